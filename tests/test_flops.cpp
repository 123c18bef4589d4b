// test_flops.cpp — the model FLOPs a GPT training token needs (nn/flops.h), counted by hand on a small
// GPT, full and with LoRA; and the core's peak (core_peak.h) that MFU divides them by.
#include <gtest/gtest.h>

#include <string>

#include "autograd/cpu/runtime/core_peak.h"
#include "autograd/cpu/runtime/runtime.h"
#include "nn/flops.h"
#include "nn/lora.h"

namespace {

using namespace autograd;

// V 11, context 8, D 16, 2 blocks, qkv bias, head tied to the token embedding.
std::unique_ptr<nn::GPTModel> small_gpt() {
  manual_seed(5);
  auto model = std::make_unique<nn::GPTModel>(nn::GPTConfig{.vocab_size = 11, .context_length = 8, .emb_dim = 16,
                                                            .n_heads = 2, .n_layers = 2, .drop_rate = 0.0,
                                                            .qkv_bias = true});
  model->tie_weights();
  return model;
}

// One block of width D with q, k, v biases: 4 D x D projections with biases, D x 4D and 4D x D with biases,
// two LayerNorms.
constexpr double block_params(double D) { return 4 * (D * D + D) + (D * 4 * D + 4 * D) + (4 * D * D + D) + 4 * D; }

TEST(Flops, AFullStepCountsSixPerParameterTheHeadAndAttention) {
  auto model = small_gpt();
  const double D = 16, V = 11, L = 2, T = 8;
  const double N = L * block_params(D) + 2 * D /* final LayerNorm */ + V * D /* the tied head; wpe is a lookup */;
  EXPECT_DOUBLE_EQ(nn::gpt_training_flops_per_token(*model, 8), 6 * N + 12 * L * D * T);
}

TEST(Flops, AnUntiedHeadCountsItsOwnMatrixNotTheEmbedding) {
  manual_seed(5);
  nn::GPTModel model(nn::GPTConfig{.vocab_size = 11, .context_length = 8, .emb_dim = 16, .n_heads = 2, .n_layers = 2,
                                   .drop_rate = 0.0, .qkv_bias = true});
  const double D = 16, V = 11, L = 2, T = 4;
  const double N = L * block_params(D) + 2 * D + V * D /* out_head: no bias */;
  EXPECT_DOUBLE_EQ(nn::gpt_training_flops_per_token(model, 4), 6 * N + 12 * L * D * T);
}

TEST(Flops, LoraCountsFourPerFrozenParameterAndSixPerAdapterParameter) {
  auto model = small_gpt();
  const double D = 16, V = 11, L = 2, T = 8, r = 2;
  nn::add_lora(*model, {.rank = 2, .alpha = 4, .targets = {"attn", "mlp"}});
  const double frozen = L * block_params(D) + 2 * D + V * D;
  // per block: 4 adapters D -> D (A r x D, B D x r), D -> 4D and 4D -> D (r x D + 4D x r, r x 4D + D x r)
  const double adapters = L * (4 * (2 * r * D) + 2 * (r * D + 4 * D * r));
  EXPECT_DOUBLE_EQ(nn::gpt_training_flops_per_token(*model, 8), 4 * frozen + 6 * adapters + 12 * L * D * T);
}

// The vectors core_peak measures on this CPU: AVX-512 or AVX2 with FMA on x86, NEON on 64-bit ARM.
static std::string expected_peak_isa() {
#if defined(__aarch64__)
  return "neon";
#else
  if (!(cpu::has_avx2() && cpu::has_fma())) return "none";
  return cpu::avx512_kernels() ? "avx512" : "avx2";
#endif
}

TEST(CorePeak, IsMeasuredWhereTheCpuHasFusedMultiplyAdds) {
  if (expected_peak_isa() == "none") {
    EXPECT_EQ(cpu::core_peak_flops(), 0);
    EXPECT_EQ(cpu::measure_core_peak_flops(), 0);
    EXPECT_STREQ(cpu::core_peak_isa(), "none");
    return;
  }
  EXPECT_GT(cpu::core_peak_flops(), 0);
  EXPECT_EQ(cpu::core_peak_isa(), expected_peak_isa());
  EXPECT_EQ(cpu::core_peak_flops(), cpu::core_peak_flops()) << "measured once, then remembered";
  // measured again: the same loop, so within a factor of two of the remembered figure on a shared machine
  const double again = cpu::measure_core_peak_flops();
  EXPECT_GT(again, cpu::core_peak_flops() / 2);
  EXPECT_LT(again, cpu::core_peak_flops() * 2);
  if (expected_peak_isa() == "neon")
    EXPECT_EQ(cpu::core_peak_rounds(128, true, 10), 2.0 * 4 * 24 * 10);  // FLOPs of 10 rounds of 24 NEON chains
  else
    EXPECT_EQ(cpu::core_peak_rounds(256, true, 10), 2.0 * 8 * 12 * 10);  // FLOPs of 10 rounds of 12 AVX2 chains
}

}  // namespace
