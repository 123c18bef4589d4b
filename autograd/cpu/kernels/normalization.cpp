// cpu/kernels/normalization.cpp — layer_norm (forward and its fused backward), var/std and the 2-norm, each
// adding and multiplying in the order of PyTorch 1.13's portable (ATEN_CPU_CAPABILITY=default) kernels,
// so that float32 results have PyTorch's bits. Each function states its order; in short,
// PyTorch's Vectorized<T> is kVecLanes plain lanes, and every operation below rounds once (no FMA).
// In fast numerics (numerics.h) float layer_norm takes its own vector-friendly rows ("fast numerics"
// below): sums in 16 lanes and a two-pass variance, which the compiler vectorises, where PyTorch's order
// keeps a row's sums serial.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "autograd/cpu/kernels.h"
#include "autograd/cpu/kernels/loops.h"
#include "autograd/cpu/runtime/runtime.h"
#include "autograd/numerics.h"

namespace autograd::cpu {

namespace {

// ---------------------------------------------------------------- row moments (RowwiseMoments)

// Welford moments of kVecLanes interleaved lanes: lane l holds elements l, l + V, l + 2V, ...
template <typename T> struct LaneMoments {
  static constexpr int64_t V = kVecLanes<T>;
  int64_t count = 0;  // values per lane
  std::array<T, V> m1{}, m2{};

  // Chan's combination of another set of moments into this one, with one shared coefficient
  // c = n_add / (n + n_add) for every lane (PyTorch's AddMomentsVec).
  void add(int64_t count_add, const std::array<T, V>& m1_add, const std::array<T, V>& m2_add) {
    const int64_t total = count + count_add;
    const T c = total == 0 ? T(0) : T(count_add) / T(total);
    for (int64_t l = 0; l < V; ++l) {
      const T delta = m1_add[l] - m1[l];
      m1[l] = m1[l] + c * delta;
      m2[l] = m2[l] + (m2_add[l] + ((delta * delta) * c) * T(count));
    }
    count = total;
  }
  void add(const LaneMoments& other) { add(other.count, other.m1, other.m2); }
};

// The same combination for one scalar set of moments (PyTorch's AddMoments).
template <typename T> void add_moments(int64_t count_add, T m1_add, T m2_add, int64_t& count, T& m1, T& m2) {
  const int64_t total = count + count_add;
  const T c = total == 0 ? T(0) : T(count_add) / T(total);
  const T delta = m1_add - m1;
  m1 = m1 + c * delta;
  m2 = m2 + (m2_add + ((delta * delta) * c) * T(count));
  count = total;
}

int64_t ceil_log2(int64_t x) {  // PyTorch's CeilLog2: at least 1
  if (x <= 2) return 1;
  return 64 - __builtin_clzll(uint64_t(x - 1));
}

// Mean and biased variance of x[0, n) as PyTorch's RowwiseMoments computes them: the whole vectors in
// chunks of 16, each chunk a per-lane Welford pass (multiplying by the float reciprocal of the count),
// chunks merged by a binary-counter cascade of depth ceil_log2(chunks); the leftover elements by a
// scalar Welford pass (dividing), and finally the lanes folded into it one at a time.
template <typename T> std::pair<T, T> row_moments(const T* x, int64_t n) {
  constexpr int64_t V = kVecLanes<T>, kChunk = 16;
  const int64_t vectors = n / V, chunks = (vectors + kChunk - 1) / kChunk, depth = ceil_log2(chunks);
  std::array<T, kChunk> reciprocal;
  for (int64_t j = 0; j < kChunk; ++j) reciprocal[size_t(j)] = T(1) / T(j + 1);
  std::vector<LaneMoments<T>> levels(static_cast<size_t>(depth));
  for (int64_t i = 0; i < chunks; ++i) {
    const int64_t count = std::min(kChunk, vectors - i * kChunk);
    std::array<T, V> m1{}, m2{};
    for (int64_t j = 0; j < count; ++j) {
      const T* v = x + (i * kChunk + j) * V;
      for (int64_t l = 0; l < V; ++l) {
        const T delta = v[l] - m1[l];
        m1[l] = m1[l] + delta * reciprocal[size_t(j)];
        m2[l] = m2[l] + delta * (v[l] - m1[l]);
      }
    }
    levels[0].add(count, m1, m2);
    for (int64_t mask = i + 1, lev = 1; lev < depth && (mask & 1) == 0; ++lev, mask >>= 1) {  // carry
      levels[size_t(lev)].add(levels[size_t(lev - 1)]);
      levels[size_t(lev - 1)] = LaneMoments<T>();
    }
  }
  for (int64_t lev = 1; lev < depth; ++lev) levels[0].add(levels[size_t(lev)]);

  int64_t count = 0;
  T m1 = 0, m2 = 0;
  for (int64_t k = vectors * V; k < n; ++k) {
    const T delta = x[k] - m1;
    ++count;
    m1 = m1 + delta / T(count);
    m2 = m2 + delta * (x[k] - m1);
  }
  for (int64_t l = 0; l < V; ++l) add_moments(vectors, levels[0].m1[size_t(l)], levels[0].m2[size_t(l)], count, m1, m2);
  return {m1, m2 / T(n)};
}

// Σ v(j) for j in [0, n) as vec::map_reduce_all sums: lanes start from the first vector (not from
// zero), later elements go into lane j % V, and the lanes are folded left to right.
template <typename T, typename F> T lane_sum(int64_t n, F v) {
  constexpr int64_t V = kVecLanes<T>;
  if (n == 0) return T(0);
  if (n < V) {
    T acc = v(0);
    for (int64_t j = 1; j < n; ++j) acc = acc + v(j);
    return acc;
  }
  std::array<T, V> lane;
  for (int64_t l = 0; l < V; ++l) lane[size_t(l)] = v(l);
  for (int64_t j = V; j < n; ++j) lane[size_t(j % V)] = lane[size_t(j % V)] + v(j);
  T acc = lane[0];
  for (int64_t l = 1; l < V; ++l) acc = acc + lane[size_t(l)];
  return acc;
}

// ---------------------------------------------------------------- layer_norm

// Rows are independent, so threads split them without changing a bit.
template <typename T>
void layer_norm_rows(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y,
                     const Tensor& mean, const Tensor& rstd) {
  const int64_t rows = x.size(0), n = x.size(1);
  const T* px = ptr<T>(x);
  const T* g = weight.defined() ? ptr<T>(weight) : nullptr;
  const T* b = bias.defined() ? ptr<T>(bias) : nullptr;
  T* py = ptr<T>(y);
  parallel_ranges(rows, n, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const T* xr = px + i * n;
      T* yr = py + i * n;
      auto [mu, var] = row_moments(xr, n);
      const T r = T(1) / std::sqrt(var + T(eps));  // a true sqrt and division, not rsqrt
      const T shift = -r * mu;
      // y = ((x·r + shift)·γ) + β; a missing γ or β is 1 or 0 in the same formula (so −0 becomes +0)
      if (g && b) contiguous_loop(n, [&](int64_t j) { yr[j] = (xr[j] * r + shift) * g[j] + b[j]; });
      else for (int64_t j = 0; j < n; ++j) yr[j] = (xr[j] * r + shift) * (g ? g[j] : T(1)) + (b ? b[j] : T(0));
      ptr<T>(mean)[i] = mu;
      ptr<T>(rstd)[i] = r;
    }
  });
}

