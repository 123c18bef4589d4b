// cpu/kernels/attention.cpp — the elementwise halves of causal attention (ops/attention.cpp): scaling the scores
// on and below the diagonal while filling above it, and checking that a matrix is zero above it.
#include <algorithm>
#include <atomic>

#include "autograd/cpu/kernels.h"
#include "autograd/cpu/kernels/loops.h"
#include "autograd/cpu/kernels/matmul_plan.h"

namespace autograd::cpu {

namespace {

// Calls f(T* x_matrix, const T* y_matrix) for each t x t matrix of two contiguous [..., t, t] tensors,
// the matrices spread over threads when there are many elements.
template <typename T, typename F> void for_each_square(const Tensor& x, const Tensor& y, F f) {
  const int64_t t = x.size(-1), count = x.numel() / std::max<int64_t>(t * t, 1);
  T* px = static_cast<T*>(x.raw_data());
  const T* py = static_cast<const T*>(y.raw_data());
  parallel_ranges(count, t * t, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) f(px + i * t * t, py + i * t * t);
  });
}

// How many entries of a t x t matrix above its diagonal are not zero: counted rather than tested one by
// one, so the loops run on vectors.
template <typename T> int64_t count_above_diagonal(const T* x, int64_t t) {
  int64_t nonzero = 0;
  run_vectorized([&nonzero, x, t] {
    int64_t count = 0;  // a local, so the compiler keeps it in registers
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = i + 1; j < t; ++j) count += x[i * t + j] != T(0);
    nonzero = count;
  });
  return nonzero;
}

}  // namespace

// dst = src / divisor on and below the diagonal, `above` above it: one pass for what masked_fill and
// the division would do in two (the same values: x / s rounded once, as the division op does; row by
// row as the fast products do it, CausalRowScale in matmul_plan.h).
void causal_scale(const Tensor& dst, const Tensor& src, double divisor, double above) {
  const int64_t t = dst.size(-1);
  dispatch_floating(dst.dtype(), "causal_scores", [&](auto tag) {
    using T = decltype(tag);
    const CausalRowScale<T> scale_row(ScaleBelowDiagonal{divisor, above});
    for_each_square<T>(dst, src, [&](T* d, const T* x) {
      run_vectorized([=, &scale_row] {
        for (int64_t i = 0; i < t; ++i) scale_row(d + i * t, x + i * t, t, i);
      });
    });
  });
}

// Whether a contiguous [..., t, t] tensor is zero above every diagonal (a causal softmax's output is).
bool zero_above_diagonal(const Tensor& p) {
  if (!p.is_contiguous()) return false;
  const int64_t t = p.size(-1), count = p.numel() / std::max<int64_t>(t * t, 1);
  return dispatch_floating(p.dtype(), "tril_matmul", [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(p.raw_data());
    std::atomic<bool> zeros{true};  // the matrices are split over threads; any nonzero ends every thread's scan
    parallel_ranges(count, t * t / 2, [&](int64_t m0, int64_t m1) {
      for (int64_t m = m0; m < m1 && zeros.load(std::memory_order_relaxed); ++m) {
        if (count_above_diagonal(x + m * t * t, t)) {
          zeros.store(false, std::memory_order_relaxed);
          return;
        }
      }
    });
    return zeros.load();
  });
}

}  // namespace autograd::cpu
