// Exercise 3, solved: exp, log and tanh.
#include "../exercises.h"

namespace exercises {

Tensor my_exp(const Tensor& x) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = exp(x);
  }
  if (!needs_grad({x})) return out;
  Tensor y = out.detach();  // the output, without its history (the output owns this node: no cycle)
  return record("MyExpBackward", out, {x}, {y}, [y](const Tensor& g) { return Grads{g * y}; });  // (eˣ)' = eˣ
}

Tensor my_log(const Tensor& x) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = log(x);
  }
  if (!needs_grad({x})) return out;
  return record("MyLogBackward", out, {x}, {x}, [x](const Tensor& g) { return Grads{g / x}; });  // (ln x)' = 1/x
}

Tensor my_tanh(const Tensor& x) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = tanh(x);
  }
  if (!needs_grad({x})) return out;
  Tensor y = out.detach();
  // (tanh x)' = 1 − tanh² x
  return record("MyTanhBackward", out, {x}, {y}, [y](const Tensor& g) { return Grads{g * (1.0 - y * y)}; });
}

}  // namespace exercises
