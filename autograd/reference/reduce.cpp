// reference/reduce.cpp — reductions: sum_to, max along a dim, variance and the 2-norm.
// Each entry picks its loop's instantiation for the dtype (strided.h: floating, any_dtype) and calls it.
#include <algorithm>
#include <cmath>

#include "autograd/reference/kernels.h"
#include "autograd/reference/strided.h"

namespace autograd::reference {

// out[j] = Σ in[i] over every input index i that lands on j: out has in's trailing shape, size 1 on the
// dims summed over (index 0 there), and may lack some leading dims (summed over too). One accumulation
// per output element, in row-major order.
template <typename T> void sum_to(const Tensor& in, const Tensor& out) {
  const size_t lead = in.shape().size() - out.shape().size();
  Shape j(out.shape().size());
  for (Index i(in.shape()); i.valid(); i.next()) {
    for (size_t d = 0; d < j.size(); ++d) j[d] = out.shape()[d] == 1 ? 0 : i[d + lead];
    at<T>(out, j) = T(at<T>(out, j) + at<T>(in, i));  // (bool: true if any is)
  }
}

void sum_to(const Tensor& in, const Tensor& out) {
  fill(out, 0.0);
  any_dtype(in, sum_to<float>, sum_to<double>, sum_to<int64_t>, sum_to<bool>)(in, out);
}

// values[r] = max_k in[r, k] along `dim`, indices[r] = the first k holding it (a NaN is the maximum, as in
// PyTorch). values and indices keep `dim` with size 1; indices may be undefined.
template <typename T> void max_dim(const Tensor& in, int64_t dim, const Tensor& values, const Tensor& indices) {
  if (in.size(dim) == 0) return;
  for (Index r(row_starts(in.shape(), dim)); r.valid(); r.next()) {
    Shape i = r;
    T best = at<T>(in, r);
    int64_t best_k = 0;
    for (int64_t k = 1; k < in.size(dim); ++k) {
      i[size_t(dim)] = k;
      const T x = at<T>(in, i);
      if (best != best) break;  // NaN (only floats differ from themselves)
      if (x != x || x > best) best = x, best_k = k;
    }
    at<T>(values, r) = best;
    if (indices.defined()) at<int64_t>(indices, r) = best_k;
  }
}

void max_dim(const Tensor& in, int64_t dim, const Tensor& values, const Tensor& indices) {
  any_dtype(in, max_dim<float>, max_dim<double>, max_dim<int64_t>, max_dim<bool>)(in, dim, values, indices);
}

// out[r] = Σ_k (x[r, k] − mean_r)² / (n − correction), mean_r = Σ_k x[r, k] / n, in double (its square
// root with take_sqrt). x is [R, n].
template <typename T> void var(const Tensor& x, double correction, bool take_sqrt, const Tensor& out) {
  const int64_t n = x.size(1);
  for (int64_t r = 0; r < x.size(0); ++r) {
    double sum = 0, squares = 0;
    for (int64_t k = 0; k < n; ++k) sum += double(at<T>(x, {r, k}));
    const double mean = sum / double(n);
    for (int64_t k = 0; k < n; ++k) squares += (double(at<T>(x, {r, k})) - mean) * (double(at<T>(x, {r, k})) - mean);
    const double v = squares / std::max(0.0, double(n) - correction);
    at<T>(out, {r}) = T(take_sqrt ? std::sqrt(v) : v);
  }
}

void var(const Tensor& x, double correction, bool take_sqrt, const Tensor& out) {
  floating(x, "var", var<float>, var<double>)(x, correction, take_sqrt, out);
}

// out = √(Σ_i x_i²)
template <typename T> void norm2(const Tensor& x, const Tensor& out) {
  T squares = 0;
  for (Index i(x.shape()); i.valid(); i.next()) squares += at<T>(x, i) * at<T>(x, i);
  at<T>(out, {}) = std::sqrt(squares);
}

void norm2(const Tensor& x, const Tensor& out) { floating(x, "norm", norm2<float>, norm2<double>)(x, out); }

}  // namespace autograd::reference
