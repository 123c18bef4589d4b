// cpu/kernels/gelu.cpp — GELU and its derivative, element by element with PyTorch 1.13's float formulas
// (aten/src/ATen/native/cpu/Activation.cpp): the constants rounded once to T, every operation rounded,
// and x86-64 glibc's tanhf/erff/expf for the transcendental parts (tanh and erf of a float: our own copies,
// float_functions.h, the same bits on every CPU; std::exp). Contiguous tensors take the tanh form a block at
// a time, the block's tanhs 16 at a time (tanh_floats, same bits).
//
// In fast numerics (numerics.h) the tanh form, the GPT's, runs through one exp of our own instead of tanhf,
// 16 lanes at a time on AVX-512 and 8 on AVX2: see "fast numerics" below.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's AVX-512 headers (see exp_floats.cpp)
#include <immintrin.h>
#endif

#include "autograd/compat.h"
#include "autograd/cpu/kernels.h"
#include "autograd/cpu/kernels/lanes.h"
#include "autograd/cpu/kernels/loops.h"
#include "autograd/cpu/runtime/runtime.h"
#include "autograd/cpu/libm/float_functions.h"
#include "autograd/cpu/libm/tanh_floats.h"
#include "autograd/numerics.h"

namespace autograd::cpu {

namespace {

template <typename T> struct GeluConstants {
  static constexpr T kAlpha = T(M_SQRT1_2);                       // 1/√2
  static constexpr T kBeta = T(M_SQRT2 * M_2_SQRTPI * 0.5);       // √(2/π)
  static constexpr T kKappa = T(0.044715);
  static constexpr T kBetaErf = T(M_2_SQRTPI * M_SQRT1_2 * 0.5);  // 1/√(2π)
};

// tanh form: ½x·(1 + tanh(u)), u = √(2/π)·(x + κx³)
template <typename T> T tanh_argument(T x) {
  using K = GeluConstants<T>;
  return K::kBeta * (x + K::kKappa * ((x * x) * x));
}

template <typename T> T gelu_tanh_given(T x, T t) { return (T(0.5) * x) * (T(1) + t); }  // t = tanh(u)

// d/dx of the tanh form = ½(1 + t) + ½x·(1 − t²)·√(2/π)·(1 + 3κx²)
template <typename T> T gelu_tanh_grad_given(T dy, T x, T t) {
  using K = GeluConstants<T>;
  const T left = T(0.5) * x, right = T(1) + t;
  const T left_derivative = T(0.5) * right;
  const T tanh_derivative = T(1) - t * t;
  const T inner_derivative = K::kBeta * (T(1) + (T(3) * K::kKappa) * (x * x));
  const T right_derivative = (left * tanh_derivative) * inner_derivative;
  return dy * (left_derivative + right_derivative);
}

template <typename T> T gelu_tanh(T x) { return gelu_tanh_given(x, exact_tanh(tanh_argument(x))); }
template <typename T> T gelu_tanh_grad(T dy, T x) { return gelu_tanh_grad_given(dy, x, exact_tanh(tanh_argument(x))); }

// exact form: x·Φ(x) = ½x·(1 + erf(x/√2))
template <typename T> T gelu_erf(T x) {
  using K = GeluConstants<T>;
  return (x * T(0.5)) * (T(1) + exact_erf(x * K::kAlpha));
}

// d/dx = Φ(x) + x·φ(x), φ(x) = e^(−x²/2)/√(2π)
template <typename T> T gelu_erf_grad(T dy, T x) {
  using K = GeluConstants<T>;
  const T cdf = T(0.5) * (T(1) + exact_erf(x * K::kAlpha));
  const T pdf = K::kBetaErf * std::exp((x * x) * T(-0.5));
  return dy * (cdf + x * pdf);
}

// ---- fast numerics: the tanh form through one exp
// With u = √(2/π)·(x + κx³) and σ the logistic function, 1 + tanh(u) = 2σ(2u), so
//     ½x·(1 + tanh(u)) = x·σ(2u) = x·s,   s = 1 / (1 + e),  e = e^(−2u)
// and its derivative, with 1 − s = e·s,
//     d/dx = s + 2x·√(2/π)·(1 + 3κx²)·s·(e·s).
// One exp per element instead of a tanhf, and no cancellation for large negative x, where 1 + tanh(u)
// would lose digits. Agrees with the exact form to a few roundings (tests/test_fast_numerics.cpp).
//
// −2u is clamped to [−86, 86] before the exp, so that e, s and e·s are normal floats; past the clamp the
// answer is set as the limit: e = 0 (x large and positive: gelu(x) = x) or s = 0 (x large and negative:
// gelu(x) = −0, derivative 0). NaN passes through. For floats the exp is our own (fast_exp_clamped, a few
// fused multiply-adds); the same steps run 16 lanes at a time in gelu_fast_avx512 below (8 in gelu_fast_avx2),
// with the same bits.
constexpr float kExpClamp = 86.0f;

template <typename T> T minus_two_u(T x) {  // −2u = x·(−2√(2/π) − 2√(2/π)κ·x²)
  using K = GeluConstants<T>;
  return x * std::fma(x * x, T(-2) * K::kBeta * K::kKappa, T(-2) * K::kBeta);
}

// e^v for v in [−86, 86]: v = k·ln 2 + r with k the nearest integer to v/ln 2 and |r| ≤ ½ ln 2, e^r by a
// degree-6 polynomial, and 2^k written straight into a float's exponent field. The polynomial is the
// minimax fit of e^r on [−½ ln 2, ½ ln 2] in relative error (1.9e−9, found by iteratively reweighted least
// squares in float64, coefficients rounded to float); in float arithmetic the whole exp is within 7e−8
// of e^v. ln 2 is one float: the error it leaves in r, k·2e−9, is far below the rounding of v itself.
struct FastExp {
  static constexpr float kLog2e = 1.44269504088896341f;
  static constexpr float kShift = 12582912.0f;  // 1.5·2²³: adding it rounds to an integer, kept in the low bits
  static constexpr float kLn2 = 0.693147182464599609375f;
  static constexpr float kPoly[7] = {1.0f, 1.0f, 0.49999991059303284f, 0.16666419804096222f, 0.04166822507977486f,
                                     0.008374814875423908f, 0.0013836828293278813f};
};

inline float fast_exp_clamped(float v) {
  using E = FastExp;
  const float shifted = v * E::kLog2e + E::kShift;  // two roundings (no FMA): the same in every build
  const float k = shifted - E::kShift;
  const float r = std::fma(k, -E::kLn2, v);
  float p = E::kPoly[6];
  for (int i = 5; i >= 0; --i) p = std::fma(p, r, E::kPoly[i]);
  const int32_t exponent = compat::bit_cast<int32_t>(shifted) - compat::bit_cast<int32_t>(E::kShift) + 127;
  return p * compat::bit_cast<float>(exponent << 23);  // 2^k: k in [−125, 125], a normal float
}
inline double fast_exp_clamped(double v) { return std::exp(v); }

// s = σ(2u) and e = e^(−2u) for one x, with the limits past the clamp.
template <typename T> std::pair<T, T> fast_sigmoid_and_exp(T x) {
  const T m = minus_two_u(x);
  const T clamped = m < T(-kExpClamp) ? T(-kExpClamp) : (m > T(kExpClamp) ? T(kExpClamp) : m);
  const T e = m < T(-kExpClamp) ? T(0) : fast_exp_clamped(clamped);
  const T s = m > T(kExpClamp) ? T(0) : T(1) / (T(1) + e);
  return {s, e};
}

template <typename T> T gelu_tanh_fast(T x) { return x * fast_sigmoid_and_exp(x).first; }

template <typename T> T gelu_tanh_fast_grad(T dy, T x) {
  using K = GeluConstants<T>;
  const auto [s, e] = fast_sigmoid_and_exp(x);
  const T du = std::fma(x * x, T(3) * K::kBeta * K::kKappa, K::kBeta);  // √(2/π)·(1 + 3κx²)
  return dy * std::fma(x + x, du * (s * (e * s)), s);
}

#if defined(__x86_64__) && defined(__GNUC__)
// The float steps above, 16 lanes at a time (the same operations in the same order: the same bits).
[[gnu::target("avx512f")]] inline __m512 gelu_fast16(const float* dy, __m512 v, __mmask16 lanes) {
  using E = FastExp;
  using K = GeluConstants<float>;
  const __m512 lo = _mm512_set1_ps(-kExpClamp), hi = _mm512_set1_ps(kExpClamp), one = _mm512_set1_ps(1.0f);
  const __m512 v2 = _mm512_mul_ps(v, v);
  const __m512 m = _mm512_mul_ps(v, _mm512_fmadd_ps(v2, _mm512_set1_ps(-2.0f * K::kBeta * K::kKappa),
                                                    _mm512_set1_ps(-2.0f * K::kBeta)));
  const __mmask16 below = _mm512_cmp_ps_mask(m, lo, _CMP_LT_OQ), above = _mm512_cmp_ps_mask(m, hi, _CMP_GT_OQ);
  const __m512 c = _mm512_mask_mov_ps(_mm512_mask_mov_ps(m, below, lo), above, hi);
  const __m512 shifted = _mm512_add_ps(_mm512_mul_ps(c, _mm512_set1_ps(E::kLog2e)), _mm512_set1_ps(E::kShift));
  const __m512 k = _mm512_sub_ps(shifted, _mm512_set1_ps(E::kShift));
  const __m512 r = _mm512_fmadd_ps(k, _mm512_set1_ps(-E::kLn2), c);
  __m512 p = _mm512_set1_ps(E::kPoly[6]);
  for (int t = 5; t >= 0; --t) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(E::kPoly[t]));
  const __m512i exponent = _mm512_add_epi32(
      _mm512_sub_epi32(_mm512_castps_si512(shifted), _mm512_castps_si512(_mm512_set1_ps(E::kShift))), _mm512_set1_epi32(127));
  __m512 e = _mm512_mul_ps(p, _mm512_castsi512_ps(_mm512_slli_epi32(exponent, 23)));
  e = _mm512_mask_mov_ps(e, below, _mm512_setzero_ps());
  const __m512 s = _mm512_mask_mov_ps(_mm512_div_ps(one, _mm512_add_ps(one, e)), above, _mm512_setzero_ps());
  if (!dy) return _mm512_mul_ps(v, s);
  const __m512 du = _mm512_fmadd_ps(v2, _mm512_set1_ps(3.0f * K::kBeta * K::kKappa), _mm512_set1_ps(K::kBeta));
  const __m512 slope = _mm512_mul_ps(du, _mm512_mul_ps(s, _mm512_mul_ps(e, s)));
  return _mm512_mul_ps(load_lanes(dy, lanes), _mm512_fmadd_ps(_mm512_add_ps(v, v), slope, s));
}

// The same steps 8 lanes at a time, for CPUs with AVX2 and FMA but not AVX-512 (AMD Zen 3, Intel before
// Skylake-SP): without it they took the element-by-element loop above, whose std::fma is a call into the C
// library when the file is compiled for plain x86-64 — GELU was over half of a GPT step there.
[[gnu::target("avx2,fma")]] inline __m256 gelu_fast8(const float* dy, __m256 v) {
  using E = FastExp;
  using K = GeluConstants<float>;
  const __m256 lo = _mm256_set1_ps(-kExpClamp), hi = _mm256_set1_ps(kExpClamp), one = _mm256_set1_ps(1.0f);
  const __m256 v2 = _mm256_mul_ps(v, v);
  const __m256 m = _mm256_mul_ps(v, _mm256_fmadd_ps(v2, _mm256_set1_ps(-2.0f * K::kBeta * K::kKappa),
                                                    _mm256_set1_ps(-2.0f * K::kBeta)));
  const __m256 below = _mm256_cmp_ps(m, lo, _CMP_LT_OQ), above = _mm256_cmp_ps(m, hi, _CMP_GT_OQ);
  const __m256 c = _mm256_blendv_ps(_mm256_blendv_ps(m, lo, below), hi, above);
  const __m256 shifted = _mm256_add_ps(_mm256_mul_ps(c, _mm256_set1_ps(E::kLog2e)), _mm256_set1_ps(E::kShift));
  const __m256 k = _mm256_sub_ps(shifted, _mm256_set1_ps(E::kShift));
  const __m256 r = _mm256_fmadd_ps(k, _mm256_set1_ps(-E::kLn2), c);
  __m256 p = _mm256_set1_ps(E::kPoly[6]);
  for (int t = 5; t >= 0; --t) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(E::kPoly[t]));
  const __m256i k_bits = _mm256_sub_epi32(_mm256_castps_si256(shifted), _mm256_castps_si256(_mm256_set1_ps(E::kShift)));
  const __m256i exponent = _mm256_add_epi32(k_bits, _mm256_set1_epi32(127));
  const __m256 e = _mm256_andnot_ps(below, _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(exponent, 23))));
  const __m256 s = _mm256_andnot_ps(above, _mm256_div_ps(one, _mm256_add_ps(one, e)));
  if (!dy) return _mm256_mul_ps(v, s);
  const __m256 du = _mm256_fmadd_ps(v2, _mm256_set1_ps(3.0f * K::kBeta * K::kKappa), _mm256_set1_ps(K::kBeta));
  const __m256 slope = _mm256_mul_ps(du, _mm256_mul_ps(s, _mm256_mul_ps(e, s)));
  return _mm256_mul_ps(_mm256_loadu_ps(dy), _mm256_fmadd_ps(_mm256_add_ps(v, v), slope, s));
}

