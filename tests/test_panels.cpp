// A Linear's weight packed for generation (autograd/ops/panels.cpp): the layout, and linear on it with the
// bits of linear on the weight itself.
#include <gtest/gtest.h>

#include <array>
#include <string>

#include <fmt/format.h>

#include "autograd/autograd.h"
#include "nn/generation.h"
#include "nn/llama.h"
#include "nn/nn.h"
#include "tests/test_helpers.h"

using namespace autograd;
using testing_helpers::randish;

namespace {

// Every value of a [rows, cols] tensor as doubles, row by row.
std::vector<double> values_of(const Tensor& t) { return t.contiguous().to(DType::Float64).to_vector<double>(); }

}  // namespace

// panels[i, p, l] = W[16i + l, p], zero rows past the last, and unpack gives W back exactly.
TEST(Panels, LayoutAndRoundTrip) {
  const Tensor w = randish({37, 20}, 1, -1, 1, DType::Float32);
  const Tensor panels = pack_panels(w);
  ASSERT_EQ(panels.shape(), (Shape{3, 20, 16}));
  EXPECT_TRUE(panels.is_contiguous());
  const std::vector<double> wv = values_of(w), pv = values_of(panels);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t p = 0; p < 20; ++p)
      for (int64_t l = 0; l < 16; ++l) {
        const int64_t row = 16 * i + l;
        const double want = row < 37 ? wv[size_t(row * 20 + p)] : 0.0;
        ASSERT_EQ(pv[size_t((i * 20 + p) * 16 + l)], want) << "panel " << i << " p " << p << " lane " << l;
      }
  testing_helpers::expect_same_float_bits(unpack_panels(panels, 37), w, "unpacked");
  const Tensor exact16 = randish({16, 3}, 2, -1, 1, DType::Float64);  // a whole panel: no padding
  testing_helpers::expect_same_float_bits(unpack_panels(pack_panels(exact16), 16), exact16, "one whole panel");
}

// In fast numerics an entry is one chain of fused multiply-adds over p in blocks of 256, the bias after the
// first block, whatever the layout of the weight: panel_linear has linear's bits. One row (the panels' own
// kernel: pairs of panels, and an odd one left) and several (the batched product), with and without a bias;
// k inside one block, across blocks, and empty; n a whole number of panels or not; float and double; the one-row
// kernel on 1 and 2 threads (2304 x 768, GPT-2's q, k and v together, splits its panels between them).
TEST(Panels, LinearOnPanelsHasTheBitsOfLinear) {
  NumericsGuard fast(Numerics::fast);
  uint32_t seed = 10;
  for (DType dtype : {DType::Float32, DType::Float64})
    for (auto [n, k] : {std::array<int64_t, 2>{49, 7}, {100, 300}, {16, 17}, {1100, 513}, {5, 64}, {33, 0}})
      for (int64_t m : {1, 3}) {
        const Tensor x = randish({m, k}, seed++, -1, 1, dtype), w = randish({n, k}, seed++, -1, 1, dtype);
        const Tensor bias = randish({n}, seed++, -1, 1, dtype), panels = pack_panels(w);
        const std::string shape = fmt::format("{} m {} n {} k {}", dtype_name(dtype), m, n, k);
        testing_helpers::expect_same_float_bits(panel_linear(x, panels, n), linear(x, w), shape);
        testing_helpers::expect_same_float_bits(panel_linear(x, panels, n, bias), linear(x, w, bias), shape + " bias");
      }
  const int before = get_num_threads();
  const Tensor x = randish({1, 768}, 50, -1, 1, DType::Float32), w = randish({2304, 768}, 51, -1, 1, DType::Float32);
  const Tensor bias = randish({2304}, 52, -1, 1, DType::Float32), panels = pack_panels(w);
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    testing_helpers::expect_same_float_bits(panel_linear(x, panels, 2304, bias), linear(x, w, bias),
                                            fmt::format("2304 x 768 on {} thread(s)", threads));
  }
  set_num_threads(before);
  // a batch of rows [2, 3, k] keeps its leading dims
  const Tensor batch = randish({2, 3, 300}, 60, -1, 1, DType::Float32), w2 = randish({40, 300}, 61, -1, 1, DType::Float32);
  const Tensor out = panel_linear(batch, pack_panels(w2), 40);
  EXPECT_EQ(out.shape(), (Shape{2, 3, 40}));
  testing_helpers::expect_same_float_bits(out, linear(batch, w2), "a [2, 3, 300] batch");
}

