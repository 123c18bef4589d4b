// exp_floats must give std::exp's bits for every float: softmax parity with PyTorch rests on it.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "autograd/cpu/libm/exp_floats.h"
#include "tests/cpu_features.h"

using autograd::cpu::exp_floats;

namespace {

// The first input where exp_floats and std::exp disagree, as text ("" if none).
std::string first_mismatch(const std::vector<float>& x) {
  std::vector<float> y(x.size());
  exp_floats(x.data(), y.data(), int64_t(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = std::exp(x[i]);
    if (std::bit_cast<uint32_t>(y[i]) != std::bit_cast<uint32_t>(want))
      return "exp(" + std::to_string(x[i]) + ") [bits " + std::to_string(std::bit_cast<uint32_t>(x[i])) +
             "]: got " + std::to_string(y[i]) + ", std::exp gives " + std::to_string(want);
  }
  return "";
}

}  // namespace

// Every 61st bit pattern: ~70 million inputs, both signs, every exponent. (The whole 2^32 was checked
// once by hand when the kernel was written: no difference.)
TEST(ExpFloats, MatchesTheLibraryBitForBitAcrossAllExponents) {
  std::vector<float> x;
  x.reserve(1 << 22);
  for (uint64_t start = 0; start < (uint64_t(1) << 32); start += uint64_t(61) << 22) {
    x.clear();
    for (uint64_t bits = start; bits < std::min(start + (uint64_t(61) << 22), uint64_t(1) << 32); bits += 61)
      x.push_back(std::bit_cast<float>(uint32_t(bits)));
    ASSERT_EQ(first_mismatch(x), "");
  }
}

// The large negative scores softmax meets, which the vector code keeps (down to the underflow threshold)
// or zeroes (below it): every float from -88 to -112, then every 4099th down to -inf.
TEST(ExpFloats, LargeNegativeInputs) {
  std::vector<float> x;
  for (uint32_t bits = 0xc2b00000u; bits < 0xc2e00000u; ++bits) x.push_back(std::bit_cast<float>(bits));
  for (uint32_t bits = 0xc2e00000u; bits < 0xff800000u; bits += 4099) x.push_back(std::bit_cast<float>(bits));
  x.push_back(-std::numeric_limits<float>::infinity());
  ASSERT_EQ(first_mismatch(x), "");
}

TEST(ExpFloats, EdgesSpecialValuesAndTheFmaProbes) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {0.0f, -0.0f, 1.0f, -1.0f, 88.0f, -88.0f, 88.72283f, 88.72284f, 89.0f, -103.27893f,
                          -103.97208f, -104.0f, -150.0f, 1e-30f, -1e-30f, 1e-45f, inf, -inf,
                          std::numeric_limits<float>::quiet_NaN(), 0x1.04845ep+5f, -0x1.f8cbb2p+5f};
  EXPECT_EQ(first_mismatch(x), "");
  float y = 1;
  exp_floats(&x[17], &y, 1);
  EXPECT_EQ(y, 0.0f);  // exp(-inf) = 0 exactly (softmax's masked entries)
}

// Every length from 0 to 40 (whole vectors and the masked tail), in place and not.
TEST(ExpFloats, AnyLengthAndInPlace) {
  for (int64_t n = 0; n <= 40; ++n) {
    std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n) + 1, 7.0f);
    for (int64_t i = 0; i < n; ++i) x[size_t(i)] = -20.0f + 0.73f * float(i);
    exp_floats(x.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(y[size_t(i)], std::exp(x[size_t(i)])) << "n " << n << " i " << i;
    EXPECT_EQ(y[size_t(n)], 7.0f) << "wrote past the end, n " << n;
    std::vector<float> z = x;
    exp_floats(z.data(), z.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(z[size_t(i)], y[size_t(i)]);
  }
  // in place with lanes that leave the fast path (|x| >= 88): those are recomputed from the input
  std::vector<float> x = {-200.0f, 1.0f, 100.0f, -std::numeric_limits<float>::infinity(), -90.0f, 89.0f, 2.0f};
  std::vector<float> want;
  for (float v : x) want.push_back(std::exp(v));
  exp_floats(x.data(), x.data(), int64_t(x.size()));
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(std::bit_cast<uint32_t>(x[i]), std::bit_cast<uint32_t>(want[i])) << i;
}

TEST(ExpFloats, VectorisedOnThisMachine) {
  // Not a correctness requirement (the scalar loop is exact too), but a slow fallback on the machines
  // this project is measured on would be a silent performance bug.
  // (16 lanes with AVX-512, 8 with AVX2 and FMA alone or under SCRATCHGRAD_NO_AVX512.)
  if (!testing_helpers::cpu_has_avx2() || !testing_helpers::cpu_has_fma()) GTEST_SKIP() << "no AVX2 and FMA here";
  EXPECT_TRUE(autograd::cpu::exp_floats_vectorised());
}