// dy null: forward (out = gelu(x)); else backward (out = dy·gelu'(x)). A last, partial vector goes through
// 8-float copies padded with zeros.
[[gnu::target("avx2,fma")]] void gelu_fast_avx2(const float* dy, const float* x, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, gelu_fast8(dy ? dy + i : nullptr, _mm256_loadu_ps(x + i)));
  if (i == n) return;
  float xs[8] = {}, dys[8] = {}, ys[8];
  std::copy(x + i, x + n, xs);
  if (dy) std::copy(dy + i, dy + n, dys);
  _mm256_storeu_ps(ys, gelu_fast8(dy ? dys : nullptr, _mm256_loadu_ps(xs)));
  std::copy(ys, ys + (n - i), out + i);
}

// dy null: forward (out = gelu(x)); else backward (out = dy·gelu'(x)).
[[gnu::target("avx512f")]] void gelu_fast_avx512(const float* dy, const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 lanes = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    store_lanes(out + i, lanes, gelu_fast16(dy ? dy + i : nullptr, load_lanes(x + i, lanes), lanes));
  }
}
#endif

// Contiguous tensors only (the ops' outputs are; others take the element-by-element loops), a block of
// kGeluBlock elements at a time: in exact numerics the block's tanhs in one call, the rest in loops the
// compiler vectorises. Blocks are split over threads when there are enough; no element depends on
// another, so threads change no bit.
constexpr int64_t kGeluBlock = 256;

