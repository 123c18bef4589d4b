// cpu/avx2_mathfun_emulation.cpp — see avx2_mathfun_emulation.h.
//
// Every step is a float operation rounded on its own, except where a comment says "fused": there the
// vector code's multiply feeds straight into an add, GCC turned the pair into one FMA instruction, and
// we call std::fma to round once as well. Which pairs are fused was settled by experiment against
// PyTorch 1.13's AVX2 kernel (docs/random.md, section 3): every polynomial step, the Cody-Waite
// reduction, the cosine's `y * z - z / 2` and the sine's `y * x + x`, and in log the `y * z + e * q1`
// step with the product y * z fused (not e * q1). Fusing any other choice changes the last bit of some
// samples. The whole project compiles with -ffp-contract=off, so the unfused steps stay unfused.
#include "autograd/random/avx2_mathfun_emulation.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "autograd/compat.h"

namespace autograd::random::avx2_emulation {
namespace {

constexpr uint32_t kSignBit = 0x80000000u;
constexpr uint32_t kExponentBits = 0x7f800000u;
constexpr uint32_t kSmallestNormal = 0x00800000u;  // 2^-126

// Cephes' logf: log(1 + f) ≈ f - f²/2 + f³·P(f) for f in [sqrt(1/2) - 1, sqrt(2) - 1].
constexpr float kLogP[9] = {7.0376836292E-2f,  -1.1514610310E-1f, 1.1676998740E-1f,
                            -1.2420140846E-1f, 1.4249322787E-1f,  -1.6668057665E-1f,
                            2.0000714765E-1f,  -2.4999993993E-1f, 3.3333331174E-1f};
// log(2) split in two, q2 with only 9 significant bits so that e * q2 is exact for any exponent e.
constexpr float kLn2Low = -2.12194440e-4f;
constexpr float kLn2High = 0.693359375f;
constexpr float kSqrtHalf = 0.707106781186547524f;

// Cephes' sinf/cosf: reduce by multiples of π/4, then one polynomial for each function on [-π/4, π/4].
constexpr float kFourOverPi = 1.27323954473516f;
// -π/4 split in three parts (Cody-Waite). The first two have few significant bits, so y * part is
// exact for the small integers y the reduction multiplies them by.
constexpr float kMinusPiOver4Part1 = -0.78515625f;
constexpr float kMinusPiOver4Part2 = -2.4187564849853515625e-4f;
constexpr float kMinusPiOver4Part3 = -3.77489497744594108e-8f;
constexpr float kSinP[3] = {-1.9515295891E-4f, 8.3321608736E-3f, -1.6666654611E-1f};
constexpr float kCosP[3] = {2.443315711809948E-005f, -1.388731625493765E-003f, 4.166664568298827E-002f};

}  // namespace

float log(float x) {
  // The vector code turns x <= 0 into NaN with a mask at the end; do the same up front.
  if (x <= 0.0f) return std::numeric_limits<float>::quiet_NaN();
  // Denormals are raised to the smallest normal float, so the exponent trick below works.
  x = std::fmax(x, compat::bit_cast<float>(kSmallestNormal));

  // frexp by bit manipulation: x = m · 2^e with m in [0.5, 1). The biased exponent minus 127 is
  // converted to float and one is added because m is in [0.5, 1) rather than [1, 2).
  const uint32_t bits = compat::bit_cast<uint32_t>(x);
  float e = static_cast<float>(static_cast<int32_t>(bits >> 23) - 0x7f);
  e = e + 1.0f;
  float m = compat::bit_cast<float>((bits & ~kExponentBits) | compat::bit_cast<uint32_t>(0.5f));

  // Keep the polynomial's argument small: if m < sqrt(1/2), use 2m - 1 and one less in the exponent,
  // otherwise m - 1. The vector code computes this without branches as (m - 1) + (m or 0), and
  // subtracts (1 or 0) from e; both are exact, so the order does not matter for the result.
  const bool below = m < kSqrtHalf;
  const float m_if_below = below ? m : 0.0f;
  m = m - 1.0f;
  e = e - (below ? 1.0f : 0.0f);
  m = m + m_if_below;

  const float z = m * m;
  // Horner's rule for P(m), each step fused.
  float y = kLogP[0];
  for (int k = 1; k < 9; ++k) y = std::fma(y, m, kLogP[k]);
  y = y * m;  // m · P(m), rounded
  // m³·P(m) + e·log2_low: the product y · z is fused into the add; e · q1 is rounded first.
  y = std::fma(y, z, e * kLn2Low);
  // - m²/2: z · 0.5 is exact, so fused or not gives the same bits (GCC fuses it).
  y = std::fma(-z, 0.5f, y);
  // m + (the small terms), then + e·log2_high (fused; the product is exact anyway).
  m = m + y;
  m = std::fma(e, kLn2High, m);
  return m;
}

void sincos(float x, float& sin_out, float& cos_out) {
  // sin is odd and cos even: work with |x| and give the sine x's sign back at the end.
  uint32_t sin_sign = compat::bit_cast<uint32_t>(x) & kSignBit;
  x = std::fabs(x);

  // j = the multiple of π/4 nearest |x| from below, rounded up to an even number: truncate |x|·4/π,
  // then (j + 1) & ~1. The octant j decides the polynomial and the signs.
  const float scaled = x * kFourOverPi;
  int32_t j = static_cast<int32_t>(scaled);  // truncation, like cvttps2dq
  j = (j + 1) & ~1;
  const float y = static_cast<float>(j);

  // Sine changes sign in octants 4..7; cosine in octants 2..5 (the vector code computes that as
  // ~(j - 2) & 4). Bit 1 of j picks which polynomial gives the sine: bit clear -> the sine
  // polynomial gives the sine and the cosine polynomial the cosine; set -> they swap.
  sin_sign ^= static_cast<uint32_t>(j & 4) << 29;
  const uint32_t cos_sign = static_cast<uint32_t>(~(j - 2) & 4) << 29;
  const bool sine_poly_gives_sine = (j & 2) == 0;

  // Extended-precision reduction x - y·π/4 in three fused steps.
  x = std::fma(y, kMinusPiOver4Part1, x);
  x = std::fma(y, kMinusPiOver4Part2, x);
  x = std::fma(y, kMinusPiOver4Part3, x);

  const float z = x * x;

  // cos x ≈ 1 - z/2 + z²·Q(z): Horner steps fused, then (y·z)·z - z/2 with the last product fused
  // into the subtraction (z · 0.5 is rounded first, exactly), then + 1.
  float c = kCosP[0];
  c = std::fma(c, z, kCosP[1]);
  c = std::fma(c, z, kCosP[2]);
  c = c * z;
  c = std::fma(c, z, -(z * 0.5f));
  c = c + 1.0f;

  // sin x ≈ x + x·z·P(z): Horner steps fused, · z rounded, then (·x + x) fused.
  float s = kSinP[0];
  s = std::fma(s, z, kSinP[1]);
  s = std::fma(s, z, kSinP[2]);
  s = s * z;
  s = std::fma(s, x, x);

  // The vector code selects with masks and then adds the unselected lane as +0 (so a -0 would become
  // +0); adding 0.0f keeps that behaviour.
  const float sin_magnitude = sine_poly_gives_sine ? 0.0f + s : c + 0.0f;
  const float cos_magnitude = sine_poly_gives_sine ? c + 0.0f : 0.0f + s;
  sin_out = compat::bit_cast<float>(compat::bit_cast<uint32_t>(sin_magnitude) ^ sin_sign);
  cos_out = compat::bit_cast<float>(compat::bit_cast<uint32_t>(cos_magnitude) ^ cos_sign);
}

}  // namespace autograd::random::avx2_emulation
