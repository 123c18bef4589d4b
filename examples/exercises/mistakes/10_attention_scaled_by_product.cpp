// expect: my_attention_head \(rung 10\) is right to float rounding, but the gradient of q is not the bits
// check rung: 14
// A deliberate mistake for the checker's tests (tests/exercises/): ds multiplied by 1/√d instead of divided
// by √d. The same number in exact arithmetic, so rung 10 passes; but a product with a rounded 1/√d rounds
// otherwise than the division PyTorch's DivBackward does, and rung 14, which asks for PyTorch's losses to
// the printed digit after 300 steps of chaotic training, says which piece rounds differently.
#include <cmath>

#include "../exercises.h"

namespace exercises {

Tensor my_attention_head(const Tensor& q, const Tensor& k, const Tensor& v) {
  const int64_t T = q.size(-2);
  const double root_d = std::sqrt(double(q.size(-1)));
  Tensor p, out;
  {
    NoGradGuard no_grad;
    Tensor scores = masked_fill(matmul(q, k.mT()) / root_d, causal_mask(T), -INFINITY);
    p = softmax(scores, -1);
    out = matmul(p, v);
  }
  if (!needs_grad({q, k, v})) return out;
  return record("MyAttentionHeadBackward", out, {q, k, v}, {q, k, v}, [q, k, v, p, root_d](const Tensor& g) {
    Tensor dv = matmul(p.mT(), g);
    Tensor dp = matmul(g, v.mT());
    Tensor ds = p * (dp - (dp * p).sum(-1, true)) * (1.0 / root_d);  // the mistake: × 1/√d, not ÷ √d
    return Grads{matmul(ds, k).sum_to(q.shape()), matmul(ds.mT(), q).sum_to(k.shape()), dv.sum_to(v.shape())};
  });
}

}  // namespace exercises
