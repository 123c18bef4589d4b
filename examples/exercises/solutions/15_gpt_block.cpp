// Exercise 15, solved: one GPT block of your own pieces.
#include "../exercises.h"

namespace exercises {

Tensor my_gpt_block(const MyGptBlock& b, const Tensor& x_in) {
  // the attention sublayer: normalise its input, add its output to x (rungs 11, 9, 10)
  Tensor h = my_layer_norm(x_in, b.norm1_scale, b.norm1_shift);
  Tensor q = (*b.W_query)(h);
  Tensor k = (*b.W_key)(h);
  Tensor v = (*b.W_value)(h);
  Tensor x = x_in + (*b.out_proj)(my_attention_head(q, k, v));
  // the feed-forward sublayer, the same way (rungs 11, 9, 12)
  h = my_layer_norm(x, b.norm2_scale, b.norm2_shift);
  return x + (*b.contract)(my_gelu((*b.expand)(h)));
}

}  // namespace exercises
