// ops/nn.cpp — the operations attention models are made of: softmax, masked_fill, embedding,
// cross-entropy. Each forward is one kernel call; each backward is stated in a comment as math.
#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "autograd/backend.h"
#include "autograd/cpu/select_floats.h"
#include "autograd/ops.h"

namespace autograd {

static void check_floating(const Tensor& x, const char* op) {
  if (!is_floating(x.dtype()))
    throw std::invalid_argument(fmt::format("{}: expected a floating point tensor, got {} (shape {})", op,
                                            dtype_name(x.dtype()), x.shape_str()));
}

// ---------------------------------------------------------------- softmax / log_softmax

static Tensor softmax_impl(const Tensor& x, int64_t dim_in, bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  check_floating(x, op);
  int64_t dim = wrap_dim(dim_in, x.dim(), op);
  if (x.dim() == 0) return log ? zeros_like(x) + (x - x) : ones_like(x) + (x - x);  // a lone value: p = 1
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  backend(x.device()).softmax(x, dim, log, out);
  if (!needs_grad({x})) return out;
  Tensor y = out.detach();
  return record(log ? "LogSoftmaxBackward0" : "SoftmaxBackward0", out, {x}, {y}, [y, dim, log](const Tensor& g) {
    // softmax:      dx = y ⊙ (g − Σ_j g_j y_j)
    // log_softmax:  dx = g − softmax(x) ⊙ Σ_j g_j
    Tensor gx = empty(y.shape(), y.dtype(), y.device());
    backend(y.device()).softmax_backward(y, g.contiguous(), dim, log, gx);
    return Grads{gx};
  });
}

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_impl(x, dim, false); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_impl(x, dim, true); }
Tensor Tensor::softmax(int64_t dim) const { return autograd::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return autograd::log_softmax(*this, dim); }

// ---------------------------------------------------------------- masked_fill

static Tensor checked_mask(const Tensor& x, const Tensor& mask, const char* op) {
  if (mask.dtype() != DType::Bool)
    throw std::invalid_argument(fmt::format("{}: expected a bool mask, got {} (shape {}); compare it, e.g. mask == 0",
                                            op, dtype_name(mask.dtype()), mask.shape_str()));
  if (mask.device() != x.device())
    throw std::invalid_argument(fmt::format("{}: mask is on {} but the input is on {}", op, mask.device().str(),
                                            x.device().str()));
  Shape shape = broadcast_shapes(x.shape(), mask.shape(), op);
  if (shape != x.shape())
    throw std::invalid_argument(fmt::format("{}: mask of shape {} cannot be broadcast to the input's shape {}", op,
                                            mask.shape_str(), x.shape_str()));
  NoGradGuard no_grad;
  return mask.expand(x.shape());
}

// masked_fill's commonest case on the CPU: contiguous floats and a contiguous mask whose shape is the
// trailing part of x's (the attention mask over a batch of score matrices): one select per repetition
// of the mask, with no broadcast views or scalar tensor to build.
static bool fill_by_repeated_mask(const Tensor& x, const Tensor& mask, double value, const Tensor& out) {
  const size_t nd = size_t(x.dim()), md = size_t(mask.dim());
  if (!x.device().is_cpu() || x.dtype() != DType::Float32 || mask.dtype() != DType::Bool || !mask.device().is_cpu() ||
      md > nd || mask.numel() == 0 || !x.is_contiguous() || !mask.is_contiguous() ||
      !std::equal(mask.shape().begin(), mask.shape().end(), x.shape().begin() + (nd - md)))
    return false;
  const int64_t period = mask.numel(), repeats = x.numel() / period;
  const bool* m = mask.data_ptr<bool>();
  const float* in = x.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t r = 0; r < repeats; ++r) cpu::select_floats(m, float(value), in + r * period, o + r * period, period);
  return true;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  Tensor m = mask;
  if (!fill_by_repeated_mask(x, mask, value, out)) {
    m = checked_mask(x, mask, "masked_fill");
    NoGradGuard no_grad;
    backend(x.device()).where(m, full({}, value, x.dtype(), x.device()).expand(x.shape()), x, out);
  }
  return record("MaskedFillBackward0", out, {x}, {m}, [m](const Tensor& g) {
    return Grads{masked_fill(g, m, 0.0)};  // filled positions no longer depend on x
  });
}
Tensor Tensor::masked_fill(const Tensor& mask, double value) const { return autograd::masked_fill(*this, mask, value); }

