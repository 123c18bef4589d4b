// reference/gpt.cpp — the GPT's own kernels: layer normalisation, GELU, and the Adam update.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "autograd/cpu/libm/float_functions.h"  // tanh and erf of a float, the same bits on every CPU
#include "autograd/reference/kernels.h"
#include "autograd/reference/strided.h"

namespace autograd::reference {

// For each row x of [M, N]:
//   mean = Σ_k x_k / N,   var = Σ_k (x_k − mean)² / N,   rstd = 1 / √(var + eps)
//   y_k  = (x_k − mean) · rstd · w_k + b_k          (w = 1 and b = 0 when undefined)
template <typename T> void layer_norm(const Tensor& x_in, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y_out,
                const Tensor& mean_out, const Tensor& rstd_out) {
  const int64_t M = x_in.size(0), N = x_in.size(1);
  const Matrix<const T> x = matrix<const T>(x_in, {});
  const Matrix<T> y = matrix<T>(y_out, {});
  for (int64_t r = 0; r < M; ++r) {
    T sum = 0, squares = 0;
    for (int64_t k = 0; k < N; ++k) sum = sum + x(r, k);
    const T mean = sum / T(N);
    for (int64_t k = 0; k < N; ++k) squares = squares + (x(r, k) - mean) * (x(r, k) - mean);
    const T rstd = T(1) / std::sqrt(squares / T(N) + T(eps));
    for (int64_t k = 0; k < N; ++k) {
      const T w = weight.defined() ? at<T>(weight, {k}) : T(1), b = bias.defined() ? at<T>(bias, {k}) : T(0);
      y(r, k) = (x(r, k) - mean) * rstd * w + b;
    }
    at<T>(mean_out, {r}) = mean;
    at<T>(rstd_out, {r}) = rstd;
  }
}

void layer_norm(const Tensor& x_in, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y_out,
                const Tensor& mean_out, const Tensor& rstd_out) {
  floating(x_in, "layer_norm", layer_norm<float>, layer_norm<double>)(x_in, weight, bias, eps, y_out, mean_out, rstd_out);
}

// With x̂ = (x − mean) · rstd and g = ∂L/∂y, for each row:
//   dx_k = rstd · (g_k·w_k − mean_j(g_j·w_j) − x̂_k · mean_j(g_j·w_j·x̂_j))
// and over the rows: dw_k = Σ_r g_rk · x̂_rk,  db_k = Σ_r g_rk. Each is written only if defined.
template <typename T> void layer_norm_backward(const Tensor& grad_y, const Tensor& x_in, const Tensor& mean, const Tensor& rstd,
                         const Tensor& weight, const Tensor& grad_x, const Tensor& grad_weight, const Tensor& grad_bias) {
  const int64_t M = x_in.size(0), N = x_in.size(1);
  const Matrix<const T> x = matrix<const T>(x_in, {}), g = matrix<const T>(grad_y, {});
  for (int64_t r = 0; r < M; ++r) {
    const T m = at<T>(mean, {r}), s = at<T>(rstd, {r});
    auto x_hat = [&](int64_t k) { return (x(r, k) - m) * s; };
    auto gw = [&](int64_t k) { return weight.defined() ? g(r, k) * at<T>(weight, {k}) : g(r, k); };
    T mean_gw = 0, mean_gw_xhat = 0;
    for (int64_t k = 0; k < N; ++k) {
      mean_gw = mean_gw + gw(k);
      mean_gw_xhat = mean_gw_xhat + gw(k) * x_hat(k);
    }
    mean_gw = mean_gw / T(N);
    mean_gw_xhat = mean_gw_xhat / T(N);
    for (int64_t k = 0; k < N; ++k) {
      if (grad_x.defined()) at<T>(grad_x, {r, k}) = s * (gw(k) - mean_gw - x_hat(k) * mean_gw_xhat);
      if (grad_weight.defined()) at<T>(grad_weight, {k}) = at<T>(grad_weight, {k}) + g(r, k) * x_hat(k);
      if (grad_bias.defined()) at<T>(grad_bias, {k}) = at<T>(grad_bias, {k}) + g(r, k);
    }
  }
}

void layer_norm_backward(const Tensor& grad_y, const Tensor& x_in, const Tensor& mean, const Tensor& rstd,
                         const Tensor& weight, const Tensor& grad_x, const Tensor& grad_weight, const Tensor& grad_bias) {
  if (grad_weight.defined()) fill(grad_weight, 0.0);
  if (grad_bias.defined()) fill(grad_bias, 0.0);
  floating(x_in, "layer_norm backward", layer_norm_backward<float>, layer_norm_backward<double>)(grad_y, x_in, mean, rstd, weight, grad_x, grad_weight, grad_bias);
}

// exact:  gelu(x) = x · Φ(x),  Φ(x) = ½ · (1 + erf(x / √2))
// tanh:   gelu(x) = ½ · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³)))
template <typename T> void gelu(const Tensor& x, bool tanh, const Tensor& y) {
  const T sqrt_2_over_pi = T(std::sqrt(2.0 / std::numbers::pi));
  for (Index i(x.shape()); i.valid(); i.next()) {
    const T v = at<T>(x, i);
    at<T>(y, i) = tanh ? T(0.5) * v * (T(1) + cpu::exact_tanh(sqrt_2_over_pi * (v + T(0.044715) * v * v * v)))
                       : v * T(0.5) * (T(1) + cpu::exact_erf(v / std::numbers::sqrt2_v<T>));
  }
}

void gelu(const Tensor& x, bool tanh, const Tensor& y) {
  floating(x, "gelu", gelu<float>, gelu<double>)(x, tanh, y);
}

// exact:  gelu'(x) = Φ(x) + x · φ(x),  φ(x) = exp(−x²/2) / √(2π)
// tanh:   gelu'(x) = ½ · (1 + t) + ½ · x · (1 − t²) · √(2/π) · (1 + 3 · 0.044715 · x²),
//         t = tanh(√(2/π) · (x + 0.044715 · x³))
// grad_x = grad_y · gelu'(x)
template <typename T> void gelu_backward(const Tensor& grad_y, const Tensor& x, bool tanh, const Tensor& grad_x) {
  const T sqrt_2_over_pi = T(std::sqrt(2.0 / std::numbers::pi)), sqrt_2pi = T(std::sqrt(2.0 * std::numbers::pi));
  for (Index i(x.shape()); i.valid(); i.next()) {
    const T v = at<T>(x, i);
    T slope;
    if (tanh) {
      const T t = cpu::exact_tanh(sqrt_2_over_pi * (v + T(0.044715) * v * v * v));
      slope = T(0.5) * (T(1) + t) + T(0.5) * v * (T(1) - t * t) * sqrt_2_over_pi * (T(1) + T(3 * 0.044715) * v * v);
    } else {
      const T cdf = T(0.5) * (T(1) + cpu::exact_erf(v / std::numbers::sqrt2_v<T>));
      slope = cdf + v * std::exp(T(-0.5) * v * v) / sqrt_2pi;
    }
    at<T>(grad_x, i) = at<T>(grad_y, i) * slope;
  }
}

void gelu_backward(const Tensor& grad_y, const Tensor& x, bool tanh, const Tensor& grad_x) {
  floating(x, "gelu backward", gelu_backward<float>, gelu_backward<double>)(grad_y, x, tanh, grad_x);
}

// One Adam step, element by element (t = step, counted from 1):
//   g ← g · grad_scale                           clip_grad_norm_'s coefficient, fused into the step (else 1)
//   θ ← θ · (1 − lr·wd)                          AdamW (decoupled weight decay) only
//   g ← g + wd · θ                               Adam with weight decay only (L2)
//   m ← β1·m + (1 − β1)·g                        v ← β2·v + (1 − β2)·g²
//   v_max ← max(v_max, v), and v_max replaces v below          amsgrad only
//   θ ← θ − lr / (1 − β1ᵗ) · m / (√v / √(1 − β2ᵗ) + eps)
template <typename T> void adam_update(const AdamStep& s, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                 const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq) {
  const T step_size = T(s.lr / (1 - std::pow(s.beta1, double(s.step))));
  const T bias_correction2_sqrt = T(std::sqrt(1 - std::pow(s.beta2, double(s.step))));
  const T beta1 = T(s.beta1), beta2 = T(s.beta2), eps = T(s.eps), wd = T(s.weight_decay);
  for (Index i(param.shape()); i.valid(); i.next()) {
    T& theta = at<T>(param, i);
    T& m = at<T>(exp_avg, i);
    T& v = at<T>(exp_avg_sq, i);
    T g = at<T>(grad, i) * T(s.grad_scale);
    if (s.decoupled_weight_decay) theta = theta * T(1 - s.lr * s.weight_decay);
    else if (s.weight_decay != 0) g = g + wd * theta;
    m = beta1 * m + T(1 - s.beta1) * g;
    v = beta2 * v + T(1 - s.beta2) * g * g;
    T second = v;
    if (s.amsgrad) second = at<T>(max_exp_avg_sq, i) = std::max(at<T>(max_exp_avg_sq, i), v);
    theta = theta - step_size * m / (std::sqrt(second) / bias_correction2_sqrt + eps);
  }
}

void adam_update(const AdamStep& s, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                 const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq) {
  floating(param, "adam", adam_update<float>, adam_update<double>)(s, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq);
}

}  // namespace autograd::reference
