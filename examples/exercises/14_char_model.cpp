// Exercise 14: train the workshop's character model on your own ops.
//
// The workshop's model (examples/mini_self_attention.cpp, nn/char_model.cpp), with your pieces:
//
//     x = tok(idx) + pos(arange(T))            token + position embeddings, [B, T, D]
//     ctx = attention(q(x), k(x), v(x))        your MyLinear layers (rung 9), your head (rung 10)
//     logits = head(ctx)                       [B, T, V]
//     loss = cross_entropy(logits [B·T, V], targets [B·T])   (rung 7)
//
// The checker builds MyCharModel after manual_seed(7) and trains it 301 steps on the workshop's text and
// batches, every gradient computed by your engine (run_backward, rung 5) and every update by your
// my_adam_step (rung 13), and prints the loss every 100 steps next to PyTorch's: 2.655 → 0.219 → 0.172 →
// 0.131. It passes when those are PyTorch's digits. After the first hundred steps training is chaotic:
// only the same float roundings in the same order give them, so every gradient of step 0 must be
// PyTorch's to the bit — when one is not, the checker says which of your pieces rounds differently.
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
// 3. Call q, k and v in that order, one statement each, as the workshop does: x's gradient is the sum of
//    three, and an engine that runs the newest node first (PyTorch's) adds them in the reverse order of
//    the calls. In my_attention_head((*model.q)(x), (*model.k)(x), (*model.v)(x)) the compiler picks it.
