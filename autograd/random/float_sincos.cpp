// random/float_sincos.cpp — see float_sincos.h.
//
// Why not simply (float)std::sin((double)x)? That is the correctly rounded sine (nearly always), and
// glibc's sinf is not: its documented worst case is 0.56 ulp. Its double-precision result is very close
// to sin x but not exact, so when sin x lies near the midpoint between two floats glibc may round to the
// other one. Of the 2^24 angles Box-Muller draws, 216,620 sines and 217,364 cosines round differently
// from the correctly rounded value (and musl's sinf/cosf disagree with glibc's on 211,969 and 212,777).
// Only the same operations in the same order give the same bits, so this is glibc's algorithm (by Arm,
// in glibc since 2.28; also in newlib and Arm's optimized-routines), re-implemented from its description
// with its published constants. No code was copied.
//
//  1. In double: n = the nearest whole number to x / (π/2), r = x - n·π/2 (r is in about [-π/4, π/4]).
//  2. sin r and cos r from two short polynomials, every operation rounded to double (no FMA: the whole
//     project builds with -ffp-contract=off, as glibc's plain x86-64 build rounds; its FMA build gives
//     the same bits on every float in [0, 2π), see float_sincos.h).
//  3. Round each to float, then rotate by the quadrant: sin(r + n·π/2) is sin r, cos r, -sin r or -cos r.
//     Negating is exact, so rotating after rounding gives the bits glibc gets by negating before.
#include "autograd/random/float_sincos.h"

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace autograd::random {
namespace {

constexpr double kTwoOverPiTimes2To24 = 0x1.45f306dc9c883p+23;  // 2/π · 2^24, rounded to double
constexpr double kHalfPi = 0x1.921fb54442d18p+0;                 // π/2, rounded to double

// sin r ≈ r + s1·r³ + r⁵·(s2 + s3·r²) on [-π/4, π/4]
constexpr double kS1 = -0x1.555545995a603p-3;
constexpr double kS2 = 0x1.1107605230bc4p-7;
constexpr double kS3 = -0x1.994eb3774cf24p-13;
// cos r ≈ 1 + c1·r² + c2·r⁴ + r⁶·(c3 + c4·r²)
constexpr double kC1 = -0x1.ffffffd0c621cp-2;
constexpr double kC2 = 0x1.55553e1068f19p-5;
constexpr double kC3 = -0x1.6c087e89a359dp-10;
constexpr double kC4 = 0x1.99343027bf8c3p-16;

}  // namespace

SinCos float_sincos(float x) {
  if (!(std::fabs(x) < 120.0f)) {
    throw std::domain_error("float_sincos: defined for |x| < 120, got " + std::to_string(x));
  }
  // Below 2^-12, sin x rounds to x and cos x to 1. glibc returns them without the polynomials, and so
  // keeps sin(-0) = -0 (the polynomial would give +0).
  if (std::fabs(x) < 0x1p-12f) return {x, 1.0f};
  const double xd = x;
  // The quadrant as glibc computes it on x86-64: x · 2/π scaled by 2^24, truncated to an integer, plus
  // one half (2^23), shifted down 24 bits. That rounds x · 2/π to the nearest whole number.
  const int n = (static_cast<int32_t>(xd * kTwoOverPiTimes2To24) + 0x800000) >> 24;
  const double r = xd - n * kHalfPi;
  const double r2 = r * r;

  const double r3 = r * r2;
  const double sin_tail = kS2 + r2 * kS3;
  const double r5 = r3 * r2;
  const double sin_head = r + r3 * kS1;
  const float sin_r = static_cast<float>(sin_head + r5 * sin_tail);

  const double r4 = r2 * r2;
  const double cos_tail = kC3 + r2 * kC4;
  const double cos_head = 1.0 + r2 * kC1;
  const double r6 = r4 * r2;
  const double cos_head2 = cos_head + r4 * kC2;
  const float cos_r = static_cast<float>(cos_head2 + r6 * cos_tail);

  switch (n & 3) {
    case 0: return {sin_r, cos_r};
    case 1: return {cos_r, -sin_r};
    case 2: return {-sin_r, -cos_r};
    default: return {-cos_r, sin_r};
  }
}

}  // namespace autograd::random
