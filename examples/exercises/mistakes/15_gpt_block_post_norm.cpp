// expect: my_gpt_block .*the sum normalised, norm\(x \+ f\(x\)\): post-norm
// A deliberate mistake for the checker's tests (tests/exercises/): the 2017 Transformer's post-norm block,
// x = norm(x + sublayer(x)), in place of GPT-2's pre-norm x + sublayer(norm(x)).
#include "../exercises.h"

namespace exercises {

Tensor my_gpt_block(const MyGptBlock& b, const Tensor& x_in) {
  Tensor q = (*b.W_query)(x_in);
  Tensor k = (*b.W_key)(x_in);
  Tensor v = (*b.W_value)(x_in);
  Tensor x = my_layer_norm(x_in + (*b.out_proj)(my_attention_head(q, k, v)), b.norm1_scale, b.norm1_shift);
  return my_layer_norm(x + (*b.contract)(my_gelu((*b.expand)(x))), b.norm2_scale, b.norm2_shift);
}

}  // namespace exercises
