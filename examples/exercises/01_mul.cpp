// Exercise 1: the backward of mul, with broadcasting (why sum_to).
//
// out = a ⊙ b, elementwise, where a and b may have different shapes that broadcast (NumPy's rules: a
// [4, 3] times b [3] uses b's row for each of a's 4 rows). The closure gets g = dL/dout (out's shape)
// and returns dL/da and dL/db:
//
//     dL/da = g ⊙ b        dL/db = g ⊙ a
//
// each of its input's own shape. When an input was broadcast, each of its elements was used several
// times, and the chain rule adds up the gradients of all those uses: `t.sum_to(shape)` sums t over
// the broadcast dims back down to `shape`.
//
// Check it:  make exercise N=1      Explained in: docs/autograd.md ("Recording"),
//                                   docs/backprop-walkthrough.md ("How broadcasting is undone")
#include "exercises.h"

namespace exercises {

Tensor my_mul(const Tensor& a, const Tensor& b) {
  Tensor out;
  {
    NoGradGuard no_grad;  // the forward is the engine's product, recorded by no one
    out = mul(a, b);
  }
  if (!needs_grad({a, b})) return out;
  return record("MyMulBackward", out, /*inputs=*/{a, b}, /*saved=*/{a, b}, [a, b](const Tensor& g) -> Grads {
    // YOUR CODE: return Grads{gradient for a, gradient for b};
    (void)g;
    not_implemented(1);
  });
}

}  // namespace exercises

// Hints, one at a time:
// 1. g * b has the output's shape. Is that a's shape when a was broadcast?
// 2. (g * b).sum_to(a.shape()) is a's gradient, whether or not a was broadcast.
// 3. The engine's own mul is in autograd/ops/elementwise.cpp; look only once yours passes.
