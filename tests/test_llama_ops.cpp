// test_llama_ops.cpp — the Llama family's ops (silu, rms_norm, rotary_embedding), the rotary tables
// (nn/rotary.h) and the RMSNorm module: gradients against finite differences (float64) on plain,
// broadcast (a weight over [B, T, D], tables over [B, H, T, d]) and non-contiguous inputs; forward and
// backward against PyTorch 1.13 (fixtures/llama/ops.txt, float32, bit for bit); the reference loops held
// to the CPU's kernels; the refusals; and the CUDA kernels against the CPU's (skipped without a GPU).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <numbers>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autograd/autograd.h"
#include "nn/layers.h"
#include "nn/rotary.h"
#include "tests/gpt_fixtures.h"
#include "tests/test_helpers.h"

#ifdef SCRATCHGRAD_HAS_CUDA
#include "gpu/gpu.h"
#endif

namespace {

using namespace autograd;
using testing_helpers::as_leaf;
using testing_helpers::expect_values;
using testing_helpers::leaf;
using testing_helpers::randish;
using testing_helpers::sliced_leaf;
using testing_helpers::transposed_leaf;
using testing_helpers::values;
using Inputs = std::vector<Tensor>;
using gpt_fixtures::Section;

// float64 rotary tables for T positions from `start` and h pairs: cos and sin of p·θ^(−j/h), θ = 10000,
// in double (rotations to double precision: cos² + sin² = 1 to the last bits).
std::pair<Tensor, Tensor> tables64(int64_t t, int64_t h, int64_t start = 0) {
  std::vector<double> cos, sin;
  for (int64_t p = start; p < start + t; ++p)
    for (int64_t j = 0; j < h; ++j) {
      const double angle = double(p) * std::pow(10000.0, -double(j) / double(h));
      cos.push_back(std::cos(angle));
      sin.push_back(std::sin(angle));
    }
  return {from_vector(cos, {t, h}), from_vector(sin, {t, h})};
}

// ---------------------------------------------------------------- gradients against finite differences

TEST(GradcheckLlamaOps, Silu) {
  auto f = [](const Inputs& v) { return silu(v[0]); };
  EXPECT_GRADCHECK(f, Inputs{leaf({3, 5}, 1, -4, 4)});
  EXPECT_GRADCHECK(f, Inputs{transposed_leaf({4, 3}, 2, -4, 4)});
  EXPECT_GRADCHECK(f, Inputs{sliced_leaf({2, 3}, 3, -4, 4)});
}

TEST(GradcheckLlamaOps, RmsNormOverBTDWithAWeightOfD) {
  auto with_weight = [](const Inputs& v) { return rms_norm(v[0], v[1], 1e-6); };
  auto without = [](const Inputs& v) { return rms_norm(v[0], Tensor(), 1e-5); };
  // [B, T, D] with weight [D] (broadcast over B·T rows); 20 = two vectors and a tail
  EXPECT_GRADCHECK(with_weight, Inputs{leaf({2, 3, 20}, 4, -2, 2), leaf({20}, 5)});
  EXPECT_GRADCHECK(without, Inputs{leaf({2, 3, 7}, 6, -2, 2)});
  // non-contiguous: a transposed x, a strided weight; a weight that alone wants a gradient
  EXPECT_GRADCHECK(with_weight, Inputs{transposed_leaf({2, 5, 6}, 7, -2, 2), sliced_leaf({6}, 8)});
  EXPECT_GRADCHECK(with_weight, Inputs{randish({4, 6}, 9, -2, 2), leaf({6}, 10)});
}

TEST(GradcheckLlamaOps, RotaryEmbeddingOverBHTdWithTablesOfTh) {
  const auto [cos, sin] = tables64(5, 4, /*start=*/3);
  auto f = [&](const Inputs& v) { return rotary_embedding(v[0], cos, sin); };
  EXPECT_GRADCHECK(f, Inputs{leaf({2, 3, 5, 8}, 11, -2, 2)});
  // a transposed x: [B, T, H, d] seen as [B, H, T, d], as attention's heads are
  Tensor x = as_leaf(randish({2, 5, 3, 8}, 12, -2, 2).transpose(1, 2));
  ASSERT_FALSE(x.is_contiguous());
  EXPECT_GRADCHECK(f, Inputs{x});
  EXPECT_GRADCHECK(f, Inputs{sliced_leaf({3, 5, 8}, 13)});
}

TEST(LlamaOps, EachRecordsItsNamedBackward) {
  Tensor x = leaf({2, 4}, 14);
  const auto [cos, sin] = tables64(2, 2);
  EXPECT_STREQ(silu(x).grad_fn()->name, "SiluBackward0");
  EXPECT_STREQ(rms_norm(x, leaf({4}, 15), 1e-6).grad_fn()->name, "RmsNormBackward0");
  EXPECT_STREQ(rotary_embedding(x, cos, sin).grad_fn()->name, "RotaryEmbeddingBackward0");
}

// ---------------------------------------------------------------- the formulas, in float64

TEST(LlamaOps, SiluIsXTimesSigmoid) {
  const Tensor x = randish({9}, 16, -6, 6);
  expect_values(silu(x), {9}, values(x * (1.0 / (1.0 + exp(-x)))), 1e-15);
}

TEST(LlamaOps, RmsNormIsHuggingFacesFormula) {
  const Tensor x = randish({3, 4, 10}, 17, -3, 3), w = randish({10}, 18);
  const Tensor want = w * (x * (1.0 / sqrt(mean(x * x, -1, true) + 1e-6)));
  expect_values(rms_norm(x, w, 1e-6), {3, 4, 10}, values(want), 1e-14);
  expect_values(rms_norm(x, Tensor(), 1e-6), {3, 4, 10}, values(x * (1.0 / sqrt(mean(x * x, -1, true) + 1e-6))), 1e-14);
}

// y = q·cos + rotate_half(q)·sin, with cos and sin repeated over both halves (Hugging Face's tables).
TEST(LlamaOps, RotaryEmbeddingIsQTimesCosPlusRotateHalfTimesSin) {
  const auto [cos, sin] = tables64(6, 3, 2);
  const Tensor q = randish({2, 2, 6, 6}, 19, -2, 2);
  const std::vector<Tensor> halves = split(q, 3, -1);
  const Tensor rotated = cat({-halves[1], halves[0]}, -1);
  const Tensor want = q * cat({cos, cos}, -1) + rotated * cat({sin, sin}, -1);
  expect_values(rotary_embedding(q, cos, sin), {2, 2, 6, 6}, values(want), 1e-15);
}

// A rotation keeps each pair's length: no position changes a vector's norm.
TEST(LlamaOps, RotaryEmbeddingKeepsEachPairsLength) {
  const auto [cos, sin] = tables64(4, 8, 1000);
  const Tensor q = randish({3, 4, 16}, 20, -2, 2), y = rotary_embedding(q, cos, sin);
  const std::vector<Tensor> a = split(q, 8, -1), b = split(y, 8, -1);
  expect_values(b[0] * b[0] + b[1] * b[1], {3, 4, 8}, values(a[0] * a[0] + a[1] * a[1]), 1e-13);
}

// ---------------------------------------------------------------- against PyTorch 1.13 (fixtures/llama/ops.txt)

const std::vector<Section>& llama_fixture() {
  static const std::vector<Section> sections =
      gpt_fixtures::read_sections("ops.txt", std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/reference/fixtures/llama/");
  return sections;
}

std::vector<const Section*> cases_starting(const std::string& prefix) {
  std::vector<const Section*> out;
  for (const Section& s : llama_fixture())
    if (s.label.rfind(prefix, 0) == 0) out.push_back(&s);
  EXPECT_FALSE(out.empty()) << prefix;
  return out;
}

std::string name_of(const Section& c) { return c.label.substr(0, c.label.find(' ')); }

TEST(LlamaOpsFixture, SiluForwardAndBackwardBitExact) {
  const Section& c = *cases_starting("silu").at(0);
  Tensor x = c.get("x").tensor().requires_grad_();
  Tensor y = silu(x);
  EXPECT_BITS(y, c.get("y"), "silu");
  y.backward(c.get("dy").tensor());
  EXPECT_BITS(x.grad(), c.get("grad_x"), "silu backward");
}

TEST(LlamaOpsFixture, RmsNormForwardAndBackwardBitExact) {
  for (const Section* c : cases_starting("rms_norm_")) {
    const std::string what = name_of(*c);
    Tensor x = c->get("x").tensor().requires_grad_();
    Tensor w = c->option("weight") == "yes" ? c->get("weight").tensor().requires_grad_() : Tensor();
    Tensor y = rms_norm(x, w, std::stod(c->option("eps")));
    EXPECT_BITS(y, c->get("y"), what + " y");
    y.backward(c->get("up").tensor());
    EXPECT_BITS(x.grad(), c->get("grad_x"), what + " grad_x");
    if (w.defined()) {
      EXPECT_BITS(w.grad(), c->get("grad_weight"), what + " grad_weight");
    }
  }
}

TEST(LlamaOpsFixture, RotaryEmbeddingForwardAndBackwardBitExact) {
  for (const Section* c : cases_starting("rotary_")) {
    const std::string what = name_of(*c);
    const Tensor cos = c->get("cos").tensor(), sin = c->get("sin").tensor();
    // the tables as nn::rope_tables makes them, and the op on them
    const int64_t d = c->get("q").shape.back();
    const auto [our_cos, our_sin] = nn::rope_tables(nn::rope_inverse_frequencies(d, std::stod(c->option("theta")),
                                                                                 std::nullopt),
                                                    std::stoll(c->option("start")), cos.size(0));
    EXPECT_BITS(our_cos, c->get("cos"), what + " cos");
    EXPECT_BITS(our_sin, c->get("sin"), what + " sin");
    Tensor q = c->get("q").tensor().requires_grad_();
    Tensor y = rotary_embedding(q, cos, sin);
    EXPECT_BITS(y, c->get("y"), what + " y");
    y.backward(c->get("up").tensor());
    EXPECT_BITS(q.grad(), c->get("grad_q"), what + " grad_q");
  }
}

TEST(LlamaOpsFixture, RopeTablesDefaultAndLlama3ScaledBitExact) {
  for (const Section* c : cases_starting("rope_tables_")) {
    const std::string what = name_of(*c);
    std::optional<nn::RopeScaling> scaling;
    if (c->option("scaling") != "none")
      scaling = nn::RopeScaling{"llama3", std::stod(c->option("factor")), std::stod(c->option("low_freq_factor")),
                                std::stod(c->option("high_freq_factor")),
                                std::stoll(c->option("original_max_position_embeddings"))};
    const Tensor inv_freq =
        nn::rope_inverse_frequencies(std::stoll(c->option("head_dim")), std::stod(c->option("theta")), scaling);
    EXPECT_BITS(inv_freq, c->get("inv_freq"), what + " inv_freq");
    const auto [cos, sin] = nn::rope_tables(inv_freq, std::stoll(c->option("start")), std::stoll(c->option("count")));
    EXPECT_BITS(cos, c->get("cos"), what + " cos");
    EXPECT_BITS(sin, c->get("sin"), what + " sin");
  }
}

// ---------------------------------------------------------------- the rotary tables

TEST(RotaryTables, InverseFrequenciesAreThetaToTheMinusTwoIOverD) {
  const Tensor f = nn::rope_inverse_frequencies(8, 10000.0, std::nullopt);
  ASSERT_EQ(f.dtype(), DType::Float32);
  expect_values(f, {4}, {1.0, 0.1, 0.01, 0.001}, 1e-8);
}

TEST(RotaryTables, AnOffsetIsASliceOfTheLongerTable) {
  const Tensor f = nn::rope_inverse_frequencies(16, 500000.0, std::nullopt);
  const auto [cos, sin] = nn::rope_tables(f, 0, 12);
  const auto [cos5, sin5] = nn::rope_tables(f, 5, 7);
  EXPECT_TRUE(equal(cos5, cos.slice(0, 5, 12)));
  EXPECT_TRUE(equal(sin5, sin.slice(0, 5, 12)));
  expect_values(cos.select(0, 0), {8}, std::vector<double>(8, 1.0), 0);
  expect_values(sin.select(0, 0), {8}, std::vector<double>(8, 0.0), 0);
}

// Llama 3.1's scaling keeps the short wavelengths, divides the long ones by the factor, and blends between.
TEST(RotaryTables, Llama3ScalingKeepsHighAndSlowsLowFrequencies) {
  const nn::RopeScaling scaling{"llama3", 32.0, 1.0, 4.0, 8192};
  const std::vector<float> plain = nn::rope_inverse_frequencies(64, 500000.0, std::nullopt).to_vector<float>();
  const std::vector<float> scaled = nn::rope_inverse_frequencies(64, 500000.0, scaling).to_vector<float>();
  int kept = 0, slowed = 0, blended = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    const double wavelen = 2 * std::numbers::pi / plain[i];
    if (wavelen < 8192 / 4.0) kept += scaled[i] == plain[i];
    else if (wavelen > 8192 / 1.0) slowed += scaled[i] == plain[i] / 32.0f;
    else blended += scaled[i] < plain[i] && scaled[i] > plain[i] / 32.0f;
  }
  EXPECT_EQ(kept + slowed + blended, int(plain.size()));
  EXPECT_GT(kept, 0);
  EXPECT_GT(slowed, 0);
  EXPECT_GT(blended, 0);
}

// ---------------------------------------------------------------- the module

TEST(RMSNormModule, AWeightOfOnesNamedWeight) {
  nn::RMSNorm norm(6, 1e-5);
  const auto named = norm.named_parameters();
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(named[0].first, "weight");
  expect_values(named[0].second, {6}, std::vector<double>(6, 1.0), 0);
  EXPECT_TRUE(named[0].second.requires_grad());
  const Tensor x = randish({2, 6}, 21, -2, 2, DType::Float32);
  EXPECT_TRUE(equal(norm(x), rms_norm(x, norm.weight, 1e-5)));
}

// ---------------------------------------------------------------- refusals

TEST(LlamaOpsErrors, EachNamesWhatIsWrong) {
  const Tensor x = zeros({2, 3, 8});
  EXPECT_THROW_WITH(silu(zeros({2}, DType::Int64)), std::invalid_argument, "silu", "int64");
  EXPECT_THROW_WITH(rms_norm(x, zeros({4}), 1e-6), std::invalid_argument, "rms_norm", "[8]", "[4]", "[2, 3, 8]");
  EXPECT_THROW_WITH(rms_norm(x, zeros({8}, DType::Float64), 1e-6), std::invalid_argument, "rms_norm", "float64");
  EXPECT_THROW_WITH(rotary_embedding(zeros({3, 7}), zeros({3, 3}), zeros({3, 3})), std::invalid_argument,
                    "rotary_embedding", "d even", "[3, 7]");
  EXPECT_THROW_WITH(rotary_embedding(x, zeros({3, 4}), zeros({2, 4})), std::invalid_argument, "rotary_embedding",
                    "sin", "[3, 4]", "[2, 4]");
  EXPECT_THROW_WITH(rotary_embedding(x, zeros({3, 4}).requires_grad_(), zeros({3, 4})), std::invalid_argument,
                    "rotary_embedding", "cos", "requires grad");
  EXPECT_THROW_WITH(nn::rope_inverse_frequencies(7, 10000.0, std::nullopt), std::invalid_argument, "head_dim", "7");
  EXPECT_THROW_WITH(nn::rope_inverse_frequencies(8, 10000.0, nn::RopeScaling{"yarn", 8, 1, 4, 8192}),
                    std::invalid_argument, "rope_scaling", "yarn");
  EXPECT_THROW_WITH(nn::rope_inverse_frequencies(8, 10000.0, nn::RopeScaling{"llama3", 8, 4, 1, 8192}),
                    std::invalid_argument, "rope_scaling", "high_freq_factor 1");
}

// ---------------------------------------------------------------- the reference loops and the CPU's kernels

// The largest |got − want| / (1 + |want|) over the elements.
double worst_difference(const Tensor& want, const Tensor& got) {
  const std::vector<double> w = values(want.to(DType::Float64)), g = values(got.to(DType::Float64));
  EXPECT_EQ(w.size(), g.size());
  double worst = 0;
  for (size_t i = 0; i < w.size() && i < g.size(); ++i) worst = std::max(worst, std::abs(g[i] - w[i]) / (1 + std::abs(w[i])));
  return worst;
}

// Each op's forward and backward on the reference loops and on the CPU's kernels, in both numerics:
// float32 within 1e-5 (the two add a row's squares in different orders), float64 within 1e-13.
void expect_kernels_agree(const std::string& what, const std::function<std::vector<Tensor>()>& run) {
  std::vector<Tensor> want;
  {
    KernelsGuard reference(Kernels::reference);
    want = run();
  }
  for (Numerics mode : {Numerics::exact, Numerics::fast}) {
    NumericsGuard numerics(mode);
    const std::vector<Tensor> got = run();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_LE(worst_difference(want[i], got[i]), want[i].dtype() == DType::Float32 ? 1e-5 : 1e-13)
          << what << ", " << numerics_name(mode) << " numerics, output " << i;
  }
}

// The forward output and the input gradients of one op for the upstream gradient g.
std::vector<Tensor> forward_and_gradients(const std::function<Tensor(const Inputs&)>& f, const Inputs& inputs,
                                          const Tensor& g) {
  Inputs leaves;
  for (const Tensor& t : inputs) leaves.push_back(t.detach().requires_grad_(t.requires_grad()));
  Tensor y = f(leaves);
  y.backward(g);
  std::vector<Tensor> out{y.detach()};
  for (const Tensor& t : leaves)
    if (t.requires_grad()) out.push_back(t.grad());
  return out;
}

TEST(LlamaReferenceKernels, HeldToTheCpuKernels) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    const std::string type(dtype_name(dtype));
    const Tensor x = randish({3, 5, 37}, 22, -3, 3, dtype).requires_grad_(), g = randish({3, 5, 37}, 23, -1, 1, dtype);
    const Tensor w = randish({37}, 24, -1, 1, dtype).requires_grad_();
    expect_kernels_agree("silu " + type, [&] { return forward_and_gradients([](const Inputs& v) { return silu(v[0]); }, {x}, g); });
    expect_kernels_agree("rms_norm " + type, [&] {
      return forward_and_gradients([](const Inputs& v) { return rms_norm(v[0], v[1], 1e-6); }, {x, w}, g);
    });
    expect_kernels_agree("rms_norm without weight " + type, [&] {
      return forward_and_gradients([](const Inputs& v) { return rms_norm(v[0], Tensor(), 1e-6); }, {x}, g);
    });
    auto [cos, sin] = nn::rope_tables(nn::rope_inverse_frequencies(36, 10000.0, std::nullopt), 7, 5);
    cos = cos.to(dtype);
    sin = sin.to(dtype);
    const Tensor q = randish({3, 2, 5, 36}, 25, -3, 3, dtype).requires_grad_(), gq = randish({3, 2, 5, 36}, 26, -1, 1, dtype);
    expect_kernels_agree("rotary_embedding " + type, [&] {
      return forward_and_gradients([&](const Inputs& v) { return rotary_embedding(v[0], cos, sin); }, {q}, gq);
    });
  }
}

