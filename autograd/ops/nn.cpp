// ops/nn.cpp — the operations attention models are made of: softmax, masked_fill, GELU, embedding,
// cross-entropy. Each forward is one kernel call; each backward function states its formula above it and
// computes it in one pass of the device's kernel for it (the reference kernels have each as a loop).
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "autograd/backend.h"
#include "autograd/ops.h"
#include "autograd/ops/checks.h"
#include "autograd/ops/gradients.h"

namespace autograd {

// ---------------------------------------------------------------- softmax / log_softmax

// softmax:      y = softmax(x) along dim  ⇒  dx = y ⊙ (g − Σ_dim g ⊙ y)
// log_softmax:  y = log_softmax(x)        ⇒  dx = g − exp(y) ⊙ Σ_dim g      (exp(y) is softmax(x))
// both in one pass of the device's softmax_backward (reference/softmax.cpp: the loop).
struct SoftmaxBackward final : BackwardFunction {
  Tensor y;  // the output, detached (the output owns this node)
  int64_t dim;
  bool log;
  SoftmaxBackward(const Tensor& y, int64_t dim, bool log) : y(y), dim(dim), log(log) {}
  Grads apply(const Tensor& g) override {
    Tensor dx = empty(y.shape(), y.dtype(), y.device());
    backend(y.device()).softmax_backward(y, g.contiguous(), dim, log, dx);
    return {dx};
  }
};

static Tensor softmax_impl(const Tensor& x, int64_t dim_in, bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  check_floating(x, op);
  int64_t dim = wrap_dim(dim_in, x.dim(), op);
  if (x.dim() == 0) return log ? zeros_like(x) + (x - x) : ones_like(x) + (x - x);  // a lone value: p = 1
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  backend(x.device()).softmax(x, dim, log, out);
  if (!needs_grad({x})) return out;
  Tensor y = out.detach();
  return record(log ? "LogSoftmaxBackward0" : "SoftmaxBackward0", out, {x}, {y}, SoftmaxBackward(y, dim, log));
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

// y = x where the mask is false, `value` where it is true  ⇒  dx = g where the mask is false, 0 where it is true
// (a filled position no longer depends on x)
struct MaskedFillBackward0 final : BackwardFunction {
  Tensor mask;  // expanded to x's shape
  explicit MaskedFillBackward0(const Tensor& mask) : mask(mask) {}
  Grads apply(const Tensor& g) override { return {masked_fill(g, mask, 0.0)}; }
};

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  Tensor m = checked_mask(x, mask, "masked_fill");
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  backend(x.device()).masked_fill(x, m, value, out);
  if (!needs_grad({x})) return out;
  return record("MaskedFillBackward0", out, {x}, {m}, MaskedFillBackward0(m));
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
  backend(device()).masked_fill(*this, m, value, *this);
  impl().storage->bump_version();
  if (tracked)
    record("MaskedFillBackward0", *this, {before}, {m}, MaskedFillBackward0(m));
  return *this;
}

// ---------------------------------------------------------------- gelu

Tensor gelu_gradient(const Tensor& g, const Tensor& x, bool tanh, Tensor dx) {
  if (!dx.defined()) dx = empty(x.shape(), x.dtype(), x.device());
  backend(x.device()).gelu_backward(g, x, tanh, dx);
  return dx;
}

// y = gelu(x) = x·Φ(x)  ⇒  dx = g ⊙ (Φ(x) + x·φ(x)),   φ(x) = exp(−x²/2)/√(2π)
// approximate "tanh": y = ½x·(1 + t), t = tanh(√(2/π)·(x + 0.044715·x³))  ⇒
//                    dx = g ⊙ (½(1 + t) + ½x·(1 − t²)·√(2/π)·(1 + 3·0.044715·x²))
// in one pass of the device's gelu_backward (gelu_gradient, ops/gradients.h; reference/gpt.cpp: the loop)
struct GeluBackward0 final : BackwardFunction {
  Tensor x;  // detached: x's history is this node's input edge
  bool tanh;
  GeluBackward0(const Tensor& x, bool tanh) : x(x.detach()), tanh(tanh) {}
  Grads apply(const Tensor& g) override { return {gelu_gradient(g, x, tanh)}; }
};

Tensor gelu(const Tensor& x, const std::string& approximate) {
  const bool tanh = gelu_uses_tanh(approximate, x, "gelu");
  check_floating(x, "gelu");
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  backend(x.device()).gelu(x, tanh, out);
  if (!needs_grad({x})) return out;
  return record("GeluBackward0", out, {x}, {x}, GeluBackward0(x, tanh));
}

// ---------------------------------------------------------------- embedding

// Every index in [0, limit), or equal to `allowed` (nll_loss's ignore_index; embedding has none).
static void check_indices(const Tensor& indices, int64_t limit, std::optional<int64_t> allowed, const char* op,
                          const char* what) {
  if (indices.dtype() != DType::Int64)
    throw std::invalid_argument(fmt::format("{}: indices must be int64, got {} (shape {})", op,
                                            dtype_name(indices.dtype()), indices.shape_str()));
  Tensor flat = indices.contiguous();
  // Without an allowed value the kernel is told 0, which is in range anyway, unless the range is empty:
  // then the first index of all is outside. (An invented sentinel such as -1 - limit would let that
  // index through, and the lookup read before the weight.)
  const int64_t at = !allowed && limit <= 0 ? (flat.numel() > 0 ? 0 : -1)
                                            : backend(indices.device()).find_index_outside(flat, limit, allowed.value_or(0));
  if (at < 0) return;
  throw std::out_of_range(fmt::format("{}: index {} (at flat position {} of indices shaped {}) is out of range for {} {}",
                                      op, flat.reshape({-1})[at].item<int64_t>(), at, indices.shape_str(), limit, what));
}

// .grad += embedding's dense gradient, touching only the looked-up rows (BackwardFunction::add_into_grad,
// Backend::add_rows_into_gradient): the rows left out are those the dense gradient would add zeros to, which
// changes no value (it would turn a −0 into +0).
static bool add_looked_up_rows(const Tensor& g, const Tensor& flat, const Shape& wshape, const Tensor& grad) {
  if (grad.shape() != wshape || !grad.is_contiguous() || grad.dtype() != g.dtype() || grad.device() != g.device())
    return false;
  if (!backend(g.device()).add_rows_into_gradient(g.contiguous().reshape({flat.numel(), wshape[1]}), flat, grad))
    return false;
  grad.impl().storage->bump_version();  // as .grad.add_() would
  return true;
}

// out[i] = weight[index[i]]  ⇒  dweight[r] = Σ over the i with index[i] = r of g[i]
// (each output row came from one weight row: add it back there; repeated indices accumulate)
struct EmbeddingBackward0 final : BackwardFunction {
  Tensor index;  // flat, contiguous
  Shape weight_shape;
  EmbeddingBackward0(const Tensor& index, const Shape& weight_shape) : index(index), weight_shape(weight_shape) {}
  Grads apply(const Tensor& g) override {
    Tensor dweight = zeros(weight_shape, g.dtype(), g.device());
    backend(g.device()).index_add_rows(g.contiguous().reshape({index.numel(), weight_shape[1]}), index, dweight);  // (no -1: dim may be 0)
    return {dweight};
  }
  // Only the looked-up rows have a gradient: into a weight that already holds a .grad, add just those.
  bool add_into_grad(const Tensor& g, const Tensor& grad) override { return add_looked_up_rows(g, index, weight_shape, grad); }
};

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  if (weight.dim() != 2)
    throw std::invalid_argument(fmt::format("embedding: weight must be 2-D [num_embeddings, dim], got {}", weight.shape_str()));
  const int64_t rows = weight.size(0), dim = weight.size(1);
  // every index in [0, rows): embedding allows no other value (no sentinel; nll_loss allows its ignore_index)
  check_indices(indices, rows, std::nullopt, "embedding", "embedding rows");
  if (indices.device() != weight.device())
    throw std::invalid_argument(fmt::format("embedding: indices on {} but weight on {}", indices.device().str(),
                                            weight.device().str()));
  Tensor flat = indices.contiguous();
  Shape out_shape = indices.shape();
  out_shape.push_back(dim);
  Tensor out = empty(out_shape, weight.dtype(), weight.device());
  backend(weight.device()).index_select_rows(weight, flat, out);
  if (!needs_grad({weight})) return out;
  return record("EmbeddingBackward0", out, {weight}, {}, EmbeddingBackward0(flat, weight.shape()));
}

