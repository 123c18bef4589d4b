// test_generation.cpp — the key/value cache and the sampler (nn/generation.h). The cache must agree with
// recomputing the window at every step up to the full context (nanoGPT PR #613's cached outputs did not):
// the same greedy tokens and the same logits to float32 rounding, on the imported GPT-2 fixture and on the
// book's GPT (no q, k, v bias, untied head), in exact and in fast numerics (the recomputation takes the
// flash-attention path past kFlashAttentionAbove positions).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "autograd/numerics.h"
#include "nn/generation.h"
#include "nn/gpt2.h"

#ifndef SCRATCHGRAD_SOURCE_DIR
#define SCRATCHGRAD_SOURCE_DIR "/work/main"
#endif

namespace {

using namespace autograd;

std::unique_ptr<nn::GPTModel> fixture_gpt2() {
  return nn::load_gpt2(std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/reference/fixtures/gpt2/tiny_gpt2.safetensors");
}

std::unique_ptr<nn::GPTModel> random_gpt(int64_t context, bool gpt2_style) {
  manual_seed(61);
  auto model = std::make_unique<nn::GPTModel>(nn::GPTConfig{.vocab_size = 23, .context_length = context, .emb_dim = 16,
                                                            .n_heads = 2, .n_layers = 2, .drop_rate = 0.0,
                                                            .qkv_bias = gpt2_style});
  if (gpt2_style) model->tie_weights();
  model->eval();
  return model;
}

double relative_difference(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i)
    worst = std::max(worst, std::abs(double(x[i]) - double(y[i])) / (1.0 + std::abs(double(y[i]))));
  return worst;
}

// Greedy generation up to the full context, with and without the cache: the same tokens, and at every
// step logits that differ only by float32 rounding (different summation orders of the same products).
void expect_cache_matches_recomputation(const nn::GPTModel& model, const std::vector<int64_t>& prompt) {
  nn::GenerationOptions options;
  options.sampling.temperature = 0;
  options.max_new_tokens = model.cfg.context_length - int64_t(prompt.size()) + 1;  // the last step fills the context
  std::vector<Tensor> cached_logits, recomputed_logits;
  Generator unused_a(1), unused_b(1);
  const auto cached = nn::generate(model, prompt, options, unused_a,
                                   [&](int64_t, const Tensor& logits) { cached_logits.push_back(logits.clone()); });
  const auto recomputed = nn::generate_uncached(model, prompt, options, unused_b, [&](int64_t, const Tensor& logits) {
    recomputed_logits.push_back(logits.clone());
  });
  ASSERT_EQ(cached.size(), size_t(options.max_new_tokens));
  EXPECT_EQ(cached, recomputed);
  ASSERT_EQ(cached_logits.size(), recomputed_logits.size());
  for (size_t step = 0; step < cached_logits.size(); ++step)
    EXPECT_LT(relative_difference(cached_logits[step], recomputed_logits[step]), 32 * 1.2e-7) << "step " << step;
}

TEST(KVCache, GreedyGenerationMatchesRecomputationOnTheImportedGpt2) {
  expect_cache_matches_recomputation(*fixture_gpt2(), {7, 3, 41});
  expect_cache_matches_recomputation(*fixture_gpt2(), {5});  // prefill of one token
}

TEST(KVCache, GreedyGenerationMatchesRecomputationOnTheBooksGpt) {
  expect_cache_matches_recomputation(*random_gpt(20, false), {1, 2, 3, 4, 5});
}

TEST(KVCache, MatchesTheFlashAttentionPathInFastNumerics) {
  NumericsGuard fast(Numerics::fast);
  auto model = random_gpt(nn::kFlashAttentionAbove + 12, true);
  expect_cache_matches_recomputation(*model, {3, 1, 4, 1, 5, 9, 2, 6});
}

TEST(KVCache, PrefillInPiecesGivesTheLogitsOfTheFullForward) {
  auto model = fixture_gpt2();
  // a batch of two rows, fed as 5 + 1 + 6 positions
  const Tensor ids = from_vector(std::vector<int64_t>{1, 9, 4, 4, 30, 2, 17, 8, 0, 49, 3, 3,  //
                                                      6, 6, 12, 40, 1, 1, 2, 3, 5, 8, 13, 21},
                                 {2, 12});
  NoGradGuard no_grad;
  const Tensor full = (*model)(ids);
  nn::KVCache cache = nn::make_kv_cache(*model, 2);
  int64_t done = 0;
  for (int64_t piece : {5, 1, 6}) {
    const Tensor logits = nn::forward_cached(*model, ids.narrow(1, done, piece), cache);
    done += piece;
    EXPECT_EQ(cache.length, done);
    EXPECT_LT(relative_difference(logits.contiguous(), full.select(1, done - 1).contiguous()), 32 * 1.2e-7) << done;
  }
}

TEST(KVCache, RefusesPositionsPastTheContext) {
  auto model = fixture_gpt2();
  nn::KVCache cache = nn::make_kv_cache(*model);
  nn::forward_cached(*model, zeros({1, 15}, DType::Int64), cache);
  try {
    nn::forward_cached(*model, zeros({1, 2}, DType::Int64), cache);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("15 cached positions and 2 new ones exceed the context of 16"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(nn::forward_cached(*model, zeros({2, 1}, DType::Int64), cache), std::invalid_argument);  // batch 2
}

TEST(KVCache, HoldsTheCapacityAskedForAndNoMoreThanTheContext) {
  auto model = fixture_gpt2();
  nn::KVCache cache = nn::make_kv_cache(*model, 1, 5);
  EXPECT_EQ(cache.capacity(), 5);
  nn::forward_cached(*model, zeros({1, 5}, DType::Int64), cache);
  EXPECT_THROW(nn::forward_cached(*model, zeros({1, 1}, DType::Int64), cache), std::invalid_argument);
  EXPECT_EQ(nn::make_kv_cache(*model).capacity(), 16);  // 0: the whole context
  try {
    nn::make_kv_cache(*model, 1, 17);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("capacity 17 is outside [0, the context of 16]"), std::string::npos) << e.what();
  }
}

TEST(Generation, AtTheContextsEndRefuseOrSlide) {
  auto model = fixture_gpt2();
  nn::GenerationOptions options;
  options.sampling.temperature = 0;
  options.max_new_tokens = 15;  // 2 + 15 − 1 = 16 positions: fits
  Generator gen(0);
  const auto fitting = nn::generate(*model, {1, 2}, options, gen);
  options.max_new_tokens = 16;  // 17 positions
  try {
    nn::generate(*model, {1, 2}, options, gen);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("need 17 positions, more than the context of 16"), std::string::npos) << e.what();
  }
  options.at_context_end = nn::ContextFull::slide;
  options.max_new_tokens = 40;
  const auto slid = nn::generate(*model, {1, 2}, options, gen);
  ASSERT_EQ(slid.size(), 40u);
  EXPECT_EQ(std::vector<int64_t>(slid.begin(), slid.begin() + 15), fitting) << "the same until the context is full";
  // a prompt longer than the context slides too: only its last 16 tokens are read
  std::vector<int64_t> long_prompt(30, 3);
  long_prompt.push_back(9);
  options.max_new_tokens = 3;
  std::vector<int64_t> tail(15, 3);
  tail.push_back(9);
  EXPECT_EQ(nn::generate(*model, long_prompt, options, gen), nn::generate(*model, tail, options, gen));
}

TEST(Generation, StopsAfterTheStopToken) {
  auto model = fixture_gpt2();
  nn::GenerationOptions options;
  options.sampling.temperature = 0;
  options.max_new_tokens = 10;
  Generator gen(0);
  const auto all = nn::generate(*model, {4}, options, gen);
  options.stop_token = all[3];
  const auto stopped = nn::generate(*model, {4}, options, gen);
  const size_t first = size_t(std::find(all.begin(), all.end(), all[3]) - all.begin());
  EXPECT_EQ(stopped, std::vector<int64_t>(all.begin(), all.begin() + std::ptrdiff_t(first) + 1));
}

TEST(Generation, BadInputIsRefusedWithItsValue) {
  auto model = fixture_gpt2();
  nn::GenerationOptions options;
  Generator gen(0);
  auto message = [&](const std::vector<int64_t>& prompt) {
    try {
      nn::generate(*model, prompt, options, gen);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({}).find("the prompt is empty"), std::string::npos);
  EXPECT_NE(message({1, 50}).find("prompt token 50 at position 1 is outside the vocabulary of 50"), std::string::npos);
  options.sampling.top_p = 0;
  EXPECT_NE(message({1}).find("top-p must be in (0, 1], got 0"), std::string::npos);
  options.sampling = {.temperature = -1};
  EXPECT_NE(message({1}).find("temperature must be 0 (greedy) or positive, got -1"), std::string::npos);
  options.sampling = {};
  options.stop_token = 77;
  EXPECT_NE(message({1}).find("stop token 77 is outside"), std::string::npos);
  EXPECT_THROW(nn::parse_context_full("wrap"), std::invalid_argument);
}

TEST(Sampling, GreedyTopKAndTopPPickFromTheRightTokens) {
  const Tensor logits = from_vector(std::vector<float>{0.5f, 3.0f, -1.0f, 2.9f, 1.0f}, {5});
  Generator gen(5);
  EXPECT_EQ(nn::sample_token(logits, {.temperature = 0}, gen), 1);
  for (int i = 0; i < 200; ++i) {
    EXPECT_EQ(nn::sample_token(logits, {.temperature = 1.0, .top_k = 1}, gen), 1);
    const int64_t two = nn::sample_token(logits, {.temperature = 1.0, .top_k = 2}, gen);
    EXPECT_TRUE(two == 1 || two == 3) << two;
    // p(1) ≈ 0.43, p(3) ≈ 0.39: top-p 0.5 needs both, top-p 0.3 only the first
    const int64_t nucleus = nn::sample_token(logits, {.temperature = 1.0, .top_p = 0.5}, gen);
    EXPECT_TRUE(nucleus == 1 || nucleus == 3) << nucleus;
    EXPECT_EQ(nn::sample_token(logits, {.temperature = 1.0, .top_p = 0.3}, gen), 1);
  }
}

TEST(Sampling, DrawsFollowTheSoftmaxAndTheSeed) {
  const Tensor logits = from_vector(std::vector<float>{std::log(0.5f), std::log(0.3f), std::log(0.2f)}, {3});
  Generator gen(11);
  std::vector<int> counts(3);
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++counts[size_t(nn::sample_token(logits, {.temperature = 1.0}, gen))];
  EXPECT_NEAR(counts[0] / double(n), 0.5, 0.015);
  EXPECT_NEAR(counts[1] / double(n), 0.3, 0.015);
  EXPECT_NEAR(counts[2] / double(n), 0.2, 0.015);
  // temperature 2 flattens: p ∝ √p
  counts = {0, 0, 0};
  for (int i = 0; i < n; ++i) ++counts[size_t(nn::sample_token(logits, {.temperature = 2.0}, gen))];
  const double total = std::sqrt(0.5) + std::sqrt(0.3) + std::sqrt(0.2);
  EXPECT_NEAR(counts[0] / double(n), std::sqrt(0.5) / total, 0.015);
  EXPECT_NEAR(counts[2] / double(n), std::sqrt(0.2) / total, 0.015);

  auto model = fixture_gpt2();
  nn::GenerationOptions options;
  options.sampling = {.temperature = 1.0, .top_k = 10};
  options.max_new_tokens = 12;
  Generator a(42), b(42), c(43);
  const auto first = nn::generate(*model, {1}, options, a);
  EXPECT_EQ(first, nn::generate(*model, {1}, options, b)) << "same seed, same tokens";
  EXPECT_NE(first, nn::generate(*model, {1}, options, c)) << "another seed, other tokens";
}

}  // namespace
