// tanh_floats.cpp — x86-64 glibc's tanhf, 16 lanes at a time (8 on CPUs with AVX2 but not AVX-512), bit for bit.
//
// glibc up to 2.40 (Debian 12 has 2.36) computes tanhf with the classic fdlibm algorithm in float
// arithmetic, every operation rounded to float (no fused multiply-adds, no double precision):
//
//   tanh(x) = sign(x) · z, with a = |x| and
//     a < 2^-55:   x · (1 + x)                      (that is, x)
//     a < 1:       z = −t / (t + 2),   t = expm1(−2a)
//     a < 22:      z = 1 − 2 / (t + 2), t = expm1(2a)
//     a >= 22:     z = 1 − 10^-30, which rounds to 1
//
// and expm1f(y), for the |y| < 44 that tanh asks for, reduces y = k·ln 2 + r (k = 0 when |y| <= ½ln 2,
// ±1 up to 1.5 ln 2, else the integer nearest y/ln 2, truncated after adding ±½), evaluates a rational
// approximation of e^r − 1 built on a degree-5 polynomial in r²/2, corrects for the low part c of the
// reduction, and scales by 2^k with one of four formulas chosen by k (they avoid cancellation). Every
// lane below follows the same operations in the same order and rounding, computing all the formulas and
// keeping the one its k picks; so the bits are the library's. NaN and ±inf go to tanh_float one by one.
//
// Those bits are x86-64 glibc 2.36's, wherever the program runs: the one-value version, tanh_float
// (float_functions.h), is the project's own copy of the same algorithm, used for NaN and ±inf, where there
// are no vectors (ARM, the WebAssembly lab) and as the reference of a start-up check, which falls back to it
// per element should the vectors ever disagree: a compiler's surprise can cost speed, never bits. (glibc
// 2.41 replaced tanhf with a correctly rounded one; its bits are not used, so that ARM and x86 and old
// and new libraries all agree.)
#include "autograd/cpu/libm/tanh_floats.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
// GCC 12's AVX-512 conversions start from an "undefined" register on purpose and then warn about it.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// The generic-vector helpers are always inlined into the AVX2 function, so no vector crosses a call.
#pragma GCC diagnostic ignored "-Wpsabi"
#include <immintrin.h>
#define SCRATCHGRAD_HAVE_AVX512_TANH 1
#endif

#include "autograd/compat.h"
#include "autograd/cpu/kernels/lanes.h"
#include "autograd/cpu/libm/float_functions.h"
#include "autograd/cpu/runtime/runtime.h"

