// Exercise 15: one GPT block, assembled from your own pieces, and trained.
//
// GPT-2's block (the book's TransformerBlock, nn/gpt.cpp) with one attention head. It normalises each
// sublayer's input (pre-norm) and adds the sublayer's output to x (a residual connection):
//
//     h = layer_norm(x; norm1)                      rung 11
//     x = x + out_proj(attention(W_query(h), W_key(h), W_value(h)))     rungs 9 and 10
//     h = layer_norm(x; norm2)
//     x = x + contract(gelu(expand(h)))             rungs 9 and 12: dim → 4·dim → dim
//
// Every piece is yours; there is no backward to write: each piece records its own node, and the chain
// rule through the block is your engine's (rung 5). The checker holds your block to the book's
// nn::TransformerBlock (its output and every gradient), runs gradcheck on it, then builds the smallest GPT
// around it (token and position embeddings, your block, a final my_layer_norm, a MyLinear head, your
// cross-entropy) and trains it 301 steps on the workshop's text with your run_backward and your
// my_adam_step, beside the same model made of the engine's ops. It passes when the printed losses agree.
//
// Check it:  make exercise N=15     Explained in: docs/gpt.md, docs/exercises.md
#include "exercises.h"

namespace exercises {

Tensor my_gpt_block(const MyGptBlock& block, const Tensor& x) {
  (void)block;
  (void)x;
  not_implemented(15);  // YOUR CODE
}

}  // namespace exercises

// Hints, one at a time:
// 1. (*block.W_query)(h) calls your Linear; my_layer_norm(x, block.norm1_scale, block.norm1_shift).
// 2. The residual adds the sublayer's output to the x that went into its norm, not to the normalised h.
// 3. Call W_query, W_key and W_value in three statements, then my_attention_head(q, k, v).
