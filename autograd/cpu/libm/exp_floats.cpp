// exp_floats.cpp — the C library's expf, 16 lanes at a time (8 on CPUs with AVX2 but not AVX-512), bit for bit.
//
// How glibc (2.28 and later, so Debian 12's 2.36) computes expf(x), as its documentation and comments
// describe the algorithm; every step is done in double precision and the result rounded to float once:
//
//   1. x · 32/ln 2 = k + r with k the nearest integer and |r| <= 1/2: adding 1.5 · 2^52 rounds the
//      product to an integer, which then sits in the low bits of the double (k), and r is what is left.
//   2. exp(x) = 2^(k/32) · 2^(r/32). Writing k = 32 q + i, 2^(k/32) = 2^q · 2^(i/32): a table holds
//      2^(i/32) for i = 0..31 as bit patterns with i << 47 already taken away, so adding k << 47 to an
//      entry adds q to its exponent field and gives the bits of 2^(k/32) directly.
//   3. 2^(r/32) ≈ 1 + c2 r + c1 r² + c0 r³, a cubic whose coefficients are fixed numbers (below).
//
// Which of those multiply-adds are fused matters for the last bit: on a CPU with FMA the library runs
// its FMA build (__expf_fma), where the compiler fused the rounding step (x · 32/ln 2 + 1.5 · 2^52), the
// remainder (x · 32/ln 2 − k) and the three multiply-adds of the cubic. With exactly those fusions the
// code below agreed with this machine's expf on all 2^32 float inputs (FTZ/DAZ on and off); any other
// choice of fusions differs somewhere. Inputs with |x| >= 88 leave the library's fast path for a check:
// from -103.97 to -88 it then computes the same steps (checked on all of them here too), below that and
// for -inf it returns +0; x >= 88 (overflow) and NaN are passed to std::exp one by one.
//
// Because the bits depend on the library build, exp_floats checks itself once against std::exp on a
// spread of inputs (including the two known to tell the FMA and plain builds apart) and falls back to
// calling std::exp per element if they disagree, so a different C library can cost speed, never bits.
#include "autograd/cpu/libm/exp_floats.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
// GCC 12's AVX-512 casts (256 → 512 bits) leave the upper half "undefined" on purpose and then warn about it.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#define SCRATCHGRAD_HAVE_AVX512_EXP 1
#endif

#include "autograd/compat.h"
#include "autograd/cpu/kernels.h"
#include "autograd/cpu/kernels/lanes.h"
#include "autograd/cpu/libm/expf_constants.h"
#include "autograd/cpu/runtime/runtime.h"

namespace autograd::cpu {

namespace {

using ExpLoop = void (*)(const float* x, float* y, int64_t n);  // y[0..n) = expf(x[0..n))

void exp_scalar(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
}

void row_maxima_scalar(const float* x, int64_t rows, int64_t n, float* out) {
  for (int64_t r = 0; r < rows; ++r, x += n) out[r] = row_maximum(x, n);
}

#ifdef SCRATCHGRAD_HAVE_AVX512_EXP

using namespace expf_constants;  // the table and coefficients (expf_constants.h)
constexpr uint32_t kBitsOf88 = 0x42b00000;  // |x| >= 88 (in bits, sign cleared) needs a closer look
constexpr float kUnderflowBelow = -0x1.9fe368p6f;  // ≈ -103.97: below it expf(x) is +0

// Steps 1-3 on 8 doubles.
[[gnu::target("avx512f")]] inline __m256 exp8(__m512d x) {
  const __m512d kd_shifted = _mm512_fmadd_pd(_mm512_set1_pd(kInvLn2Scaled), x, _mm512_set1_pd(kShift));
  const __m512i k = _mm512_castpd_si512(kd_shifted);  // k in the low bits
  const __m512d kd = _mm512_sub_pd(kd_shifted, _mm512_set1_pd(kShift));
  const __m512d r = _mm512_fmsub_pd(_mm512_set1_pd(kInvLn2Scaled), x, kd);
  // table[k % 32]: two 16-entry lookups, chosen by bit 4 of k
  const __m512i t0 = _mm512_loadu_si512(kExp2Table), t1 = _mm512_loadu_si512(kExp2Table + 8);
  const __m512i t2 = _mm512_loadu_si512(kExp2Table + 16), t3 = _mm512_loadu_si512(kExp2Table + 24);
  const __m512i low_half = _mm512_permutex2var_epi64(t0, k, t1), high_half = _mm512_permutex2var_epi64(t2, k, t3);
  const __m512i entry = _mm512_mask_blend_epi64(_mm512_test_epi64_mask(k, _mm512_set1_epi64(16)), low_half, high_half);
  const __m512d scale = _mm512_castsi512_pd(_mm512_add_epi64(entry, _mm512_slli_epi64(k, 47)));  // 2^(k/32)
  const __m512d cubic_hi = _mm512_fmadd_pd(_mm512_set1_pd(kC0), r, _mm512_set1_pd(kC1));
  const __m512d r2 = _mm512_mul_pd(r, r);
  __m512d p = _mm512_fmadd_pd(_mm512_set1_pd(kC2), r, _mm512_set1_pd(1.0));
  p = _mm512_fmadd_pd(cubic_hi, r2, p);
  return _mm512_cvtpd_ps(_mm512_mul_pd(p, scale));
}

// Up to 16 values (the lanes in `lanes`).
[[gnu::target("avx512f")]] inline void exp16(const float* x, float* y, __mmask16 lanes) {
  const __m512 v = load_lanes(x, lanes);
  const __m512d low = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
  const __m512d high = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  __m512 e = _mm512_castpd_ps(
      _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(exp8(low))), _mm256_castps_pd(exp8(high)), 1));
  const __m512i magnitude = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff));
  const __mmask16 big = _mm512_mask_cmpge_epu32_mask(lanes, magnitude, _mm512_set1_epi32(int(kBitsOf88)));
  // Large negative x (softmax's far-off and masked scores) stay here: down to the underflow threshold the
  // library computes them with the same steps, below it (and for -inf) its answer is +0.
  const __mmask16 negative = _mm512_mask_cmp_ps_mask(big, v, _mm512_setzero_ps(), _CMP_LT_OQ);
  const __mmask16 underflow = _mm512_mask_cmp_ps_mask(big, v, _mm512_set1_ps(kUnderflowBelow), _CMP_LT_OQ);
  e = _mm512_mask_mov_ps(e, underflow, _mm512_setzero_ps());
  if (const unsigned rest = big & ~negative; rest != 0) {  // rare: x >= 88 or NaN (x may be y: use v)
    alignas(64) float in[16], out[16];
    _mm512_store_ps(in, v);
    _mm512_store_ps(out, e);
    for (unsigned left = rest; left != 0; left &= left - 1) out[__builtin_ctz(left)] = std::exp(in[__builtin_ctz(left)]);
    e = _mm512_load_ps(out);
  }
  store_lanes(y, lanes, e);
}

