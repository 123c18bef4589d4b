// expect: my_exp: the output outlives its last handle. Your closure keeps `out` itself
// A deliberate mistake for the checker's tests (tests/exercises/): my_exp's closure keeps the output itself, not
// out.detach(). Its gradients are right; the output, its node and the closure keep each other alive for good.
#include "../exercises.h"

namespace exercises {

Tensor my_exp(const Tensor& x) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = exp(x);
  }
  if (!needs_grad({x})) return out;
  return record("MyExpBackward", out, {x}, {out}, [out](const Tensor& g) { return Grads{g * out}; });
}

Tensor my_log(const Tensor& x) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = log(x);
  }
  if (!needs_grad({x})) return out;
  return record("MyLogBackward", out, {x}, {x}, [x](const Tensor& g) { return Grads{g / x}; });
}

Tensor my_tanh(const Tensor& x) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = tanh(x);
  }
  if (!needs_grad({x})) return out;
  Tensor y = out.detach();
  return record("MyTanhBackward", out, {x}, {y}, [y](const Tensor& g) { return Grads{g * (1.0 - y * y)}; });
}

}  // namespace exercises
