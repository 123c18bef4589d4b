// Exercise 12: GELU's backward, in the tanh form (GPT-2's; PyTorch's approximate="tanh").
//
//     y = ½ x (1 + t),   t = tanh(u),   u = c (x + 0.044715 x³),   c = √(2/π)
//
// The product rule on ½ x · (1 + t), and the chain rule through tanh (rung 3) and u:
//
//     dy/dx = ½ (1 + t) + ½ x (1 − t²) · c (1 + 3 · 0.044715 x²)
//
// Check it:  make exercise N=12     Explained in: docs/gpt.md ("The new ops' backward, derived")
#include <cmath>

#include "exercises.h"

namespace exercises {

Tensor my_gelu(const Tensor& x) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = gelu(x, "tanh");
  }
  if (!needs_grad({x})) return out;
  return record("MyGeluBackward", out, {x}, {x}, [x](const Tensor& g) -> Grads {
    (void)g;
    not_implemented(12);  // YOUR CODE
  });
}

}  // namespace exercises

// Hints, one at a time:
// 1. Recompute t = tanh((x + x * x * x * 0.044715) * c) in the closure from the saved x.
// 2. Two terms: ½ (1 + t) from differentiating x, ½ x · dt/dx from differentiating (1 + t).
