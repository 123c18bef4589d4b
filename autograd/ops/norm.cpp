// ops/norm.cpp — the statistics of a GPT: layer_norm, var/std and the 2-norm. Each forward is one
// kernel call that rounds as PyTorch 1.13's CPU kernel does; each backward function states its math in
// the comment above it. Node names are PyTorch's grad_fn names.
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

// With x̂ = (x − μ)·r and y = x̂·γ + β on each row of x [rows, n] (μ, r: one per row; γ may be undefined: 1):
//   dβ = Σ_rows g,   dγ = Σ_rows g ⊙ x̂,   dx = r ⊙ (g·γ − mean(g·γ) − x̂ ⊙ mean(g·γ ⊙ x̂))   (means along the row)
// in one pass of the device's layer_norm_backward (reference/gpt.cpp: the loop). Only the wanted ones are made.
struct NativeLayerNormBackward0 final : BackwardFunction {
  Tensor x, gamma, mean, rstd;  // x as [rows, n] rows; gamma flat [n] (or undefined)
  Shape x_shape, normalized_shape;
  bool want_x, want_gamma, want_beta;
  NativeLayerNormBackward0(const Tensor& rows_x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                           const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias)
      : x(rows_x), gamma(gamma), mean(mean), rstd(rstd), x_shape(x.shape()), normalized_shape(normalized_shape),
        want_x(x.requires_grad()), want_gamma(weight.defined() && weight.requires_grad()),
        want_beta(bias.defined() && bias.requires_grad()) {}
  Grads apply(const Tensor& g) override {
    const int64_t rows = x.size(0), n = x.size(1);
    auto output = [&](bool wanted, const Shape& shape) { return wanted ? empty(shape, g.dtype(), g.device()) : Tensor(); };
    Tensor dx = output(want_x, x.shape()), dgamma = output(want_gamma, {n}), dbeta = output(want_beta, {n});
    backend(g.device()).layer_norm_backward(g.contiguous().reshape({rows, n}), x, mean.reshape({rows}),
                                            rstd.reshape({rows}), gamma, dx, dgamma, dbeta);
    return {want_x ? dx.reshape(x_shape) : Tensor(), want_gamma ? dgamma.reshape(normalized_shape) : Tensor(),
            want_beta ? dbeta.reshape(normalized_shape) : Tensor()};
  }
};

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
  y = record("NativeLayerNormBackward0", y, {x, weight, bias}, {x, weight, mean, rstd},
             NativeLayerNormBackward0(rows_x, w, mean, rstd, x, normalized_shape, weight, bias));
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
struct VarStdBackward final : BackwardFunction {
  Tensor x, result;  // detached
  std::optional<int64_t> dim;
  bool keepdim, take_sqrt;
  double correction;
  int64_t n;  // how many values each result is the variance of
  VarStdBackward(const Tensor& x, const Tensor& result, std::optional<int64_t> dim, bool keepdim, bool take_sqrt,
                 double correction)
      : x(x.detach()), result(result.detach()), dim(dim), keepdim(keepdim), take_sqrt(take_sqrt),
        correction(correction), n(dim ? x.size(*dim) : x.numel()) {}
  Grads apply(const Tensor& g) override {
    Tensor dvar = take_sqrt ? (g / (result * 2.0)).masked_fill(result == 0.0, 0.0) : g;
    if (dim && !keepdim) dvar = dvar.unsqueeze(*dim);
    Tensor centered = dim ? x - x.mean(*dim, true) : x - x.mean();
    return {(dvar * (2.0 / (double(n) - correction))) * centered};
  }
};

static Tensor var_std(const Tensor& x, std::optional<int64_t> dim_in, bool unbiased, bool keepdim, bool take_sqrt) {
  const char* op = take_sqrt ? "std" : "var";
  check_floating(x, op);
  std::optional<int64_t> dim;
  if (dim_in) dim = wrap_dim(*dim_in, x.dim(), op);
  const double correction = unbiased ? 1.0 : 0.0;
  Tensor out = var_values(x, dim, correction, take_sqrt, keepdim);
  if (!needs_grad({x})) return out;
  return record(take_sqrt ? "StdBackward0" : "VarBackward0", out, {x}, {x, out},
                VarStdBackward(x, out, dim, keepdim, take_sqrt, correction));
}

Tensor var(const Tensor& x, int64_t dim, bool unbiased, bool keepdim) { return var_std(x, dim, unbiased, keepdim, false); }
Tensor var(const Tensor& x, bool unbiased) { return var_std(x, std::nullopt, unbiased, false, false); }
Tensor std(const Tensor& x, int64_t dim, bool unbiased, bool keepdim) { return var_std(x, dim, unbiased, keepdim, true); }
Tensor std(const Tensor& x, bool unbiased) { return var_std(x, std::nullopt, unbiased, false, true); }

// ---------------------------------------------------------------- the 2-norm

// y = √(Σ x²)  ⇒  dx = g · x / y   (0 where y is 0)
struct NormBackward1 final : BackwardFunction {
  Tensor x, y;  // detached
  NormBackward1(const Tensor& x, const Tensor& y) : x(x.detach()), y(y.detach()) {}
  Grads apply(const Tensor& g) override { return {(x * (g / y)).masked_fill(y == 0.0, 0.0)}; }
};

// √(Σ x²) over every element (torch.norm(x, 2.0)).
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
  return record("NormBackward1", out, {x}, {x, out}, NormBackward1(x, out));
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
