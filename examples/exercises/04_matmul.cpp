// Exercise 4: matmul's two gradients.
//
// out = a b, with a [..., n, k], b [..., k, m], out [..., n, m]; out[i, j] = Σ_k a[i, k] b[k, j].
// Then ∂out[i, j]/∂a[i, k] = b[k, j] and ∂out[i, j]/∂b[k, j] = a[i, k], so
//
//     dL/da = g bᵀ     [n, m] × [m, k] = [n, k]
//     dL/db = aᵀ g     [k, n] × [n, m] = [k, m]
//
// t.mT() transposes the last two dims. The leading (batch) dims broadcast, as in mul: a [2, n, k]
// times b [k, m] uses b for both matrices of a, so b's gradient adds up the two (sum_to).
//
// Check it:  make exercise N=4      Explained in: docs/backprop-walkthrough.md, docs/architecture.md
#include "exercises.h"

namespace exercises {

Tensor my_matmul(const Tensor& a, const Tensor& b) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = matmul(a, b);
  }
  if (!needs_grad({a, b})) return out;
  return record("MyMatmulBackward", out, {a, b}, {a, b}, [a, b](const Tensor& g) -> Grads {
    (void)g;
    not_implemented(4);  // YOUR CODE
  });
}

}  // namespace exercises

// Hints, one at a time:
// 1. Write the shapes down; there is only one way to multiply g with b (or a) that gives a's (b's) shape.
// 2. matmul(g, b.mT()) and matmul(a.mT(), g); then .sum_to(a.shape()) and .sum_to(b.shape()).
