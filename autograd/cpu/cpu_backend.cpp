// cpu/cpu_backend.cpp — the CPU kernels: plain loops over strided memory, nothing about graphs.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
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

#include "autograd/backend.h"
#include "autograd/cpu/buffer_cache.h"
#include "autograd/cpu/cpu.h"
#include "autograd/cpu/exp_floats.h"
#include "autograd/cpu/loops.h"
#include "autograd/cpu/select_floats.h"

namespace autograd::cpu {

namespace {

template <typename T> T* ptr(const Tensor& t) { return static_cast<T*>(t.raw_data()); }

// The contiguous inner loops of the elementwise kernels: body(i) for i in [0, n), compiled a second time
// for AVX-512 (16 floats per instruction instead of baseline SSE's 4) and chosen at run time. Every
// body here is exact in any vector width (IEEE +, −, ×, ÷, compares, selects, copies; library calls stay
// calls), so both give the same bits.
#if defined(__x86_64__) && defined(__GNUC__)
template <typename Body> [[gnu::target("avx512f")]] void contiguous_loop_avx512(int64_t n, Body body) {
  for (int64_t i = 0; i < n; ++i) body(i);
}
#endif
template <typename Body> inline void contiguous_loop(int64_t n, Body body) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (n >= 64 && avx512_kernels()) return contiguous_loop_avx512(n, body);
#endif
  for (int64_t i = 0; i < n; ++i) body(i);
}

// out = f(in), elementwise over same-shaped strided tensors.
template <typename In, typename Out, typename F> void map1(const Tensor& in, const Tensor& out, F f) {
  auto plan = make_plan<2>(out.shape(), {&out.strides(), &in.strides()});
  Out* po = ptr<Out>(out);
  const In* pi = ptr<In>(in);
  parallel_for_each_run(plan, out.numel(), [&](const auto& off, int64_t n, const auto& st) {
    Out* o = po + off[0];
    const In* a = pi + off[1];
    if (st[0] == 1 && st[1] == 1) {
      contiguous_loop(n, [&](int64_t i) { o[i] = f(a[i]); });
    } else {
      for (int64_t i = 0; i < n; ++i) o[i * st[0]] = f(a[i * st[1]]);
    }
  });
}

// out = f(a, b), elementwise; the inner loop is specialised for "b is one scalar" (stride 0).
template <typename T, typename Out, typename F> void map2(const Tensor& a, const Tensor& b, const Tensor& out, F f) {
  auto plan = make_plan<3>(out.shape(), {&out.strides(), &a.strides(), &b.strides()});
  Out* po = ptr<Out>(out);
  const T* pa = ptr<T>(a);
  const T* pb = ptr<T>(b);
  parallel_for_each_run(plan, out.numel(), [&](const auto& off, int64_t n, const auto& st) {
    Out* o = po + off[0];
    const T* x = pa + off[1];
    const T* y = pb + off[2];
    if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
      contiguous_loop(n, [&](int64_t i) { o[i] = f(x[i], y[i]); });
    } else if (st[0] == 1 && st[1] == 1 && st[2] == 0) {
      const T yv = *y;
      contiguous_loop(n, [&](int64_t i) { o[i] = f(x[i], yv); });
    } else {
      for (int64_t i = 0; i < n; ++i) o[i * st[0]] = f(x[i * st[1]], y[i * st[2]]);
    }
  });
}

template <typename T> T relu_of(T x) { return x > T(0) ? x : T(0); }

template <typename T> void unary_typed(UnaryOp op, const Tensor& in, const Tensor& out, double scalar) {
  const T s = T(scalar);
  switch (op) {
    case UnaryOp::Neg: return map1<T, T>(in, out, [](T x) { return T(-x); });
    case UnaryOp::Abs: return map1<T, T>(in, out, [](T x) { return x < T(0) ? T(-x) : x; });
    case UnaryOp::Relu: return map1<T, T>(in, out, [](T x) { return relu_of(x); });
    case UnaryOp::ReluMask: return map1<T, T>(in, out, [](T x) { return x > T(0) ? T(1) : T(0); });
    case UnaryOp::AddScalar: return map1<T, T>(in, out, [s](T x) { return T(x + s); });
    case UnaryOp::MulScalar: return map1<T, T>(in, out, [s](T x) { return T(x * s); });
    case UnaryOp::RSubScalar: return map1<T, T>(in, out, [s](T x) { return T(s - x); });
    case UnaryOp::EqScalar: return map1<T, bool>(in, out, [s](T x) { return x == s; });
    case UnaryOp::NeScalar: return map1<T, bool>(in, out, [s](T x) { return x != s; });
    case UnaryOp::LtScalar: return map1<T, bool>(in, out, [s](T x) { return x < s; });
    case UnaryOp::LeScalar: return map1<T, bool>(in, out, [s](T x) { return x <= s; });
    case UnaryOp::GtScalar: return map1<T, bool>(in, out, [s](T x) { return x > s; });
    case UnaryOp::GeScalar: return map1<T, bool>(in, out, [s](T x) { return x >= s; });
    default: break;
  }
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case UnaryOp::Exp: return map1<T, T>(in, out, [](T x) { return std::exp(x); });
      case UnaryOp::Log: return map1<T, T>(in, out, [](T x) { return std::log(x); });
      case UnaryOp::Sqrt: return map1<T, T>(in, out, [](T x) { return std::sqrt(x); });
      case UnaryOp::Tanh: return map1<T, T>(in, out, [](T x) { return std::tanh(x); });
      case UnaryOp::DivScalar: return map1<T, T>(in, out, [s](T x) { return x / s; });
      case UnaryOp::RDivScalar: return map1<T, T>(in, out, [s](T x) { return s / x; });
      case UnaryOp::PowScalar:
        if (scalar == 2.0) return map1<T, T>(in, out, [](T x) { return x * x; });
        if (scalar == 0.5) return map1<T, T>(in, out, [](T x) { return std::sqrt(x); });
        return map1<T, T>(in, out, [s](T x) { return std::pow(x, s); });
      default: break;
    }
  }
  throw std::invalid_argument(fmt::format("unary op {} is not defined for dtype {}", int(op), dtype_name(in.dtype())));
}