// ---------------------------------------------------------------- the CUDA kernels (gpu/llama.cu)

#ifndef SCRATCHGRAD_HAS_CUDA

TEST(LlamaOpsCuda, BuiltWithoutCuda) {
  GTEST_SKIP() << "built without CUDA (configure with -DSCRATCHGRAD_CUDA=ON on a machine with nvcc to build gpu/)";
}

#else

// Each op's forward and input gradients on cuda:0 against the CPU's: float32 within 2e-5·(1 + |cpu|) (a
// row's sums add in another order), float64 within 1e-12.
void expect_gpu_matches_cpu(const std::string& what, const std::function<Tensor(const Inputs&)>& f, const Inputs& inputs,
                            const Tensor& g) {
  const std::vector<Tensor> want = forward_and_gradients(f, inputs, g);
  Inputs on_gpu;
  for (const Tensor& t : inputs) on_gpu.push_back(t.detach().to(Device::cuda(0)).requires_grad_(t.requires_grad()));
  const std::vector<Tensor> got = forward_and_gradients(f, on_gpu, g.to(Device::cuda(0)));
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(got[i].device().is_cuda()) << what;
    EXPECT_LE(worst_difference(want[i], got[i].to(Device::cpu())), want[i].dtype() == DType::Float32 ? 2e-5 : 1e-12)
        << what << ", output " << i;
  }
}