template <typename Block> void for_each_block(int64_t n, Block block) {
  const int64_t blocks = (n + kGeluBlock - 1) / kGeluBlock;
  parallel_ranges(blocks, kGeluBlock, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) block(b * kGeluBlock, std::min(kGeluBlock, n - b * kGeluBlock));
  });
}

// ---- exact numerics, contiguous floats: the same formulas with the block's tanhs in one call
// (tanh_floats: tanhf's bits, 16 at a time), so the same bits as the element-by-element loops.
template <typename T> void tanh_in_place(T* v, int64_t n) {
  if constexpr (std::is_same_v<T, float>) tanh_floats(v, v, n);
  else for (int64_t i = 0; i < n; ++i) v[i] = std::tanh(v[i]);
}

// The tanh form a block at a time: out[j] = combine(j, x[j], v[j]) with v = the block's u values
// (inner) passed through one call (whole_block: tanh_floats).
template <typename T, typename Inner, typename WholeBlock, typename Combine>
void gelu_tanh_blocks(const T* x, T* out, int64_t n, Inner inner, WholeBlock whole_block, Combine combine) {
  for_each_block(n, [&](int64_t i0, int64_t m) {
    T v[kGeluBlock];
    contiguous_loop(m, [&](int64_t i) { v[i] = inner(x[i0 + i]); });
    whole_block(v, m);
    contiguous_loop(m, [&](int64_t i) { out[i0 + i] = combine(i0 + i, x[i0 + i], v[i]); });
  });
}

