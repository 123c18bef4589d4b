// Exercise 12, solved: GELU's backward (the tanh form).
#include <cmath>

#include "../exercises.h"

namespace exercises {

Tensor my_gelu(const Tensor& x) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = gelu(x, "tanh");
  }
  if (!needs_grad({x})) return out;
  return record("MyGeluBackward", out, {x}, {x}, [x](const Tensor& g) {
    // y = ½ x (1 + t),  t = tanh(u),  u = c (x + 0.044715 x³),  c = √(2/π)
    // y' = ½ (1 + t) + ½ x (1 − t²) · c (1 + 3 · 0.044715 x²)
    const double c = std::sqrt(2.0 / M_PI), k = 0.044715;
    Tensor t = tanh((x + x * x * x * k) * c);
    Tensor du = (1.0 + x * x * (3.0 * k)) * c;
    return Grads{g * ((1.0 + t) * 0.5 + x * 0.5 * (1.0 - t * t) * du)};
  });
}

}  // namespace exercises