// Exact numerics, the reference kernels and bfloat16 take the panels through one product a panel: the
// values of linear (the sums in their own order), and bfloat16's product, whose chain does not depend on the
// columns beside an entry, exactly.
TEST(Panels, OtherNumericsKernelsAndBfloat16) {
  const Tensor x = randish({1, 300}, 70, -1, 1, DType::Float32), w = randish({50, 300}, 71, -1, 1, DType::Float32);
  const Tensor bias = randish({50}, 72, -1, 1, DType::Float32);
  {
    NumericsGuard exact(Numerics::exact);
    EXPECT_TRUE(allclose(panel_linear(x, pack_panels(w), 50, bias), linear(x, w, bias), 1e-5, 1e-5));
  }
  {
    KernelsGuard reference(Kernels::reference);
    EXPECT_TRUE(allclose(panel_linear(x, pack_panels(w), 50, bias), linear(x, w, bias), 1e-5, 1e-5));
  }
  NumericsGuard fast(Numerics::fast);
  const Tensor xb = x.to(DType::BFloat16), wb = w.to(DType::BFloat16), bb = bias.to(DType::BFloat16);
  const Tensor packed = pack_panels(wb);
  EXPECT_EQ(packed.dtype(), DType::BFloat16);
  testing_helpers::expect_same_float_bits(panel_linear(xb, packed, 50, bb).to(DType::Float32),
                                          linear(xb, wb, bb).to(DType::Float32), "bfloat16");
}

// A table's rows read from its panels: the rows of the table, in the indices' shape.
TEST(Panels, RowsOfAPackedTable) {
  const Tensor table = randish({37, 5}, 90, -1, 1, DType::Float32), panels = pack_panels(table);
  const Tensor indices = from_vector(std::vector<int64_t>{36, 0, 17, 17, 15, 16}, {2, 3});
  testing_helpers::expect_same_float_bits(panel_rows(panels, indices, 37), embedding(table, indices), "rows");
  EXPECT_EQ(panel_rows(panels, from_vector(std::vector<int64_t>{}, {0}), 37).shape(), (Shape{0, 5}));
  EXPECT_THROW_WITH(panel_rows(panels, from_vector(std::vector<int64_t>{37}, {1}), 37), std::invalid_argument,
                    "panel_rows", "index 37", "37 rows");
}

TEST(Panels, RefusesWhatItCannotMultiply) {
  const Tensor w = randish({20, 8}, 80, -1, 1, DType::Float32), panels = pack_panels(w);
  const Tensor x = randish({1, 8}, 81, -1, 1, DType::Float32);
  EXPECT_THROW_WITH(pack_panels(randish({2, 3, 4}, 82)), std::invalid_argument, "pack_panels", "[2, 3, 4]");
  EXPECT_THROW_WITH(panel_linear(randish({1, 9}, 83, -1, 1, DType::Float32), panels, 20), std::invalid_argument,
                    "panel_linear", "[1, 9]", "8 in_features");
  EXPECT_THROW_WITH(panel_linear(x, panels, 40), std::invalid_argument, "panel_linear", "40 rows");
  EXPECT_THROW_WITH(panel_linear(x, w, 20), std::invalid_argument, "panel_linear", "[20, 8]");
  EXPECT_THROW_WITH(panel_linear(x, panels, 20, randish({19}, 84, -1, 1, DType::Float32)), std::invalid_argument,
                    "bias of shape [19]", "out_features 20");
  EXPECT_THROW_WITH(panel_linear(x.to(DType::Float64), panels, 20), std::invalid_argument, "panel_linear");
  Tensor trained = randish({1, 8}, 85, -1, 1, DType::Float32).requires_grad_();
  EXPECT_THROW_WITH(panel_linear(trained, panels, 20), std::invalid_argument, "no gradient");
  EXPECT_THROW_WITH(unpack_panels(panels, 33), std::invalid_argument, "unpack_panels", "33 rows");
  NoGradGuard no_grad;
  EXPECT_NO_THROW(panel_linear(trained, panels, 20));
}

// ---- models packed for generation (nn::pack_weights_for_generation)

