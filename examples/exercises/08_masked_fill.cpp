// Exercise 8: masked_fill, and the causal mask.
//
// out = value where mask is true, x where it is false (mask: bool, broadcastable to x). A filled
// position holds a constant, which does not depend on x:
//
//     dL/dx = g where the mask is false, 0 where it is true
//
// The causal mask makes attention causal: query i (row) may see keys j ≤ i (columns), never the future.
// causal_mask(T) is bool [T, T], true where j > i (the positions to fill with −inf before the softmax,
// whose e^{−inf} = 0 then gives them no weight).
//
// Check it:  make exercise N=8      Explained in: docs/backprop-walkthrough.md ("Why the mask goes before
//                                   the softmax")
#include "exercises.h"

namespace exercises {

Tensor my_masked_fill(const Tensor& x, const Tensor& mask, double value) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = where(mask, full({}, value, x.dtype(), x.device()), x);
  }
  if (!needs_grad({x})) return out;
  return record("MyMaskedFillBackward", out, {x}, {mask}, [mask](const Tensor& g) -> Grads {
    (void)g;
    not_implemented(8);  // YOUR CODE
  });
}

Tensor causal_mask(int64_t T) {
  (void)T;
  not_implemented(8);  // YOUR CODE
}

}  // namespace exercises

// Hints, one at a time:
// 1. where(cond, a, b) picks a where cond is true; zeros({}, g.dtype()) is a 0-d zero that broadcasts.
// 2. arange(T).view({T, 1}) is the row index, arange(T).view({1, T}) the column index; gt(a, b) is a > b.