// 16 values of a row per instruction; lanes past the row's end read as -inf.
[[gnu::target("avx512f")]] void row_maxima_avx512(const float* x, int64_t rows, int64_t n, float* out) {
  const __m512 minus_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t r = 0; r < rows; ++r, x += n) {
    __m512 m = minus_inf;
    __mmask16 nan = 0;
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 lanes = n - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - j)) - 1);
      const __m512 v = _mm512_mask_loadu_ps(minus_inf, lanes, x + j);
      nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
      m = _mm512_max_ps(m, v);
    }
    out[r] = nan ? std::numeric_limits<float>::quiet_NaN() : _mm512_reduce_max_ps(m);
  }
}

[[gnu::target("avx512f")]] void exp_avx512(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) exp16(x + i, y + i, 0xffff);
  if (i < n) exp16(x + i, y + i, __mmask16((1u << (n - i)) - 1));
}

// ---- the same steps on CPUs with AVX2 and FMA but not AVX-512: 4 doubles per step, 8 floats per call

// Steps 1-3 on 4 doubles, with the same fused multiply-adds as exp8.
[[gnu::target("avx2,fma")]] inline __m128 exp4(__m256d x) {
  const __m256d kd_shifted = _mm256_fmadd_pd(_mm256_set1_pd(kInvLn2Scaled), x, _mm256_set1_pd(kShift));
  const __m256i k = _mm256_castpd_si256(kd_shifted);  // k in the low bits
  const __m256d kd = _mm256_sub_pd(kd_shifted, _mm256_set1_pd(kShift));
  const __m256d r = _mm256_fmsub_pd(_mm256_set1_pd(kInvLn2Scaled), x, kd);
  const __m256i entry = _mm256_i64gather_epi64(reinterpret_cast<const long long*>(kExp2Table),
                                               _mm256_and_si256(k, _mm256_set1_epi64x(31)), 8);  // table[k % 32]
  const __m256d scale = _mm256_castsi256_pd(_mm256_add_epi64(entry, _mm256_slli_epi64(k, 47)));  // 2^(k/32)
  const __m256d cubic_hi = _mm256_fmadd_pd(_mm256_set1_pd(kC0), r, _mm256_set1_pd(kC1));
  const __m256d r2 = _mm256_mul_pd(r, r);
  __m256d p = _mm256_fmadd_pd(_mm256_set1_pd(kC2), r, _mm256_set1_pd(1.0));
  p = _mm256_fmadd_pd(cubic_hi, r2, p);
  return _mm256_cvtpd_ps(_mm256_mul_pd(p, scale));
}

