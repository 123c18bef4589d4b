// reference/reduce.cpp — reductions: sum_to, max along a dim, variance and the 2-norm.
#include <algorithm>
#include <cmath>

#include "autograd/reference/kernels.h"
#include "autograd/reference/strided.h"

namespace autograd::reference {

// out[j] = Σ in[i] over every input index i that lands on j: out has in's trailing shape, size 1 on the
// dims summed over (index 0 there), and may lack some leading dims (summed over too). One accumulation
// per output element, in row-major order.
void sum_to(const Tensor& in, const Tensor& out) {
  fill(out, 0.0);
  const size_t lead = in.shape().size() - out.shape().size();
  dispatch(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    Shape j(out.shape().size());
    for_each_index(in.shape(), [&](const Shape& i) {
      for (size_t d = 0; d < j.size(); ++d) j[d] = out.shape()[d] == 1 ? 0 : i[d + lead];
      at<T>(out, j) = T(at<T>(out, j) + at<T>(in, i));  // (bool: true if any is)
    });
  });
}

// values[r] = max_k in[r, k] along `dim`, indices[r] = the first k holding it (a NaN is the maximum, as in
// PyTorch). values and indices keep `dim` with size 1; indices may be undefined.
void max_dim(const Tensor& in, int64_t dim, const Tensor& values, const Tensor& indices) {
  dispatch(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (in.size(dim) == 0) return;
    for_each_index(row_starts(in.shape(), dim), [&](const Shape& r) {
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
    });
  });
}

// out[r] = Σ_k (x[r, k] − mean_r)² / (n − correction), mean_r = Σ_k x[r, k] / n, in double (its square
// root with take_sqrt). x is [R, n].
void var(const Tensor& x, double correction, bool take_sqrt, const Tensor& out) {
  dispatch_floating(x.dtype(), "var", [&](auto tag) {
    using T = decltype(tag);
    const int64_t n = x.size(1);
    for (int64_t r = 0; r < x.size(0); ++r) {
      double sum = 0, squares = 0;
      for (int64_t k = 0; k < n; ++k) sum += double(at<T>(x, {r, k}));
      const double mean = sum / double(n);
      for (int64_t k = 0; k < n; ++k) squares += (double(at<T>(x, {r, k})) - mean) * (double(at<T>(x, {r, k})) - mean);
      const double v = squares / std::max(0.0, double(n) - correction);
      at<T>(out, {r}) = T(take_sqrt ? std::sqrt(v) : v);
    }
  });
}

// out = √(Σ_i x_i²)
void norm2(const Tensor& x, const Tensor& out) {
  dispatch_floating(x.dtype(), "norm", [&](auto tag) {
    using T = decltype(tag);
    T squares = 0;
    for_each_index(x.shape(), [&](const Shape& i) { squares += at<T>(x, i) * at<T>(x, i); });
    at<T>(out, {}) = std::sqrt(squares);
  });
}

}  // namespace autograd::reference
