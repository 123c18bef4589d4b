// attention_from_scratch — the programs behind the web page "Attention from Scratch": the six tokens
// "Your journey starts with one step" through four acts (chapter 3 of Raschka's "Build a Large Language
// Model (From Scratch)") and the page's lab. The Python twin is
// tests/reference/seed_programs/attention_from_scratch.py; this program prints the same bytes.
#include <cmath>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "nn/nn.h"

using namespace autograd;

static const double kInf = std::numeric_limits<double>::infinity();

// Python's `print("label:", tensor)`.
static void print_labeled(const std::string& label, const Tensor& t) { std::cout << label << " " << t << "\n"; }

// A plain fixed-point row "[0.1234, ...]" (the unscaled weights span 1e-32..1; as a tensor their
// scientific-notation digits would depend on the last bits of randn and exp).
static std::string row4(const Tensor& t) {
  std::string s = "[";
  for (double v : t.to_vector<double>()) s += (s.size() > 1 ? ", " : "") + fmt::format("{:.4f}", v);
  return s + "]";
}

int main() {
  set_numerics(Numerics::exact);  // PyTorch's bits: this program prints the numbers PyTorch prints
  set_printoptions(/*precision=*/4);  // the page prints with 4 decimals

  Tensor inputs = tensor({{0.43, 0.15, 0.89},   // Your     (x^1)
                          {0.55, 0.87, 0.66},   // journey  (x^2)
                          {0.57, 0.85, 0.64},   // starts   (x^3)
                          {0.22, 0.58, 0.33},   // with     (x^4)
                          {0.77, 0.25, 0.10},   // one      (x^5)
                          {0.05, 0.80, 0.55}});  // step     (x^6)
  const int64_t d_in = 3, d_out = 2;

  // ------------------------------------------------------------------ Act 1
  std::cout << "== Act 1: attention without weights ==\n";
  Tensor attn_scores = inputs.matmul(inputs.t());
  Tensor attn_weights = softmax(attn_scores, -1);
  Tensor all_context_vecs = attn_weights.matmul(inputs);
  std::cout << "attn_scores = inputs @ inputs.T\n" << attn_scores << "\n";
  std::cout << "attn_weights = softmax(attn_scores, dim=-1)\n" << attn_weights << "\n";
  print_labeled("row sums:", attn_weights.sum(-1));
  std::cout << "all_context_vecs = attn_weights @ inputs\n" << all_context_vecs << "\n";

  // ------------------------------------------------------------------ Act 2
  std::cout << "\n== Act 2: trainable query, key and value weights ==\n";
  manual_seed(123);
  nn::SelfAttention_v1 sa_v1(d_in, d_out);
  std::cout << "SelfAttention_v1 (torch.manual_seed(123)) output:\n" << sa_v1(inputs) << "\n";

  manual_seed(789);
  nn::SelfAttention_v2 sa_v2(d_in, d_out);
  std::cout << "SelfAttention_v2 (torch.manual_seed(789)) output:\n" << sa_v2(inputs) << "\n";
  Tensor keys, attn_scores_v2, attn_weights_v2;
  {
    NoGradGuard no_grad;
    Tensor queries = (*sa_v2.W_query)(inputs);
    keys = (*sa_v2.W_key)(inputs);
    attn_scores_v2 = queries.matmul(keys.t());
    attn_weights_v2 = softmax(attn_scores_v2 / std::pow(double(keys.size(-1)), 0.5), -1);
  }
  std::cout << "SelfAttention_v2 attention weights:\n" << attn_weights_v2 << "\n";

  // ------------------------------------------------------------------ Act 3
  std::cout << "\n== Act 3: causal attention ==\n";
  int64_t context_length = attn_scores_v2.size(0);
  Tensor mask = triu(ones({context_length, context_length}), 1);
  Tensor masked = attn_scores_v2.masked_fill(mask.to_bool(), -kInf);
  std::cout << "masked scores (SelfAttention_v2, upper triangle = -inf):\n" << masked << "\n";
  Tensor attn_weights_masked = softmax(masked / std::pow(double(keys.size(-1)), 0.5), -1);
  std::cout << "masked attention weights = softmax(masked / sqrt(d_k)):\n" << attn_weights_masked << "\n";

  manual_seed(123);
  nn::Dropout dropout(0.5);
  Tensor example = ones({6, 6});
  std::cout << "dropout(0.5) on ones(6, 6) (torch.manual_seed(123)):\n" << dropout(example) << "\n";

  Tensor batch = stack({inputs, inputs}, 0);
  std::cout << "batch shape: " << shape_tuple(batch) << "\n";
  manual_seed(123);
  context_length = batch.size(1);
  nn::CausalAttention ca(d_in, d_out, context_length, 0.0);
  Tensor context_vecs = ca(batch);
  std::cout << "CausalAttention (torch.manual_seed(123)) context_vecs:\n" << context_vecs << "\n";
  std::cout << "context_vecs.shape: " << shape_tuple(context_vecs) << "\n";

  // ------------------------------------------------------------------ Act 4
  std::cout << "\n== Act 4: multi-head attention ==\n";
  manual_seed(123);
  nn::MultiHeadAttentionWrapper mha_wrapper(d_in, d_out, context_length, 0.0, /*num_heads=*/2);
  context_vecs = mha_wrapper(batch);
  std::cout << "MultiHeadAttentionWrapper (torch.manual_seed(123), 2 heads) context_vecs:\n" << context_vecs << "\n";
  std::cout << "context_vecs.shape: " << shape_tuple(context_vecs) << "\n";

  manual_seed(123);
  nn::MultiHeadAttention mha(d_in, d_out, context_length, 0.0, /*num_heads=*/2);
  context_vecs = mha(batch);
  std::cout << "MultiHeadAttention (torch.manual_seed(123), 2 heads) context_vecs:\n" << context_vecs << "\n";
  std::cout << "context_vecs.shape: " << shape_tuple(context_vecs) << "\n";

  // ------------------------------------------------------------------ The lab
  std::cout << "\n== The lab ==\n";
  std::cout << "-- softmax temperature: softmax(attn_scores[1] / T), query 'journey' (act 1) --\n";
  Tensor row = attn_scores[1];
  print_labeled("attn_scores[1]:", row);
  for (double T : {0.25, 0.5, 1.0, 2.0, 4.0}) print_labeled(fmt::format("T = {:.2f}:", T), softmax(row / T, -1));

  std::cout << "-- causal mask off vs on, query 'journey' (act 1, T = 1) --\n";
  Tensor causal = triu(ones({6, 6}), 1).to_bool();
  Tensor w_off = softmax(attn_scores, -1)[1];
  Tensor w_on = softmax(attn_scores.masked_fill(causal, -kInf), -1)[1];
  print_labeled("mask off:", w_off);
  print_labeled("mask on: ", w_on);
  std::cout << "full causal weights (act 1 scores, mask on):\n"
            << softmax(attn_scores.masked_fill(causal, -kInf), -1) << "\n";

  std::cout << "-- one cell: query 'journey' meets key 'starts' --\n";
  const int64_t q_i = 1, k_j = 2;
  Tensor dot = (inputs[q_i] * inputs[k_j]).sum();
  print_labeled("query:", inputs[q_i]);
  print_labeled("key:  ", inputs[k_j]);
  print_labeled("products:", inputs[q_i] * inputs[k_j]);
  std::cout << fmt::format("score = {:.4f}, weight = {:.4f}\n", dot.item(), attn_weights[q_i][k_j].item());

  std::cout << "-- the d_k slider: unscaled vs scaled softmax (torch.manual_seed(0)) --\n";
  for (int64_t d_k : {2, 8, 32, 128, 512}) {
    manual_seed(0);
    Tensor q = randn({d_k});
    Tensor K = randn({6, d_k});
    Tensor unscaled = softmax(K.matmul(q), -1);
    Tensor scaled = softmax(K.matmul(q) / std::pow(double(d_k), 0.5), -1);
    std::cout << fmt::format("d_k = {}\n", d_k);
    std::cout << "  unscaled: " << row4(unscaled) << "\n";
    std::cout << "  scaled:   " << row4(scaled) << "\n";
    std::cout << fmt::format("  max weight: unscaled {:.4f}, scaled {:.4f}\n", unscaled.max().item(), scaled.max().item());
  }
  return 0;  // (spelled out: the lab compiles this main() under another name, examples/lab/acts.cpp)
}
