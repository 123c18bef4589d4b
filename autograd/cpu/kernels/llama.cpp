// cpu/kernels/llama.cpp — SiLU, RMS normalisation and the rotary embedding, each rounding as PyTorch 1.13's
// portable (ATEN_CPU_CAPABILITY=default) kernels round Hugging Face's formulas, so float32 results have
// PyTorch's bits:
//   silu        x / (1 + exp(−x)), and dy·σ·(1 + x·(1 − σ)) for its gradient (PyTorch's silu kernels)
//   rms_norm    LlamaRMSNorm's ops one after the other: x.pow(2).mean(-1, keepdim) (a sum in PyTorch's
//               cascade order, sum_to, then ÷ n), + eps, rsqrt (1/√, two roundings), x·r, weight·(x·r);
//               its gradient as autograd runs those ops' backward formulas (below)
//   rotary      q·cos + rotate_half(q)·sin: every product rounded, then one addition
#include <cmath>
#include <cstdint>

#include "autograd/cpu/kernels.h"
#include "autograd/cpu/kernels/loops.h"

namespace autograd::cpu {

namespace {

// ---------------------------------------------------------------- silu

template <typename T> T silu_of(T x) { return x / (T(1) + std::exp(-x)); }

template <typename T> T silu_grad_of(T dy, T x) {
  const T sigmoid = T(1) / (T(1) + std::exp(-x));
  return (dy * sigmoid) * (T(1) + x * (T(1) - sigmoid));
}

// ---------------------------------------------------------------- rms_norm

// Σ of each row of rows [M, n] into sums [M] in PyTorch's order (the sum over the last dim, keepdim).
void row_sums(const Tensor& rows, const Tensor& sums) { sum_to(rows, sums.reshape({rows.size(0), 1})); }

// out[i, k] = f(i, k) for every element of an [M, n] tensor, rows split over threads (no element depends
// on another, so threads change no bit).
template <typename T, typename F> void fill_rows(const Tensor& out, F f) {
  const int64_t rows = out.size(0), n = out.size(1);
  T* po = ptr<T>(out);
  parallel_ranges(rows, n, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) contiguous_loop(n, [&](int64_t k) { po[i * n + k] = f(i, k); });
  });
}

// r = 1/√(Σ x²/n + eps); y = w·(x·r)   (no weight: y = x·r)
template <typename T>
void rms_norm_rows(const Tensor& x, const Tensor& weight, double eps, const Tensor& y, const Tensor& rstd) {
  const int64_t rows = x.size(0), n = x.size(1);
  const T* px = ptr<T>(x);
  const T* w = weight.defined() ? ptr<T>(weight) : nullptr;
  T* r = ptr<T>(rstd);
  Tensor squares = empty({rows, n}, x.dtype(), Device::cpu());
  fill_rows<T>(squares, [&](int64_t i, int64_t k) { return px[i * n + k] * px[i * n + k]; });
  row_sums(squares, rstd);
  for (int64_t i = 0; i < rows; ++i) r[i] = T(1) / std::sqrt(r[i] / T(n) + T(eps));
  if (w) fill_rows<T>(y, [&](int64_t i, int64_t k) { return w[k] * (px[i * n + k] * r[i]); });
  else fill_rows<T>(y, [&](int64_t i, int64_t k) { return px[i * n + k] * r[i]; });
}

