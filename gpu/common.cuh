// gpu/common.cuh — what every kernel file shares (internal, nvcc only): strided indexing, launch
// geometry, dtype dispatch.
//
// Kernels see tensors of one shape with arbitrary strides (views, broadcast stride 0). On the host we
// "coalesce" the dims exactly as the CPU loops do: drop size-1 dims and merge neighbours laid out back to
// back in every operand, so a contiguous tensor becomes one run. The result (at most kMaxDims sizes, and
// per dim one stride per operand) travels to the kernel by value in an Indexer; each thread turns its
// linear index into one element offset per operand.
#pragma once
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "autograd/tensor.h"
#include "gpu/check.h"

namespace gpu::detail {

using autograd::DType;
using autograd::Shape;
using autograd::Tensor;

constexpr int kMaxDims = 8;  // per kernel launch, after coalescing (elementwise launches split deeper ones)
constexpr int kThreads = 256;

template <int K> struct Indexer {
  int ndim = 0;             // 0: a single element (or every dim has size 1)
  bool contiguous = true;   // every operand is one run with stride 1: offset == base + index
  int64_t base[K] = {};     // element offset of each operand's first element (for split launches)
  int64_t sizes[kMaxDims];  // outermost first
  int64_t strides[kMaxDims][K];

  __device__ __forceinline__ void offsets(int64_t i, int64_t (&off)[K]) const {
#pragma unroll
    for (int k = 0; k < K; ++k) off[k] = base[k] + (contiguous ? i : 0);
    if (contiguous) return;
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t size = sizes[d];
      const int64_t q = i / size, r = i - q * size;
      i = q;
#pragma unroll
      for (int k = 0; k < K; ++k) off[k] += r * strides[d][k];
    }
  }
};

// Dims merged where every operand allows it, size-1 dims dropped; outermost first.
template <int K> struct Coalesced {
  std::vector<int64_t> sizes;
  std::vector<std::array<int64_t, K>> strides;
};

template <int K> Coalesced<K> coalesce(const Shape& shape, const std::array<const Shape*, K>& strides) {
  Coalesced<K> c;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    std::array<int64_t, K> s;
    for (int k = 0; k < K; ++k) s[size_t(k)] = (*strides[size_t(k)])[d];
    bool merge = !c.sizes.empty();
    for (int k = 0; merge && k < K; ++k) merge = c.strides.back()[size_t(k)] == s[size_t(k)] * shape[d];
    if (merge) {
      c.sizes.back() *= shape[d];
      c.strides.back() = s;
    } else {
      c.sizes.push_back(shape[d]);
      c.strides.push_back(s);
    }
  }
  return c;
}

// An Indexer over the coalesced dims [first, end) (at most kMaxDims of them).
template <int K> Indexer<K> indexer_from(const Coalesced<K>& c, size_t first) {
  Indexer<K> ix;
  const int n = int(c.sizes.size() - first);
  ix.ndim = n;
  ix.contiguous = n == 0;
  if (n == 1) {
    ix.contiguous = true;
    for (int k = 0; k < K; ++k) ix.contiguous = ix.contiguous && c.strides[first][size_t(k)] == 1;
  }
  for (int d = 0; d < n; ++d) {
    ix.sizes[d] = c.sizes[first + size_t(d)];
    for (int k = 0; k < K; ++k) ix.strides[d][k] = c.strides[first + size_t(d)][size_t(k)];
  }
  return ix;
}

// For kernels that take one launch: more than kMaxDims unmergeable dims are refused with a clear error.
template <int K>
Indexer<K> make_indexer(const Shape& shape, const std::array<const Shape*, K>& strides, const char* op) {
  Coalesced<K> c = coalesce<K>(shape, strides);
  if (c.sizes.size() > size_t(kMaxDims))
    throw std::invalid_argument(std::string("gpu ") + op + ": operands need " + std::to_string(c.sizes.size()) +
                                " dimensions after merging contiguous ones; this kernel takes at most " +
                                std::to_string(kMaxDims) + " (make the input .contiguous() first)");
  return indexer_from(c, 0);
}

inline unsigned blocks_for(int64_t n, int threads = kThreads) {
  const int64_t b = (n + threads - 1) / threads;
  return unsigned(b < 1 ? 1 : (b > 65535 * 8 ? 65535 * 8 : b));  // grid-stride loops cover the rest
}

#define GPU_GRID_STRIDE_LOOP(i, n)                                                          \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);                 \
       i += int64_t(blockDim.x) * gridDim.x)

template <typename T> T* ptr(const Tensor& t) { return static_cast<T*>(t.raw_data()); }

using autograd::dispatch;  // dtype → C++ type, shared with the CPU backend (autograd/dtype.h)
using autograd::dispatch_floating;

// NaN-propagating max (a NaN anywhere wins, as in PyTorch).
template <typename T> __device__ __forceinline__ T nan_max(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a) return a;
    if (b != b) return b;
  }
  return b > a ? b : a;
}

// The sum of v over the 32 lanes of a warp, in every lane (a butterfly of shuffles).
template <typename T> __device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// exp in T's own precision (expf for float).
template <typename T> __device__ __forceinline__ T fexp(T x) {
  if constexpr (std::is_same_v<T, float>) return expf(x); else return exp(x);
}

}  // namespace gpu::detail