Tensor& Tensor::masked_fill_(const Tensor& mask, double value) {
  Tensor m = checked_mask(*this, mask, "masked_fill_");
  bool tracked = is_grad_enabled() && requires_grad();
  if (tracked && is_leaf())
    throw std::runtime_error(fmt::format("masked_fill_: a leaf tensor that requires grad (shape {}) cannot be modified "
                                         "in place; use masked_fill",
                                         shape_str()));
  if (tracked && impl().is_view)
    throw std::runtime_error(fmt::format("masked_fill_: in-place fill of a view (shape {}) that has autograd history "
                                         "is not supported; use masked_fill",
                                         shape_str()));
  // Keep a handle on the history as it was, so the new node can pass gradients on to it.
  Tensor before = detach();
  before.impl().grad_fn = impl().grad_fn;
  before.impl().requires_grad = requires_grad();
  {
    NoGradGuard no_grad;
    backend(device()).where(m, full({}, value, dtype(), device()).expand(shape()), *this, *this);
  }
  ++impl().storage->version;
  if (tracked)
    record("MaskedFillBackward0", *this, {before}, {m}, [m](const Tensor& g) { return Grads{autograd::masked_fill(g, m, 0.0)}; });
  return *this;
}

// ---------------------------------------------------------------- embedding

static void check_indices(const Tensor& indices, int64_t limit, int64_t allowed, const char* op, const char* what) {
  if (indices.dtype() != DType::Int64)
    throw std::invalid_argument(fmt::format("{}: indices must be int64, got {} (shape {})", op,
                                            dtype_name(indices.dtype()), indices.shape_str()));
  auto check = [&](const int64_t* values, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
      if ((values[i] < 0 || values[i] >= limit) && values[i] != allowed)
        throw std::out_of_range(fmt::format("{}: index {} (at flat position {} of indices shaped {}) is out of range "
                                            "for {} {}",
                                            op, values[i], i, indices.shape_str(), limit, what));
  };
  if (indices.device().is_cpu() && indices.is_contiguous()) return check(indices.data_ptr<int64_t>(), indices.numel());
  std::vector<int64_t> values = indices.to_vector<int64_t>();  // a copy on the host
  check(values.data(), int64_t(values.size()));
}

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  if (weight.dim() != 2)
    throw std::invalid_argument(fmt::format("embedding: weight must be 2-D [num_embeddings, dim], got {}", weight.shape_str()));
  const int64_t rows = weight.size(0), dim = weight.size(1);
  // range-checked against a sentinel no index can equal
  check_indices(indices, rows, -1 - rows, "embedding", "embedding rows");
  if (indices.device() != weight.device())
    throw std::invalid_argument(fmt::format("embedding: indices on {} but weight on {}", indices.device().str(),
                                            weight.device().str()));
  Tensor flat = indices.contiguous();
  Shape out_shape = indices.shape();
  out_shape.push_back(dim);
  Tensor out = empty(out_shape, weight.dtype(), weight.device());
  backend(weight.device()).index_select_rows(weight, flat, out);
  Shape wshape = weight.shape();
  return record("EmbeddingBackward0", out, {weight}, {}, [flat, wshape](const Tensor& g) {
    // each output row came from one weight row: add it back there (repeated indices accumulate)
    Tensor gw = zeros(wshape, g.dtype(), g.device());
    backend(g.device()).index_add_rows(g.contiguous().reshape({-1, wshape[1]}), flat, gw);
    return Grads{gw};
  });
}

// ---------------------------------------------------------------- losses

