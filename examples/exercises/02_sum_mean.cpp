// Exercise 2: sum and mean along a dim.
//
// out = Σ_i x[..., i, ...] along `dim` (keepdim keeps that dim with size 1). Each element of x along
// the dim feeds the one output value it was summed into, with derivative 1, so:
//
//     dL/dx = g, with the summed dim put back and expanded to x's shape
//     mean:   dL/dx = that / n      (n = x.size(dim))
//
// Tools: g.unsqueeze(dim) puts a dim of size 1 back; .expand(shape) stretches size-1 dims (a view);
// .contiguous() copies it into its own memory.
//
// Check it:  make exercise N=2      Explained in: docs/autograd.md, docs/backprop-walkthrough.md
#include "exercises.h"

namespace exercises {

Tensor my_sum(const Tensor& x, int64_t dim, bool keepdim) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = sum(x, dim, keepdim);
  }
  if (!needs_grad({x})) return out;
  Shape shape = x.shape();
  int64_t d = dim < 0 ? dim + x.dim() : dim;  // a negative dim counts from the end
  return record("MySumBackward", out, {x}, {}, [shape, d, keepdim](const Tensor& g) -> Grads {
    // YOUR CODE
    (void)g;
    not_implemented(2);
  });
}

Tensor my_mean(const Tensor& x, int64_t dim, bool keepdim) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = mean(x, dim, keepdim);
  }
  if (!needs_grad({x})) return out;
  Shape shape = x.shape();
  int64_t d = dim < 0 ? dim + x.dim() : dim;
  return record("MyMeanBackward", out, {x}, {}, [shape, d, keepdim](const Tensor& g) -> Grads {
    // YOUR CODE
    (void)g;
    not_implemented(2);
  });
}

}  // namespace exercises

// Hints, one at a time:
// 1. With keepdim=false, x [3, 4] summed over dim 1 gives g of shape [3]: expand({3, 4}) fails, since
//    broadcasting aligns the last dims. Unsqueeze first: g.unsqueeze(1) is [3, 1].
// 2. Summed over dim 0, g is [4] and expand({3, 4}) happens to work: do not rely on it.
// 3. A mean is a sum times 1/n: its gradient is the sum's, times 1/n.