template <typename T> void binary_typed(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  switch (op) {
    case BinaryOp::Add: return map2<T, T>(a, b, out, [](T x, T y) { return T(x + y); });
    case BinaryOp::Sub: return map2<T, T>(a, b, out, [](T x, T y) { return T(x - y); });
    case BinaryOp::Mul: return map2<T, T>(a, b, out, [](T x, T y) { return T(x * y); });
    case BinaryOp::Div:
      if constexpr (std::is_floating_point_v<T>) return map2<T, T>(a, b, out, [](T x, T y) { return x / y; });
      break;
    case BinaryOp::Eq: return map2<T, bool>(a, b, out, [](T x, T y) { return x == y; });
    case BinaryOp::Ne: return map2<T, bool>(a, b, out, [](T x, T y) { return x != y; });
    case BinaryOp::Lt: return map2<T, bool>(a, b, out, [](T x, T y) { return x < y; });
    case BinaryOp::Le: return map2<T, bool>(a, b, out, [](T x, T y) { return x <= y; });
    case BinaryOp::Gt: return map2<T, bool>(a, b, out, [](T x, T y) { return x > y; });
    case BinaryOp::Ge: return map2<T, bool>(a, b, out, [](T x, T y) { return x >= y; });
  }
  throw std::invalid_argument(fmt::format("binary op {} is not defined for dtype {}", int(op), dtype_name(a.dtype())));
}

// Visits every 1-D "row" along `dim`: row(in_offset, out_offset) with the dim's strides fixed.
template <typename Row> void for_each_row(const Tensor& in, const Tensor& out, int64_t dim, Row row) {
  Shape outer = in.shape();
  outer[size_t(dim)] = 1;
  auto plan = make_plan<2>(outer, {&in.strides(), &out.strides()});
  auto rows = [&](const auto& off, int64_t n, const auto& st) {
    for (int64_t i = 0; i < n; ++i) row(off[0] + i * st[0], off[1] + i * st[1]);
  };
  parallel_for_each_run(plan, shape_numel(outer), rows, in.shape()[size_t(dim)]);  // rows never share outputs
}

// ---------------------------------------------------------------- softmax, in PyTorch's order
//
// PyTorch 1.13's portable CPU build (ATEN_CPU_CAPABILITY=default) has two softmax kernels, and they
// add up a row differently (docs/parity.md has the measurements):
//  * over the last dim, the row is reduced with Vectorized<T> — 32 bytes, so 8 float or 4 double
//    lanes (vector_lane_reduce below); softmax multiplies by 1/sum, log_softmax subtracts log(sum);
//  * over any other dim, a running sum from 0 in index order; softmax divides by the sum.
// exp and log are the C library's expf/logf (exp/log for double), exactly as the portable
// Vectorized<T>::exp() applies them lane by lane.

// Lanes of PyTorch's portable Vectorized<T>.
template <typename T> constexpr int64_t kVecLanes = 32 / int64_t(sizeof(T));

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

// A row's stride: any, or 1 known at compile time — contiguous rows (attention scores, logits) then
// get plain loops the compiler can unroll and vectorise, which matters for rows of 8 or 13 values.
using Contiguous = std::integral_constant<int64_t, 1>;

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
    row_maxima(xb, count, n, maxima.data());
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
void softmax_backward_row(const T* yr, const T* gr, T* xr, Stride s, int64_t n, bool last, bool log) {
  if (log) {  // dx = g − exp(y) · Σ g
    const T sum = softmax_row_sum<T>(last, n, [&](int64_t j) { return gr[j * s]; });
    for (int64_t j = 0; j < n; ++j) xr[j * s] = gr[j * s] - T(std::exp(yr[j * s]) * sum);
  } else {  // dx = (g − Σ g·y) · y
    const T dot = softmax_row_sum<T>(last, n, [&](int64_t j) { return T(gr[j * s] * yr[j * s]); });
    for (int64_t j = 0; j < n; ++j) xr[j * s] = T(gr[j * s] - dot) * yr[j * s];
  }
}