// With x̂ = (x − μ)·r and y = x̂·γ + β over a row of n:
//   dβ = Σ_rows dy,   dγ = Σ_rows dy·x̂,
//   dx = r·dy·γ + B·x + C   where B = (Σ dy·γ·μ − Σ dy·γ·x)·r³/n and C = −B·μ − (Σ dy·γ)·r/n,
// which is r·(dyγ − mean(dyγ) − x̂·mean(dyγ·x̂)) rearranged as PyTorch's kernel computes it.
// Two passes, each split over threads without changing a bit: dx by rows, dγ and dβ by columns (each
// column summed over the rows in row order, PyTorch's one-thread order).
template <typename T>
void layer_norm_backward_rows(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                              const Tensor& weight, const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  const int64_t rows = x.size(0), n = x.size(1);
  const T *pdy = ptr<T>(dy), *px = ptr<T>(x), *pm = ptr<T>(mean), *pr = ptr<T>(rstd);
  const T* g = weight.defined() ? ptr<T>(weight) : nullptr;
  const T scale = T(1) / T(n);
  if (dx.defined()) {
    parallel_ranges(rows, n, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const T *dyr = pdy + i * n, *xr = px + i * n;
        const T a = pr[i], mu = pm[i];
        const T sum_dy_x = lane_sum<T>(n, [&](int64_t j) { return g ? (dyr[j] * xr[j]) * g[j] : dyr[j] * xr[j]; });
        const T sum_dy = lane_sum<T>(n, [&](int64_t j) { return g ? dyr[j] * g[j] : dyr[j]; });
        const T B = ((((sum_dy * mu) - sum_dy_x) * a) * a) * a * scale;
        const T C = ((-B) * mu) - ((sum_dy * a) * scale);
        T* dxr = ptr<T>(dx) + i * n;
        if (g) contiguous_loop(n, [&](int64_t j) { dxr[j] = (((a * dyr[j]) * g[j]) + B * xr[j]) + C; });
        else contiguous_loop(n, [&](int64_t j) { dxr[j] = ((a * dyr[j]) + B * xr[j]) + C; });
      }
    });
  }
  if (!dweight.defined() && !dbias.defined()) return;
  // dγ and dβ: every row added in row order, starting from 0 (then added to 0, as PyTorch does)
  T* dg = dweight.defined() ? ptr<T>(dweight) : nullptr;
  T* db = dbias.defined() ? ptr<T>(dbias) : nullptr;
  parallel_ranges(n, rows, [&](int64_t j0, int64_t j1) {
    const int64_t w = j1 - j0;
    std::vector<T> sums_g(dg ? size_t(w) : 0, T(0)), sums_b(db ? size_t(w) : 0, T(0));
    T *sg = sums_g.data(), *sb = sums_b.data();
    for (int64_t i = 0; i < rows; ++i) {
      const T *dyr = pdy + i * n + j0, *xr = px + i * n + j0;
      const T a = pr[i], shift = (-a) * pm[i];
      if (dg) contiguous_loop(w, [&](int64_t j) { sg[j] = sg[j] + dyr[j] * (a * xr[j] + shift); });
      if (db) contiguous_loop(w, [&](int64_t j) { sb[j] = sb[j] + dyr[j]; });
    }
    for (int64_t j = 0; j < w; ++j) {
      if (dg) dg[j0 + j] = T(0) + sg[j];
      if (db) db[j0 + j] = T(0) + sb[j];
    }
  });
}

