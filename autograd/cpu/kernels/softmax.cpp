// cpu/kernels/softmax.cpp — softmax and log_softmax over one dim, forward and backward, in PyTorch's order.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's AVX-512 headers (see exp_floats.cpp)
#include <immintrin.h>
#endif

#include "autograd/cpu/kernels.h"
#include "autograd/cpu/kernels/loops.h"
#include "autograd/cpu/libm/exp_floats.h"

namespace autograd::cpu {

namespace {

// ---------------------------------------------------------------- softmax, in PyTorch's order
//
// PyTorch 1.13's portable CPU build (ATEN_CPU_CAPABILITY=default) has two softmax kernels, and they
// add up a row differently (docs/parity.md has the measurements):
//  * over the last dim, the row is reduced with Vectorized<T> — 32 bytes, so 8 float or 4 double
//    lanes (vector_lane_reduce below); softmax multiplies by 1/sum, log_softmax subtracts log(sum);
//  * over any other dim, a running sum from 0 in index order; softmax divides by the sum.
// exp and log are the C library's expf/logf (exp/log for double), exactly as the portable
// Vectorized<T>::exp() applies them lane by lane.


// vec::reduce_all(op, row, n) of the portable build: lane l starts at x[l] and folds in x[l + 8],
// x[l + 16], ... over the full blocks of 8; the n % 8 leftovers fold into lanes 0, 1, ...; finally
// the lanes are folded left to right. Rows shorter than 8 are folded left to right directly.
template <typename T, typename Value, typename Op> T vector_lane_reduce(int64_t n, Value x, Op op) {
  constexpr int64_t L = kVecLanes<T>;
  if (n < L) {
    T acc = x(0);
    for (int64_t j = 1; j < n; ++j) acc = op(acc, x(j));
    return acc;
  }
  T lanes[L];
  for (int64_t l = 0; l < L; ++l) lanes[l] = x(l);
  int64_t d = L;
  for (; d < n - n % L; d += L)
    for (int64_t l = 0; l < L; ++l) lanes[l] = op(lanes[l], x(d + l));
  for (int64_t l = 0; d + l < n; ++l) lanes[l] = op(lanes[l], x(d + l));
  T acc = lanes[0];
  for (int64_t l = 1; l < L; ++l) acc = op(acc, lanes[l]);
  return acc;
}

// The sum of n values the way the softmax kernels add them: vector lanes over the last dim, a running
// sum from 0 over any other.
template <typename T, typename Value> T softmax_row_sum(bool last_dim, int64_t n, Value x) {
  if (last_dim) return vector_lane_reduce<T>(n, x, [](T a, T b) { return T(a + b); });
  T sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += x(j);
  return sum;
}

// max with NaN winning (vec::maximum propagates NaN); the order of a max does not matter otherwise.
template <typename T> T row_max(int64_t n, const T* x, int64_t stride) {
  T m = x[0];
  for (int64_t j = 1; j < n; ++j) {
    const T v = x[j * stride];
    if (std::isnan(v) || v > m) m = v;
  }
  return m;
}


template <typename T, typename Stride>
void softmax_row(const T* x, Stride si, T* y, Stride so, int64_t n, bool last, bool log) {
  const T m = row_max(n, x, int64_t(si));  // an all -inf row gives -inf - -inf = NaN everywhere, as in PyTorch
  // A trailing run of -inf (causal attention's masked scores) gives exp(-inf - m) = +0 exactly when m
  // is not -inf itself: found once per row, those entries skip the exp call.
  const T neg_inf = -std::numeric_limits<T>::infinity();
  int64_t live = n;
  if (m != neg_inf)
    while (live > 0 && x[(live - 1) * si] == neg_inf) --live;
  auto exp_shifted = [&](int64_t j) { return j < live ? T(std::exp(T(x[j * si] - m))) : T(0); };
  if (log) {
    const T sum = softmax_row_sum<T>(last, n, exp_shifted);
    const T log_sum = std::log(sum);
    for (int64_t j = 0; j < n; ++j) y[j * so] = T(x[j * si] - m) - log_sum;  // (x − max) − log Σ, that order
    return;
  }
  for (int64_t j = 0; j < live; ++j) y[j * so] = std::exp(T(x[j * si] - m));
  for (int64_t j = live; j < n; ++j) y[j * so] = T(0);
  const T sum = softmax_row_sum<T>(last, n, [&](int64_t j) { return y[j * so]; });
  if (last) {
    const T inv = T(1) / sum;
    for (int64_t j = 0; j < n; ++j) y[j * so] = y[j * so] * inv;
  } else {
    for (int64_t j = 0; j < n; ++j) y[j * so] = y[j * so] / sum;
  }
}

// Float rows laid end to end (contiguous input and output, softmax over the last dim: attention scores,
// logits). A block of rows goes through each step together, so that its exps are one exp_floats call
// (16 per instruction) instead of a library call per value; each row's values and order are softmax_row's.
// (No trailing -inf skip here: exp_floats gives exp(-inf) = 0 at vector speed.)
// N is the row length when known at compile time (short rows, see softmax_float_rows below), else 0.
template <int64_t N> void softmax_float_rows_of(const float* x, float* y, int64_t rows, int64_t n_runtime, bool log) {
  const int64_t n = N > 0 ? N : n_runtime;
  thread_local std::vector<float> exps, maxima;
  const int64_t block_rows = std::max<int64_t>(1, 2048 / n);  // x, y and the exps of a block stay in L1
  exps.resize(size_t(std::min(rows, block_rows) * n));
  maxima.resize(size_t(std::min(rows, block_rows)));
  for (int64_t r0 = 0; r0 < rows; r0 += block_rows) {
    const int64_t count = std::min(block_rows, rows - r0);
    const float* xb = x + r0 * n;
    float* yb = y + r0 * n;
    if constexpr (N > 0) {  // short rows: a fixed-length loop per row, cheaper than row_maxima's vector loop
      for (int64_t r = 0; r < count; ++r) maxima[size_t(r)] = row_maximum(xb + r * n, N);
    } else {
      row_maxima(xb, count, n, maxima.data());
    }
    for (int64_t r = 0; r < count; ++r) {  // x − max(row); an all -inf row gives NaN, as in PyTorch
      const float m = maxima[size_t(r)];
      for (int64_t j = 0; j < n; ++j) yb[r * n + j] = xb[r * n + j] - m;
    }
    float* e = log ? exps.data() : yb;  // softmax: exp in place; log_softmax keeps x − max for the end
    exp_floats(yb, e, count * n);
    for (int64_t r = 0; r < count; ++r) {
      float* er = e + r * n;
      float* yr = yb + r * n;
      const float sum = softmax_row_sum<float>(/*last_dim=*/true, n, [&](int64_t j) { return er[j]; });
      if (log) {
        const float log_sum = std::log(sum);
        for (int64_t j = 0; j < n; ++j) yr[j] = yr[j] - log_sum;  // (x − max) − log Σ
      } else {
        const float inv = 1.0f / sum;
        for (int64_t j = 0; j < n; ++j) yr[j] = yr[j] * inv;
      }
    }
  }
}

// Rows of up to 16 values (attention over a short context, a small vocabulary's logits) run a copy of
// the code compiled for their exact length: every loop above then has a fixed trip count and becomes
// straight-line code, which for rows this short is most of the cost.
inline constexpr int64_t kFixedRowLengths = 16;
template <size_t... Ns> constexpr auto fixed_length_softmax_rows(std::index_sequence<Ns...>) {
  return std::array{&softmax_float_rows_of<int64_t(Ns)>...};  // entry 0: the general code
}
void softmax_float_rows(const float* x, float* y, int64_t rows, int64_t n, bool log) {
  static constexpr auto by_length = fixed_length_softmax_rows(std::make_index_sequence<kFixedRowLengths + 1>());
  by_length[n <= kFixedRowLengths ? size_t(n) : 0](x, y, rows, n, log);
}

// Runs `rows_fn(first_input_offset, first_output_offset, count)` over row ranges of a [rows, n] layout,
// split over threads when the work is big enough (rows never share outputs).
template <typename Rows> void for_row_ranges(int64_t rows, int64_t n, Rows rows_fn) {
  const Shape outer{rows}, stride{n};
  auto plan = make_plan<2>(outer, {&stride, &stride});
  parallel_for_each_run(plan, rows, [&](const auto& off, int64_t count, const auto&) { rows_fn(off[0], count); }, n);
}

template <typename T>
void softmax_typed(const Tensor& in, int64_t dim, bool log, const Tensor& out) {
  const int64_t n = in.shape()[size_t(dim)];
  if (in.numel() == 0) return;  // no rows, or rows of no values (whose max would read past the end)
  if constexpr (std::is_same_v<T, float>) {
    if (dim == in.dim() - 1 && n > 0 && in.is_contiguous() && out.is_contiguous()) {
      const float* x = ptr<float>(in);
      float* y = ptr<float>(out);
      for_row_ranges(in.numel() / n, n, [&](int64_t offset, int64_t count) { softmax_float_rows(x + offset, y + offset, count, n, log); });
      return;
    }
  }
  const int64_t si = in.strides()[size_t(dim)], so = out.strides()[size_t(dim)];
  const bool last = dim == in.dim() - 1;
  const T* pi = ptr<T>(in);
  T* po = ptr<T>(out);
  if (si == 1 && so == 1) {
    for_each_row(in, out, dim, [&](int64_t oi, int64_t oo) {
      softmax_row<T>(pi + oi, Contiguous{}, po + oo, Contiguous{}, n, last, log);
    });
  } else {
    for_each_row(in, out, dim, [&](int64_t oi, int64_t oo) { softmax_row<T>(pi + oi, si, po + oo, so, n, last, log); });
  }
}

template <typename T, typename Stride>
[[gnu::always_inline]] inline void softmax_backward_row(const T* yr, const T* gr, T* xr, Stride s, int64_t n, bool last,
                                                        bool log) {
  if (log) {  // dx = g − exp(y) · Σ g
    const T sum = softmax_row_sum<T>(last, n, [&](int64_t j) { return gr[j * s]; });
    for (int64_t j = 0; j < n; ++j) xr[j * s] = gr[j * s] - T(std::exp(yr[j * s]) * sum);
  } else {  // dx = (g − Σ g·y) · y
    const T dot = softmax_row_sum<T>(last, n, [&](int64_t j) { return T(gr[j * s] * yr[j * s]); });
    for (int64_t j = 0; j < n; ++j) xr[j * s] = T(gr[j * s] - dot) * yr[j * s];
  }
}

// log_softmax's backward on float rows laid end to end: exp(y) of a block of rows in one exp_floats call,
// then softmax_backward_row's arithmetic. A block is as many rows as fit 2048 values, or one long row (a
// GPT-2 logit row is 50,257 values, 201 KB), so the exps are read back from the cache, not from memory.
// N: the row length if fixed at compile time (as above), else 0.
template <int64_t N>
void log_softmax_backward_float_rows_of(const float* y, const float* g, float* gx, int64_t rows, int64_t n_runtime) {
  const int64_t n = N > 0 ? N : n_runtime;
  const int64_t block_rows = std::max<int64_t>(1, 2048 / n);
  for (int64_t r0 = 0; r0 < rows; r0 += block_rows) {
    const int64_t count = std::min(block_rows, rows - r0);
    exp_floats(y + r0 * n, gx + r0 * n, count * n);  // gx = softmax(x) first
    for (int64_t r = r0; r < r0 + count; ++r) {
      const float* gr = g + r * n;
      float* xr = gx + r * n;
      const float sum = softmax_row_sum<float>(/*last_dim=*/true, n, [&](int64_t j) { return gr[j]; });
      for (int64_t j = 0; j < n; ++j) xr[j] = gr[j] - xr[j] * sum;
    }
  }
}
// softmax's backward on float rows laid end to end: softmax_backward_row's arithmetic, with the row length
// fixed at compile time for short rows (attention over the seed's 8 positions: its loops had been a
// fifth of this op's time in a seed step).
template <int64_t N>
void softmax_backward_float_rows_of(const float* y, const float* g, float* gx, int64_t rows, int64_t n_runtime) {
  const int64_t n = N > 0 ? N : n_runtime;
  for (int64_t r = 0; r < rows; ++r)
    softmax_backward_row<float>(y + r * n, g + r * n, gx + r * n, Contiguous{}, n, /*last=*/true, /*log=*/false);
}
template <size_t... Ns> constexpr auto fixed_length_softmax_backward_rows(std::index_sequence<Ns...>, bool log) {
  return log ? std::array{&log_softmax_backward_float_rows_of<int64_t(Ns)>...}
             : std::array{&softmax_backward_float_rows_of<int64_t(Ns)>...};
}
void softmax_backward_float_rows(const float* y, const float* g, float* gx, int64_t rows, int64_t n, bool log) {
  static constexpr auto plain = fixed_length_softmax_backward_rows(std::make_index_sequence<kFixedRowLengths + 1>(), false);
  static constexpr auto logs = fixed_length_softmax_backward_rows(std::make_index_sequence<kFixedRowLengths + 1>(), true);
  (log ? logs : plain)[n <= kFixedRowLengths ? size_t(n) : 0](y, g, gx, rows, n);
}

template <typename T>
void softmax_backward_typed(const Tensor& y, const Tensor& g, int64_t dim, bool log, const Tensor& gx) {
  if (y.numel() == 0) return;  // rows of no values: the lane sums would read past the end
  // y, g and gx are contiguous (the op makes sure), so each row shares one offset and one stride.
  const int64_t n = y.shape()[size_t(dim)], s = y.strides()[size_t(dim)];
  const bool last = dim == y.dim() - 1;
  if constexpr (std::is_same_v<T, float>) {
    if (last && s == 1 && n > 0) {
      const float* py = ptr<float>(y);
      const float* pg = ptr<float>(g);
      float* px = ptr<float>(gx);
      for_row_ranges(y.numel() / n, n, [&](int64_t offset, int64_t count) {
        softmax_backward_float_rows(py + offset, pg + offset, px + offset, count, n, log);
      });
      return;
    }
  }
  const T* py = ptr<T>(y);
  const T* pg = ptr<T>(g);
  T* px = ptr<T>(gx);
  if (s == 1) {
    for_each_row(y, gx, dim, [&](int64_t o, int64_t) {
      softmax_backward_row<T>(py + o, pg + o, px + o, Contiguous{}, n, last, log);
    });
  } else {
    for_each_row(y, gx, dim, [&](int64_t o, int64_t) { softmax_backward_row<T>(py + o, pg + o, px + o, s, n, last, log); });
  }
}

}  // namespace

void softmax(const Tensor& in, int64_t dim, bool log, const Tensor& out) {
  dispatch_floating(in.dtype(), "softmax", [&](auto tag) { softmax_typed<decltype(tag)>(in, dim, log, out); });
}

void softmax_backward(const Tensor& y, const Tensor& g, int64_t dim, bool log, const Tensor& gx) {
  dispatch_floating(y.dtype(), "softmax_backward",
                    [&](auto tag) { softmax_backward_typed<decltype(tag)>(y, g, dim, log, gx); });
}

}  // namespace autograd::cpu
