// Exercise 14, solved: the workshop's character model on your own ops.
#include "../exercises.h"

namespace exercises {

Tensor char_model_loss(const MyCharModel& m, const Tensor& idx, const Tensor& targets) {
  const int64_t B = idx.size(0), T = idx.size(1), V = m.head->weight.size(0);
  Tensor positions = (*m.pos)(arange(T));  // (one statement: the operands of + are made in the compiler's order)
  Tensor x = (*m.tok)(idx) + positions;    // x = tok(idx) + pos(arange(T))
  // q, k, then v, one statement each, as the workshop calls them. Backward runs the newest node first, so
  // this order decides the order in which x's three gradients are added — and float addition rounds
  // differently in another order. (In my_attention_head(q(x), k(x), v(x)) the order is the compiler's
  // choice: C++ leaves it unspecified, and GCC calls v first.)
  Tensor qx = (*m.q)(x);
  Tensor kx = (*m.k)(x);
  Tensor vx = (*m.v)(x);
  Tensor logits = (*m.head)(my_attention_head(qx, kx, vx));                 // rung 10 on rung 9's layers: [B, T, V]
  return my_cross_entropy(logits.view({B * T, V}), targets.view({B * T}));  // rung 7
}

}  // namespace exercises