// ---------------------------------------------------------------- layer_norm, fast numerics
// The same formulas for float rows, with every sum kept in 16 lanes (element j in lane j % 16, the lanes
// folded pairwise at the end) instead of PyTorch's per-lane Welford pass and its 8-lane sums: vector
// code, and a two-pass variance (the mean first, then Σ (x − mean)²) for accuracy. Plain multiplies and
// adds, so the AVX-512 and AVX2 twins the compiler vectorises and the baseline loop give the same bits.
constexpr int64_t kFastLanes = 16;

// Σ v(j) for j in [0, n), in kFastLanes lanes folded pairwise, then the leftover elements.
template <typename F> [[gnu::always_inline]] inline float lanes_sum(int64_t n, F v) {
  float lane[kFastLanes] = {};
  const int64_t whole = n - n % kFastLanes;
  for (int64_t j = 0; j < whole; j += kFastLanes)
    for (int64_t l = 0; l < kFastLanes; ++l) lane[l] = lane[l] + v(j + l);
  for (int64_t width = kFastLanes / 2; width >= 1; width /= 2)
    for (int64_t l = 0; l < width; ++l) lane[l] = lane[l] + lane[l + width];
  float total = lane[0];
  for (int64_t j = whole; j < n; ++j) total = total + v(j);
  return total;
}

struct FastLayerNormRows {
  const float *x, *g, *b;  // g, b may be null (1 and 0)
  float *y, *mean, *rstd;
  int64_t n;
  float eps;

  [[gnu::always_inline]] void operator()(int64_t i0, int64_t i1) const {
    for (int64_t i = i0; i < i1; ++i) {
      const float* xr = x + i * n;
      float* yr = y + i * n;
      const float mu = lanes_sum(n, [&](int64_t j) { return xr[j]; }) / float(n);
      const float var = lanes_sum(n, [&](int64_t j) { return (xr[j] - mu) * (xr[j] - mu); }) / float(n);
      const float r = 1.0f / std::sqrt(var + eps);
      if (g && b) for (int64_t j = 0; j < n; ++j) yr[j] = ((xr[j] - mu) * r) * g[j] + b[j];
      else for (int64_t j = 0; j < n; ++j) yr[j] = ((xr[j] - mu) * r) * (g ? g[j] : 1.0f) + (b ? b[j] : 0.0f);
      mean[i] = mu;
      rstd[i] = r;
    }
  }
};