// log_softmax's backward on float rows laid end to end: exp(y) of a block of rows in one exp_floats call,
// then softmax_backward_row's arithmetic. N: the row length if fixed at compile time (as above), else 0.
template <int64_t N>
void log_softmax_backward_float_rows_of(const float* y, const float* g, float* gx, int64_t rows, int64_t n_runtime) {
  const int64_t n = N > 0 ? N : n_runtime;
  exp_floats(y, gx, rows * n);  // gx = softmax(x) first
  for (int64_t r = 0; r < rows; ++r) {
    const float* gr = g + r * n;
    float* xr = gx + r * n;
    const float sum = softmax_row_sum<float>(/*last_dim=*/true, n, [&](int64_t j) { return gr[j]; });
    for (int64_t j = 0; j < n; ++j) xr[j] = gr[j] - xr[j] * sum;
  }
}
template <size_t... Ns> constexpr auto fixed_length_log_softmax_backward_rows(std::index_sequence<Ns...>) {
  return std::array{&log_softmax_backward_float_rows_of<int64_t(Ns)>...};
}
void log_softmax_backward_float_rows(const float* y, const float* g, float* gx, int64_t rows, int64_t n) {
  static constexpr auto by_length =
      fixed_length_log_softmax_backward_rows(std::make_index_sequence<kFixedRowLengths + 1>());
  by_length[n <= kFixedRowLengths ? size_t(n) : 0](y, g, gx, rows, n);
}

