// ops/norm.cpp — the statistics of a GPT: layer_norm, var/std and the 2-norm. Each forward is one
// kernel call that rounds as PyTorch 1.13's CPU kernel does; each backward is stated as
// math in its comment. Node names are PyTorch's grad_fn names.
#include <cmath>
#include <span>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "autograd/backend.h"
#include "autograd/ops.h"
#include "autograd/ops/checks.h"

namespace autograd {

// ---------------------------------------------------------------- layer_norm

// x's trailing dims must be normalized_shape, and weight/bias (when given) must have that shape.
static void check_layer_norm(const Tensor& x, const Shape& normalized, const Tensor& weight, const Tensor& bias) {
  check_floating(x, "layer_norm");
  const size_t k = normalized.size(), d = size_t(x.dim());
  bool ok = k > 0 && k <= d;
  for (size_t i = 0; ok && i < k; ++i) ok = x.shape()[d - k + i] == normalized[i];
  if (!ok)
    throw std::invalid_argument(fmt::format("layer_norm: normalized_shape {} does not match the trailing dims of the "
                                            "input of shape {}",
                                            shape_to_string(normalized), x.shape_str()));
  for (const Tensor& p : {weight, bias}) {
    if (!p.defined()) continue;
    if (p.shape() != normalized)
      throw std::invalid_argument(fmt::format("layer_norm: weight and bias must have normalized_shape {}, got {}",
                                              shape_to_string(normalized), p.shape_str()));
    check_same_dtype(x, p, "layer_norm");
    check_same_device(x, p, "layer_norm");
  }
}

// With x̂ = (x − μ)·r and y = x̂·γ + β on each row of x [rows, n] (μ, r: [rows, 1], γ may be undefined: 1):
//   dβ = Σ_rows g,   dγ = Σ_rows g ⊙ x̂,   dx = r ⊙ (g·γ − mean(g·γ) − x̂ ⊙ mean(g·γ ⊙ x̂))   (means along the row)
// Only the wanted ones are made (the others are undefined). A device with a fused kernel runs that instead.
static std::tuple<Tensor, Tensor, Tensor> layer_norm_gradients(const Tensor& g, const Tensor& x, const Tensor& mu,
                                                               const Tensor& r, const Tensor& gamma, bool want_x,
                                                               bool want_w, bool want_b) {
  const int64_t n = x.size(1);
  if (backend(g.device()).has_fused_gradients()) {
    auto output = [&](bool wanted, const Shape& shape) { return wanted ? empty(shape, g.dtype(), g.device()) : Tensor(); };
    Tensor gx = output(want_x, x.shape()), gw = output(want_w, {n}), gb = output(want_b, {n});
    backend(g.device()).layer_norm_backward(g, x, mu.reshape({x.size(0)}), r.reshape({x.size(0)}), gamma, gx, gw, gb);
    return {gx, gw, gb};
  }
  Tensor x_hat = (x - mu) * r;
  Tensor g_gamma = gamma.defined() ? g * gamma : g;
  Tensor gx = want_x ? r * (g_gamma - g_gamma.mean(1, true) - x_hat * (g_gamma * x_hat).mean(1, true)) : Tensor();
  return {gx, want_w ? (g * x_hat).sum(0) : Tensor(), want_b ? g.sum(0) : Tensor()};
}

// Returns (y, mean, rstd), mean and rstd shaped like x with the normalized dims of size 1 (PyTorch's
// native_layer_norm). y = (x − mean)·rstd·weight + bias over the normalized dims, rstd = 1/√(var + eps).
std::tuple<Tensor, Tensor, Tensor> native_layer_norm(const Tensor& x, const Shape& normalized_shape,
                                                     const Tensor& weight, const Tensor& bias, double eps) {
  check_layer_norm(x, normalized_shape, weight, bias);
  const int64_t n = shape_numel(normalized_shape), rows = n == 0 ? 0 : x.numel() / n;
  Tensor rows_x, w, b;
  Shape stats_shape = x.shape();
  for (size_t i = stats_shape.size() - normalized_shape.size(); i < stats_shape.size(); ++i) stats_shape[i] = 1;
  Tensor y = empty({rows, n}, x.dtype(), x.device());
  Tensor mean = empty(stats_shape, x.dtype(), x.device()), rstd = empty(stats_shape, x.dtype(), x.device());
  {
    NoGradGuard no_grad;
    rows_x = x.detach().contiguous().reshape({rows, n});
    if (weight.defined()) w = weight.detach().contiguous().reshape({n});
    if (bias.defined()) b = bias.detach().contiguous().reshape({n});
    backend(x.device()).layer_norm(rows_x, w, b, eps, y, mean.reshape({rows}), rstd.reshape({rows}));
    y = y.reshape(x.shape());
  }
  if (!needs_grad({x, weight, bias})) return {y, mean, rstd};
  const bool want_x = x.requires_grad(), want_w = weight.defined() && weight.requires_grad(),
             want_b = bias.defined() && bias.requires_grad();
  Shape x_shape = x.shape();
  y = record("NativeLayerNormBackward0", y, {x, weight, bias}, {x, weight, mean, rstd},
             [rows_x, w, mean, rstd, x_shape, normalized_shape, want_x, want_w, want_b](const Tensor& g) {
               const int64_t rows = rows_x.size(0), n = rows_x.size(1);
               auto [gx, gw, gb] = layer_norm_gradients(g.contiguous().reshape({rows, n}), rows_x,
                                                        mean.reshape({rows, 1}), rstd.reshape({rows, 1}), w,
                                                        want_x, want_w, want_b);
               return Grads{want_x ? gx.reshape(x_shape) : Tensor(), want_w ? gw.reshape(normalized_shape) : Tensor(),
                            want_b ? gb.reshape(normalized_shape) : Tensor()};
             });
  return {y, mean, rstd};
}

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  return std::get<0>(native_layer_norm(x, normalized_shape, weight, bias, eps));
}