// dx of rows [i0, i1), by the exact kernel's formula (see layer_norm_backward_rows) with lanes_sum.
struct FastLayerNormGradRows {
  const float *dy, *x, *mean, *rstd, *g;  // g may be null
  float* dx;
  int64_t n;

  [[gnu::always_inline]] void operator()(int64_t i0, int64_t i1) const {
    const float scale = 1.0f / float(n);
    for (int64_t i = i0; i < i1; ++i) {
      const float *dyr = dy + i * n, *xr = x + i * n;
      float* dxr = dx + i * n;
      const float a = rstd[i], mu = mean[i];
      auto dyg = [&](int64_t j) { return g ? dyr[j] * g[j] : dyr[j]; };
      const float sum_dy_x = lanes_sum(n, [&](int64_t j) { return dyg(j) * xr[j]; });
      const float sum_dy = lanes_sum(n, dyg);
      const float B = ((((sum_dy * mu) - sum_dy_x) * a) * a) * a * scale;
      const float C = ((-B) * mu) - ((sum_dy * a) * scale);
      for (int64_t j = 0; j < n; ++j) dxr[j] = ((a * dyg(j)) + B * xr[j]) + C;
    }
  }
};

#if defined(__x86_64__) && defined(__GNUC__)
template <typename Rows> [[gnu::target("avx512f")]] void rows_avx512(const Rows& rows, int64_t i0, int64_t i1) {
  rows(i0, i1);
}
template <typename Rows> [[gnu::target("avx2")]] void rows_avx2(const Rows& rows, int64_t i0, int64_t i1) {
  rows(i0, i1);
}
#endif

// rows(i0, i1) over [0, count), split over threads (rows are independent), AVX-512 or AVX2 where the CPU
// has it (the same bits: the lanes are fixed by lanes_sum, not by the vector width).
template <typename Rows> void run_fast_rows(const Rows& rows, int64_t count, int64_t n) {
  parallel_ranges(count, n, [&](int64_t i0, int64_t i1) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (avx512_kernels()) return rows_avx512(rows, i0, i1);
    if (has_avx2()) return rows_avx2(rows, i0, i1);
#endif
    rows(i0, i1);
  });
}

// ---------------------------------------------------------------- var / std

// Welford in double over one row, as PyTorch's WelfordOps<float, double> reduce along a dim.
template <typename T> double welford_m2(const T* x, int64_t n) {
  double m = 0, m2 = 0;
  for (int64_t k = 0; k < n; ++k) {
    const double delta = double(x[k]) - m;
    m = m + delta / double(k + 1);
    m2 = m2 + delta * (double(x[k]) - m);
  }
  return m2;
}

// The whole tensor, as PyTorch's std_var_all_cpu: the mean in T (its cascade sum / n), widened to
// double, then Σ (x − mean)² in double in memory order.
template <typename T> double two_pass_m2(const Tensor& x) {
  Tensor total = empty({}, x.dtype(), Device::cpu());
  sum_to(x.reshape({-1}), total);
  const double m = double(*ptr<T>(total) / T(x.numel()));
  const T* px = ptr<T>(x);
  double s = 0;
  for (int64_t k = 0; k < x.numel(); ++k) {
    const double d = double(px[k]) - m;
    s = s + d * d;
  }
  return s;
}

// ---------------------------------------------------------------- the 2-norm

// √(Σ x²) as PyTorch's reduce-lastdim fast path: kVecLanes accumulators from zero over the whole
// vectors, folded left to right, then the leftover elements' squares added one by one; a T sqrt.
template <typename T> T norm2_contiguous(const T* x, int64_t n) {
  constexpr int64_t V = kVecLanes<T>;
  const int64_t whole = n - n % V;
  std::array<T, V> acc{};
  for (int64_t d = 0; d < whole; d += V)
    for (int64_t l = 0; l < V; ++l) acc[size_t(l)] = acc[size_t(l)] + x[d + l] * x[d + l];
  T s = acc[0];
  for (int64_t l = 1; l < V; ++l) s = s + acc[size_t(l)];
  for (int64_t d = whole; d < n; ++d) s = s + x[d] * x[d];
  return std::sqrt(s);
}

}  // namespace