namespace {

// Every step's logits of a greedy generation (prefill, then cached steps) and the tokens.
struct Generated {
  std::vector<int64_t> ids;
  std::vector<Tensor> logits;
};
Generated greedy(const nn::LanguageModel& model, const std::vector<int64_t>& prompt, int64_t tokens) {
  nn::GenerationOptions options;
  options.sampling.temperature = 0;
  options.max_new_tokens = tokens;
  Generator unused(1);
  Generated run;
  run.ids = nn::generate(model, prompt, options, unused, [&](int64_t, const Tensor& l) { run.logits.push_back(l.clone()); });
  return run;
}

void expect_same_run(const Generated& packed, const Generated& unpacked) {
  EXPECT_EQ(packed.ids, unpacked.ids);
  ASSERT_EQ(packed.logits.size(), unpacked.logits.size());
  for (size_t i = 0; i < packed.logits.size(); ++i)
    testing_helpers::expect_same_float_bits(packed.logits[i], unpacked.logits[i], fmt::format("step {}", i));
}

}  // namespace

// A GPT whose layers are wide enough to pack (64 wide, a 256-wide feed-forward, 80 tokens, biases in q, k and v),
// with its own head and with a head tied to the token embedding as GPT-2's, and a Llama with grouped-query
// attention and a tied head: packed, each generates the same tokens with the same logits to the last bit,
// prompt and cached steps alike (a tied table's lookups read its panels). Left unpacked: layers under 49
// outputs.
TEST(PackedModels, GenerateWithTheBitsOfTheUnpackedModel) {
  NumericsGuard fast(Numerics::fast);
  const nn::GPTConfig gpt_cfg{.vocab_size = 80, .context_length = 24, .emb_dim = 64, .n_heads = 4, .n_layers = 2,
                              .drop_rate = 0.0, .qkv_bias = true};
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "GPT, tied head" : "GPT, its own head");
    manual_seed(5);
    nn::GPTModel gpt(gpt_cfg), gpt_packed(gpt_cfg);
    if (tied) {
      gpt.tie_weights();
      gpt_packed.tie_weights();
    }
    gpt_packed.load_state_dict(gpt.state_dict());
    gpt.eval();
    gpt_packed.eval();
    const Generated gpt_before = greedy(gpt, {3, 14, 15, 9, 26}, 12);
    EXPECT_EQ(nn::pack_weights_for_generation(gpt_packed), 2 * 6 + 1);  // q, k, v, out, expand, contract; the head
    EXPECT_EQ(gpt_packed.tok_emb->packed(), tied);
    expect_same_run(greedy(gpt_packed, {3, 14, 15, 9, 26}, 12), gpt_before);
  }

  const nn::LlamaConfig llama_cfg{.vocab_size = 60, .hidden_size = 64, .intermediate_size = 96, .num_hidden_layers = 2,
                                  .num_attention_heads = 4, .num_key_value_heads = 2, .max_position_embeddings = 32};
  manual_seed(6);
  nn::LlamaModel llama(llama_cfg), llama_packed(llama_cfg);
  llama_packed.load_state_dict(llama.state_dict());
  const Generated llama_before = greedy(llama, {1, 2, 3}, 10);
  // q and o (64), gate, up and down (96, 96, 64) of each block, and the tied table; k and v (32 outputs) stay
  EXPECT_EQ(nn::pack_weights_for_generation(llama_packed), 2 * 5 + 1);
  EXPECT_TRUE(llama_packed.model->embed_tokens->packed());
  expect_same_run(greedy(llama_packed, {1, 2, 3}, 10), llama_before);
  EXPECT_EQ(nn::pack_weights_for_generation(llama_packed), 0) << "packing twice packs nothing more";
}

// A Llama kept in bfloat16 (generate --precision bf16), packed: its logits stay within bfloat16's rounding of
// the unpacked model's, the prompt's and each cached step's (fed the same tokens).
TEST(PackedModels, Bfloat16LlamaStaysWithinRounding) {
  NumericsGuard fast(Numerics::fast);
  AutocastGuard autocast(DType::BFloat16);
  const nn::LlamaConfig cfg{.vocab_size = 60, .hidden_size = 64, .intermediate_size = 96, .num_hidden_layers = 2,
                            .num_attention_heads = 4, .num_key_value_heads = 2, .max_position_embeddings = 32};
  manual_seed(8);
  nn::LlamaModel plain(cfg), packed(cfg);
  packed.load_state_dict(plain.state_dict());
  nn::keep_weights_in_bfloat16(plain);
  nn::keep_weights_in_bfloat16(packed);
  EXPECT_EQ(nn::pack_weights_for_generation(packed), 2 * 5 + 1);
  nn::KVCache plain_cache = plain.make_kv_cache(), packed_cache = packed.make_kv_cache();
  std::vector<std::vector<int64_t>> feeds{{1, 2, 3, 4}, {5}, {6}, {7}};
  for (const auto& ids : feeds) {
    const Tensor in = from_vector(ids, {1, int64_t(ids.size())});
    const Tensor a = plain.forward_cached(in, plain_cache), b = packed.forward_cached(in, packed_cache);
    EXPECT_TRUE(allclose(b, a, 0.05, 0.05)) << "after " << ids.size() << " new token(s)";
  }
}

