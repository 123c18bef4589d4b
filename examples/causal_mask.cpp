// causal_mask — the workshop's causal_mask.py: block every token from seeing the future.
#include <cmath>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autograd/autograd.h"

using namespace autograd;

int main() {
  set_numerics(Numerics::exact);  // PyTorch's bits: this program prints the numbers PyTorch prints
  manual_seed(3);
  set_printoptions(/*precision=*/2, /*sci_mode=*/false);

  const int64_t T = 4;
  std::vector<std::string> tokens = {"<s>", "warm", "dosa", "please"};
  Tensor scores = randn({T, T});  // pretend these came from Q @ K^T / sqrt(d_k)

  Tensor mask = tril(ones({T, T}));  // lower triangle of ones
  Tensor masked = scores.masked_fill(mask == 0.0, -std::numeric_limits<double>::infinity());
  Tensor weights = softmax(masked, -1);

  std::cout << "Causal mask (1 = allowed, 0 = blocked):\n" << mask << "\n";
  std::cout << "\nAttention weights after causal masking:\n" << weights << "\n";
  std::cout << "\nRow by row (a token can only look left, never right):\n";
  for (int64_t i = 0; i < T; ++i) {
    std::string seen;
    for (int64_t j = 0; j < T; ++j)
      if (weights[i][j].item() > 0) seen += (seen.empty() ? "" : ", ") + tokens[size_t(j)];
    std::cout << fmt::format("  {:>8} can attend to: {}", tokens[size_t(i)], seen) << "\n";
  }
}
