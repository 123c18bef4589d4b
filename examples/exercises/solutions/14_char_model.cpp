// Exercise 14, solved: the workshop's character model on your own ops.
#include "../exercises.h"

namespace exercises {

Tensor char_model_loss(const MyCharModel& m, const Tensor& idx, const Tensor& targets) {
  const int64_t B = idx.size(0), T = idx.size(1), V = m.head->weight.size(0);
  Tensor x = (*m.tok)(idx) + (*m.pos)(arange(T));                      // x = tok(idx) + pos(arange(T))
  Tensor ctx = my_attention_head((*m.q)(x), (*m.k)(x), (*m.v)(x));    // rung 10, on rung 9's layers
  Tensor logits = (*m.head)(ctx);                                      // [B, T, V]
  return my_cross_entropy(logits.view({B * T, V}), targets.view({B * T}));  // rung 7
}

}  // namespace exercises
