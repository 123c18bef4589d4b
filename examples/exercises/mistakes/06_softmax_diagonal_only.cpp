// expect: only the diagonal of the Jacobian
// A deliberate mistake for the checker's tests (tests/exercises/): only the Jacobian's diagonal.
#include "../exercises.h"

namespace exercises {

Tensor my_softmax(const Tensor& x, int64_t dim) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = softmax(x, dim);
  }
  if (!needs_grad({x})) return out;
  Tensor y = out.detach();
  return record("MySoftmaxBackward", out, {x}, {y}, [y, dim](const Tensor& g) {
    // ∂y_j/∂x_i = y_j (δ_ij − y_i), so dx_i = Σ_j g_j y_j (δ_ij − y_i) = y_i (g_i − Σ_j g_j y_j)
    return Grads{g * y * (1.0 - y)};
  });
}

}  // namespace exercises
