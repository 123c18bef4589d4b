// Exercise 14: train the workshop's character model on your own ops.
//
// The workshop's model (examples/mini_self_attention.cpp, nn/char_model.cpp), with your pieces:
//
//     x = tok(idx) + pos(arange(T))            token + position embeddings, [B, T, D]
//     ctx = attention(q(x), k(x), v(x))        your MyLinear layers (rung 9), your head (rung 10)
//     logits = head(ctx)                       [B, T, V]
//     loss = cross_entropy(logits [B·T, V], targets [B·T])   (rung 7)
//
// The checker builds MyCharModel after manual_seed(7), trains it 301 steps with your my_adam_step
// (rung 13) on the workshop's text and batches, and prints the loss every 100 steps next to PyTorch's:
// 2.655 → 0.219 → 0.172 → 0.131. After step 100 only the same float roundings in the same order give
// the same digits (the reference solution's one-node attention prints 0.183 and 0.149 there); the
// checker then reruns with the engine's attention ops and your other pieces, which can match to the bit.
//
// Check it:  make exercise N=14     Explained in: docs/parity.md, docs/backprop-walkthrough.md
#include "exercises.h"

namespace exercises {

Tensor char_model_loss(const MyCharModel& model, const Tensor& idx, const Tensor& targets) {
  (void)model;
  (void)idx;
  (void)targets;
  not_implemented(14);  // YOUR CODE
}

}  // namespace exercises

// Hints, one at a time:
// 1. (*model.tok)(idx) calls the embedding; arange(T) is the positions 0..T−1.
// 2. logits.view({B * T, V}) and targets.view({B * T}) flatten the batch for the loss.
