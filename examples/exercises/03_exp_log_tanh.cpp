// Exercise 3: exp, log and tanh.
//
//     y = eˣ       dy/dx = eˣ = y
//     y = ln x     dy/dx = 1/x
//     y = tanh x   dy/dx = 1 − tanh² x = 1 − y²
//
// and dL/dx = g ⊙ dy/dx. Where the derivative is the output itself, save the output — but detached
// (out.detach()): the output owns this node, so a closure holding the output itself would be a cycle.
//
// Check it:  make exercise N=3      Explained in: docs/autograd.md ("Recording")
#include "exercises.h"

namespace exercises {

Tensor my_exp(const Tensor& x) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = exp(x);
  }
  if (!needs_grad({x})) return out;
  Tensor y = out.detach();
  return record("MyExpBackward", out, {x}, {y}, [y](const Tensor& g) -> Grads {
    (void)g;
    not_implemented(3);  // YOUR CODE
  });
}

Tensor my_log(const Tensor& x) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = log(x);
  }
  if (!needs_grad({x})) return out;
  return record("MyLogBackward", out, {x}, {x}, [x](const Tensor& g) -> Grads {
    (void)g;
    not_implemented(3);  // YOUR CODE
  });
}

Tensor my_tanh(const Tensor& x) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = tanh(x);
  }
  if (!needs_grad({x})) return out;
  Tensor y = out.detach();
  return record("MyTanhBackward", out, {x}, {y}, [y](const Tensor& g) -> Grads {
    (void)g;
    not_implemented(3);  // YOUR CODE
  });
}

}  // namespace exercises

// Hints, one at a time:
// 1. Scalars mix with tensors: 1.0 - y * y is a tensor.
// 2. No sum_to here: a unary op's output has its input's shape.