// 8 values (see exp16 for the large ones).
[[gnu::target("avx2,fma")]] inline __m256 exp8_floats(__m256 v) {
  __m256 e = _mm256_set_m128(exp4(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1))),
                             exp4(_mm256_cvtps_pd(_mm256_castps256_ps128(v))));
  const __m256i magnitude = _mm256_and_si256(_mm256_castps_si256(v), _mm256_set1_epi32(0x7fffffff));
  const __m256 big = _mm256_castsi256_ps(_mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(int(kBitsOf88) - 1)));
  const __m256 negative = _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LT_OQ);
  e = _mm256_andnot_ps(_mm256_cmp_ps(v, _mm256_set1_ps(kUnderflowBelow), _CMP_LT_OQ), e);  // +0 below it
  if (const int rest = _mm256_movemask_ps(_mm256_andnot_ps(negative, big)); rest != 0) {  // rare: x >= 88 or NaN
    alignas(32) float in[8], out[8];
    _mm256_store_ps(in, v);
    _mm256_store_ps(out, e);
    for (int left = rest; left != 0; left &= left - 1) out[__builtin_ctz(left)] = std::exp(in[__builtin_ctz(left)]);
    e = _mm256_load_ps(out);
  }
  return e;
}

[[gnu::target("avx2,fma")]] void exp_avx2(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp8_floats(_mm256_loadu_ps(x + i)));
  if (i == n) return;
  alignas(32) float part[8] = {};  // a last, partial vector: through a copy padded with zeros
  std::copy(x + i, x + n, part);
  _mm256_store_ps(part, exp8_floats(_mm256_load_ps(part)));
  std::copy(part, part + (n - i), y + i);
}

// 8 values of a row per instruction; lanes past the row's end read as -inf.
[[gnu::target("avx2")]] void row_maxima_avx2(const float* x, int64_t rows, int64_t n, float* out) {
  const __m256 minus_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t r = 0; r < rows; ++r, x += n) {
    __m256 m = minus_inf, nan = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
      const __m256 v = _mm256_loadu_ps(x + j);
      nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
      m = _mm256_max_ps(m, v);
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, m);
    float largest = lanes[0];
    bool any_nan = _mm256_movemask_ps(nan) != 0;
    for (int l = 1; l < 8; ++l) largest = lanes[l] > largest ? lanes[l] : largest;
    for (; j < n; ++j) {
      any_nan |= x[j] != x[j];
      largest = x[j] > largest ? x[j] : largest;
    }
    out[r] = any_nan ? std::numeric_limits<float>::quiet_NaN() : largest;
  }
}

// The start-up check: a spread of inputs over the whole fast path (every 65521st bit pattern with
// |x| < 88, every 4099th from -88 to -112), the edges around it, and the two inputs where the FMA and
// plain builds of expf differ.
bool vector_matches_library(ExpLoop vectorised) {
  std::vector<float> inputs = {0x1.04845ep+5f, -0x1.f8cbb2p+5f, 0.0f, -0.0f, 87.99999f, -87.99999f, 88.0f, -88.0f,
                               -103.0f, -103.97f, -103.98f, -104.0f, 89.0f, std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  for (uint32_t bits = 0; bits < kBitsOf88; bits += 65521) {
    inputs.push_back(compat::bit_cast<float>(bits));
    inputs.push_back(compat::bit_cast<float>(bits | 0x80000000u));
  }
  for (uint32_t bits = 0xc2b00000u; bits < 0xc2e00000u; bits += 4099) inputs.push_back(compat::bit_cast<float>(bits));
  std::vector<float> fast(inputs.size());
  vectorised(inputs.data(), fast.data(), int64_t(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i)
    if (compat::bit_cast<uint32_t>(fast[i]) != compat::bit_cast<uint32_t>(std::exp(inputs[i]))) return false;
  return true;
}

#endif

// The vector versions this CPU runs, once they have matched the library: 16 lanes, 8 lanes, or none.
struct ExpLoops {
  ExpLoop exp;
  void (*row_maxima)(const float*, int64_t, int64_t, float*);
};
ExpLoops vectorised_exp() {
#ifdef SCRATCHGRAD_HAVE_AVX512_EXP
  static const ExpLoops chosen = []() -> ExpLoops {
    const ExpLoops candidate = avx512_kernels()          ? ExpLoops{exp_avx512, row_maxima_avx512}
                               : has_avx2() && has_fma() ? ExpLoops{exp_avx2, row_maxima_avx2}
                                                         : ExpLoops{};
    return candidate.exp && vector_matches_library(candidate.exp) ? candidate : ExpLoops{};
  }();
  return chosen;
#else
  return {};
#endif
}

}  // namespace

bool exp_floats_vectorised() { return vectorised_exp().exp != nullptr; }

void row_maxima(const float* x, int64_t rows, int64_t n, float* out) {
  if (const auto loop = vectorised_exp().row_maxima) return loop(x, rows, n, out);
  row_maxima_scalar(x, rows, n, out);
}

void exp_floats(const float* x, float* y, int64_t n) {
  if (const auto loop = vectorised_exp().exp) return loop(x, y, n);
  exp_scalar(x, y, n);
}

}  // namespace autograd::cpu
