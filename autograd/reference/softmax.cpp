// reference/softmax.cpp — softmax and log_softmax along one dim, forward and backward, one row at a time.
// A row is the values along `dim` with every other index fixed; row[k] is the k-th of them.
#include <cmath>

#include "autograd/reference/kernels.h"
#include "autograd/reference/strided.h"

namespace autograd::reference {

// softmax:      y_k = exp(x_k − m) / Σ_j exp(x_j − m)
// log_softmax:  y_k = (x_k − m) − log Σ_j exp(x_j − m)
// m = max_j x_j changes nothing in exact arithmetic; it keeps exp from overflowing.
template <typename T> void softmax(const Tensor& in, int64_t dim, bool log, const Tensor& out) {
  const int64_t n = in.size(dim), xs = in.strides()[size_t(dim)], ys = out.strides()[size_t(dim)];
  if (n == 0) return;
  for (Index r(row_starts(in.shape(), dim)); r.valid(); r.next()) {
    const T* x = &at<T>(in, r);
    T* y = &at<T>(out, r);
    T m = x[0];
    for (int64_t k = 1; k < n; ++k) m = x[k * xs] > m ? x[k * xs] : m;
    T sum = 0;
    for (int64_t k = 0; k < n; ++k) sum = sum + std::exp(x[k * xs] - m);
    for (int64_t k = 0; k < n; ++k)
      y[k * ys] = log ? T(x[k * xs] - m) - std::log(sum) : T(std::exp(x[k * xs] - m) / sum);
  }
}

void softmax(const Tensor& in, int64_t dim, bool log, const Tensor& out) {
  floating(in, "softmax", softmax<float>, softmax<double>)(in, dim, log, out);
}

// softmax:      dx_k = y_k · (g_k − Σ_j g_j · y_j)
// log_softmax:  dx_k = g_k − exp(y_k) · Σ_j g_j         (exp(y) is the softmax)
template <typename T> void softmax_backward(const Tensor& y_in, const Tensor& g_in, int64_t dim, bool log, const Tensor& dx_out) {
  const int64_t n = y_in.size(dim);
  const int64_t ys = y_in.strides()[size_t(dim)], gs = g_in.strides()[size_t(dim)], dxs = dx_out.strides()[size_t(dim)];
  if (n == 0) return;
  for (Index r(row_starts(y_in.shape(), dim)); r.valid(); r.next()) {
    const T* y = &at<T>(y_in, r);
    const T* g = &at<T>(g_in, r);
    T* dx = &at<T>(dx_out, r);
    T sum = 0;
    for (int64_t j = 0; j < n; ++j) sum = sum + (log ? g[j * gs] : g[j * gs] * y[j * ys]);
    for (int64_t k = 0; k < n; ++k)
      dx[k * dxs] = log ? T(g[k * gs] - std::exp(y[k * ys]) * sum) : T(y[k * ys] * (g[k * gs] - sum));
  }
}

void softmax_backward(const Tensor& y_in, const Tensor& g_in, int64_t dim, bool log, const Tensor& dx_out) {
  floating(y_in, "softmax_backward", softmax_backward<float>, softmax_backward<double>)(y_in, g_in, dim, log, dx_out);
}

}  // namespace autograd::reference
