// float_functions.cpp — tanhf, expm1f and erff with x86-64 glibc 2.36's bits on any CPU (see float_functions.h).
//
// Each follows its algorithm as the library's C describes it (fdlibm's, converted to float), one rounded
// float operation at a time, in the same order: this file is compiled with -ffp-contract=off like the rest of
// the project, so no compiler fuses a multiply and an add anywhere, and std::fma appears only where the
// library's x86-64 build itself fuses (expf's FMA build, inside erf). The constants are written as bit
// patterns: the floats the library's decimal literals round to. tests/test_float_functions.cpp compares all
// three with the C library on every float input near the kernels' range, and with x86-64 fixtures.
//
//   expm1f(y): y = k·ln 2 + r, with k = 0 when |y| <= ½ln 2, ±1 up to 1.5 ln 2, else the integer nearest
//     y/ln 2 (truncated after adding ±½); ln 2 in two parts (hi + lo), so r = hi − lo with the rounding
//     error c of that subtraction kept. e^r − 1 comes from a rational approximation built on a degree-5
//     polynomial in r²/2, corrected for c, then scaled by 2^k with one of five formulas chosen by k (they
//     avoid cancellation). |y| < 2^-25 gives y; y >= 88.72 overflows; y <= −27 ln 2 gives −1.
//   tanhf(x) = sign(x)·z, a = |x|: a < 2^-55: x·(1 + x); a < 1: z = −t/(t + 2), t = expm1(−2a);
//     a < 22: z = 1 − 2/(t + 2), t = expm1(2a); else 1 − 10^-30 (which rounds to 1).
//   erff(x), a = |x|: a < 0.84375: x + x·P(x²)/Q(x²) (degree 4 and 5); a < 1.25: ±(c + P(s)/Q(s)) with
//     s = a − 1 and c = 0.845062911 (degree 6 both); a < 6: 1 − e^(−z² − 0.5625)·e^((z − a)(z + a) + R/S)/a,
//     z = a with its low 12 mantissa bits cleared, R/S a rational function of 1/a² (two sets of
//     coefficients, split at a = 1/0.35); a >= 6: 1 − 10^-30. The sign of x is put back at the end.
//     Its two exps are glibc's expf (double precision inside; see exp_floats.cpp): x86-64's libm calls the
//     FMA build of it on CPUs with FMA, so the steps that build fuses are std::fma here.
#include "autograd/cpu/libm/float_functions.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "autograd/compat.h"
#include "autograd/cpu/libm/expf_constants.h"

