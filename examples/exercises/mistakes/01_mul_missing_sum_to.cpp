// expect: missing sum_to
// A deliberate mistake for the checker's tests (tests/exercises/): the gradients are not summed back to the broadcast inputs' shapes.
#include "../exercises.h"

namespace exercises {

Tensor my_mul(const Tensor& a, const Tensor& b) {
  Tensor out;
  {
    NoGradGuard no_grad;  // the forward: the engine's own product, recorded by no one
    out = mul(a, b);
  }
  if (!needs_grad({a, b})) return out;
  return record("MyMulBackward", out, {a, b}, {a, b}, [a, b](const Tensor& g) {
    // d(a·b)/da = b, d(a·b)/db = a; where an input was stretched, its gradient sums over the stretch
    return Grads{g * b, g * a};
  });
}

}  // namespace exercises
