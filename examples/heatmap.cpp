// heatmap — the workshop's scaled_dot_product.py followed by heatmap.py, which continues it:
// attention from scratch on a 4-token sentence, then the weights printed as a text grid.
//
//   heatmap                  the workshop's output (compared byte for byte with its Python twin)
//   heatmap --svg FILE.svg   also draws the attention weights as an SVG heatmap (open it in a browser)
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autograd/autograd.h"
#include "plot/svg.h"

using namespace autograd;

int main(int argc, char** argv) {
  set_numerics(Numerics::exact);  // PyTorch's bits: this program prints the numbers PyTorch prints
  std::string svg_file;
  for (int a = 1; a < argc; ++a) {
    if (std::strcmp(argv[a], "--svg") == 0 && a + 1 < argc) {
      svg_file = argv[++a];
    } else {
      std::cerr << "usage: " << argv[0] << " [--svg FILE.svg]\n";
      return 2;
    }
  }
  manual_seed(0);
  set_printoptions(/*precision=*/3, /*sci_mode=*/false);

  std::vector<std::string> words = {"Aditi", "loves", "warm", "dosa"};
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

  // heatmap.py: printing the attention grid
  std::cout << "Attention map (rows = query word, columns = attended word):\n";
  std::string header = "          ";
  for (const auto& w : words) header += fmt::format("{:>8}", w);
  std::cout << header << "\n";
  for (int64_t i = 0; i < seq_len; ++i) {
    std::string row;
    for (int64_t j = 0; j < seq_len; ++j) row += fmt::format("{:>8.2f}", weights[i][j].item());
    std::cout << fmt::format("{:>10}{}", words[size_t(i)], row) << "\n";
  }

  if (!svg_file.empty()) {
    plot::svg::HeatmapOptions look{.title = "Attention weights = softmax(Q Kᵀ / √d_k)",
                             .row_title = "query word",
                             .column_title = "attended word",
                             .decimals = 2,
                             .lo = 0.0,
                             .hi = 1.0};
    write_text_file(svg_file, plot::svg::heatmap(weights, words, words, look));
    std::cerr << "wrote " << svg_file << "\n";
  }
}