// ---------------------------------------------------------------- var / std

// The values of var/std (no node): x's `dim` moved last and made contiguous, one kernel call per row
// (all: the whole tensor as one row, which PyTorch reduces by another method).
static Tensor var_values(const Tensor& x, std::optional<int64_t> dim, double correction, bool take_sqrt,
                         bool keepdim) {
  NoGradGuard no_grad;
  if (!dim) {
    Tensor out = empty({}, x.dtype(), x.device());
    backend(x.device()).var(x.contiguous().reshape({1, x.numel()}), correction, take_sqrt, true, out);
    return keepdim ? out.reshape(Shape(size_t(x.dim()), 1)) : out;
  }
  Shape order, reduced_shape;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != *dim) {
      order.push_back(d);
      reduced_shape.push_back(x.size(d));
    }
  order.push_back(*dim);
  const int64_t n = x.size(*dim), rows = shape_numel(reduced_shape);
  Tensor out = empty({rows}, x.dtype(), x.device());
  // PyTorch reduces a tensor whose result has one element as a whole (the all-reduce form)
  backend(x.device()).var(x.permute(order).contiguous().reshape({rows, n}), correction, take_sqrt, rows == 1, out);
  out = out.reshape(reduced_shape);
  return keepdim ? out.unsqueeze(*dim) : out;
}

// d var / dx = (2 / (n − correction))·(x − mean(x)), the factor rounded to x's dtype and applied to the
// gradient first, as PyTorch's var_backward does; d std = d var / (2·std), 0 where std is 0.
static Tensor var_std(const Tensor& x, std::optional<int64_t> dim_in, bool unbiased, bool keepdim, bool take_sqrt) {
  const char* op = take_sqrt ? "std" : "var";
  check_floating(x, op);
  std::optional<int64_t> dim;
  if (dim_in) dim = wrap_dim(*dim_in, x.dim(), op);
  const double correction = unbiased ? 1.0 : 0.0;
  Tensor out = var_values(x, dim, correction, take_sqrt, keepdim);
  if (!needs_grad({x})) return out;
  const int64_t n = dim ? x.size(*dim) : x.numel();
  Tensor xd = x.detach(), result = out.detach();
  return record(take_sqrt ? "StdBackward0" : "VarBackward0", out, {x}, {x, result},
                [xd, result, dim, keepdim, take_sqrt, correction, n](const Tensor& g) {
                  Tensor grad = g;
                  if (take_sqrt) grad = (grad / (result * 2.0)).masked_fill(result == 0.0, 0.0);
                  if (dim && !keepdim) grad = grad.unsqueeze(*dim);
                  Tensor centered = dim ? xd - xd.mean(*dim, true) : xd - xd.mean();
                  return Grads{(grad * (2.0 / (double(n) - correction))) * centered};
                });
}

Tensor var(const Tensor& x, int64_t dim, bool unbiased, bool keepdim) { return var_std(x, dim, unbiased, keepdim, false); }
Tensor var(const Tensor& x, bool unbiased) { return var_std(x, std::nullopt, unbiased, false, false); }
Tensor std(const Tensor& x, int64_t dim, bool unbiased, bool keepdim) { return var_std(x, dim, unbiased, keepdim, true); }
Tensor std(const Tensor& x, bool unbiased) { return var_std(x, std::nullopt, unbiased, false, true); }

// ---------------------------------------------------------------- the 2-norm

// √(Σ x²) over every element (torch.norm(x, 2.0)); d/dx = x / norm (0 where the norm is 0).
Tensor vector_norm(const Tensor& x) {
  check_floating(x, "vector_norm");
  Tensor out = empty({}, x.dtype(), x.device());
  Tensor flat;
  {
    NoGradGuard no_grad;
    flat = x.detach().contiguous();
    backend(x.device()).norm2(flat, out);
  }
  if (!needs_grad({x})) return out;
  Tensor xd = x.detach(), result = out.detach();
  return record("NormBackward1", out, {x}, {x, result}, [xd, result](const Tensor& g) {
    return Grads{(xd * (g / result)).masked_fill(result == 0.0, 0.0)};
  });
}

Tensor vector_norms(const std::vector<Tensor>& xs) {
  if (xs.empty()) throw std::invalid_argument("vector_norms: no tensors (an empty list has no dtype or device for its norms)");
  for (size_t i = 0; i < xs.size(); ++i) {
    check_floating(xs[i], "vector_norms");
    if (xs[i].dtype() != xs[0].dtype() || xs[i].device() != xs[0].device())
      throw std::invalid_argument(fmt::format("vector_norms: tensor {} is {} on {} (shape {}), tensor 0 is {} on {} (shape {})",
                                              i, dtype_name(xs[i].dtype()), xs[i].device().str(), xs[i].shape_str(),
                                              dtype_name(xs[0].dtype()), xs[0].device().str(), xs[0].shape_str()));
  }
  // with gradients: each norm recorded on its own, and the stack passes each its entry of the gradient
  if (needs_grad(std::span<const Tensor>(xs))) {
    std::vector<Tensor> norms;
    for (const Tensor& x : xs) norms.push_back(vector_norm(x));
    return stack(norms);
  }
  NoGradGuard no_grad;
  std::vector<Tensor> flat;
  for (const Tensor& x : xs) flat.push_back(x.contiguous());
  Tensor out = empty({int64_t(xs.size())}, xs[0].dtype(), xs[0].device());
  backend(out.device()).norm2_each(flat, out);
  return out;
}

}  // namespace autograd
