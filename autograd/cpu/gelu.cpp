// cpu/gelu.cpp — GELU and its derivative, element by element with PyTorch 1.13's float formulas
// (aten/src/ATen/native/cpu/Activation.cpp): the constants rounded once to T, every operation rounded,
// and glibc's tanhf/erff/expf (std::tanh/erf/exp on a float) for the transcendental parts.
#include <cmath>

#include "autograd/cpu/kernels.h"
#include "autograd/cpu/loops.h"

namespace autograd::cpu {

namespace {

template <typename T> struct GeluConstants {
  static constexpr T kAlpha = T(M_SQRT1_2);                       // 1/√2
  static constexpr T kBeta = T(M_SQRT2 * M_2_SQRTPI * 0.5);       // √(2/π)
  static constexpr T kKappa = T(0.044715);
  static constexpr T kBetaErf = T(M_2_SQRTPI * M_SQRT1_2 * 0.5);  // 1/√(2π)
};

// tanh form: ½x·(1 + tanh(√(2/π)·(x + κx³)))
template <typename T> T gelu_tanh(T x) {
  using K = GeluConstants<T>;
  const T cube = (x * x) * x;
  const T inner = K::kBeta * (x + K::kKappa * cube);
  return (T(0.5) * x) * (T(1) + std::tanh(inner));
}

// d/dx of the tanh form = ½(1 + t) + ½x·(1 − t²)·√(2/π)·(1 + 3κx²), t = tanh(inner)
template <typename T> T gelu_tanh_grad(T dy, T x) {
  using K = GeluConstants<T>;
  const T x_sq = x * x;
  const T inner = K::kBeta * (x + K::kKappa * (x_sq * x));
  const T t = std::tanh(inner);
  const T left = T(0.5) * x, right = T(1) + t;
  const T left_derivative = T(0.5) * right;
  const T tanh_derivative = T(1) - t * t;
  const T inner_derivative = K::kBeta * (T(1) + (T(3) * K::kKappa) * x_sq);
  const T right_derivative = (left * tanh_derivative) * inner_derivative;
  return dy * (left_derivative + right_derivative);
}

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

}  // namespace

void gelu(const Tensor& x, bool tanh, const Tensor& y) {
  dispatch_floating(x.dtype(), "gelu", [&](auto tag) {
    using T = decltype(tag);
    if (tanh) map1<T, T>(x, y, [](T v) { return gelu_tanh(v); });
    else map1<T, T>(x, y, [](T v) { return gelu_erf(v); });
  });
}

void gelu_backward(const Tensor& grad_y, const Tensor& x, bool tanh, const Tensor& grad_x) {
  dispatch_floating(x.dtype(), "gelu backward", [&](auto tag) {
    using T = decltype(tag);
    if (tanh) map2<T, T>(grad_y, x, grad_x, [](T dy, T v) { return gelu_tanh_grad(dy, v); });
    else map2<T, T>(grad_y, x, grad_x, [](T dy, T v) { return gelu_erf_grad(dy, v); });
  });
}

}  // namespace autograd::cpu
