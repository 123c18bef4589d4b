// cpu/kernels/sums.cpp — sums over dims in PyTorch's cascade order, and max over a dim.
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
#include "autograd/cpu/kernels/lanes.h"
#include "autograd/cpu/kernels/loops.h"

namespace autograd::cpu {

namespace {

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
      for (int g = 0; g < G; ++g) l0[g] = _mm512_add_ps(l0[g], load_lanes(base + i * rs + 16 * g, lanes[g]));
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
    for (int g = 0; g < G; ++g) l0[g] = _mm512_add_ps(l0[g], load_lanes(base + i * rs + 16 * g, lanes[g]));
#pragma GCC unroll 4
  for (int g = 0; g < G; ++g) {
    const __m512 total = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(l0[g], l1[g]), l2[g]), l3[g]);
    store_lanes(result + 16 * g, lanes[g], total);
  }
}
// The same on 8-float vectors, for CPUs with AVX2 but not AVX-512: up to 24 columns at a time (3 vectors
// per level, 12 accumulators of the 16 registers); a last, partial vector is read and written masked.
[[gnu::target("avx2"), gnu::always_inline]] inline __m256 load_columns(const float* p, bool whole, __m256i lanes) {
  return whole ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, lanes);
}
template <int G>
[[gnu::target("avx2")]] void cascade_columns_avx2(const float* base, int64_t rs, int64_t count, int64_t cols,
                                                  float* result) {
  const CascadeLevels levels(count);  // four levels, as cascade_columns_with
  const int64_t level_power = levels.power, level_step = levels.step, level_mask = levels.mask;
  const int64_t in_last = cols - 8 * (G - 1);  // 1..8 columns in the last vector
  const __m256i lane_index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i last_lanes = _mm256_cmpgt_epi32(_mm256_set1_epi32(int(in_last)), lane_index);
  bool whole[G];
  for (int g = 0; g < G; ++g) whole[g] = g < G - 1 || in_last == 8;
  __m256 l0[G], l1[G], l2[G], l3[G];
#pragma GCC unroll 4
  for (int g = 0; g < G; ++g) l0[g] = l1[g] = l2[g] = l3[g] = _mm256_setzero_ps();
  int64_t i = 0;
  while (i + level_step <= count) {
    for (int64_t j = 0; j < level_step; ++j, ++i)
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) l0[g] = _mm256_add_ps(l0[g], load_columns(base + i * rs + 8 * g, whole[g], last_lanes));
    const bool up2 = (i & (level_mask << level_power)) == 0, up3 = up2 && (i & (level_mask << (2 * level_power))) == 0;
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      l1[g] = _mm256_add_ps(l1[g], l0[g]);
      l0[g] = _mm256_setzero_ps();
      if (up2) {
        l2[g] = _mm256_add_ps(l2[g], l1[g]);
        l1[g] = _mm256_setzero_ps();
      }
      if (up3) {
        l3[g] = _mm256_add_ps(l3[g], l2[g]);
        l2[g] = _mm256_setzero_ps();
      }
    }
  }
  for (; i < count; ++i)
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) l0[g] = _mm256_add_ps(l0[g], load_columns(base + i * rs + 8 * g, whole[g], last_lanes));
#pragma GCC unroll 4
  for (int g = 0; g < G; ++g) {
    const __m256 total = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(l0[g], l1[g]), l2[g]), l3[g]);
    if (whole[g]) _mm256_storeu_ps(result + 8 * g, total);
    else _mm256_maskstore_ps(result + 8 * g, last_lanes, total);
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
    if (cs == 1 && has_avx2()) {
      for (int64_t c0 = 0; c0 < cols; c0 += 24) {
        const int64_t nc = std::min<int64_t>(24, cols - c0);
        switch ((nc + 7) / 8) {
          case 1: cascade_columns_avx2<1>(base + c0, rs, count, nc, result + c0); break;
          case 2: cascade_columns_avx2<2>(base + c0, rs, count, nc, result + c0); break;
          default: cascade_columns_avx2<3>(base + c0, rs, count, nc, result + c0); break;
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
    parallel_ranges(chunks, size0 * kChunk, [&](int64_t c0, int64_t c1) {
      for (int64_t chunk = c0; chunk < c1; ++chunk) sum_chunk(chunk);
    });
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

}  // namespace

void sum_to(const Tensor& in, const Tensor& out) {
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

void max_dim(const Tensor& in, int64_t dim, const Tensor& values, const Tensor& indices) {
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

}  // namespace autograd::cpu
