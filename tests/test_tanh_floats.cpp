// tanh_floats must give tanh_float's bits for every float (float_functions.h: x86-64 glibc's tanhf, on any CPU;
// tests/test_float_functions.cpp checks it against the library): GELU's parity with PyTorch rests on it. And the
// exact GELU's block path (contiguous floats, tanh_floats) must give the element-by-element loops' bits.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "autograd/cpu/libm/float_functions.h"
#include "autograd/cpu/libm/tanh_floats.h"
#include "tests/cpu_features.h"
#include "tests/test_helpers.h"

using autograd::cpu::tanh_floats;

namespace {

// The first input where tanh_floats and tanh_float disagree, as text ("" if none). NaNs only need to stay NaN.
std::string first_mismatch(const std::vector<float>& x) {
  std::vector<float> y(x.size());
  tanh_floats(x.data(), y.data(), int64_t(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = autograd::cpu::tanh_float(x[i]);
    if (std::isnan(want) && std::isnan(y[i])) continue;
    if (std::bit_cast<uint32_t>(y[i]) != std::bit_cast<uint32_t>(want))
      return "tanh(" + std::to_string(x[i]) + ") [bits " + std::to_string(std::bit_cast<uint32_t>(x[i])) +
             "]: got " + std::to_string(y[i]) + ", tanh_float gives " + std::to_string(want);
  }
  return "";
}

}  // namespace

// Every 61st bit pattern: ~70 million inputs, both signs, every exponent, so every branch of tanhf and of
// the expm1f inside it. (All 2^32 were checked once when the kernel was written, with the flush-to-zero
// modes on and off: no difference.)
TEST(TanhFloats, MatchesTheLibraryBitForBitAcrossAllExponents) {
  std::vector<float> x;
  x.reserve(1 << 22);
  for (uint64_t start = 0; start < (uint64_t(1) << 32); start += uint64_t(61) << 22) {
    x.clear();
    for (uint64_t bits = start; bits < std::min(start + (uint64_t(61) << 22), uint64_t(1) << 32); bits += 61)
      x.push_back(std::bit_cast<float>(uint32_t(bits)));
    ASSERT_EQ(first_mismatch(x), "");
  }
}

// Where GELU's tanh arguments mostly live, |u| < 4: every 127th float of each sign.
TEST(TanhFloats, EveryFloatBelowFour) {
  std::vector<float> x;
  for (uint32_t bits = 0; bits < 0x40800000u; bits += 127) {
    x.push_back(std::bit_cast<float>(bits));
    x.push_back(std::bit_cast<float>(bits | 0x80000000u));
  }
  ASSERT_EQ(first_mismatch(x), "");
}

TEST(TanhFloats, BranchEdgesAndSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {0.0f, -0.0f, 1.0f, -1.0f, 22.0f, -22.0f, 21.999998f, 0x1p-55f, -0x1p-55f, 0x1.fffffep-56f,
                          0.17328680f, 0.17328681f, 0.51986039f, 0.51986045f, 1e-30f, 1e-45f, -1e-45f, 9.0f, 44.0f,
                          inf, -inf, std::numeric_limits<float>::quiet_NaN()};
  // around each threshold of expm1f's k (|2x| near j·ln 2 ± ½ln 2)
  for (int j = -64; j <= 64; ++j)
    for (float d = -3e-3f; d <= 3e-3f; d += 1e-4f) x.push_back((float(j) + 0.5f) * 0.34657359f + d);
  EXPECT_EQ(first_mismatch(x), "");
  float y[2];
  tanh_floats(&x[19], y, 2);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -1.0f);
}

// Every length from 0 to 40 (whole vectors and the masked tail), in place and not.
TEST(TanhFloats, AnyLengthAndInPlace) {
  for (int64_t n = 0; n <= 40; ++n) {
    std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n) + 1, 7.0f);
    for (int64_t i = 0; i < n; ++i) x[size_t(i)] = -5.0f + 0.27f * float(i);
    tanh_floats(x.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(y[size_t(i)], autograd::cpu::tanh_float(x[size_t(i)])) << "n " << n << " i " << i;
    EXPECT_EQ(y[size_t(n)], 7.0f) << "wrote past the end, n " << n;
    std::vector<float> z = x;
    tanh_floats(z.data(), z.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(z[size_t(i)], y[size_t(i)]);
  }
  // in place with lanes that go to tanh_float one by one (NaN, ±inf): computed from the input
  std::vector<float> x = {-200.0f, 1.0f, std::numeric_limits<float>::infinity(), -0.5f,
                          -std::numeric_limits<float>::infinity(), 2.0f};
  std::vector<float> want;
  for (float v : x) want.push_back(autograd::cpu::tanh_float(v));
  tanh_floats(x.data(), x.data(), int64_t(x.size()));
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(std::bit_cast<uint32_t>(x[i]), std::bit_cast<uint32_t>(want[i])) << i;
}

TEST(TanhFloats, VectorisedOnThisMachine) {
  // Not a correctness requirement (the scalar loop is exact too), but a slow fallback on the machines
  // this project is measured on would be a silent performance bug.
  // (16 lanes with AVX-512, 8 with AVX2 alone or under SCRATCHGRAD_NO_AVX512.)
  if (!testing_helpers::cpu_has_avx2()) GTEST_SKIP() << "no AVX2 here";
  EXPECT_TRUE(autograd::cpu::tanh_floats_vectorised());
}

// GELU's tanh form in exact numerics: contiguous floats go a block at a time through tanh_floats, other
// layouts element by element through tanh_float; both must give the same bits, forward and backward, over
// more elements than one block (and a ragged tail), on one thread and on two.
TEST(TanhFloats, ExactGeluBlocksMatchTheElementLoops) {
  using namespace autograd;
  NumericsGuard exact(Numerics::exact);
  const int threads_before = get_num_threads();
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    const Tensor x = testing_helpers::randish({301, 129}, 5, -6, 6, DType::Float32);
    const Tensor up = testing_helpers::randish({301, 129}, 6, -1, 1, DType::Float32);
    Tensor contiguous = x.clone().requires_grad_();
    Tensor spaced = testing_helpers::as_leaf(testing_helpers::spaced_copy(x));
    ASSERT_FALSE(spaced.is_contiguous());
    Tensor y_blocks = gelu(contiguous, "tanh"), y_elements = gelu(spaced, "tanh");
    testing_helpers::expect_same_float_bits(y_blocks, y_elements, "gelu tanh forward");
    y_blocks.backward(up);
    y_elements.backward(testing_helpers::spaced_copy(up));
    testing_helpers::expect_same_float_bits(contiguous.grad(), spaced.grad(), "gelu tanh backward");
  }
  set_num_threads(threads_before);
}
