// Exercise 3: exp, log and tanh.
//
//     y = eˣ       dy/dx = eˣ = y
//     y = ln x     dy/dx = 1/x
//     y = tanh x   dy/dx = 1 − tanh² x = 1 − y²
//
// and dL/dx = g ⊙ dy/dx. Each closure keeps what its formula needs: capture it, and list it in `saved`
// (record's fourth argument), so that an in-place write to it before backward is caught. Where the
// derivative is the output itself, keep the output — but detached, y = out.detach(): the same numbers
// without the history. The output owns this node and the node owns the closure, so a closure holding
// `out` itself would close a cycle that is never freed. The checker looks for it.
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
  // YOUR CODE: what must the closure keep? Capture it in [] and list it in /*saved=*/{}.
  return record("MyExpBackward", out, /*inputs=*/{x}, /*saved=*/{}, [](const Tensor& g) -> Grads {
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
  return record("MyLogBackward", out, /*inputs=*/{x}, /*saved=*/{}, [](const Tensor& g) -> Grads {
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
  return record("MyTanhBackward", out, /*inputs=*/{x}, /*saved=*/{}, [](const Tensor& g) -> Grads {
    (void)g;
    not_implemented(3);  // YOUR CODE
  });
}

}  // namespace exercises

// Hints, one at a time:
// 1. Scalars mix with tensors: 1.0 - y * y is a tensor.
// 2. No sum_to here: a unary op's output has its input's shape.
// 3. my_log keeps x (an input owns no node of this op: no cycle); my_exp and my_tanh keep out.detach().
