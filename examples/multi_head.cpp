// multi_head — the workshop's multi_head.py: build multi-head attention by hand, copy the packed
// weights of (our) nn::MultiheadAttention into it, and check both give the same output.
#include <cstdio>
#include <iostream>

#include "nn/nn.h"

using namespace autograd;

int main() {
  set_numerics(Numerics::exact);  // PyTorch's bits: this program prints the numbers PyTorch prints
  manual_seed(1);

  const int64_t d_model = 8, heads = 2;
  nn::WorkshopMultiHeadAttention mine(d_model, heads);  // the workshop's class MultiHeadAttention
  nn::MultiheadAttention ref(d_model, heads, /*batch_first=*/true);

  // Copy PyTorch's packed Q/K/V weights into our separate layers
  auto w = chunk(ref.in_proj_weight, 3, 0);
  auto b = chunk(ref.in_proj_bias, 3, 0);
  {
    NoGradGuard no_grad;
    mine.W_q->weight.copy_(w[0]); mine.W_q->bias.copy_(b[0]);
    mine.W_k->weight.copy_(w[1]); mine.W_k->bias.copy_(b[1]);
    mine.W_v->weight.copy_(w[2]); mine.W_v->bias.copy_(b[2]);
    mine.W_o->weight.copy_(ref.out_proj->weight); mine.W_o->bias.copy_(ref.out_proj->bias);
  }

  Tensor x = randn({1, 5, d_model});
  Tensor out_mine = mine(x);
  auto [out_ref, attn] = ref(x, x, x);

  std::cout << "Our output shape:       " << shape_tuple(out_mine) << "\n";
  std::cout << "PyTorch output shape:   " << shape_tuple(out_ref) << "\n";
  std::cout << "Max absolute difference: " << print::python_float_repr((out_mine - out_ref).abs().max().item()) << "\n";
  std::cout << "Outputs match (atol 1e-5): " << (allclose(out_mine, out_ref, 1e-5, 1e-5) ? "True" : "False") << "\n";
}