// A packed model only generates: a gradient cannot reach a packed weight, an adapter cannot be added, and in
// exact numerics (PyTorch's order of sums in W's own layout) nothing is packed.
TEST(PackedModels, OnlyGenerate) {
  const nn::GPTConfig cfg{.vocab_size = 80, .context_length = 16, .emb_dim = 64, .n_heads = 4, .n_layers = 1,
                          .drop_rate = 0.0};
  manual_seed(7);
  nn::GPTModel model(cfg);
  {
    NumericsGuard exact(Numerics::exact);
    EXPECT_EQ(nn::pack_weights_for_generation(model), 0);
  }
  NumericsGuard fast(Numerics::fast);
  EXPECT_GT(nn::pack_weights_for_generation(model), 0);
  const nn::Linear& query = *(*model.trf_blocks)[0].att->W_query;
  EXPECT_TRUE(query.packed());
  EXPECT_FALSE(query.weight.defined());
  const Tensor ids = from_vector(std::vector<int64_t>{1, 2, 3}, {1, 3});
  EXPECT_THROW_WITH(model.forward(ids), std::invalid_argument, "panel_linear", "no gradient");
  EXPECT_THROW_WITH((*model.trf_blocks)[0].att->W_query->add_lora(4, 8.0), std::invalid_argument, "packed for generation");
  NoGradGuard no_grad;
  EXPECT_EQ(model.forward(ids).shape(), (Shape{1, 3, 80}));
}

// bfloat16 weights (generate --precision bf16) are packed too. One row goes through the CPU's widening kernel
// (AVX-512: each bfloat16 panel row widened to float32 and added by fused multiply-adds) where it has one, else
// the weight is unpacked for the bfloat16 product. Both round each sum to bfloat16 once, from float32 sums
// added in their own orders: they agree with linear to within a bfloat16 rounding of each output, under
// autocast (float32 activations rounded first) as without.
TEST(Panels, Bfloat16WeightsAgreeWithTheBfloat16Product) {
  NumericsGuard fast(Numerics::fast);
  uint32_t seed = 100;
  for (auto [n, k] : {std::array<int64_t, 2>{100, 300}, {49, 64}, {2304, 768}}) {
    SCOPED_TRACE(fmt::format("n {} k {}", n, k));
    const Tensor x = randish({1, k}, seed++, -1, 1, DType::Float32), w = randish({n, k}, seed++, -1, 1, DType::Float32);
    const Tensor bias = randish({n}, seed++, -1, 1, DType::Float32);
    const Tensor wb = w.to(DType::BFloat16), packed = pack_panels(wb);
    const Tensor xb = x.to(DType::BFloat16), bb = bias.to(DType::BFloat16);
    const Tensor got = panel_linear(xb, packed, n, bb), want = linear(xb, wb, bb);
    EXPECT_EQ(got.dtype(), DType::BFloat16);
    EXPECT_TRUE(allclose(got.to(DType::Float32), want.to(DType::Float32), 1.0 / 128, 1e-6));
    AutocastGuard autocast(DType::BFloat16);
    const Tensor got_autocast = panel_linear(x, packed, n, bias), want_autocast = linear(x, wb, bias);
    EXPECT_EQ(got_autocast.dtype(), DType::Float32);
    EXPECT_TRUE(allclose(got_autocast, want_autocast, 1.0 / 128, 1e-6));
    // several rows: the weight unpacked for the bfloat16 product, linear's own bits
    const Tensor rows = randish({3, k}, seed++, -1, 1, DType::Float32);
    testing_helpers::expect_same_float_bits(panel_linear(rows, packed, n, bias), linear(rows, wb, bias), "three rows");
  }
}
