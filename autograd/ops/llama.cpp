// ops/llama.cpp — the three ops a Llama block adds to a GPT's: SiLU (the gate of the SwiGLU feed-forward),
// RMS normalisation and the rotary position embedding. Each forward is one kernel call that rounds as
// PyTorch 1.13's CPU kernels round Hugging Face's formulas; each backward function states its formula
// above it and computes it in one pass of the device's kernel for it (reference/llama.cpp: the loops).
#include <stdexcept>

#include <fmt/format.h>

#include "autograd/backend.h"
#include "autograd/ops.h"
#include "autograd/ops/checks.h"

namespace autograd {

// ---------------------------------------------------------------- silu

// y = x·σ(x), σ(x) = 1/(1 + exp(−x))  ⇒  dx = g ⊙ σ(x)·(1 + x·(1 − σ(x)))
// (σ' = σ·(1 − σ), so d(x·σ)/dx = σ + x·σ·(1 − σ)), in one pass of the device's silu_backward.
struct SiluBackward0 final : BackwardFunction {
  Tensor x;  // detached and contiguous: x's history is this node's input edge
  explicit SiluBackward0(const Tensor& x) : x(x) {}
  Grads apply(const Tensor& g) override {
    Tensor dx = empty(x.shape(), x.dtype(), x.device());
    backend(x.device()).silu_backward(g.contiguous(), x, dx);
    return {dx};
  }
};

Tensor silu(const Tensor& x) {
  check_floating(x, "silu");
  Tensor input = x.detach().contiguous();
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  backend(x.device()).silu(input, out);
  if (!needs_grad({x})) return out;
  return record("SiluBackward0", out, {x}, {x}, SiluBackward0(input));
}

// ---------------------------------------------------------------- rms_norm

static void check_rms_norm(const Tensor& x, const Tensor& weight) {
  check_floating(x, "rms_norm");
  if (x.dim() == 0)
    throw std::invalid_argument("rms_norm: expected an input with at least one dim (normalised over the last), got a 0-d tensor");
  if (!weight.defined()) return;
  if (weight.dim() != 1 || weight.size(0) != x.size(-1))
    throw std::invalid_argument(fmt::format("rms_norm: weight must have shape [{}] (the input's last dim), got {} for "
                                            "an input of shape {}",
                                            x.size(-1), weight.shape_str(), x.shape_str()));
  check_same_dtype(x, weight, "rms_norm");
  check_same_device(x, weight, "rms_norm");
}

// With r = 1/√(mean(x²) + eps), x̂ = x·r and y = w·x̂ on each row of n (w may be undefined: 1):
//   dw = Σ_rows g ⊙ x̂,   dx = (g·w)·r + x·(2/n)·(−½·r³·Σ_row (g·w) ⊙ x)
// (the second term is the path through the mean of squares: d r/d x_k = −r³·x_k/n), in one pass of the
// device's rms_norm_backward. Only the wanted gradients are made.
struct RmsNormBackward0 final : BackwardFunction {
  Tensor x, weight, rstd;  // x as [rows, n] rows; weight flat [n] (or undefined); rstd [rows]
  Shape x_shape;
  bool want_x, want_weight;
  RmsNormBackward0(const Tensor& rows_x, const Tensor& weight, const Tensor& rstd, const Shape& x_shape, bool want_x,
                   bool want_weight)
      : x(rows_x), weight(weight), rstd(rstd), x_shape(x_shape), want_x(want_x), want_weight(want_weight) {}
  Grads apply(const Tensor& g) override {
    const int64_t rows = x.size(0), n = x.size(1);
    Tensor dx = want_x ? empty(x.shape(), g.dtype(), g.device()) : Tensor();
    Tensor dweight = want_weight ? empty({n}, g.dtype(), g.device()) : Tensor();
    backend(g.device()).rms_norm_backward(g.contiguous().reshape({rows, n}), x, rstd, weight, dx, dweight);
    return {want_x ? dx.reshape(x_shape) : Tensor(), dweight};
  }
};

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  check_rms_norm(x, weight);
  const int64_t n = x.size(-1), rows = n == 0 ? 0 : x.numel() / n;
  Tensor rows_x, w;
  Tensor y = empty({rows, n}, x.dtype(), x.device()), rstd = empty({rows}, x.dtype(), x.device());
  {
    NoGradGuard no_grad;
    rows_x = x.detach().contiguous().reshape({rows, n});
    if (weight.defined()) w = weight.detach().contiguous();
    backend(x.device()).rms_norm(rows_x, w, eps, y, rstd);
    y = y.reshape(x.shape());
  }
  if (!needs_grad({x, weight})) return y;
  const bool want_weight = weight.defined() && weight.requires_grad();
  return record("RmsNormBackward0", y, {x, weight}, {x, weight},
                RmsNormBackward0(rows_x, w, rstd, x.shape(), x.requires_grad(), want_weight));
}

