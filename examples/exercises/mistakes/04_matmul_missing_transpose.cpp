// expect: missing transpose
// A deliberate mistake for the checker's tests (tests/exercises/): da = g b instead of g bᵀ.
#include "../exercises.h"

namespace exercises {

Tensor my_matmul(const Tensor& a, const Tensor& b) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = matmul(a, b);
  }
  if (!needs_grad({a, b})) return out;
  return record("MyMatmulBackward", out, {a, b}, {a, b}, [a, b](const Tensor& g) {
    // out[i, j] = Σ_k a[i, k] b[k, j]:  da = g bᵀ,  db = aᵀ g  (then undo any broadcast batch dims)
    return Grads{matmul(g, b).sum_to(a.shape()), matmul(a.mT(), g).sum_to(b.shape())};
  });
}

}  // namespace exercises
