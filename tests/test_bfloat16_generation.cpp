// test_bfloat16_generation.cpp — generation on weights kept in bfloat16 (nn::keep_weights_in_bfloat16, what
// generate --precision bf16 does): the matrices hold bfloat16 in half the bytes, the norms and biases stay
// float32, and the tokens and logits are those of a float32 model holding the same (bfloat16) values: bit for
// bit under autocast (each product rounds both operands to bfloat16 either way), and the same greedy tokens
// with nearby logits when that float32 model runs its products in float32. GPT and Llama (grouped-query
// attention, q/k/v biases, QK-norm, an untied head); a Hugging Face BF16 folder read without widening.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "autograd/reference/kernels.h"
#include "nn/generation.h"
#include "nn/gpt.h"
#include "nn/gpt2.h"
#include "nn/hf_folder.h"
#include "nn/llama.h"
#include "nn/safetensors.h"

namespace {

using namespace autograd;

// Every matrix of `model` rounded to the nearest bfloat16 value, kept in float32: the float32 reference of a
// bfloat16 model.
void round_matrices_to_bfloat16_values(nn::Module& model) {
  NoGradGuard no_grad;
  for (Tensor p : model.parameters())
    if (p.dim() >= 2) p.copy_(p.to(DType::BFloat16).to(DType::Float32));
}

size_t parameter_bytes(const nn::Module& model) {
  size_t bytes = 0;
  for (const Tensor& p : model.parameters()) bytes += size_t(p.numel()) * dtype_size(p.dtype());
  return bytes;
}

struct Greedy {
  std::vector<int64_t> ids;
  std::vector<std::vector<float>> logits;  // each step's
};

Greedy greedy(const nn::LanguageModel& model, const std::vector<int64_t>& prompt, int64_t tokens) {
  nn::GenerationOptions options;
  options.max_new_tokens = tokens;
  options.sampling.temperature = 0;
  Generator gen(0);
  Greedy g;
  g.ids = nn::generate(model, prompt, options, gen,
                       [&](int64_t, const Tensor& logits) { g.logits.push_back(logits.to_vector<float>()); });
  return g;
}

// `stored` (keep_weights_in_bfloat16) against `reference` (the same values in float32).
void expect_the_same_generation(const nn::LanguageModel& reference, const nn::LanguageModel& stored,
                                const std::vector<int64_t>& prompt, int64_t tokens) {
  Greedy bf16, reference_under_autocast;
  {
    AutocastGuard autocast(DType::BFloat16);
    bf16 = greedy(stored, prompt, tokens);
    reference_under_autocast = greedy(reference, prompt, tokens);
  }
  EXPECT_EQ(bf16.ids, reference_under_autocast.ids);
  EXPECT_EQ(bf16.logits, reference_under_autocast.logits) << "the same products on the same bfloat16 operands";

  // The float32 products: the same greedy tokens, logits within a few bfloat16 steps of the activations'
  // rounding (2⁻⁸ relative) of the largest logit.
  const Greedy float32 = greedy(reference, prompt, tokens);
  EXPECT_EQ(bf16.ids, float32.ids);
  ASSERT_EQ(bf16.logits.size(), float32.logits.size());
  for (size_t step = 0; step < float32.logits.size(); ++step) {
    const std::vector<float>& want = float32.logits[step];
    float largest = 0, error = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      largest = std::max(largest, std::abs(want[i]));
      error = std::max(error, std::abs(bf16.logits[step][i] - want[i]));
    }
    EXPECT_LE(error, largest * 0.04f) << "step " << step;
    EXPECT_GT(error, 0.0f) << "step " << step << ": bfloat16 activations should move the logits a little";
  }
}

void expect_matrices_in_bfloat16(const nn::Module& model) {
  for (const auto& [name, p] : model.named_parameters())
    EXPECT_EQ(p.dtype(), p.dim() >= 2 ? DType::BFloat16 : DType::Float32) << name;
}

TEST(BFloat16Generation, GptOnBfloat16WeightsGeneratesAsItsFloat32Twin) {
  const nn::GPTConfig cfg{.vocab_size = 96, .context_length = 40, .emb_dim = 48, .n_heads = 4, .n_layers = 2,
                          .drop_rate = 0.0, .qkv_bias = true};
  manual_seed(21);
  nn::GPTModel reference(cfg);
  reference.tie_weights();
  manual_seed(21);
  nn::GPTModel stored(cfg);
  stored.tie_weights();
  round_matrices_to_bfloat16_values(reference);
  round_matrices_to_bfloat16_values(stored);
  reference.eval(), stored.eval();

  const size_t float32_bytes = parameter_bytes(stored);
  nn::keep_weights_in_bfloat16(stored);
  expect_matrices_in_bfloat16(stored);
  EXPECT_TRUE(stored.out_head->weight.impl_ptr() == stored.tok_emb->weight.impl_ptr()) << "the head stays tied";
  EXPECT_LT(double(parameter_bytes(stored)), 0.52 * double(float32_bytes));

  expect_the_same_generation(reference, stored, {3, 14, 15, 92, 65}, 12);
}