// Forward (dy null) or backward of the tanh form, contiguous, exact numerics (tanh(u)).
template <typename T> void gelu_tanh_contiguous(const T* dy, const T* x, T* out, int64_t n) {
  auto u = [](T v) { return tanh_argument(v); };
  if (!dy) gelu_tanh_blocks(x, out, n, u, tanh_in_place<T>, [](int64_t, T v, T t) { return gelu_tanh_given(v, t); });
  else gelu_tanh_blocks(x, out, n, u, tanh_in_place<T>,
                        [dy](int64_t j, T v, T t) { return gelu_tanh_grad_given(dy[j], v, t); });
}

// The same in fast numerics: a block at a time through gelu_fast_avx512 where the CPU has AVX-512, through
// gelu_fast_avx2 where it has AVX2 and FMA, else element by element (the same bits).
template <typename T> void gelu_tanh_fast_contiguous(const T* dy, const T* x, T* out, int64_t n) {
  for_each_block(n, [&](int64_t i0, int64_t m) {
#if defined(__x86_64__) && defined(__GNUC__)
    if constexpr (std::is_same_v<T, float>) {
      if (avx512_kernels()) return gelu_fast_avx512(dy ? dy + i0 : nullptr, x + i0, out + i0, m);
      if (has_avx2() && has_fma()) return gelu_fast_avx2(dy ? dy + i0 : nullptr, x + i0, out + i0, m);
    }
#endif
    if (dy) for (int64_t i = i0; i < i0 + m; ++i) out[i] = gelu_tanh_fast_grad(dy[i], x[i]);
    else for (int64_t i = i0; i < i0 + m; ++i) out[i] = gelu_tanh_fast(x[i]);
  });
}