void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y,
                const Tensor& mean, const Tensor& rstd) {
  if (x.dtype() == DType::Float32 && numerics() == Numerics::fast) {
    const FastLayerNormRows rows{ptr<float>(x), weight.defined() ? ptr<float>(weight) : nullptr,
                                 bias.defined() ? ptr<float>(bias) : nullptr, ptr<float>(y), ptr<float>(mean),
                                 ptr<float>(rstd), x.size(1), float(eps)};
    return run_fast_rows(rows, x.size(0), x.size(1));
  }
  dispatch_floating(x.dtype(), "layer_norm", [&](auto tag) {
    layer_norm_rows<decltype(tag)>(x, weight, bias, eps, y, mean, rstd);
  });
}

void layer_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                         const Tensor& weight, const Tensor& grad_x, const Tensor& grad_weight,
                         const Tensor& grad_bias) {
  if (x.dtype() == DType::Float32 && numerics() == Numerics::fast && grad_x.defined()) {
    const FastLayerNormGradRows rows{ptr<float>(grad_y), ptr<float>(x), ptr<float>(mean), ptr<float>(rstd),
                                     weight.defined() ? ptr<float>(weight) : nullptr, ptr<float>(grad_x), x.size(1)};
    run_fast_rows(rows, x.size(0), x.size(1));
    // dγ and dβ as in exact numerics (column sums in row order), without dx
    layer_norm_backward_rows<float>(grad_y, x, mean, rstd, weight, Tensor(), grad_weight, grad_bias);
    return;
  }
  dispatch_floating(x.dtype(), "layer_norm backward", [&](auto tag) {
    layer_norm_backward_rows<decltype(tag)>(grad_y, x, mean, rstd, weight, grad_x, grad_weight, grad_bias);
  });
}

void var(const Tensor& x, double correction, bool take_sqrt, bool all, const Tensor& out) {
  dispatch_floating(x.dtype(), "var", [&](auto tag) {
    using T = decltype(tag);
    const int64_t rows = x.size(0), n = x.size(1);
    const double divisor = std::max(0.0, double(n) - correction);
    for (int64_t i = 0; i < rows; ++i) {
      const double m2 = all ? two_pass_m2<T>(x) : welford_m2(ptr<T>(x) + i * n, n);
      const double v = m2 / divisor;
      ptr<T>(out)[i] = T(take_sqrt ? std::sqrt(v) : v);
    }
  });
}

void norm2(const Tensor& x, const Tensor& out) {
  dispatch_floating(x.dtype(), "norm", [&](auto tag) {
    using T = decltype(tag);
    *ptr<T>(out) = norm2_contiguous(ptr<T>(x), x.numel());
  });
}

// Which thread computes each tensor's norm: largest first, each to the thread with the fewest elements so
// far, so that the threads finish together (GPT-2's gradients: one of 38.6M elements, 147 of 0.8K to 2.4M).
static std::vector<int> deal_to_threads(const std::vector<Tensor>& xs, int threads) {
  std::vector<size_t> order(xs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return xs[a].numel() > xs[b].numel(); });
  std::vector<int64_t> load(size_t(threads), 0);
  std::vector<int> owner(xs.size());
  for (size_t i : order) {
    const size_t least = size_t(std::min_element(load.begin(), load.end()) - load.begin());
    owner[i] = int(least);
    load[least] += xs[i].numel();
  }
  return owner;
}

// Each tensor's norm is norm2's, computed whole by one thread: the threads split the list, never a tensor
// (a norm's sum is one chain per lane, in memory order), so no bit depends on how many there are.
void norm2_each(const std::vector<Tensor>& xs, const Tensor& out) {
  dispatch_floating(out.dtype(), "norm", [&](auto tag) {
    using T = decltype(tag);
    int64_t elements = 0;
    for (const Tensor& x : xs) elements += x.numel();
    const int threads = elements < kParallelElements ? 1 : int(std::min<int64_t>(get_num_threads(), int64_t(xs.size())));
    const std::vector<int> owner = deal_to_threads(xs, threads);  // (an empty list: 0 elements, 1 thread)
    T* norms = ptr<T>(out);
    const int64_t stride = out.strides()[0];
    auto mine = [&](int thread) {
      for (size_t i = 0; i < xs.size(); ++i)
        if (owner[i] == thread) norms[int64_t(i) * stride] = norm2_contiguous(ptr<T>(xs[i]), xs[i].numel());
    };
    if (threads <= 1) return mine(0);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int t = 0; t < threads; ++t) mine(t);
  });
}

}  // namespace autograd::cpu
