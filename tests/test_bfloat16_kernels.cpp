// test_bfloat16_kernels.cpp — the bfloat16 products (bfloat16 operands, float32 sums) held to the plain
// loop of autograd/reference/ (reference::bfloat16_matmul): exactly where every sum is exact (small
// integers), within a bound on float32 roundings elsewhere; on every shape the packing has a case for.
#include <gtest/gtest.h>

#include <cmath>
#include <array>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "autograd/cpu/kernels.h"
#include "autograd/reference/kernels.h"
#include "autograd/precision/widening_backend.h"

namespace {

using namespace autograd;

// A float32 tensor of shape `shape` with values from `draw`, rounded to bfloat16.
template <typename Draw> Tensor bf16_values(const Shape& shape, Draw&& draw) {
  std::vector<float> v(size_t(shape_numel(shape)));
  for (float& x : v) x = draw();
  return from_vector(v, shape).to(DType::BFloat16);
}

struct Case {
  int64_t m, k, n;
  bool a_transposed = false, b_transposed = false;
  bool strided = false;  // both operands every other column of a wider matrix: no stride is 1
};

// The operands of a case: a [m, k] and b [k, n], stored transposed where the case says so.
std::pair<Tensor, Tensor> operands(const Case& c, bool integers, std::mt19937& rng) {
  std::uniform_int_distribution<int> small(-4, 4);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto draw = [&] { return integers ? float(small(rng)) : normal(rng); };
  if (c.strided)
    return {bf16_values({c.k, 2 * c.m}, draw).slice(1, 0, std::nullopt, 2).t(),
            bf16_values({c.k, 2 * c.n}, draw).slice(1, 0, std::nullopt, 2)};
  Tensor a = c.a_transposed ? bf16_values({c.k, c.m}, draw).t() : bf16_values({c.m, c.k}, draw);
  Tensor b = c.b_transposed ? bf16_values({c.n, c.k}, draw).t() : bf16_values({c.k, c.n}, draw);
  return {a, b};
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (int64_t m : {1, 5, 12, 13, 30})
    for (int64_t k : {0, 1, 2, 7, 64, 513, 1030})
      for (int64_t n : {1, 16, 33, 70}) all.push_back({m, k, n});
  // one row times a weight stored [n, k] (b transposed): the unpacked dot-product path, with K's tails of
  // 0 to 31 terms past the last whole 32 and N's columns in eights and the rest
  for (int64_t k : {0, 1, 2, 31, 32, 33, 64, 513, 1030})
    for (int64_t n : {1, 3, 4, 5, 8, 17, 33, 70}) all.push_back({1, k, n, false, true});
  // a Linear's three products in training (x·Wᵀ, g·W, xᵀ·g) pack each operand from its own layout: every
  // pairing of the two layouts, K odd and even, N whole panels of 32 and not
  // (K of 2048 and more: the deep path, B a block of pairs at a time across every panel, a partial block last)
  for (const auto& [m, k, n] : {std::array<int64_t, 3>{20, 65, 40}, {13, 64, 64}, {7, 70, 50}, {30, 7, 33}, {3, 1, 1},
                                {13, 4097, 40}, {12, 2048, 33}})
    for (bool a_t : {false, true})
      for (bool b_t : {false, true}) all.push_back({m, k, n, a_t, b_t});
  all.push_back({13, 65, 40, false, false, true});
  all.push_back({1, 8, 3, false, false, true});
  return all;
}

using Kernel = void (*)(const Tensor&, const Tensor&, const Tensor&, const ProductStore&);
Tensor product(Kernel kernel, const Tensor& a, const Tensor& b) {
  Tensor out = empty({a.size(-2), b.size(-1)});
  kernel(a, b, out, {});
  return out;
}

// Integer operands, |sums| < 2²⁴: every sum is exact in any order, so every path gives the loop's bits.
TEST(BFloat16Kernels, ExactWhereTheSumsAreExact) {
  std::mt19937 rng(7);
  for (const Case& c : cases()) {
    SCOPED_TRACE(testing::Message() << "m " << c.m << " k " << c.k << " n " << c.n << " transposed " << c.a_transposed
                                    << c.b_transposed << " strided " << c.strided);
    const auto [a, b] = operands(c, true, rng);
    const Tensor want = product(reference::bfloat16_matmul, a, b);
    EXPECT_TRUE(equal(product(cpu::bfloat16_matmul, a, b), want));
    // into a transposed output (a weight's gradient is made in its transposed layout): the same bits
    const Tensor turned = empty({c.n, c.m}).t();
    cpu::bfloat16_matmul(a, b, turned);
    EXPECT_TRUE(equal(turned, want));
    // into a bfloat16 output, in both layouts: each sum rounded once, by the kernel and by the loop
    const Tensor want_rounded = want.to(DType::BFloat16).to(DType::Float32);
    for (const Tensor& rounded : {empty({c.m, c.n}, DType::BFloat16), empty({c.n, c.m}, DType::BFloat16).t()}) {
      cpu::bfloat16_matmul(a, b, rounded);
      EXPECT_TRUE(equal(rounded.to(DType::Float32), want_rounded));
      reference::bfloat16_matmul(a, b, rounded);
      EXPECT_TRUE(equal(rounded.to(DType::Float32), want_rounded));
    }
    // with a bias, into a float32 output rounded to bfloat16 and widened back (autocast's product handed on
    // in float32) and into a bfloat16 one, in both layouts: sum + bias, rounded once
    std::vector<float> bias_values(size_t(c.n));
    for (float& v : bias_values) v = float(int(rng() % 9) - 4);
    const Tensor bias = from_vector(bias_values, {c.n});
    const Tensor want_biased = (want + bias).to(DType::BFloat16).to(DType::Float32);
    for (Kernel kernel : {Kernel(cpu::bfloat16_matmul), Kernel(reference::bfloat16_matmul)}) {
      for (const Tensor& out : {empty({c.m, c.n}), empty({c.n, c.m}).t(), empty({c.m, c.n}, DType::BFloat16),
                                empty({c.n, c.m}, DType::BFloat16).t()}) {
        kernel(a, b, out, {.bias = bias, .rounded = true});
        EXPECT_TRUE(equal(out.to(DType::Float32), want_biased)) << dtype_name(out.dtype()) << " contiguous " << out.is_contiguous();
        if (out.dtype() != DType::Float32) continue;
        kernel(a, b, out, {.rounded = true});
        EXPECT_TRUE(equal(out, want_rounded));
      }
    }
    // the portable path: widened operands, the float32 product
    EXPECT_TRUE(equal(matmul(a.to(DType::Float32), b.to(DType::Float32)), want));
  }
}

// A product big enough for A's packing and the deep path's panels to be split over two threads: the loop's
// bits on integer operands, A in both layouts.
TEST(BFloat16Kernels, BigProductsOnTwoThreads) {
  std::mt19937 rng(11);
  const int previous = get_num_threads();
  set_num_threads(2);
  for (bool a_transposed : {false, true}) {
    const auto [a, b] = operands({300, 3500, 40, a_transposed, false}, true, rng);
    EXPECT_TRUE(equal(product(cpu::bfloat16_matmul, a, b), product(reference::bfloat16_matmul, a, b)))
        << "A transposed " << a_transposed;
  }
  // a float32 output of 4 MB and more, rounded: stored with streaming stores, in both layouts (a weight's
  // gradient is made in its transposed one), odd edges written plainly. K 1: each sum is one exact product
  // of normal values, which the rounding changes
  const auto [a, b] = operands({1030, 1, 1040}, false, rng);
  const Tensor want = product(reference::bfloat16_matmul, a, b).to(DType::BFloat16).to(DType::Float32);
  for (const Tensor& out : {empty({1030, 1040}), empty({1040, 1030}).t()}) {
    cpu::bfloat16_matmul(a, b, out, {.rounded = true});
    EXPECT_TRUE(equal(out, want)) << "contiguous " << out.is_contiguous();
  }
  set_num_threads(previous);
}

// Normal operands: each entry within 2·k·2⁻²⁴·Σ|a·b| of the loop's (two sums of the same exact terms in
// different orders, each off by at most k roundings of at most 2⁻²⁴ of the running |sum|).
TEST(BFloat16Kernels, WithinFloat32RoundingsOfTheLoop) {
  std::mt19937 rng(8);
  for (const Case& c : cases()) {
    SCOPED_TRACE(testing::Message() << "m " << c.m << " k " << c.k << " n " << c.n << " transposed " << c.a_transposed
                                    << c.b_transposed << " strided " << c.strided);
    const auto [a, b] = operands(c, false, rng);
    const Tensor want = product(reference::bfloat16_matmul, a, b);
    const Tensor got = product(cpu::bfloat16_matmul, a, b);
    const Tensor magnitude = matmul(a.to(DType::Float64).abs(), b.to(DType::Float64).abs());
    const Tensor bound = magnitude * (2.0 * double(std::max<int64_t>(c.k, 1)) * std::ldexp(1.0, -24));
    const Tensor error = (got.to(DType::Float64) - want.to(DType::Float64)).abs();
    EXPECT_TRUE(equal(le(error, bound), ones(error.shape(), DType::Bool)));
  }
}

// Batched, broadcast (stride-0) batch dims and a strided output, through the backend's matmul: the float32
// sums rounded once into a bfloat16 output.
TEST(BFloat16Kernels, BatchedBroadcastAndRoundedOnce) {
  std::mt19937 rng(9);
  std::uniform_int_distribution<int> small(-3, 3);
  auto draw = [&] { return float(small(rng)); };
  const Tensor a = bf16_values({3, 1, 9, 21}, draw).expand({3, 4, 9, 21});
  const Tensor b = bf16_values({4, 21, 35}, draw);
  const Tensor out = matmul(a, b);
  EXPECT_EQ(out.dtype(), DType::BFloat16);
  const Tensor want = matmul(a.to(DType::Float32), b.to(DType::Float32)).to(DType::BFloat16);
  EXPECT_TRUE(equal(out.to(DType::Float32), want.to(DType::Float32)));
  // a sum of three values where bfloat16 rounding after each term would differ from rounding once
  const Tensor x = tensor({{1.0, 1.0 / 256, 1.0 / 256}}).to(DType::BFloat16);
  const Tensor y = tensor({{1.0}, {1.0}, {1.0}}).to(DType::BFloat16);
  EXPECT_EQ(matmul(x, y).item(), 1.0078125);  // 1 + 2⁻⁷: the float32 sum, rounded once
}

// One row per matrix of a batch times a shared weight stored [n, k] (a cached step's products over a batch
// of sequences): the row path on each matrix, the loop's bits on integer operands.
TEST(BFloat16Kernels, RowsOfABatchTimesAWeight) {
  std::mt19937 rng(10);
  std::uniform_int_distribution<int> small(-4, 4);
  auto draw = [&] { return float(small(rng)); };
  const Tensor a = bf16_values({3, 1, 45}, draw);
  const Tensor b = bf16_values({37, 45}, draw).t().expand({3, 45, 37});
  Tensor got = empty({3, 1, 37}), want = empty({3, 1, 37});
  cpu::bfloat16_matmul(a, b, got);
  reference::bfloat16_matmul(a, b, want);
  EXPECT_TRUE(equal(got, want));
}

// The kernel the CPU runs is named, and is the AVX512_BF16 one where /proc/cpuinfo lists the instructions.
TEST(BFloat16Kernels, ChoiceIsNamed) {
  const std::string name = cpu::bfloat16_kernel_name();
  EXPECT_TRUE(name == "avx512_bf16" || name == "float32 (widened)") << name;
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string text((std::istreambuf_iterator<char>(cpuinfo)), std::istreambuf_iterator<char>());
  // (an x86 build only: under qemu-user an aarch64 build reads the x86 host's /proc/cpuinfo)
  const bool x86 =
#if defined(__x86_64__)
      true;
#else
      false;
#endif
  if (x86 && text.find(" avx512_bf16") != std::string::npos && std::getenv("SCRATCHGRAD_NO_AVX512") == nullptr &&
      std::getenv("SCRATCHGRAD_NO_AVX512_BF16") == nullptr && std::getenv("SCRATCHGRAD_NO_AVX2") == nullptr) {
    EXPECT_EQ(name, "avx512_bf16");
  }
  if (name == "avx512_bf16") {
    EXPECT_GT(cpu::bfloat16_peak_rounds(10), 0.0);
  }
}

}  // namespace
