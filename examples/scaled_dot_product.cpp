// scaled_dot_product — the workshop's scaled_dot_product.py: attention from scratch on a 4-token
// sentence, every tensor printed along the way.
#include <iostream>
#include <string>
#include <vector>

#include "autograd/autograd.h"

using namespace autograd;

int main() {
  set_numerics(Numerics::exact);  // PyTorch's bits: this program prints the numbers PyTorch prints
  manual_seed(0);
  set_printoptions(/*precision=*/3, /*sci_mode=*/false);

  std::vector<std::string> words = {"Aditi", "loves", "warm", "dosa"};  // used by heatmap.py
  const int64_t seq_len = 4, d_model = 4;

  // Toy token embeddings (normally learned)
  Tensor X = randn({seq_len, d_model});

  // One shared set of projection weights (normally learned)
  Tensor W_q = randn({d_model, d_model}) * 0.5;
  Tensor W_k = randn({d_model, d_model}) * 0.5;
  Tensor W_v = randn({d_model, d_model}) * 0.5;

  Tensor Q = X.matmul(W_q);  // Queries: "what am I looking for?"
  Tensor K = X.matmul(W_k);  // Keys:    "what do I contain?"
  Tensor V = X.matmul(W_v);  // Values:  "what do I offer?"

  const int64_t d_k = Q.size(-1);
  Tensor scores = Q.matmul(K.t());                      // every query dotted with every key
  Tensor scaled = scores / std::pow(double(d_k), 0.5);  // keep the numbers gentle
  Tensor weights = softmax(scaled, -1);                 // each row becomes probabilities
  Tensor output = weights.matmul(V);                    // blend the values

  std::cout << "Q = X @ W_q\n" << Q << "\n";
  std::cout << "\nRaw scores = Q @ K^T, shape " << shape_tuple(scores) << "\n" << scores << "\n";
  std::cout << "\nScaled scores = scores / sqrt(d_k), d_k = " << d_k << "\n" << scaled << "\n";
  std::cout << "\nAttention weights = softmax(scaled), each row sums to 1\n" << weights << "\n";
  std::cout << "row sums: " << weights.sum(-1) << "\n";
  std::cout << "\nOutput = weights @ V, shape " << shape_tuple(output) << "\n" << output << "\n";
}