TEST(BFloat16Generation, LlamaOnBfloat16WeightsGeneratesAsItsFloat32Twin) {
  const nn::LlamaConfig cfg{.vocab_size = 80, .hidden_size = 64, .intermediate_size = 96, .num_hidden_layers = 2,
                            .num_attention_heads = 4, .num_key_value_heads = 2, .max_position_embeddings = 40,
                            .tie_word_embeddings = false, .attention_bias = true, .qk_norm = true,
                            .initializer_range = 0.2};
  manual_seed(22);
  nn::LlamaModel reference(cfg);
  manual_seed(22);
  nn::LlamaModel stored(cfg);
  round_matrices_to_bfloat16_values(reference);
  round_matrices_to_bfloat16_values(stored);
  reference.eval(), stored.eval();

  const size_t float32_bytes = parameter_bytes(stored);
  nn::keep_weights_in_bfloat16(stored);
  expect_matrices_in_bfloat16(stored);
  EXPECT_LT(double(parameter_bytes(stored)), 0.52 * double(float32_bytes));

  expect_the_same_generation(reference, stored, {1, 2, 3, 5, 8, 13}, 12);
}

// A BF16 folder (the PyTorch twin's smollm2 fixture) read for bfloat16: the matrices arrive as stored (the
// same values as the widened float32 read), the norms widened to float32.
TEST(BFloat16Generation, ABf16FolderIsReadWithoutWidening) {
  const nn::HfFolder folder =
      nn::read_hf_folder(std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/reference/fixtures/hf/smollm2");
  const std::unique_ptr<nn::LlamaModel> wide = nn::load_llama_folder(folder);
  const std::unique_ptr<nn::LlamaModel> narrow = nn::load_llama_folder(folder, DType::BFloat16);
  expect_matrices_in_bfloat16(*narrow);
  const nn::NamedTensors a = wide->named_parameters(), b = narrow->named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(a[i].first);
    EXPECT_TRUE(equal(a[i].second, b[i].second.to(DType::Float32)));
  }
  EXPECT_THROW(nn::load_llama_folder(folder, DType::Float64), std::invalid_argument);
}

// GPT-2's F32 model.safetensors read for bfloat16: each matrix rounded as it is read (no float32 copy), the
// same values as the float32 load rounded; the norms and biases as they are.
TEST(BFloat16Generation, AGpt2F32FileIsRoundedAsItIsRead) {
  manual_seed(23);
  nn::GPTModel source({.vocab_size = 64, .context_length = 16, .emb_dim = 32, .n_heads = 2, .n_layers = 2,
                       .drop_rate = 0.0, .qkv_bias = true});
  source.tie_weights();
  const std::string file = ::testing::TempDir() + "bf16_gpt2.safetensors";
  nn::save_safetensors(file, nn::gpt2_state_dict(source), nn::gpt2_metadata(source));
  const std::unique_ptr<nn::GPTModel> wide = nn::load_gpt2(file);
  const std::unique_ptr<nn::GPTModel> narrow = nn::load_gpt2(file, 0, DType::BFloat16);
  expect_matrices_in_bfloat16(*narrow);
  EXPECT_TRUE(narrow->out_head->weight.impl_ptr() == narrow->tok_emb->weight.impl_ptr());
  const nn::NamedTensors a = wide->named_parameters(), b = narrow->named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(a[i].first);
    const Tensor want = a[i].second.dim() >= 2 ? a[i].second.to(DType::BFloat16) : a[i].second;
    EXPECT_TRUE(equal(b[i].second.to(DType::Float32), want.to(DType::Float32)));
  }
  std::remove(file.c_str());
}

// store_in_bfloat16 changes a tensor's storage under everything that holds it, so it takes only what nothing
// else depends on: a contiguous float32 leaf.
TEST(BFloat16Generation, StoreInBfloat16TakesContiguousFloat32LeavesOnly) {
  Tensor leaf = tensor({{1.0, 1.0 / 3}, {-2.5, 1e-3}});
  const Tensor holder = leaf;  // another handle on the same tensor
  store_in_bfloat16(leaf);
  EXPECT_EQ(holder.dtype(), DType::BFloat16);
  EXPECT_EQ(holder.to_vector<float>(), tensor({{1.0, 1.0 / 3}, {-2.5, 1e-3}}).to(DType::BFloat16).to_vector<float>());
  store_in_bfloat16(leaf);  // bfloat16 already: unchanged
  EXPECT_EQ(leaf.dtype(), DType::BFloat16);

  Tensor matrix = ones({3, 4});
  EXPECT_THROW(store_in_bfloat16(matrix.t()), std::invalid_argument);
  Tensor w = ones({2, 2}).requires_grad_(true);
  EXPECT_THROW(store_in_bfloat16(w * 2.0), std::invalid_argument);
  EXPECT_THROW(store_in_bfloat16(ones({2}, DType::Float64)), std::invalid_argument);
}

// --kernels reference (KernelsGuard): an autocast product runs the bfloat16 reference loop, bit for bit, where
// the fast kernel's order of additions would give other bits.
TEST(BFloat16Generation, ReferenceKernelsRunTheBfloat16Loop) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> xv(3 * 1030), wv(40 * 1030);
  for (float& v : xv) v = normal(rng);
  for (float& v : wv) v = normal(rng);
  const Tensor x = from_vector(xv, {3, 1030}), w = from_vector(wv, {40, 1030});
  Tensor loop = empty({3, 40});
  reference::bfloat16_matmul(x.to(DType::BFloat16), w.to(DType::BFloat16).t(), loop);
  const Tensor want = loop.to(DType::BFloat16).to(DType::Float32);  // autocast's output is rounded to bfloat16
  Tensor got;
  {
    KernelsGuard reference_kernels(Kernels::reference);
    AutocastGuard autocast(DType::BFloat16);
    got = linear(x, w);
  }
  EXPECT_TRUE(equal(got, want));
}

}  // namespace
