// reference/llama.cpp — the Llama family's own kernels: SiLU, RMS normalisation and the rotary embedding.
#include <cmath>

#include "autograd/reference/kernels.h"
#include "autograd/reference/strided.h"

namespace autograd::reference {

// silu(x) = x · σ(x),  σ(x) = 1 / (1 + exp(−x))
template <typename T> void silu(const Tensor& x, const Tensor& y) {
  for (Index i(x.shape()); i.valid(); i.next()) {
    const T v = at<T>(x, i);
    at<T>(y, i) = v / (T(1) + std::exp(-v));
  }
}

void silu(const Tensor& x, const Tensor& y) { floating(x, "silu", silu<float>, silu<double>)(x, y); }

// silu'(x) = σ(x) + x · σ(x) · (1 − σ(x)) = σ(x) · (1 + x · (1 − σ(x)))
// grad_x = grad_y · silu'(x)
template <typename T> void silu_backward(const Tensor& grad_y, const Tensor& x, const Tensor& grad_x) {
  for (Index i(x.shape()); i.valid(); i.next()) {
    const T v = at<T>(x, i);
    const T sigmoid = T(1) / (T(1) + std::exp(-v));
    at<T>(grad_x, i) = at<T>(grad_y, i) * sigmoid * (T(1) + v * (T(1) - sigmoid));
  }
}

void silu_backward(const Tensor& grad_y, const Tensor& x, const Tensor& grad_x) {
  floating(x, "silu backward", silu_backward<float>, silu_backward<double>)(grad_y, x, grad_x);
}

// For each row x of [M, N]:
//   rstd = 1 / √(Σ_k x_k² / N + eps),   y_k = w_k · (x_k · rstd)          (w = 1 when undefined)
template <typename T>
void rms_norm(const Tensor& x_in, const Tensor& weight, double eps, const Tensor& y_out, const Tensor& rstd_out) {
  const int64_t M = x_in.size(0), N = x_in.size(1);
  const Matrix<const T> x = matrix<const T>(x_in, {});
  const Matrix<T> y = matrix<T>(y_out, {});
  for (int64_t r = 0; r < M; ++r) {
    T squares = 0;
    for (int64_t k = 0; k < N; ++k) squares = squares + x(r, k) * x(r, k);
    const T rstd = T(1) / std::sqrt(squares / T(N) + T(eps));
    for (int64_t k = 0; k < N; ++k) {
      const T w = weight.defined() ? at<T>(weight, {k}) : T(1);
      y(r, k) = w * (x(r, k) * rstd);
    }
    at<T>(rstd_out, {r}) = rstd;
  }
}

void rms_norm(const Tensor& x, const Tensor& weight, double eps, const Tensor& y, const Tensor& rstd) {
  floating(x, "rms_norm", rms_norm<float>, rms_norm<double>)(x, weight, eps, y, rstd);
}

// With x̂ = x · rstd and g = ∂L/∂y, for each row (rstd = (mean(x²) + eps)^(−½), so ∂rstd/∂x_k = −rstd³·x_k/N):
//   dx_k = rstd · (g_k·w_k) − x_k · rstd³ · Σ_j (g_j·w_j · x_j) / N
// and over the rows: dw_k = Σ_r g_rk · x̂_rk. Each is written only if defined.
template <typename T>
void rms_norm_backward(const Tensor& grad_y, const Tensor& x_in, const Tensor& rstd, const Tensor& weight,
                       const Tensor& grad_x, const Tensor& grad_weight) {
  const int64_t M = x_in.size(0), N = x_in.size(1);
  const Matrix<const T> x = matrix<const T>(x_in, {}), g = matrix<const T>(grad_y, {});
  for (int64_t r = 0; r < M; ++r) {
    const T s = at<T>(rstd, {r});
    auto gw = [&](int64_t k) { return weight.defined() ? g(r, k) * at<T>(weight, {k}) : g(r, k); };
    T gw_x = 0;
    for (int64_t k = 0; k < N; ++k) gw_x = gw_x + gw(k) * x(r, k);
    for (int64_t k = 0; k < N; ++k) {
      if (grad_x.defined()) at<T>(grad_x, {r, k}) = s * gw(k) - x(r, k) * s * s * s * gw_x / T(N);
      if (grad_weight.defined()) at<T>(grad_weight, {k}) = at<T>(grad_weight, {k}) + g(r, k) * x(r, k) * s;
    }
  }
}

void rms_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& rstd, const Tensor& weight,
                       const Tensor& grad_x, const Tensor& grad_weight) {
  if (grad_weight.defined()) fill(grad_weight, 0.0);
  floating(x, "rms_norm backward", rms_norm_backward<float>, rms_norm_backward<double>)(grad_y, x, rstd, weight,
                                                                                          grad_x, grad_weight);
}

// Each pair (x_j, x_{j+h}) of x[n, t, :] (h = d/2) turned by the angle whose cosine and sine are
// c = cos[t, j] and s = sin[t, j] (the opposite angle when `inverse`: s → −s):
//   out_j = x_j · c − x_{j+h} · s,   out_{j+h} = x_{j+h} · c + x_j · s
template <typename T>
void rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse, const Tensor& out) {
  const int64_t h = x.size(2) / 2;
  for (Index i(leading(x, 1)); i.valid(); i.next()) {  // every (n, t)
    const int64_t n = i[0], t = i[1];
    for (int64_t j = 0; j < h; ++j) {
      const T c = at<T>(cos, {t, j}), s = inverse ? -at<T>(sin, {t, j}) : at<T>(sin, {t, j});
      const T x1 = at<T>(x, {n, t, j}), x2 = at<T>(x, {n, t, j + h});
      at<T>(out, {n, t, j}) = x1 * c - x2 * s;
      at<T>(out, {n, t, j + h}) = x2 * c + x1 * s;
    }
  }
}

void rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse, const Tensor& out) {
  floating(x, "rotary_embedding", rotary_embedding<float>, rotary_embedding<double>)(x, cos, sin, inverse, out);
}

}  // namespace autograd::reference