namespace autograd::cpu {

namespace {

using TanhLoop = void (*)(const float* x, float* y, int64_t n);  // y[0..n) = tanhf(x[0..n))

void tanh_scalar(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = tanh_float(x[i]);
}

#ifdef SCRATCHGRAD_HAVE_AVX512_TANH

// expm1f's constants, as bit patterns (the values the library's decimal literals round to).
constexpr uint32_t kLn2Hi = 0x3f317180, kLn2Lo = 0x3717f7d1, kInvLn2 = 0x3fb8aa3b;
constexpr uint32_t kQ1 = 0xbd088889, kQ2 = 0x3ad00d01, kQ3 = 0xb8a670cd, kQ4 = 0x36867e54, kQ5 = 0xb457edbb;
// Thresholds on |y|'s bits: ½ln 2, 1.5 ln 2, 2^-25.
constexpr int kHalfLn2 = 0x3eb17218, kThreeHalvesLn2 = 0x3F851592, kTwoToMinus25 = 0x33000000;
// tanhf's thresholds on |x|'s bits: 2^-55, 1, 22, infinity.
constexpr int kTiny = 0x24000000, kOne = 0x3f800000, kTwentyTwo = 0x41b00000, kInfinity = 0x7f800000;

#define TARGET [[gnu::target("avx512f"), gnu::always_inline]] inline

TARGET __m512 splat(uint32_t bits) { return _mm512_castsi512_ps(_mm512_set1_epi32(int(bits))); }
TARGET __m512 splat(float v) { return _mm512_set1_ps(v); }
TARGET __m512 add(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
TARGET __m512 sub(__m512 a, __m512 b) { return _mm512_sub_ps(a, b); }
TARGET __m512 mul(__m512 a, __m512 b) { return _mm512_mul_ps(a, b); }
TARGET __m512 div(__m512 a, __m512 b) { return _mm512_div_ps(a, b); }
TARGET __m512i bits_of(__m512 v) { return _mm512_castps_si512(v); }
TARGET __m512 float_of(__m512i v) { return _mm512_castsi512_ps(v); }
// "add k to y's exponent": y's bits plus k << 23
TARGET __m512 scale_by_power_of_two(__m512 y, __m512i k) {
  return float_of(_mm512_add_epi32(bits_of(y), _mm512_slli_epi32(k, 23)));
}

// expm1f(y) on 16 lanes, for |y| < 27 ln 2 when y < 0 and |y| < 88.7 when y > 0 (tanh's range).
TARGET __m512 expm1_16(__m512 y) {
  const __m512i hx = _mm512_and_si512(bits_of(y), _mm512_set1_epi32(0x7fffffff));
  const __mmask16 negative = _mm512_test_epi32_mask(bits_of(y), _mm512_set1_epi32(int(0x80000000u)));
  const __mmask16 reduced = _mm512_cmpgt_epi32_mask(hx, _mm512_set1_epi32(kHalfLn2));
  const __mmask16 near = _mm512_cmplt_epi32_mask(hx, _mm512_set1_epi32(kThreeHalvesLn2));
  const __mmask16 tiny = _mm512_cmplt_epi32_mask(hx, _mm512_set1_epi32(kTwoToMinus25));

  // k: 0 (|y| <= ½ln 2), ±1 (up to 1.5 ln 2), else (int)(y/ln 2 ± ½)
  const __m512 half = _mm512_mask_mov_ps(splat(0.5f), negative, splat(-0.5f));
  const __m512i k_far = _mm512_cvttps_epi32(add(mul(splat(kInvLn2), y), half));
  const __m512i plus_minus_one = _mm512_mask_mov_epi32(_mm512_set1_epi32(1), negative, _mm512_set1_epi32(-1));
  __m512i k = _mm512_mask_mov_epi32(k_far, near, plus_minus_one);
  k = _mm512_maskz_mov_epi32(reduced, k);

  // y = hi − lo exactly as the library splits it; for k = 0 this leaves x = y and c = 0.
  const __m512 t = _mm512_cvtepi32_ps(k);
  const __m512 hi = sub(y, mul(t, splat(kLn2Hi)));
  const __m512 lo = mul(t, splat(kLn2Lo));
  const __m512 x = sub(hi, lo);
  const __m512 c = sub(sub(hi, x), lo);

  // the rational approximation on the reduced argument
  const __m512 hfx = mul(splat(0.5f), x);
  const __m512 hxs = mul(x, hfx);
  __m512 poly = add(splat(kQ4), mul(hxs, splat(kQ5)));
  poly = add(splat(kQ3), mul(hxs, poly));
  poly = add(splat(kQ2), mul(hxs, poly));
  poly = add(splat(kQ1), mul(hxs, poly));
  const __m512 r1 = add(splat(1.0f), mul(hxs, poly));
  const __m512 t3 = sub(splat(3.0f), mul(r1, hfx));
  const __m512 e = mul(hxs, div(sub(r1, t3), sub(splat(6.0f), mul(x, t3))));

  // k = 0
  const __m512 k_zero = sub(x, sub(mul(x, e), hxs));
  // k != 0: the correction for c, then the formula that suits k
  const __m512 ec = sub(sub(mul(x, sub(e, c)), c), hxs);
  const __m512 x_minus_ec = sub(x, ec);
  const __m512 k_minus_one = sub(mul(splat(0.5f), x_minus_ec), splat(0.5f));
  const __m512 k_one_low = mul(splat(-2.0f), sub(ec, add(x, splat(0.5f))));   // x < −¼
  const __m512 k_one_high = add(splat(1.0f), mul(splat(2.0f), x_minus_ec));
  const __mmask16 below_quarter = _mm512_cmp_ps_mask(x, splat(-0.25f), _CMP_LT_OQ);
  const __m512 k_one = _mm512_mask_mov_ps(k_one_high, below_quarter, k_one_low);
  const __m512 k_far_out = sub(scale_by_power_of_two(sub(splat(1.0f), sub(ec, x)), k), splat(1.0f));  // k <= −2, k > 56
  const __m512i top = _mm512_sub_epi32(_mm512_set1_epi32(0x3f800000), _mm512_srlv_epi32(_mm512_set1_epi32(0x1000000), k));
  const __m512 k_mid = scale_by_power_of_two(sub(float_of(top), sub(ec, x)), k);  // 2 <= k < 23: t = 1 − 2^−k
  const __m512 two_to_minus_k = float_of(_mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(0x7f), k), 23));
  const __m512 k_high = scale_by_power_of_two(add(sub(x, add(ec, two_to_minus_k)), splat(1.0f)), k);  // 23 <= k <= 56