namespace autograd::cpu {

namespace {

constexpr float from_bits(uint32_t bits) { return compat::bit_cast<float>(bits); }
uint32_t bits_of(float v) { return compat::bit_cast<uint32_t>(v); }
// y · 2^k, by adding k to y's exponent field (y normal and the result in range, as the callers ensure)
float times_power_of_two(float y, int32_t k) { return from_bits(bits_of(y) + (uint32_t(k) << 23)); }

// p0 + s·(p1 + s·(p2 + ...)), innermost first, each step rounded: the library's Horner order.
template <size_t N> float horner(float s, const float (&p)[N]) {
  float sum = p[N - 1];
  for (size_t i = N - 1; i-- > 0;) sum = p[i] + s * sum;
  return sum;
}

// ---- expm1f
constexpr float kLn2Hi = from_bits(0x3f317180), kLn2Lo = from_bits(0x3717f7d1), kInvLn2 = from_bits(0x3fb8aa3b);
constexpr float kExpm1Q[] = {1.0f, from_bits(0xbd088889), from_bits(0x3ad00d01), from_bits(0xb8a670cd),
                             from_bits(0x36867e54), from_bits(0xb457edbb)};  // 1, Q1..Q5
constexpr float kOverflowAbove = from_bits(0x42b17180);  // 88.72168: expm1f of more (from 88.7217 up) is +inf

float expm1_reduced(float y, uint32_t hx, bool negative);

}  // namespace

float expm1_float(float y) {
  const uint32_t hx = bits_of(y) & 0x7fffffff;
  const bool negative = (bits_of(y) >> 31) != 0;
  if (hx >= 0x4195b844) {    // |y| >= 27 ln 2: −1 below, maybe NaN, ±inf or overflow above
    if (hx >= 0x42b17218) {  // |y| >= 88.7217
      if (hx > 0x7f800000) return y + y;
      if (hx == 0x7f800000) return negative ? -1.0f : y;
      if (y > kOverflowAbove) return std::numeric_limits<float>::infinity();
    }
    if (negative) return -1.0f;
  }
  if (hx < 0x33000000) {  // |y| < 2^-25: y, computed (a subnormal y is then 0 where denormals are zero)
    const float t = 1.0e30f + y;
    return y - (t - 1.0e30f);
  }
  return expm1_reduced(y, hx, negative);
}

namespace {

float expm1_reduced(float y, uint32_t hx, bool negative) {
  // k and the reduced argument x = hi − lo, with c the rounding error of that subtraction
  int32_t k = 0;
  float x = y, c = 0;
  if (hx > 0x3eb17218) {                              // |y| > ½ln 2
    if (hx < 0x3F851592) k = negative ? -1 : 1;         // |y| < 1.5 ln 2
    else k = int32_t(kInvLn2 * y + (negative ? -0.5f : 0.5f));
    const float t = float(k);
    const float hi = y - t * kLn2Hi, lo = t * kLn2Lo;
    x = hi - lo;
    c = (hi - x) - lo;
  }
  // the rational approximation of e^x − 1 on the reduced argument
  const float hfx = 0.5f * x, hxs = x * hfx;
  const float r1 = horner(hxs, kExpm1Q);
  const float t = 3.0f - r1 * hfx;
  float e = hxs * ((r1 - t) / (6.0f - x * t));
  if (k == 0) return x - (x * e - hxs);
  // the correction for c, then the formula that suits k
  e = x * (e - c) - c;
  e -= hxs;
  if (k == -1) return 0.5f * (x - e) - 0.5f;
  if (k == 1) return x < -0.25f ? -2.0f * (e - (x + 0.5f)) : 1.0f + 2.0f * (x - e);
  if (k <= -2 || k > 56) return times_power_of_two(1.0f - (e - x), k) - 1.0f;
  if (k < 23) return times_power_of_two(from_bits(0x3f800000 - (0x1000000u >> k)) - (e - x), k);  // 1 − 2^-k
  return times_power_of_two((x - (e + from_bits(uint32_t(0x7f - k) << 23))) + 1.0f, k);           // 2^-k
}

}  // namespace

// ---- tanhf
float tanh_float(float x) {
  const uint32_t ix = bits_of(x) & 0x7fffffff;
  const bool negative = (bits_of(x) >> 31) != 0;
  if (ix >= 0x7f800000) return negative ? 1.0f / x - 1.0f : 1.0f / x + 1.0f;  // ±1, NaN
  if (ix < 0x24000000) return x * (1.0f + x);                                  // |x| < 2^-55
  const float a = from_bits(ix);
  float z;
  if (ix >= 0x41b00000) {  // |x| >= 22
    z = 1.0f - 1.0e-30f;
  } else if (ix >= 0x3f800000) {  // |x| >= 1
    const float t = expm1_float(2.0f * a);
    z = 1.0f - 2.0f / (t + 2.0f);
  } else {
    const float t = expm1_float(-2.0f * a);
    z = -t / (t + 2.0f);
  }
  return negative ? -z : z;
}

// ---- erff
namespace {

constexpr float kErx = from_bits(0x3f58560b);  // 0.845062911
constexpr float kEfx = from_bits(0x3e0375d4);  // 2/√π − 1
// erf on [0, 0.84375]: x + x·pp(x²)/qq(x²)
constexpr float kPp[] = {from_bits(0x3e0375d4), from_bits(0xbea66beb), from_bits(0xbce9528f), from_bits(0xbbbd1489),
                         from_bits(0xb7c756b1)};
constexpr float kQq[] = {1.0f, from_bits(0x3ecbbbce), from_bits(0x3d852a63), from_bits(0x3ba68116),
                         from_bits(0x390aee49), from_bits(0xb684e21a)};
// on [0.84375, 1.25]: erx + pa(s)/qa(s), s = |x| − 1
constexpr float kPa[] = {from_bits(0xbb1acdc6), from_bits(0x3ed46805), from_bits(0xbebe9208), from_bits(0x3ea2fe54),
                         from_bits(0xbde31cc2), from_bits(0x3d1151b3), from_bits(0xbb0df9c0)};
constexpr float kQa[] = {1.0f, from_bits(0x3dd9f331), from_bits(0x3f0a5785), from_bits(0x3d931ae7),
                         from_bits(0x3e013307), from_bits(0x3c5f6e13), from_bits(0x3c445aa3)};
// erfc on [1.25, 1/0.35]: ra(s)/sa(s), s = 1/x²
constexpr float kRa[] = {from_bits(0xbc21a093), from_bits(0xbf31a0b7), from_bits(0xc128f022), from_bits(0xc2798057),
                         from_bits(0xc322658c), from_bits(0xc3389ae7), from_bits(0xc2a2932b), from_bits(0xc11d077e)};
constexpr float kSa[] = {1.0f,                  from_bits(0x419d35ce), from_bits(0x4309a863), from_bits(0x43d9486f),
                         from_bits(0x442158c9), from_bits(0x43d6810b), from_bits(0x42d9451f), from_bits(0x40d23f7c),
                         from_bits(0xbd777f97)};
// and on [1/0.35, 6]: rb(s)/sb(s)
constexpr float kRb[] = {from_bits(0xbc21a092), from_bits(0xbf4c9dd4), from_bits(0xc18e104b), from_bits(0xc320a2ea),
                         from_bits(0xc41f6441), from_bits(0xc480230b), from_bits(0xc3f1c275)};
constexpr float kSb[] = {1.0f,                  from_bits(0x41f2b459), from_bits(0x43a2e571), from_bits(0x44c01759),
                         from_bits(0x4547fdbb), from_bits(0x451f90ce), from_bits(0x43ed43a7), from_bits(0xc1b38712)};

// glibc's expf for |x| < 88 (erf asks for −36.6 < x < 1), as its FMA build computes it: the steps of
// exp_floats.cpp in double precision, rounding the product to an integer, the remainder and the cubic's
// multiply-adds fused.
float exp_below_88(float x) {
  using namespace expf_constants;
  const double xd = x;
  const double kd_shifted = std::fma(kInvLn2Scaled, xd, kShift);
  const uint64_t k = compat::bit_cast<uint64_t>(kd_shifted);  // k in the low bits
  const double kd = kd_shifted - kShift;
  const double r = std::fma(kInvLn2Scaled, xd, -kd);
  const double scale = compat::bit_cast<double>(kExp2Table[k % 32] + (k << 47));  // 2^(k/32)
  const double cubic_hi = std::fma(kC0, r, kC1);
  const double r2 = r * r;
  double p = std::fma(kC2, r, 1.0);
  p = std::fma(cubic_hi, r2, p);
  return float(p * scale);
}

}  // namespace

float erf_float(float x) {
  const uint32_t hx = bits_of(x), ix = hx & 0x7fffffff;
  const bool negative = (hx >> 31) != 0;
  if (ix >= 0x7f800000) return float(1 - int(negative) * 2) + 1.0f / x;  // ±1, NaN
  if (ix < 0x3f580000) {                                                 // |x| < 0.84375
    if (ix < 0x31800000) {                                               // |x| < 2^-28
      if (ix < 0x04000000) return 0.0625f * (16.0f * x + (16.0f * kEfx) * x);  // (no underflow in between)
      return x + kEfx * x;
    }
    const float z = x * x;
    return x + x * (horner(z, kPp) / horner(z, kQq));
  }
  if (ix < 0x3fa00000) {  // |x| < 1.25
    const float s = std::fabs(x) - 1.0f;
    const float p = horner(s, kPa), q = horner(s, kQa);
    return negative ? -kErx - p / q : kErx + p / q;
  }
  if (ix >= 0x40c00000) return negative ? 1.0e-30f - 1.0f : 1.0f - 1.0e-30f;  // |x| >= 6
  const float a = std::fabs(x);
  const float s = 1.0f / (a * a);
  const bool near = ix < 0x4036db6e;  // |x| < 1/0.35
  const float R = near ? horner(s, kRa) : horner(s, kRb), S = near ? horner(s, kSa) : horner(s, kSb);
  const float z = from_bits(ix & 0xfffff000);
  const float r = exp_below_88(-z * z - 0.5625f) * exp_below_88((z - a) * (z + a) + R / S);
  return negative ? r / a - 1.0f : 1.0f - r / a;
}

}  // namespace autograd::cpu