template <typename T>
void softmax_backward_typed(const Tensor& y, const Tensor& g, int64_t dim, bool log, const Tensor& gx) {
  // y, g and gx are contiguous (the op makes sure), so each row shares one offset and one stride.
  const int64_t n = y.shape()[size_t(dim)], s = y.strides()[size_t(dim)];
  const bool last = dim == y.dim() - 1;
  if constexpr (std::is_same_v<T, float>) {
    if (log && last && s == 1 && n > 0) {
      const float* py = ptr<float>(y);
      const float* pg = ptr<float>(g);
      float* px = ptr<float>(gx);
      for_row_ranges(y.numel() / n, n, [&](int64_t offset, int64_t count) {
        log_softmax_backward_float_rows(py + offset, pg + offset, px + offset, count, n);
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

// ---------------------------------------------------------------- sums, in PyTorch's order
//
// PyTorch 1.13 sums floating tensors with `cascade_sum` (aten/src/ATen/native/cpu/SumKernel.cpp): a
// TensorIterator first orders and merges the dims, then each 2-D slice of the iteration is summed
// with one of four loops, all built from one idea — partial sums of 16 values are added into a
// higher "level", so only numbers of similar size meet. The code below re-derives that order (not
// the vector instructions: each vector lane is just an independent column here).

struct IterDim {
  int64_t size, in_stride, out_stride;  // elements; out_stride 0 on reduced dims
};

// TensorIterator's dim order for a reduction (reorder_dimensions): innermost first, reduced dims
// before kept ones, then by increasing stride; ties go to the smaller dim. Its comparison can be
// undecided, so it is an insertion sort that stops at the first decided "no swap", as PyTorch's is.
std::vector<IterDim> reduction_iteration_order(const std::vector<IterDim>& dims) {
  const size_t nd = dims.size();
  std::vector<size_t> perm(nd);
  for (size_t i = 0; i < nd; ++i) perm[i] = nd - 1 - i;  // innermost (last) dim first
  auto should_swap = [&](size_t d0, size_t d1) -> int {
    // the output operand: reduced dims (stride 0) go to the front
    const int64_t o0 = dims[d0].out_stride, o1 = dims[d1].out_stride;
    if ((o0 == 0) != (o1 == 0)) return o1 == 0 ? 1 : -1;
    for (auto [s0, s1] : {std::pair{o0, o1}, std::pair{dims[d0].in_stride, dims[d1].in_stride}}) {
      if (s0 == 0 || s1 == 0) continue;
      if (s0 < s1) return -1;
      if (s0 > s1) return 1;
      if (dims[d0].size > dims[d1].size) return 1;
    }
    return 0;
  };
  for (size_t i = 1; i < nd; ++i) {
    size_t d1 = i;
    for (size_t d0 = i; d0-- > 0;) {
      const int c = should_swap(perm[d0], perm[d1]);
      if (c > 0) {
        std::swap(perm[d0], perm[d1]);
        d1 = d0;
      } else if (c < 0) {
        break;
      }
    }
  }
  // coalesce_dimensions: merge neighbours laid out back to back in both operands; size-1 dims vanish
  std::vector<IterDim> out;
  for (size_t k = 0; k < nd; ++k) {
    const IterDim& d = dims[perm[k]];
    if (out.empty()) {
      out.push_back(d);
      continue;
    }
    IterDim& prev = out.back();
    const bool merge = prev.size == 1 || d.size == 1 ||
                       (prev.size * prev.in_stride == d.in_stride && prev.size * prev.out_stride == d.out_stride);
    if (!merge) {
      out.push_back(d);
    } else {
      if (prev.size == 1) prev.in_stride = d.in_stride, prev.out_stride = d.out_stride;
      prev.size *= d.size;
    }
  }
  return out;
}

// The cascade's four levels for `count` values: level l + 1 takes level l every 2^power values
// (power 4: every 16; larger above 2^19 values, so the four levels always suffice).
struct CascadeLevels {
  static constexpr int64_t kLevels = 4;
  int64_t power, step, mask;
  explicit CascadeLevels(int64_t count) {
    const int64_t ceil_log2 = count <= 2 ? 1 : 64 - __builtin_clzll(uint64_t(count - 1));
    power = std::max<int64_t>(4, ceil_log2 / kLevels);
    step = int64_t(1) << power;
    mask = step - 1;
  }
};

// multi_row_sum for `cols` independent columns of `count` values each: x(i, c) = base[i*rs + c*cs].
// Values go into level 0; after every 16 values level 0 is added into level 1 (and emptied), after
// every 256 level 1 into level 2, and so on (the step grows for counts above 2^19); at the end the
// levels are added together. Columns are done 64 at a time (each has its own accumulators).
template <typename T, typename ColStride>
void cascade_columns_with(const T* base, int64_t rs, ColStride cs, int64_t count, int64_t cols, T* result) {
  constexpr int64_t kLevels = CascadeLevels::kLevels, kChunk = 64;
  const CascadeLevels levels(count);
  const int64_t level_power = levels.power, level_step = levels.step, level_mask = levels.mask;
  for (int64_t c0 = 0; c0 < cols; c0 += kChunk) {
    const int64_t nc = std::min(kChunk, cols - c0);
    const T* col0 = base + c0 * cs;
    T acc[kLevels][kChunk];
    for (int64_t lv = 0; lv < kLevels; ++lv)  // only the columns in use (an `= {}` cleared all 1 KB per call)
      for (int64_t c = 0; c < nc; ++c) acc[lv][c] = T(0);
    int64_t i = 0;
    while (i + level_step <= count) {
      for (int64_t j = 0; j < level_step; ++j, ++i)
        for (int64_t c = 0; c < nc; ++c) acc[0][c] += col0[i * rs + c * cs];
      for (int64_t lv = 1; lv < kLevels; ++lv) {
        for (int64_t c = 0; c < nc; ++c) {
          acc[lv][c] += acc[lv - 1][c];
          acc[lv - 1][c] = T(0);
        }
        if ((i & (level_mask << (lv * level_power))) != 0) break;
      }
    }
    for (; i < count; ++i)
      for (int64_t c = 0; c < nc; ++c) acc[0][c] += col0[i * rs + c * cs];
    for (int64_t lv = 1; lv < kLevels; ++lv)
      for (int64_t c = 0; c < nc; ++c) acc[0][c] += acc[lv][c];
    for (int64_t c = 0; c < nc; ++c) result[c0 + c] = acc[0][c];
  }
}

// Adjacent columns (a bias gradient: the sum over rows of a row-major matrix) get loops over c that the
// compiler turns into vector adds, one column per lane.
// The same cascade for up to 16·G adjacent float columns with AVX-512: G vectors of 16 columns per
// level, all four levels in registers (above they live in memory, and every row waits on the previous
// row's store). Each column's adds are the same, in the same order.
#if defined(__x86_64__) && defined(__GNUC__)
template <int G>
[[gnu::target("avx512f")]] void cascade_columns_avx512(const float* base, int64_t rs, int64_t count, int64_t cols,
                                                       float* result) {
  const CascadeLevels levels(count);  // four levels, as cascade_columns_with
  const int64_t level_power = levels.power, level_step = levels.step, level_mask = levels.mask;
  __mmask16 lanes[G];
  for (int g = 0; g < G; ++g) {
    const int64_t left = cols - 16 * g;
    lanes[g] = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
  }
  __m512 l0[G], l1[G], l2[G], l3[G];
#pragma GCC unroll 4
  for (int g = 0; g < G; ++g) l0[g] = l1[g] = l2[g] = l3[g] = _mm512_setzero_ps();
  int64_t i = 0;
  while (i + level_step <= count) {
    for (int64_t j = 0; j < level_step; ++j, ++i)
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) l0[g] = _mm512_add_ps(l0[g], _mm512_maskz_loadu_ps(lanes[g], base + i * rs + 16 * g));
    const bool up2 = (i & (level_mask << level_power)) == 0, up3 = up2 && (i & (level_mask << (2 * level_power))) == 0;
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      l1[g] = _mm512_add_ps(l1[g], l0[g]);
      l0[g] = _mm512_setzero_ps();
      if (up2) {
        l2[g] = _mm512_add_ps(l2[g], l1[g]);
        l1[g] = _mm512_setzero_ps();
      }
      if (up3) {
        l3[g] = _mm512_add_ps(l3[g], l2[g]);
        l2[g] = _mm512_setzero_ps();
      }
    }
  }
  for (; i < count; ++i)
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) l0[g] = _mm512_add_ps(l0[g], _mm512_maskz_loadu_ps(lanes[g], base + i * rs + 16 * g));
#pragma GCC unroll 4
  for (int g = 0; g < G; ++g) {
    const __m512 total = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(l0[g], l1[g]), l2[g]), l3[g]);
    _mm512_mask_storeu_ps(result + 16 * g, lanes[g], total);
  }
}
#endif

