// Exercise 6: softmax's backward.
//
// y_j = e^{x_j} / Σ_k e^{x_k} along `dim`. Each y_j depends on every x_i (through the sum):
//
//     ∂y_j/∂x_i = y_j (δ_ij − y_i)
//     dL/dx_i = Σ_j g_j ∂y_j/∂x_i = y_i (g_i − Σ_j g_j y_j)
//
// The Jacobian is never built: one sum along dim per row (t.sum(dim, /*keepdim=*/true) keeps it
// broadcastable against y).
//
// Check it:  make exercise N=6      Explained in: docs/backprop-walkthrough.md ("Why 1/√d_k keeps the
//                                   softmax gradients alive"), autograd/ops/nn.cpp
#include "exercises.h"

namespace exercises {

Tensor my_softmax(const Tensor& x, int64_t dim) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = softmax(x, dim);
  }
  if (!needs_grad({x})) return out;
  Tensor y = out.detach();
  return record("MySoftmaxBackward", out, {x}, {y}, [y, dim](const Tensor& g) -> Grads {
    (void)g;
    not_implemented(6);  // YOUR CODE
  });
}

}  // namespace exercises

// Hints, one at a time:
// 1. Write the 2-element case by hand: y1 = e^{x1} / (e^{x1} + e^{x2}). What is ∂y1/∂x2?
// 2. Σ_j g_j y_j is (g * y).sum(dim, true): one number per row.