TEST(LlamaOpsCuda, ForwardAndBackwardMatchTheCpu) {
  if (!gpu::is_available()) GTEST_SKIP() << "no CUDA device: " << gpu::unavailable_reason();
  for (DType dtype : {DType::Float32, DType::Float64}) {
    const std::string type(dtype_name(dtype));
    const Tensor x = randish({3, 5, 576}, 27, -3, 3, dtype).requires_grad_(), g = randish({3, 5, 576}, 28, -1, 1, dtype);
    const Tensor w = randish({576}, 29, -1, 1, dtype).requires_grad_();
    expect_gpu_matches_cpu("silu " + type, [](const Inputs& v) { return silu(v[0]); }, {x}, g);
    expect_gpu_matches_cpu("rms_norm " + type, [](const Inputs& v) { return rms_norm(v[0], v[1], 1e-5); }, {x, w}, g);
    expect_gpu_matches_cpu("rms_norm without weight " + type, [](const Inputs& v) { return rms_norm(v[0], Tensor(), 1e-5); },
                           {x}, g);
    auto [cos, sin] = nn::rope_tables(nn::rope_inverse_frequencies(64, 500000.0, nn::RopeScaling{}), 100, 5);
    const Tensor q = randish({2, 3, 5, 64}, 30, -3, 3, dtype).requires_grad_(), gq = randish({2, 3, 5, 64}, 31, -1, 1, dtype);
    expect_gpu_matches_cpu("rotary_embedding " + type, [&](const Inputs& v) {
      const Device d = v[0].device();
      return rotary_embedding(v[0], cos.to(dtype).to(d), sin.to(dtype).to(d));
    }, {q}, gq);
  }
}

#endif

}  // namespace