template <typename T> void cascade_columns(const T* base, int64_t rs, int64_t cs, int64_t count, int64_t cols, T* result) {
#if defined(__x86_64__) && defined(__GNUC__)
  if constexpr (std::is_same_v<T, float>) {
    if (cs == 1 && avx512_kernels()) {
      for (int64_t c0 = 0; c0 < cols; c0 += 64) {
        const int64_t nc = std::min<int64_t>(64, cols - c0);
        switch ((nc + 15) / 16) {
          case 1: cascade_columns_avx512<1>(base + c0, rs, count, nc, result + c0); break;
          case 2: cascade_columns_avx512<2>(base + c0, rs, count, nc, result + c0); break;
          case 3: cascade_columns_avx512<3>(base + c0, rs, count, nc, result + c0); break;
          default: cascade_columns_avx512<4>(base + c0, rs, count, nc, result + c0); break;
        }
      }
      return;
    }
  }
#endif
  if (cs == 1) return cascade_columns_with(base, rs, Contiguous{}, count, cols, result);
  cascade_columns_with(base, rs, cs, count, cols, result);
}

// row_sum: a column of `size` values seen as rows of 4 (four interleaved partial sums, each a
// cascade); the size % 4 leftovers are added to the first; then ((p0 + p1) + p2) + p3.
template <typename T> void row_sum_columns(const T* base, int64_t rs, int64_t cs, int64_t size, int64_t cols, T* result) {
  constexpr int64_t kIlp = 4, kChunk = 64;
  const int64_t size_ilp = size / kIlp;
  for (int64_t c0 = 0; c0 < cols; c0 += kChunk) {
    const int64_t nc = std::min(kChunk, cols - c0);
    const T* col0 = base + c0 * cs;
    T partial[kIlp][kChunk];
    for (int64_t k = 0; k < kIlp; ++k) cascade_columns(col0 + k * rs, kIlp * rs, cs, size_ilp, nc, partial[k]);
    for (int64_t i = size_ilp * kIlp; i < size; ++i)
      for (int64_t c = 0; c < nc; ++c) partial[0][c] += col0[i * rs + c * cs];
    for (int64_t k = 1; k < kIlp; ++k)
      for (int64_t c = 0; c < nc; ++c) partial[0][c] += partial[k][c];
    for (int64_t c = 0; c < nc; ++c) result[c0 + c] = partial[0][c];
  }
}

// cascade_sum's 2-D loop: dim 0 (size0) and dim 1 (size1) of the iteration; adds into `out`.
template <typename T>
void cascade_sum_2d(const T* in, T* out, int64_t size0, int64_t size1, int64_t in_s0, int64_t in_s1, int64_t out_s0,
                    int64_t out_s1) {
  if (out_s0 != 0 && out_s1 == 0) {  // make the reduced dim the first
    std::swap(size0, size1);
    std::swap(in_s0, in_s1);
    std::swap(out_s0, out_s1);
  }
  if (out_s0 != 0) {  // nothing reduced here: out += in
    for (int64_t j = 0; j < size1; ++j)
      for (int64_t i = 0; i < size0; ++i) out[j * out_s1 + i * out_s0] += in[j * in_s1 + i * in_s0];
    return;
  }
  constexpr int64_t W = kVecLanes<T>;
  constexpr int64_t kChunk = 64;
  T sums[kChunk];
  if (in_s0 == 1 && size0 >= W) {
    // "vectorized inner sum": W lanes each take every W-th value (a row_sum each); the size0 % W
    // leftovers are summed from 0, then the lanes are added to that, left to right
    const int64_t vec_size = size0 / W;
    for (int64_t j = 0; j < size1; ++j) {
      const T* row = in + j * in_s1;
      T lanes[W];
      row_sum_columns(row, W, 1, vec_size, W, lanes);
      T total = 0;
      for (int64_t k = vec_size * W; k < size0; ++k) total += row[k];
      for (int64_t l = 0; l < W; ++l) total += lanes[l];
      out[j * out_s1] += total;
    }
  } else if (in_s1 == 1 && size1 >= W) {
    // "vectorized outer sum": columns in groups of 4 vectors are plain cascades; the rest row_sums
    const int64_t grouped = size1 / (4 * W) * (4 * W);
    // Chunks of columns never share an output, so big sums (a D 256 model's bias gradients) split them
    // over threads; each column is added up exactly as on one thread.
    const int64_t chunks = (size1 + kChunk - 1) / kChunk;
    const int threads = size0 * size1 < kParallelElements ? 1 : int(std::min<int64_t>(get_num_threads(), chunks));
    auto sum_chunk = [&](int64_t chunk) {
      const int64_t j0 = chunk * kChunk, nc = std::min(kChunk, size1 - j0);
      T chunk_sums[kChunk];
      for (int64_t c = 0; c < nc;) {  // split the chunk where the grouped columns end
        const int64_t j = j0 + c;
        const int64_t run = j < grouped ? std::min(nc - c, grouped - j) : nc - c;
        if (j < grouped) cascade_columns(in + j, in_s0, 1, size0, run, chunk_sums);
        else row_sum_columns(in + j, in_s0, 1, size0, run, chunk_sums);
        for (int64_t r = 0; r < run; ++r) out[(j + r) * out_s1] += chunk_sums[r];
        c += run;
      }
    };
    if (threads == 1) {  // no OpenMP region at all (even an if(false) one costs more than a small sum)
      for (int64_t chunk = 0; chunk < chunks; ++chunk) sum_chunk(chunk);
    } else {
#pragma omp parallel for num_threads(threads) schedule(static)
      for (int64_t chunk = 0; chunk < chunks; ++chunk) sum_chunk(chunk);
    }
  } else if (in_s0 < in_s1) {
    // "scalar inner sum": one row_sum per output
    for (int64_t j = 0; j < size1; ++j) {
      row_sum_columns(in + j * in_s1, in_s0, 1, size0, 1, sums);
      out[j * out_s1] += sums[0];
    }
  } else {
    // "scalar outer sum": columns in groups of 4 are plain cascades, the rest row_sums
    int64_t j = 0;
    for (; j + 3 < size1; j += 4) {
      cascade_columns(in + j * in_s1, in_s0, in_s1, size0, 4, sums);
      for (int64_t r = 0; r < 4; ++r) out[(j + r) * out_s1] += sums[r];
    }
    for (; j < size1; ++j) {
      row_sum_columns(in + j * in_s1, in_s0, 1, size0, 1, sums);
      out[j * out_s1] += sums[0];
    }
  }
}

