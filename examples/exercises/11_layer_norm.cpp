// Exercise 11: LayerNorm's backward, over the last dim.
//
//     μ = mean(x),  σ² = mean((x − μ)²),  rstd = 1/√(σ² + ε),  x̂ = (x − μ) · rstd,  y = x̂ w + b
//
// μ and σ² depend on every x of the row, so the gradient is not just g w rstd. With dx̂ = g w:
//
//     dx = rstd · (dx̂ − mean(dx̂) − x̂ · mean(dx̂ · x̂))     (means over the last dim, keepdim)
//     dw = Σ g x̂,   db = Σ g                              (over every dim but the last: sum_to)
//
// Check it:  make exercise N=11     Explained in: docs/gpt.md ("The new ops' backward, derived")
#include "exercises.h"

namespace exercises {

Tensor my_layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  Tensor out, xhat, rstd;
  {
    NoGradGuard no_grad;
    Tensor centred = x - x.mean(-1, true);
    Tensor var = (centred * centred).mean(-1, true);  // the biased variance, as LayerNorm uses
    rstd = 1.0 / sqrt(var + eps);
    xhat = centred * rstd;
    out = xhat * weight + bias;
  }
  if (!needs_grad({x, weight, bias})) return out;
  return record("MyLayerNormBackward", out, {x, weight, bias}, {weight}, [xhat, rstd, weight](const Tensor& g) -> Grads {
    (void)g;
    not_implemented(11);  // YOUR CODE: Grads{dx, dw, db}
  });
}

}  // namespace exercises

// Hints, one at a time:
// 1. Derive it for one row: x̂_i = (x_i − μ) rstd; ∂μ/∂x_j = 1/C; ∂rstd/∂x_j = −rstd³ (x_j − μ) / C.
// 2. t.mean(-1, true) keeps the dim, so it broadcasts against the row.