// ---------------------------------------------------------------- losses

// loss = −(1/count)·Σ_i logp[i, t_i] over the kept rows (t_i ≠ ignore_index):
//   dlogp[i, c] = −g/count where c = t_i on a kept row, 0 everywhere else
struct NllLossBackward0 final : BackwardFunction {
  Tensor targets;
  Shape shape;  // of log_probs, [N, C]
  int64_t ignore_index, count;
  NllLossBackward0(const Tensor& targets, const Shape& shape, int64_t ignore_index, int64_t count)
      : targets(targets), shape(shape), ignore_index(ignore_index), count(count) {}
  Grads apply(const Tensor& g) override {
    Tensor dlogp = zeros(shape, g.dtype(), g.device());
    backend(g.device()).nll_loss_backward(g, targets, ignore_index, count, dlogp);
    return {dlogp};
  }
};

// The mean of −log p[target] over the rows whose target is not ignore_index (0/0 = nan if all are), its
// sum added in PyTorch's order (the backend's nll_loss).
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
  Tensor out = empty({}, lp.dtype(), lp.device());
  const int64_t count = backend(lp.device()).nll_loss(lp, tgt, ignore_index, out);
  if (!needs_grad({log_probs})) return out;
  return record("NllLossBackward0", out, {log_probs}, {}, NllLossBackward0(tgt, log_probs.shape(), ignore_index, count));
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
  if (logits.dim() != 2)
    throw std::invalid_argument(fmt::format("cross_entropy: expected logits of shape [N, C], got {}; flatten with "
                                            ".view({{-1, C}})",
                                            logits.shape_str()));
  return nll_loss(log_softmax(logits, 1), targets, ignore_index);
}

}  // namespace autograd