// sum of `in` into `out` (zeroed here): the reduced dims are those where `out` has size 1 (or is
// missing, for leading dims). One thread, as torch.set_num_threads(1) or any sum below 32768 values.
template <typename T> void cascade_sum(const Tensor& in, const Tensor& out) {
  // The commonest case, a bias gradient: a contiguous [R, C] summed over its rows. The iteration order
  // below puts the reduced rows first, making it this one 2-D loop: called directly, without building it.
  const bool over_rows = (out.dim() == 1 || (out.dim() == 2 && out.size(0) == 1)) && out.size(-1) == in.size(-1);
  if (in.dim() == 2 && in.is_contiguous() && in.size(0) > 1 && in.size(1) > 1 && over_rows) {
    cascade_sum_2d(ptr<T>(in), ptr<T>(out), in.size(0), in.size(1), in.size(1), int64_t(1), int64_t(0), int64_t(1));
    return;
  }
  const size_t nd = in.shape().size(), lead = nd - out.shape().size();
  std::vector<IterDim> dims(nd);
  for (size_t d = 0; d < nd; ++d) {
    const int64_t size = in.shape()[d];
    // a dim of size 1 keeps the stride a keepdim output would have there; a reduced one gets 0
    int64_t out_stride = d < lead ? out.numel() : out.strides()[d - lead];
    if (size != 1 && (d < lead || out.shape()[d - lead] == 1)) out_stride = 0;
    dims[d] = {size, in.strides()[d], out_stride};
  }
  std::vector<IterDim> it = reduction_iteration_order(dims);
  while (it.size() < 2) it.push_back({1, 0, 0});
  const T* pi = ptr<T>(in);
  T* po = ptr<T>(out);
  // dims 2.. are walked by an odometer (dim 2 fastest), each step one 2-D loop, as serial_for_each does
  std::vector<int64_t> counter(it.size(), 0);
  int64_t in_off = 0, out_off = 0;
  while (true) {
    cascade_sum_2d(pi + in_off, po + out_off, it[0].size, it[1].size, it[0].in_stride, it[1].in_stride,
                   it[0].out_stride, it[1].out_stride);
    size_t d = 2;
    for (; d < it.size(); ++d) {
      in_off += it[d].in_stride;
      out_off += it[d].out_stride;
      if (++counter[d] < it[d].size) break;
      in_off -= it[d].in_stride * it[d].size;
      out_off -= it[d].out_stride * it[d].size;
      counter[d] = 0;
    }
    if (d == it.size()) return;
  }
}

// dst (contiguous) = src, a matrix with any strides: one loop nest, no iteration plan — the copies
// training makes most are small matrices.
template <typename T> void copy_matrix(const Tensor& src, const Tensor& dst) {
  const int64_t rows = src.size(0), cols = src.size(1);
  const int64_t rs = src.strides()[0], cs = src.strides()[1];
  const T* s = ptr<T>(src);
  T* d = ptr<T>(dst);
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = s + r * rs;
    T* out = d + r * cols;
    if (cs == 1) {
      for (int64_t c = 0; c < cols; ++c) out[c] = row[c];
    } else {
      for (int64_t c = 0; c < cols; ++c) out[c] = row[c * cs];
    }
  }
}

class CpuBackend final : public Backend {
 public:
  void* allocate(size_t nbytes) override { return cached_allocate(nbytes); }
  void deallocate(void* p, size_t nbytes) override { cached_deallocate(p, nbytes); }

