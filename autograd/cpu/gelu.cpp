// cpu/gelu.cpp — GELU and its derivative, element by element with PyTorch 1.13's float formulas
// (aten/src/ATen/native/cpu/Activation.cpp): the constants rounded once to T, every operation rounded,
// and glibc's tanhf/erff/expf (std::tanh/erf/exp on a float) for the transcendental parts. Contiguous
// tensors take the tanh form a block at a time, the block's tanhs 16 at a time (tanh_floats, same bits).
//
// In fast numerics (numerics.h) the tanh form, the GPT's, runs through one vectorised exp instead of tanhf:
// see "fast numerics" below.
#include <algorithm>
#include <cmath>

#include "autograd/cpu/exp_floats.h"
#include "autograd/cpu/kernels.h"
#include "autograd/cpu/loops.h"
#include "autograd/cpu/tanh_floats.h"
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

template <typename T> T gelu_tanh(T x) { return gelu_tanh_given(x, std::tanh(tanh_argument(x))); }
template <typename T> T gelu_tanh_grad(T dy, T x) { return gelu_tanh_grad_given(dy, x, std::tanh(tanh_argument(x))); }

// exact form: x·Φ(x) = ½x·(1 + erf(x/√2))
template <typename T> T gelu_erf(T x) {
  using K = GeluConstants<T>;
  return (x * T(0.5)) * (T(1) + std::erf(x * K::kAlpha));
}

// d/dx = Φ(x) + x·φ(x), φ(x) = e^(−x²/2)/√(2π)
template <typename T> T gelu_erf_grad(T dy, T x) {
  using K = GeluConstants<T>;
  const T cdf = T(0.5) * (T(1) + std::erf(x * K::kAlpha));
  const T pdf = K::kBetaErf * std::exp((x * x) * T(-0.5));
  return dy * (cdf + x * pdf);
}

// ---- fast numerics: the tanh form through one exp
// With u = √(2/π)·(x + κx³) and σ the logistic function, 1 + tanh(u) = 2σ(2u), so
//     ½x·(1 + tanh(u)) = x·σ(2u) = x / (1 + e^(−2u))
// and its derivative, with s = σ(2u) and 1 − s = e^(−2u)·s,
//     d/dx = s + 2x·s·(1 − s)·√(2/π)·(1 + 3κx²).
// One exp per element, 16 at a time (exp_floats), instead of a tanhf; and no cancellation for large
// negative x, where 1 + tanh(u) would lose digits. Agrees with the exact form to a few roundings.
template <typename T> T minus_two_u(T x) { return T(-2) * tanh_argument(x); }

template <typename T> void exp_in_place(T* v, int64_t n) {
  if constexpr (std::is_same_v<T, float>) exp_floats(v, v, n);
  else for (int64_t i = 0; i < n; ++i) v[i] = std::exp(v[i]);
}

template <typename T> T gelu_tanh_fast_grad(T dy, T x, T e) {  // e = e^(−2u)
  using K = GeluConstants<T>;
  const T s = T(1) / (T(1) + e);
  const T du = K::kBeta * (T(1) + (T(3) * K::kKappa) * (x * x));
  return dy * (s + T(2) * x * (s * (e * s)) * du);
}

// Contiguous tensors only (the ops' outputs are; others take the element-by-element loops), a block of
// kGeluBlock elements at a time: the block's exps (fast) or tanhs (exact) in one call, the rest in loops
// the compiler vectorises. Blocks are split over threads when there are enough; no element depends on
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
// (inner) passed through one call (whole_block: tanh_floats, or exp_floats in fast numerics).
template <typename T, typename Inner, typename WholeBlock, typename Combine>
void gelu_tanh_blocks(const T* x, T* out, int64_t n, Inner inner, WholeBlock whole_block, Combine combine) {
  for_each_block(n, [&](int64_t i0, int64_t m) {
    T v[kGeluBlock];
    contiguous_loop(m, [&](int64_t i) { v[i] = inner(x[i0 + i]); });
    whole_block(v, m);
    contiguous_loop(m, [&](int64_t i) { out[i0 + i] = combine(i0 + i, x[i0 + i], v[i]); });
  });
}

// Forward (dy null) or backward of the tanh form, contiguous: exact (tanh(u)) or fast (e^(−2u)).
template <typename T> void gelu_tanh_contiguous(const T* dy, const T* x, T* out, int64_t n, bool fast) {
  auto u = [](T v) { return tanh_argument(v); };
  auto minus_2u = [](T v) { return minus_two_u(v); };
  if (fast && !dy) gelu_tanh_blocks(x, out, n, minus_2u, exp_in_place<T>, [](int64_t, T v, T e) { return v / (T(1) + e); });
  else if (fast) gelu_tanh_blocks(x, out, n, minus_2u, exp_in_place<T>,
                                  [dy](int64_t j, T v, T e) { return gelu_tanh_fast_grad(dy[j], v, e); });
  else if (!dy) gelu_tanh_blocks(x, out, n, u, tanh_in_place<T>, [](int64_t, T v, T t) { return gelu_tanh_given(v, t); });
  else gelu_tanh_blocks(x, out, n, u, tanh_in_place<T>,
                        [dy](int64_t j, T v, T t) { return gelu_tanh_grad_given(dy[j], v, t); });
}

bool all_contiguous(std::initializer_list<const Tensor*> tensors) {
  return std::all_of(tensors.begin(), tensors.end(), [](const Tensor* t) { return t->is_contiguous(); });
}

}  // namespace

void gelu(const Tensor& x, bool tanh, const Tensor& y) {
  dispatch_floating(x.dtype(), "gelu", [&](auto tag) {
    using T = decltype(tag);
    if (tanh && all_contiguous({&x, &y}))
      gelu_tanh_contiguous<T>(nullptr, ptr<T>(x), ptr<T>(y), x.numel(), numerics() == Numerics::fast);
    else if (tanh) map1<T, T>(x, y, [](T v) { return gelu_tanh(v); });
    else map1<T, T>(x, y, [](T v) { return gelu_erf(v); });
  });
}

void gelu_backward(const Tensor& grad_y, const Tensor& x, bool tanh, const Tensor& grad_x) {
  dispatch_floating(x.dtype(), "gelu backward", [&](auto tag) {
    using T = decltype(tag);
    if (tanh && all_contiguous({&grad_y, &x, &grad_x}))
      gelu_tanh_contiguous(ptr<T>(grad_y), ptr<T>(x), ptr<T>(grad_x), x.numel(), numerics() == Numerics::fast);
    else if (tanh) map2<T, T>(grad_y, x, grad_x, [](T dy, T v) { return gelu_tanh_grad(dy, v); });
    else map2<T, T>(grad_y, x, grad_x, [](T dy, T v) { return gelu_erf_grad(dy, v); });
  });
}

}  // namespace autograd::cpu