// The backward formulas of LlamaRMSNorm's ops, in the order autograd runs them (PyTorch 1.13's
// derivatives.yaml), for y = w·x̂, x̂ = x·r, r = rsqrt(v + eps), v = mean(x²):
//   dw  = Σ_rows g·x̂                                  (mul, then sum_to w's shape)
//   dx̂  = g·w;   dr = Σ_row dx̂·x                       (mul; r was broadcast over the row)
//   dv  = (−½·dr)·(r·r·r)                              (rsqrt: −0.5·grad·result³)
//   dx  = dx̂·r + (dv/n)·(2·x)                          (mean: grad/n; pow: grad·(2·x¹); the two paths added)
template <typename T>
void rms_norm_backward_rows(const Tensor& g, const Tensor& x, const Tensor& rstd, const Tensor& weight,
                            const Tensor& dx, const Tensor& dweight) {
  const int64_t rows = x.size(0), n = x.size(1);
  const T *pg = ptr<T>(g), *px = ptr<T>(x), *r = ptr<T>(rstd);
  const T* w = weight.defined() ? ptr<T>(weight) : nullptr;
  if (dweight.defined()) {
    Tensor products = empty({rows, n}, x.dtype(), Device::cpu());
    fill_rows<T>(products, [&](int64_t i, int64_t k) { return pg[i * n + k] * (px[i * n + k] * r[i]); });
    sum_to(products, dweight);
  }
  if (!dx.defined()) return;
  Tensor dxhat = g;
  if (w) {
    dxhat = empty({rows, n}, x.dtype(), Device::cpu());
    fill_rows<T>(dxhat, [&](int64_t i, int64_t k) { return pg[i * n + k] * w[k]; });
  }
  const T* pd = ptr<T>(dxhat);
  Tensor products = empty({rows, n}, x.dtype(), Device::cpu()), dr = empty({rows}, x.dtype(), Device::cpu());
  fill_rows<T>(products, [&](int64_t i, int64_t k) { return pd[i * n + k] * px[i * n + k]; });
  row_sums(products, dr);
  T* dmean = ptr<T>(dr);  // dr, turned in place into the gradient of each row's mean of squares
  for (int64_t i = 0; i < rows; ++i) dmean[i] = ((T(-0.5) * dmean[i]) * ((r[i] * r[i]) * r[i])) / T(n);
  fill_rows<T>(dx, [&](int64_t i, int64_t k) {
    return pd[i * n + k] * r[i] + dmean[i] * (T(2) * px[i * n + k]);
  });
}

// ---------------------------------------------------------------- rotary embedding

// For each (row, t): out[j] = x[j]·c − x[j+h]·s, out[j+h] = x[j+h]·c + x[j]·s with c, s = cos, sin[t, j];
// inverse: s → −s. (Rows of T·d split over threads.)
template <typename T>
void rotary_rows(const Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse, const Tensor& out) {
  const int64_t rows = x.size(0), t_count = x.size(1), d = x.size(2), h = d / 2;
  const T *px = ptr<T>(x), *pc = ptr<T>(cos), *ps = ptr<T>(sin);
  T* po = ptr<T>(out);
  parallel_ranges(rows * t_count, d, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t t = p % t_count;
      const T *xr = px + p * d, *c = pc + t * h, *s = ps + t * h;
      T* o = po + p * d;
      if (inverse) {
        contiguous_loop(h, [&](int64_t j) {
          const T x1 = xr[j], x2 = xr[j + h];
          o[j] = x1 * c[j] + x2 * s[j];
          o[j + h] = x2 * c[j] - x1 * s[j];
        });
      } else {
        contiguous_loop(h, [&](int64_t j) {
          const T x1 = xr[j], x2 = xr[j + h];
          o[j] = x1 * c[j] - x2 * s[j];
          o[j + h] = x2 * c[j] + x1 * s[j];
        });
      }
    }
  });
}

}  // namespace

void silu(const Tensor& x, const Tensor& y) {
  dispatch_floating(x.dtype(), "silu", [&](auto tag) {
    using T = decltype(tag);
    map1<T, T>(x, y, [](T v) { return silu_of(v); });
  });
}

void silu_backward(const Tensor& grad_y, const Tensor& x, const Tensor& grad_x) {
  dispatch_floating(x.dtype(), "silu backward", [&](auto tag) {
    using T = decltype(tag);
    map2<T, T>(grad_y, x, grad_x, [](T dy, T v) { return silu_grad_of(dy, v); });
  });
}

void rms_norm(const Tensor& x, const Tensor& weight, double eps, const Tensor& y, const Tensor& rstd) {
  dispatch_floating(x.dtype(), "rms_norm", [&](auto tag) { rms_norm_rows<decltype(tag)>(x, weight, eps, y, rstd); });
}

void rms_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& rstd, const Tensor& weight,
                       const Tensor& grad_x, const Tensor& grad_weight) {
  dispatch_floating(x.dtype(), "rms_norm backward", [&](auto tag) {
    rms_norm_backward_rows<decltype(tag)>(grad_y, x, rstd, weight, grad_x, grad_weight);
  });
}

void rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse, const Tensor& out) {
  dispatch_floating(x.dtype(), "rotary_embedding", [&](auto tag) {
    rotary_rows<decltype(tag)>(x, cos, sin, inverse, out);
  });
}

}  // namespace autograd::cpu