// PyTorch's nll_loss (mean, no class weights) adds the picked values with a cascade of its own
// (aten/src/ATen/native/LossNLL.cpp), not with sum(): 8 partial sums ("levels"). Row b's value is
// subtracted into level 0; then, if the low 4 bits of b are all zero, level 0 is added into level 1
// and emptied; if bits 4..7 are zero too, level 1 into level 2; and so on (4 bits per level, more for
// batches above 2^32). Ignored rows are skipped before any of this. The result is
// ((0 + L0) + L1) + ... + L7, divided by the number of rows not ignored (0/0 = NaN if all are).
// picked(b) is log_probs[b, targets[b]]; it is only asked for rows that are not ignored.
template <typename T, typename Picked>
T nll_loss_mean(int64_t n, Picked picked, const int64_t* targets, int64_t ignore_index) {
  constexpr int kLevels = 8;
  const int64_t ceil_log2 = n <= 2 ? 1 : 64 - __builtin_clzll(uint64_t(n - 1));
  const int64_t level_power = std::max<int64_t>(4, ceil_log2 / kLevels);
  const int64_t level_mask = (int64_t(1) << level_power) - 1;
  T levels[kLevels] = {};
  int64_t count = 0;
  for (int64_t b = 0; b < n; ++b) {
    if (targets[b] == ignore_index) continue;
    ++count;
    levels[0] -= picked(b);
    for (int j = 0; j + 1 < kLevels; ++j) {
      if ((b & (level_mask << (j * level_power))) != 0) break;
      levels[j + 1] += levels[j];
      levels[j] = T(0);
    }
  }
  T total = 0;
  for (T level : levels) total += level;
  return total / T(count);
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& targets, int64_t ignore_index) {
  if (log_probs.dim() != 2)
    throw std::invalid_argument(fmt::format("nll_loss: expected input of shape [N, C], got {}", log_probs.shape_str()));
  if (targets.dim() != 1 || targets.size(0) != log_probs.size(0))
    throw std::invalid_argument(fmt::format("nll_loss: expected targets of shape [{}] for input {}, got {}",
                                            log_probs.size(0), log_probs.shape_str(), targets.shape_str()));
  check_floating(log_probs, "nll_loss");
  check_indices(targets, log_probs.size(1), ignore_index, "nll_loss", "classes");
  Tensor lp = log_probs.detach().contiguous();
  Tensor tgt = targets.contiguous();
  const int64_t rows = lp.size(0), classes = lp.size(1);
  Tensor out;  // mean of −log p[target]; 0/0 = nan if all are ignored
  int64_t count = 0;
  if (lp.device().is_cpu()) {
    // one scalar, added in PyTorch's order straight from the tensors' memory
    const int64_t* t = tgt.data_ptr<int64_t>();
    count = std::count_if(t, t + rows, [&](int64_t v) { return v != ignore_index; });
    double value = dispatch_floating(lp.dtype(), "nll_loss", [&](auto tag) {
      using T = decltype(tag);
      const T* p = lp.data_ptr<T>();
      return double(nll_loss_mean<T>(rows, [&](int64_t b) { return p[b * classes + t[b]]; }, t, ignore_index));
    });
    out = full({}, value, lp.dtype(), lp.device());
  } else {
    std::vector<int64_t> t = tgt.to_vector<int64_t>();
    count = std::count_if(t.begin(), t.end(), [&](int64_t v) { return v != ignore_index; });
    Tensor picked = empty({rows}, lp.dtype(), lp.device());
    backend(lp.device()).gather_rows(lp, tgt, ignore_index, picked);
    out = neg(sum(picked) / double(count));
  }
  Shape shape = log_probs.shape();
  return record("NllLossBackward0", out, {log_probs}, {}, [tgt, shape, count, ignore_index](const Tensor& g) {
    // d loss / d logp[i, target_i] = −1/count; every other entry gets 0
    Tensor gx = zeros(shape, g.dtype(), g.device());
    if (g.device().is_cpu()) {  // the same arithmetic as below, without five small tensors
      dispatch_floating(g.dtype(), "nll_loss backward", [&](auto tag) {
        using T = decltype(tag);
        const T coef = T(-g.item<T>()) / T(count);
        const int64_t* t = tgt.data_ptr<int64_t>();
        T* out = gx.data_ptr<T>();
        for (int64_t i = 0; i < shape[0]; ++i)
          if (t[i] != ignore_index) out[i * shape[1] + t[i]] += coef;
      });
      return Grads{gx};
    }
    Tensor coef = (neg(g) / double(count)).reshape({1}).expand({shape[0]}).contiguous();
    backend(g.device()).scatter_rows(coef, tgt, ignore_index, gx);
    return Grads{gx};
  });
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
  if (logits.dim() != 2)
    throw std::invalid_argument(fmt::format("cross_entropy: expected logits of shape [N, C], got {}; flatten with "
                                            ".view({{-1, C}})",
                                            logits.shape_str()));
  return nll_loss(log_softmax(logits, 1), targets, ignore_index);
}

}  // namespace autograd