bool all_contiguous(std::initializer_list<const Tensor*> tensors) {
  return std::all_of(tensors.begin(), tensors.end(), [](const Tensor* t) { return t->is_contiguous(); });
}

}  // namespace

void gelu(const Tensor& x, bool tanh, const Tensor& y) {
  dispatch_floating(x.dtype(), "gelu", [&](auto tag) {
    using T = decltype(tag);
    const bool fast = numerics() == Numerics::fast, contiguous = all_contiguous({&x, &y});
    if (tanh && fast && contiguous) gelu_tanh_fast_contiguous<T>(nullptr, ptr<T>(x), ptr<T>(y), x.numel());
    else if (tanh && fast) map1<T, T>(x, y, [](T v) { return gelu_tanh_fast(v); });
    else if (tanh && contiguous) gelu_tanh_contiguous<T>(nullptr, ptr<T>(x), ptr<T>(y), x.numel());
    else if (tanh) map1<T, T>(x, y, [](T v) { return gelu_tanh(v); });
    else map1<T, T>(x, y, [](T v) { return gelu_erf(v); });
  });
}

void gelu_backward(const Tensor& grad_y, const Tensor& x, bool tanh, const Tensor& grad_x) {
  dispatch_floating(x.dtype(), "gelu backward", [&](auto tag) {
    using T = decltype(tag);
    const bool fast = numerics() == Numerics::fast, contiguous = all_contiguous({&grad_y, &x, &grad_x});
    if (tanh && fast && contiguous) gelu_tanh_fast_contiguous(ptr<T>(grad_y), ptr<T>(x), ptr<T>(grad_x), x.numel());
    else if (tanh && fast) map2<T, T>(grad_y, x, grad_x, [](T dy, T v) { return gelu_tanh_fast_grad(dy, v); });
    else if (tanh && contiguous) gelu_tanh_contiguous(ptr<T>(grad_y), ptr<T>(x), ptr<T>(grad_x), x.numel());
    else if (tanh) map2<T, T>(grad_y, x, grad_x, [](T dy, T v) { return gelu_tanh_grad(dy, v); });
    else map2<T, T>(grad_y, x, grad_x, [](T dy, T v) { return gelu_erf_grad(dy, v); });
  });
}

}  // namespace autograd::cpu
