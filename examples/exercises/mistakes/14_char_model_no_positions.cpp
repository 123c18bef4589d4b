// expect: char_model_loss at step 0: .*the forward differs
// Exercise 14, a usual mistake: the position embeddings left out (x = tok(idx)). The model cannot tell where
// a character stands, and its step-0 loss is not the workshop's.
#include "../exercises.h"

namespace exercises {

Tensor char_model_loss(const MyCharModel& m, const Tensor& idx, const Tensor& targets) {
  const int64_t B = idx.size(0), T = idx.size(1), V = m.head->weight.size(0);
  Tensor x = (*m.tok)(idx);
  Tensor qx = (*m.q)(x);
  Tensor kx = (*m.k)(x);
  Tensor vx = (*m.v)(x);
  Tensor logits = (*m.head)(my_attention_head(qx, kx, vx));
  return my_cross_entropy(logits.view({B * T, V}), targets.view({B * T}));
}

}  // namespace exercises