  const __mmask16 k_below_two = _mm512_cmplt_epi32_mask(k, _mm512_set1_epi32(2));
  const __mmask16 k_below_23 = _mm512_cmplt_epi32_mask(k, _mm512_set1_epi32(23));
  const __mmask16 k_above_56 = _mm512_cmpgt_epi32_mask(k, _mm512_set1_epi32(56));
  __m512 result = k_far_out;                                                   // k <= −2 or k > 56
  result = _mm512_mask_mov_ps(result, ~k_below_two & k_below_23, k_mid);        // 2..22
  result = _mm512_mask_mov_ps(result, ~k_below_23 & ~k_above_56, k_high);       // 23..56
  result = _mm512_mask_mov_ps(result, _mm512_cmpeq_epi32_mask(k, _mm512_set1_epi32(1)), k_one);
  result = _mm512_mask_mov_ps(result, _mm512_cmpeq_epi32_mask(k, _mm512_set1_epi32(-1)), k_minus_one);
  result = _mm512_mask_mov_ps(result, _mm512_cmpeq_epi32_mask(k, _mm512_setzero_si512()), k_zero);
  return _mm512_mask_mov_ps(result, tiny, y);  // |y| < 2^-25: y itself
}

// tanhf on up to 16 values (the lanes in `lanes`).
[[gnu::target("avx512f")]] void tanh16(const float* in, float* out, __mmask16 lanes) {
  const __m512 x = load_lanes(in, lanes);
  const __m512i ix = _mm512_and_si512(bits_of(x), _mm512_set1_epi32(0x7fffffff));
  const __m512 a = float_of(ix);
  const __mmask16 at_least_one = _mm512_cmpge_epi32_mask(ix, _mm512_set1_epi32(kOne));
  const __m512 two_a = mul(splat(2.0f), a), minus_two_a = mul(splat(-2.0f), a);
  const __m512 t = expm1_16(_mm512_mask_mov_ps(minus_two_a, at_least_one, two_a));
  const __m512 t_plus_two = add(t, splat(2.0f));
  const __m512 below_one = div(_mm512_sub_ps(_mm512_setzero_ps(), t), t_plus_two);  // −t / (t + 2)
  const __m512 from_one = sub(splat(1.0f), div(splat(2.0f), t_plus_two));
  __m512 z = _mm512_mask_mov_ps(below_one, at_least_one, from_one);
  z = _mm512_mask_mov_ps(z, _mm512_cmpge_epi32_mask(ix, _mm512_set1_epi32(kTwentyTwo)), sub(splat(1.0f), splat(1.0e-30f)));
  const __mmask16 negative = _mm512_test_epi32_mask(bits_of(x), _mm512_set1_epi32(int(0x80000000u)));
  z = float_of(_mm512_mask_xor_epi32(bits_of(z), negative, bits_of(z), _mm512_set1_epi32(int(0x80000000u))));  // −z
  const __mmask16 tiny = _mm512_cmplt_epi32_mask(ix, _mm512_set1_epi32(kTiny));
  z = _mm512_mask_mov_ps(z, tiny, mul(x, add(splat(1.0f), x)));
  store_lanes(out, lanes, z);
  if (const unsigned special = _mm512_mask_cmpge_epi32_mask(lanes, ix, _mm512_set1_epi32(kInfinity)); special != 0) {
    alignas(64) float saved[16];  // rare: NaN and ±inf, one at a time (from x as loaded: out may be in)
    _mm512_store_ps(saved, x);
    for (unsigned left = special; left != 0; left &= left - 1) out[__builtin_ctz(left)] = tanh_float(saved[__builtin_ctz(left)]);
  }
}

[[gnu::target("avx512f")]] void tanh_avx512(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) tanh16(x + i, y + i, 0xffff);
  if (i < n) tanh16(x + i, y + i, __mmask16((1u << (n - i)) - 1));
}

#undef TARGET

