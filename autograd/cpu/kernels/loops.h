// cpu/kernels/loops.h — walking K same-shaped strided operands with as few, as long inner loops as possible.
//
// Elementwise kernels see tensors of one shape but arbitrary strides (views, broadcast stride 0). We
// first "coalesce": drop size-1 dims and merge neighbouring dims that are laid out back to back in every
// operand, so a contiguous 3-D tensor becomes one run of numel elements. Then the kernel's inner lambda
// is called once per innermost run with the run length and each operand's inner stride; a kernel tests
// for stride 1 and gives the compiler a plain loop it can vectorise.
#pragma once
#include <algorithm>
#include <cmath>
#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "autograd/dtype.h"
#include "autograd/cpu/runtime/runtime.h"
#include "autograd/tensor.h"

namespace autograd::cpu {

// A vector with fixed room (no allocation: every kernel call makes a plan, so it must be cheap).
template <typename T, size_t N> class FixedVector {
 public:
  void push_back(const T& v) {
    if (size_ == N)
      throw std::invalid_argument("kernel: more than " + std::to_string(N) +
                                  " dimensions remain after merging contiguous ones; not supported");
    items_[size_++] = v;
  }
  T& back() { return items_[size_ - 1]; }
  const T& back() const { return items_[size_ - 1]; }
  T& operator[](size_t i) { return items_[i]; }
  const T& operator[](size_t i) const { return items_[i]; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  std::array<T, N> items_;  // only [0, size_) is ever read: not cleared (that was a rep stos per kernel call)
  size_t size_ = 0;
};

inline constexpr size_t kMaxLoopDims = 16;

template <size_t K> struct LoopPlan {
  FixedVector<int64_t, kMaxLoopDims> sizes;                   // outermost first
  FixedVector<std::array<int64_t, K>, kMaxLoopDims> strides;  // per dim, per operand (elements)
};

template <size_t K> LoopPlan<K> make_plan(const Shape& shape, const std::array<const Shape*, K>& strides) {
  LoopPlan<K> plan;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    std::array<int64_t, K> s;
    for (size_t k = 0; k < K; ++k) s[k] = (*strides[k])[d];
    bool merge = !plan.sizes.empty();
    for (size_t k = 0; merge && k < K; ++k) merge = plan.strides.back()[k] == s[k] * shape[d];
    if (merge) {
      plan.sizes.back() *= shape[d];
      plan.strides.back() = s;
    } else {
      plan.sizes.push_back(shape[d]);
      plan.strides.push_back(s);
    }
  }
  return plan;
}

// Calls run(offsets, n, inner_strides) for the innermost runs that cover elements [begin, end) of the
// iteration (element e is the e-th visited, outermost dim slowest); offsets are element offsets per
// operand. A run may be cut short at `begin` or `end`.
template <size_t K, typename Run>
void for_each_run_in(const LoopPlan<K>& plan, int64_t begin, int64_t end, Run&& run) {
  std::array<int64_t, K> offsets{};
  if (begin >= end) return;
  if (plan.sizes.empty()) {  // every dim has size 1: a single element
    std::array<int64_t, K> ones;
    ones.fill(1);
    run(offsets, int64_t(1), ones);
    return;
  }
  const size_t inner = plan.sizes.size() - 1;
  std::array<int64_t, kMaxLoopDims> counter{};  // the odometer: index along each dim
  for (int64_t rest = begin, d = int64_t(inner); d >= 0 && rest > 0; --d) {
    counter[size_t(d)] = rest % plan.sizes[size_t(d)];
    rest /= plan.sizes[size_t(d)];
    for (size_t k = 0; k < K; ++k) offsets[k] += counter[size_t(d)] * plan.strides[size_t(d)][k];
  }
  for (int64_t e = begin;;) {
    const int64_t n = std::min(plan.sizes[inner] - counter[inner], end - e);
    run(offsets, n, plan.strides[inner]);
    e += n;
    if (e >= end) return;
    for (size_t k = 0; k < K; ++k) offsets[k] -= counter[inner] * plan.strides[inner][k];  // back to the run's start
    counter[inner] = 0;
    size_t d = inner;  // advance the odometer over the outer dims
    while (d > 0) {
      --d;
      if (++counter[d] < plan.sizes[d]) {
        for (size_t k = 0; k < K; ++k) offsets[k] += plan.strides[d][k];
        break;
      }
      for (size_t k = 0; k < K; ++k) offsets[k] -= plan.strides[d][k] * (plan.sizes[d] - 1);
      counter[d] = 0;
    }
  }
}

// Every innermost run, in order.
template <size_t K, typename Run> void for_each_run(const LoopPlan<K>& plan, int64_t numel, Run&& run) {
  for_each_run_in(plan, 0, numel, run);
}

// Below this many elements a kernel stays on one thread: starting threads costs a few microseconds.
inline constexpr int64_t kParallelElements = int64_t(1) << 15;

// Like for_each_run, with the elements split into one contiguous range per thread (get_num_threads())
// when there are enough of them. Only for kernels whose runs write disjoint outputs — elementwise maps,
// row-wise softmax — so that who computes an element can never change its value.
// `cost` is how many elements' worth of work one element is (a softmax row: its length).
template <size_t K, typename Run>
void parallel_for_each_run(const LoopPlan<K>& plan, int64_t numel, Run&& run, int64_t cost = 1) {
  const int threads = numel * cost < kParallelElements ? 1 : int(std::min<int64_t>(get_num_threads(), numel));
  if (threads <= 1) return for_each_run(plan, numel, run);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int t = 0; t < threads; ++t) for_each_run_in(plan, numel * t / threads, numel * (t + 1) / threads, run);
}

// body(begin, end) over [0, count), split into one contiguous range per thread when the work (count
// items of `cost` elements each) is large enough. For bodies whose ranges write disjoint outputs, each in
// an order that does not depend on the range (rows of a layer_norm, columns of its weight gradient).
template <typename Body> void parallel_ranges(int64_t count, int64_t cost, Body&& body) {
  const int threads = count * cost < kParallelElements ? 1 : int(std::min<int64_t>(get_num_threads(), count));
  if (threads <= 1) return body(int64_t(0), count);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int t = 0; t < threads; ++t) body(count * t / threads, count * (t + 1) / threads);
}

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
// body() with its loops compiled for AVX-512 where the CPU has it, for kernels whose inner loops are
// short (a causal matrix's rows) and would pay a dispatch per loop in contiguous_loop. The same rule:
// only bodies that give the same bits in any vector width.
#if defined(__x86_64__) && defined(__GNUC__)
template <typename Body> [[gnu::target("avx512f")]] void run_avx512(Body body) { body(); }
#endif
template <typename Body> inline void run_vectorized(Body body) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (avx512_kernels()) return run_avx512(body);
#endif
  body();
}
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


// Lanes of PyTorch's portable Vectorized<T>.
template <typename T> constexpr int64_t kVecLanes = 32 / int64_t(sizeof(T));

// A row's (or column's) stride: any, or 1 known at compile time — contiguous ones then
// get plain loops the compiler can unroll and vectorise.
using Contiguous = std::integral_constant<int64_t, 1>;

}  // namespace autograd::cpu