// ---------------------------------------------------------------- rotary_embedding

static void check_rotary(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  check_floating(x, "rotary_embedding");
  if (x.dim() < 2 || x.size(-1) % 2 != 0)
    throw std::invalid_argument(fmt::format("rotary_embedding: expected x of shape [..., T, d] with d even, got {}",
                                            x.shape_str()));
  const int64_t t = x.size(-2), h = x.size(-1) / 2;
  for (const Tensor* table : {&cos, &sin}) {
    const char* name = table == &cos ? "cos" : "sin";
    if (!table->defined() || table->dim() != 2 || table->size(0) != t || table->size(1) != h)
      throw std::invalid_argument(fmt::format("rotary_embedding: {} must have shape [{}, {}] ([T, d/2] for x of shape "
                                              "{}), got {}",
                                              name, t, h, x.shape_str(),
                                              table->defined() ? table->shape_str() : "an undefined tensor"));
    check_same_dtype(x, *table, "rotary_embedding");
    check_same_device(x, *table, "rotary_embedding");
    if (table->requires_grad() && is_grad_enabled())
      throw std::invalid_argument(fmt::format("rotary_embedding: {} (shape {}) requires grad, but the tables take no "
                                              "gradient; pass {}.detach()",
                                              name, table->shape_str(), name));
  }
}

// y = R(θ)·x on each pair (x[j], x[j+h]), θ = the angle of (cos[t, j], sin[t, j]). A rotation's transpose
// is the rotation by −θ, so
//   dx[j] = g[j]·c + g[j+h]·s,   dx[j+h] = g[j+h]·c − g[j]·s
// (the device's rotary_embedding with inverse = true). The tables take no gradient.
struct RotaryEmbeddingBackward0 final : BackwardFunction {
  Tensor cos, sin;  // contiguous [T, h]
  Shape x_shape;
  RotaryEmbeddingBackward0(const Tensor& cos, const Tensor& sin, const Shape& x_shape)
      : cos(cos), sin(sin), x_shape(x_shape) {}
  Grads apply(const Tensor& g) override {
    const int64_t t = x_shape[x_shape.size() - 2], d = x_shape.back();
    const int64_t rows = t * d == 0 ? 0 : shape_numel(x_shape) / (t * d);
    Tensor dx = empty({rows, t, d}, g.dtype(), g.device());
    backend(g.device()).rotary_embedding(g.contiguous().reshape({rows, t, d}), cos, sin, /*inverse=*/true, dx);
    return {dx.reshape(x_shape)};
  }
};

Tensor rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  check_rotary(x, cos, sin);
  const int64_t t = x.size(-2), d = x.size(-1), rows = t * d == 0 ? 0 : x.numel() / (t * d);
  Tensor out = empty({rows, t, d}, x.dtype(), x.device()), c, s;
  {
    NoGradGuard no_grad;
    c = cos.detach().contiguous();
    s = sin.detach().contiguous();
    backend(x.device()).rotary_embedding(x.detach().contiguous().reshape({rows, t, d}), c, s, /*inverse=*/false, out);
    out = out.reshape(x.shape());
  }
  if (!needs_grad({x})) return out;
  return record("RotaryEmbeddingBackward0", out, {x}, {}, RotaryEmbeddingBackward0(c, s, x.shape()));
}

}  // namespace autograd