// ---- the same steps on GCC's generic vectors, for CPUs with AVX2 but not AVX-512 (8 lanes)
// A comparison gives a lane mask (all ones or zero), `mask ? a : b` picks lane by lane, a cast between
// vectors of one size keeps the bits, and __builtin_convertvector truncates like the library's (int).
// Only multiplies, adds, subtractions and divisions, never fused (the build's -ffp-contract=off): the bits
// are the library's, as the 16-lane version's are.
typedef float Floats8 __attribute__((vector_size(32)));
typedef int32_t Ints8 __attribute__((vector_size(32)));
typedef uint32_t Unsigned8 __attribute__((vector_size(32)));

template <typename V> [[gnu::always_inline]] inline V splat_of(auto value) { return V{} + value; }
template <typename F, typename I> [[gnu::always_inline]] inline F from_bits(I bits) { return F(bits); }
// y · 2^k: k added to y's exponent field. (Bit arithmetic on unsigned lanes, which wrap: the lanes whose
// k is out of range, later discarded, must not overflow a signed int, which UBSan would stop on.)
template <typename F, typename U, typename I> [[gnu::always_inline]] inline F times_power_of_two(F y, I k) {
  return F(U(y) + (U(k) << 23));
}

// expm1f(y) on the lanes of F, for tanh's range (see expm1_16).
template <typename F, typename I, typename U> [[gnu::always_inline]] inline F expm1_lanes(F y) {
  const I bits = I(y), hx = bits & 0x7fffffff;
  const I negative = bits < 0, reduced = hx > kHalfLn2, near = hx < kThreeHalvesLn2, tiny = hx < kTwoToMinus25;

  // k: 0 (|y| <= ½ln 2), ±1 (up to 1.5 ln 2), else (int)(y/ln 2 ± ½)
  const F half = negative ? splat_of<F>(-0.5f) : splat_of<F>(0.5f);
  const I k_far = __builtin_convertvector(from_bits<F>(splat_of<I>(int(kInvLn2))) * y + half, I);
  const I plus_minus_one = negative ? splat_of<I>(-1) : splat_of<I>(1);
  const I k = reduced ? (near ? plus_minus_one : k_far) : I{};

  // y = hi − lo exactly as the library splits it; for k = 0 this leaves x = y and c = 0.
  const F t = __builtin_convertvector(k, F);
  const F hi = y - t * from_bits<F>(splat_of<I>(int(kLn2Hi)));
  const F lo = t * from_bits<F>(splat_of<I>(int(kLn2Lo)));
  const F x = hi - lo;
  const F c = (hi - x) - lo;

  // the rational approximation on the reduced argument
  const F hfx = 0.5f * x;
  const F hxs = x * hfx;
  F poly = from_bits<F>(splat_of<I>(int(kQ4))) + hxs * from_bits<F>(splat_of<I>(int(kQ5)));
  poly = from_bits<F>(splat_of<I>(int(kQ3))) + hxs * poly;
  poly = from_bits<F>(splat_of<I>(int(kQ2))) + hxs * poly;
  poly = from_bits<F>(splat_of<I>(int(kQ1))) + hxs * poly;
  const F r1 = 1.0f + hxs * poly;
  const F t3 = 3.0f - r1 * hfx;
  const F e = hxs * ((r1 - t3) / (6.0f - x * t3));

  // k = 0
  const F k_zero = x - (x * e - hxs);
  // k != 0: the correction for c, then the formula that suits k
  const F ec = (x * (e - c) - c) - hxs;
  const F x_minus_ec = x - ec;
  const F k_minus_one = 0.5f * x_minus_ec - 0.5f;
  const F k_one = x < -0.25f ? -2.0f * (ec - (x + 0.5f)) : 1.0f + 2.0f * x_minus_ec;
  const F k_far_out = times_power_of_two<F, U>(1.0f - (ec - x), k) - 1.0f;  // k <= −2, k > 56
  const U top = 0x3f800000u - (splat_of<U>(0x1000000u) >> (U(k) & 31u));  // 1 − 2^−k (the shift: 2 <= k < 23)
  const F k_mid = times_power_of_two<F, U>(from_bits<F>(top) - (ec - x), k);  // 2 <= k < 23
  const F two_to_minus_k = from_bits<F>((0x7fu - U(k)) << 23);
  const F k_high = times_power_of_two<F, U>((x - (ec + two_to_minus_k)) + 1.0f, k);  // 23 <= k <= 56

  F result = k_far_out;
  result = k >= 2 && k < 23 ? k_mid : result;
  result = k >= 23 && k <= 56 ? k_high : result;
  result = k == 1 ? k_one : result;
  result = k == -1 ? k_minus_one : result;
  result = k == 0 ? k_zero : result;
  return tiny ? y : result;  // |y| < 2^-25: y itself
}