  void copy(const Tensor& src, const Tensor& dst) override {
    if (src.dtype() == dst.dtype() && dst.is_contiguous()) {
      if (src.is_contiguous()) {  // one block of bytes (memmove: x.copy_(x) is legal)
        if (src.numel() > 0) std::memmove(dst.raw_data(), src.raw_data(), size_t(src.numel()) * dtype_size(src.dtype()));
        return;
      }
      if (src.dim() == 2) {  // a bias row broadcast down addmm's output, a transposed gradient made contiguous
        dispatch(src.dtype(), [&](auto tag) { copy_matrix<decltype(tag)>(src, dst); });
        return;
      }
    }
    dispatch(src.dtype(), [&](auto s) {
      using S = decltype(s);
      dispatch(dst.dtype(), [&](auto d) {
        using D = decltype(d);
        if constexpr (std::is_same_v<D, bool>) map1<S, D>(src, dst, [](S x) { return x != S(0); });
        else map1<S, D>(src, dst, [](S x) { return D(x); });
      });
    });
  }

  void fill(const Tensor& dst, double value) override {
    dispatch(dst.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T v = T(value);
      if (v == T(0) && !std::signbit(double(value)) && dst.is_contiguous()) {  // zeros: all-zero bytes
        std::memset(dst.raw_data(), 0, size_t(dst.numel()) * sizeof(T));
        return;
      }
      // write-only: the old contents may be uninitialised (and, for bool, not even a valid bool)
      auto plan = make_plan<1>(dst.shape(), {&dst.strides()});
      T* p = ptr<T>(dst);
      parallel_for_each_run(plan, dst.numel(), [&](const auto& off, int64_t n, const auto& st) {
        for (int64_t i = 0; i < n; ++i) p[off[0] + i * st[0]] = v;
      });
    });
  }

  void unary(UnaryOp op, const Tensor& in, const Tensor& out, double scalar) override {
    dispatch(in.dtype(), [&](auto tag) { unary_typed<decltype(tag)>(op, in, out, scalar); });
  }

  void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) override {
    dispatch(a.dtype(), [&](auto tag) { binary_typed<decltype(tag)>(op, a, b, out); });
  }

  void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) override {
    dispatch(a.dtype(), [&](auto tag) {
      using T = decltype(tag);
      auto plan = make_plan<4>(out.shape(), {&out.strides(), &cond.strides(), &a.strides(), &b.strides()});
      T* po = ptr<T>(out);
      const bool* pc = ptr<bool>(cond);
      const T* pa = ptr<T>(a);
      const T* pb = ptr<T>(b);
      parallel_for_each_run(plan, out.numel(), [&](const auto& off, int64_t n, const auto& st) {
        T* o = po + off[0];
        const bool* c = pc + off[1];
        const T* x = pa + off[2];
        const T* y = pb + off[3];
        // masked_fill is where(mask, value, x) with the value a stride-0 scalar: give the compiler a
        // plain loop for that and for all-contiguous operands, so it can use vectors
        if (st[0] == 1 && st[1] == 1 && st[2] == 0 && st[3] == 1) {
          const T value = *x;
          if constexpr (std::is_same_v<T, float>) select_floats(c, value, y, o, n);
          else for (int64_t i = 0; i < n; ++i) o[i] = c[i] ? value : y[i];
        } else if (st[0] == 1 && st[1] == 1 && st[2] == 1 && st[3] == 0) {  // where(cond, x, scalar)
          const T value = *y;
          for (int64_t i = 0; i < n; ++i) o[i] = c[i] ? x[i] : value;
        } else if (st[0] == 1 && st[1] == 1 && st[2] == 1 && st[3] == 1) {
          for (int64_t i = 0; i < n; ++i) o[i] = c[i] ? x[i] : y[i];
        } else {
          for (int64_t i = 0; i < n; ++i) o[i * st[0]] = c[i * st[1]] ? x[i * st[2]] : y[i * st[3]];
        }
      });
    });
  }

  void sum_to(const Tensor& in, const Tensor& out) override {
    // `out` is contiguous, with size 1 on the reduced dims (or without some leading dims).
    fill(out, 0.0);
    if (in.numel() == 0) return;
    if (is_floating(in.dtype())) {
      dispatch_floating(in.dtype(), "sum", [&](auto tag) { cascade_sum<decltype(tag)>(in, out); });
      return;
    }
    // integers: every order gives the same sum. Viewed with stride 0 along the reduced dims, every
    // input element lands on its output slot.
    Shape acc_strides(in.shape().size(), 0);
    const size_t lead = in.shape().size() - out.shape().size();
    for (size_t d = 0; d < out.shape().size(); ++d)
      acc_strides[d + lead] = out.shape()[d] == 1 ? 0 : out.strides()[d];
    dispatch(in.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* pi = ptr<T>(in);
      T* po = ptr<T>(out);
      auto plan = make_plan<2>(in.shape(), {&acc_strides, &in.strides()});
      for_each_run(plan, in.numel(), [&](const auto& off, int64_t n, const auto& st) {
        for (int64_t i = 0; i < n; ++i) po[off[0] + i * st[0]] += pi[off[1] + i * st[1]];
      });
    });
  }

  void max_dim(const Tensor& in, int64_t dim, const Tensor& values, const Tensor& indices) override {
    dispatch(in.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const int64_t n = in.shape()[size_t(dim)], s = in.strides()[size_t(dim)];
      const T* pi = ptr<T>(in);
      T* pv = ptr<T>(values);
      int64_t* px = indices.defined() ? ptr<int64_t>(indices) : nullptr;
      // values and indices share a contiguous layout, so one offset addresses both
      for_each_row(in, values, dim, [&](int64_t oi, int64_t oo) {
        const T* x = pi + oi;
        T best = x[0];
        int64_t at = 0;
        for (int64_t j = 1; j < n; ++j) {
          T v = x[j * s];
          if constexpr (std::is_floating_point_v<T>) {
            if (std::isnan(best)) break;  // NaN wins, as in PyTorch
            if (std::isnan(v) || v > best) best = v, at = j;
          } else {
            if (v > best) best = v, at = j;
          }
        }
        pv[oo] = best;
        if (px) px[oo] = at;
      });
    });
  }

  void matmul(const Tensor& a, const Tensor& b, const Tensor& out) override { batched_matmul(a, b, out); }

  void softmax(const Tensor& in, int64_t dim, bool log, const Tensor& out) override {
    dispatch_floating(in.dtype(), "softmax", [&](auto tag) { softmax_typed<decltype(tag)>(in, dim, log, out); });
  }

  void softmax_backward(const Tensor& y, const Tensor& g, int64_t dim, bool log, const Tensor& gx) override {
    dispatch_floating(y.dtype(), "softmax_backward",
                      [&](auto tag) { softmax_backward_typed<decltype(tag)>(y, g, dim, log, gx); });
  }

  void index_select_rows(const Tensor& weight, const Tensor& index, const Tensor& out) override {
    dispatch(weight.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const int64_t n = index.numel(), d = weight.shape()[1];
      const int64_t r = weight.strides()[0], c = weight.strides()[1];
      const int64_t* idx = ptr<int64_t>(index);
      const T* w = ptr<T>(weight);
      T* o = ptr<T>(out);
      for (int64_t i = 0; i < n; ++i) {
        const T* row = w + idx[i] * r;
        if (c == 1) {  // a plain loop: rows are short, and a memcpy call per row costs more than the copy
          for (int64_t j = 0; j < d; ++j) o[i * d + j] = row[j];
        } else {
          for (int64_t j = 0; j < d; ++j) o[i * d + j] = row[j * c];
        }
      }
    });
  }

  void index_add_rows(const Tensor& grad, const Tensor& index, const Tensor& grad_weight) override {
    dispatch(grad.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const int64_t n = index.numel(), d = grad_weight.shape()[1];
      const int64_t* idx = ptr<int64_t>(index);
      const T* g = ptr<T>(grad);
      T* w = ptr<T>(grad_weight);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < d; ++j) w[idx[i] * d + j] += g[i * d + j];
    });
  }

  void gather_rows(const Tensor& values, const Tensor& index, int64_t skip, const Tensor& out) override {
    dispatch(values.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const int64_t n = index.numel(), c = values.shape()[1];
      const int64_t* idx = ptr<int64_t>(index);
      const T* v = ptr<T>(values);
      T* o = ptr<T>(out);
      for (int64_t i = 0; i < n; ++i) o[i] = idx[i] == skip ? T(0) : v[i * c + idx[i]];
    });
  }

  void scatter_rows(const Tensor& grad, const Tensor& index, int64_t skip, const Tensor& grad_values) override {
    dispatch(grad.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const int64_t n = index.numel(), c = grad_values.shape()[1];
      const int64_t* idx = ptr<int64_t>(index);
      const T* g = ptr<T>(grad);
      T* v = ptr<T>(grad_values);
      for (int64_t i = 0; i < n; ++i)
        if (idx[i] != skip) v[i * c + idx[i]] += g[i];
    });
  }

  void adam_update(const AdamStep& step, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                   const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq) override {
    adam_update_cpu(step, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq);
  }

  void copy_to_cpu(const Tensor& src, void* dst, size_t nbytes) override { std::memcpy(dst, src.raw_data(), nbytes); }
  void copy_from_cpu(const void* src, const Tensor& dst, size_t nbytes) override {
    std::memcpy(dst.raw_data(), src, nbytes);
  }
};

}  // namespace

Backend& cpu_backend() {
  static CpuBackend instance;
  return instance;
}

}  // namespace autograd::cpu

namespace autograd {

namespace {
Backend* cuda_backend = nullptr;
}

void register_backend(DeviceType type, Backend* b) {
  if (type == DeviceType::CUDA) cuda_backend = b;
}

Backend& backend(Device device) {
  if (device.is_cpu()) return cpu::cpu_backend();
  if (!cuda_backend)
    throw std::runtime_error(fmt::format("device {}: this build of scratchgrad has no CUDA support "
                                         "(configure with -DSCRATCHGRAD_CUDA=ON on a machine with nvcc)",
                                         device.str()));
  return *cuda_backend;
}

}  // namespace autograd
