// Exercise 8, solved: masked_fill and the causal mask.
#include "../exercises.h"

namespace exercises {

Tensor my_masked_fill(const Tensor& x, const Tensor& mask, double value) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = where(mask, full({}, value, x.dtype(), x.device()), x);
  }
  if (!needs_grad({x})) return out;
  return record("MyMaskedFillBackward", out, {x}, {mask}, [mask](const Tensor& g) {
    // a filled position is the constant `value`: it does not depend on x, so x gets no gradient there
    return Grads{where(mask, zeros({}, g.dtype(), g.device()), g)};
  });
}

Tensor causal_mask(int64_t T) {
  Tensor rows = arange(T).view({T, 1}), cols = arange(T).view({1, T});
  return gt(cols, rows);  // key j is in query i's future when j > i
}

}  // namespace exercises