// out[0..lanes of F) = tanhf(in[...]) (see tanh16); NaN and ±inf lanes are left for the caller. (Arrays in
// and out, no vector argument: clang refuses a vector passed from the AVX2 function to one without AVX.)
template <typename F, typename I, typename U> [[gnu::always_inline]] inline void tanh_lanes(const float* in, float* out) {
  F x;
  __builtin_memcpy(&x, in, sizeof x);
  const I ix = I(x) & 0x7fffffff;
  const F a = from_bits<F>(ix);
  const I at_least_one = ix >= kOne;
  const F t = expm1_lanes<F, I, U>(at_least_one ? 2.0f * a : -2.0f * a);
  const F t_plus_two = t + 2.0f;
  // −t / (t + 2) below 1, 1 − 2 / (t + 2) from 1: one division, of the numerator each lane needs
  const F quotient = (at_least_one ? splat_of<F>(2.0f) : 0.0f - t) / t_plus_two;
  F z = at_least_one ? 1.0f - quotient : quotient;
  z = ix >= kTwentyTwo ? splat_of<F>(1.0f - 1.0e-30f) : z;
  z = from_bits<F>(I(z) ^ (I(x) & int(0x80000000u)));  // −z where x is negative
  z = ix < kTiny ? x * (1.0f + x) : z;
  __builtin_memcpy(out, &z, sizeof z);
}

// 8 values from `in` to `out` (in may be out).
[[gnu::target("avx2")]] inline void tanh8(const float* in, float* out) {
  const __m256 x = _mm256_loadu_ps(in);
  const __m256i magnitude = _mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x7fffffff));
  const __m256i infinite_or_nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(kInfinity - 1));
  const int special = _mm256_movemask_ps(_mm256_castsi256_ps(infinite_or_nan));
  alignas(32) float saved[8];
  if (special != 0) _mm256_store_ps(saved, x);  // rare: NaN and ±inf, kept before out (maybe in) is written
  tanh_lanes<Floats8, Ints8, Unsigned8>(in, out);
  for (int left = special; left != 0; left &= left - 1) out[__builtin_ctz(left)] = tanh_float(saved[__builtin_ctz(left)]);
}

// y[0..n) = tanhf(x[0..n)), 8 at a time; a last, partial vector through a copy padded with zeros.
[[gnu::target("avx2")]] void tanh_avx2(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) tanh8(x + i, y + i);
  if (i == n) return;
  float part[8] = {};
  std::copy(x + i, x + n, part);
  tanh8(part, part);
  std::copy(part, part + (n - i), y + i);
}

// The start-up check: every 65521st bit pattern of each sign (all exponents, so every branch of expm1
// and of tanh), and the edges between the branches.
bool vector_matches_library(TanhLoop vectorised) {
  std::vector<float> inputs = {0.0f, -0.0f, 1.0f, -1.0f, 22.0f, -22.0f, 0x1p-55f, -0x1p-55f, 0.34657359f, 0.5f,
                               std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN()};
  for (uint32_t bits = 0; bits < 0x7f800000u; bits += 65521) {
    inputs.push_back(compat::bit_cast<float>(bits));
    inputs.push_back(compat::bit_cast<float>(bits | 0x80000000u));
  }
  std::vector<float> fast(inputs.size());
  vectorised(inputs.data(), fast.data(), int64_t(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i)
    if (compat::bit_cast<uint32_t>(fast[i]) != compat::bit_cast<uint32_t>(tanh_float(inputs[i]))) return false;
  return true;
}

#endif

// The vector version this CPU runs, once it has matched the library: 16 lanes, 8 lanes, or none.
TanhLoop vectorised_tanh() {
#ifdef SCRATCHGRAD_HAVE_AVX512_TANH
  static const TanhLoop chosen = [] {
    const TanhLoop candidate = avx512_kernels() ? tanh_avx512 : has_avx2() ? tanh_avx2 : nullptr;
    return candidate && vector_matches_library(candidate) ? candidate : nullptr;
  }();
  return chosen;
#else
  return nullptr;
#endif
}

}  // namespace

bool tanh_floats_vectorised() { return vectorised_tanh() != nullptr; }

void tanh_floats(const float* x, float* y, int64_t n) {
  if (const TanhLoop vectorised = vectorised_tanh()) return vectorised(x, y, n);
  tanh_scalar(x, y, n);
}

}  // namespace autograd::cpu
