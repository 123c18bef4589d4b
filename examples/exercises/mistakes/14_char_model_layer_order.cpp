// expect: the gradients of tok.weight and pos.weight are not the workshop's to the bit, .* q, k, then v
// Exercise 14, a usual mistake: the layers called in another order than the workshop's (v, k, then q; the
// same happens to my_attention_head(q(x), k(x), v(x)) under GCC, which evaluates arguments right to left).
// Every value is right, but x's three gradients are added in another order: after a few steps of training
// the float roundings drift apart, and the losses at steps 200 and 300 are not PyTorch's.
#include "../exercises.h"

namespace exercises {

Tensor char_model_loss(const MyCharModel& m, const Tensor& idx, const Tensor& targets) {
  const int64_t B = idx.size(0), T = idx.size(1), V = m.head->weight.size(0);
  Tensor x = (*m.tok)(idx) + (*m.pos)(arange(T));
  Tensor vx = (*m.v)(x);
  Tensor kx = (*m.k)(x);
  Tensor qx = (*m.q)(x);
  Tensor logits = (*m.head)(my_attention_head(qx, kx, vx));
  return my_cross_entropy(logits.view({B * T, V}), targets.view({B * T}));
}

}  // namespace exercises
