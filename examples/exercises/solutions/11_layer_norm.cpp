// Exercise 11, solved: LayerNorm's backward.
#include "../exercises.h"

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
  return record("MyLayerNormBackward", out, {x, weight, bias}, {weight}, [xhat, rstd, weight](const Tensor& g) {
    // y = x̂ w + b with x̂ = (x − μ) · rstd, and μ and rstd depend on every x of the row:
    //   dx = rstd · (dx̂ − mean(dx̂) − x̂ · mean(dx̂ · x̂)),  dx̂ = g w
    Tensor dxhat = g * weight;
    Tensor dx = rstd * (dxhat - dxhat.mean(-1, true) - xhat * (dxhat * xhat).mean(-1, true));
    return Grads{dx, (g * xhat).sum_to(weight.shape()), g.sum_to(weight.shape())};
  });
}

}  // namespace exercises
