// gpu/llama.cu — the Llama family's kernels: SiLU, RMS normalisation (one warp per row) and the rotary
// embedding, forward and backward. Every tensor arrives contiguous (backend.h says so for these entries).
// The formulas are the CPU's (cpu/kernels/llama.cpp); a row's sums add in the warp's order, so float32
// results agree with the CPU's to rounding, not bit for bit.
#include <cmath>

#include "gpu/common.cuh"
#include "gpu/kernels.h"

namespace gpu::kernels {

using namespace gpu::detail;

namespace {

template <typename T> __device__ __forceinline__ T fsqrt(T x) {
  if constexpr (std::is_same_v<T, float>) return sqrtf(x); else return sqrt(x);
}

// ---------------------------------------------------------------- silu

// y = x / (1 + exp(−x))
template <typename T> __global__ void silu_kernel(int64_t n, const T* x, T* y) {
  GPU_GRID_STRIDE_LOOP(i, n) y[i] = x[i] / (T(1) + fexp(-x[i]));
}

// dx = dy·σ·(1 + x·(1 − σ)),  σ = 1 / (1 + exp(−x))
template <typename T> __global__ void silu_backward_kernel(int64_t n, const T* dy, const T* x, T* dx) {
  GPU_GRID_STRIDE_LOOP(i, n) {
    const T sigmoid = T(1) / (T(1) + fexp(-x[i]));
    dx[i] = (dy[i] * sigmoid) * (T(1) + x[i] * (T(1) - sigmoid));
  }
}

// ---------------------------------------------------------------- rms_norm (one warp per row)

constexpr int kRowsPerBlock = 4;  // warps per block

// r = 1/√(Σ x²/n + eps);  y = w·(x·r)   (w null: y = x·r)
template <typename T>
__global__ void rms_norm_kernel(int64_t rows, int64_t n, T eps, const T* px, const T* w, T* py, T* rstd) {
  const int lane = threadIdx.x % 32;
  const int64_t first = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  for (int64_t row = first; row < rows; row += int64_t(gridDim.x) * kRowsPerBlock) {
    const T* x = px + row * n;
    T* y = py + row * n;
    T squares = T(0);
    for (int64_t k = lane; k < n; k += 32) squares += x[k] * x[k];
    squares = warp_sum(squares);
    const T r = T(1) / fsqrt(squares / T(n) + eps);
    for (int64_t k = lane; k < n; k += 32) y[k] = w ? w[k] * (x[k] * r) : x[k] * r;
    if (lane == 0) rstd[row] = r;
  }
}

// dx̂ = g·w;  dx = dx̂·r + ((−½·Σ dx̂·x)·r³ / n)·(2·x)
template <typename T>
__global__ void rms_norm_backward_kernel(int64_t rows, int64_t n, const T* pg, const T* px, const T* rstd, const T* w,
                                         T* pdx) {
  const int lane = threadIdx.x % 32;
  const int64_t first = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  for (int64_t row = first; row < rows; row += int64_t(gridDim.x) * kRowsPerBlock) {
    const T *g = pg + row * n, *x = px + row * n;
    T* dx = pdx + row * n;
    const T r = rstd[row];
    T dot = T(0);
    for (int64_t k = lane; k < n; k += 32) dot += (w ? g[k] * w[k] : g[k]) * x[k];
    dot = warp_sum(dot);
    const T dmean = ((T(-0.5) * dot) * ((r * r) * r)) / T(n);
    for (int64_t k = lane; k < n; k += 32) dx[k] = (w ? g[k] * w[k] : g[k]) * r + dmean * (T(2) * x[k]);
  }
}

// dw[k] = Σ_rows g·(x·r), one thread per column, the rows in order
template <typename T>
__global__ void rms_norm_weight_kernel(int64_t rows, int64_t n, const T* g, const T* x, const T* rstd, T* dw) {
  GPU_GRID_STRIDE_LOOP(k, n) {
    T sum = T(0);
    for (int64_t row = 0; row < rows; ++row) sum += g[row * n + k] * (x[row * n + k] * rstd[row]);
    dw[k] = sum;
  }
}

// ---------------------------------------------------------------- rotary embedding (one thread per pair)

// pair p of (row, t, j): out[j] = x[j]·c − x[j+h]·s, out[j+h] = x[j+h]·c + x[j]·s; `sign` −1 turns s into −s
template <typename T>
__global__ void rotary_kernel(int64_t pairs, int64_t t_count, int64_t h, T sign, const T* x, const T* cos,
                              const T* sin, T* out) {
  GPU_GRID_STRIDE_LOOP(p, pairs) {
    const int64_t j = p % h, position = p / h;  // position = row·T + t
    const int64_t table = (position % t_count) * h + j, at = position * 2 * h + j;
    const T c = cos[table], s = sign * sin[table], x1 = x[at], x2 = x[at + h];
    out[at] = x1 * c - x2 * s;
    out[at + h] = x2 * c + x1 * s;
  }
}

}  // namespace

void silu(const Tensor& x, const Tensor& y) {
  const int64_t n = x.numel();
  if (n == 0) return;
  dispatch_floating(x.dtype(), "silu", [&](auto tag) {
    using T = decltype(tag);
    silu_kernel<T><<<blocks_for(n), kThreads>>>(n, ptr<T>(x), ptr<T>(y));
    check_launch("silu");
  });
}

void silu_backward(const Tensor& grad_y, const Tensor& x, const Tensor& grad_x) {
  const int64_t n = x.numel();
  if (n == 0) return;
  dispatch_floating(x.dtype(), "silu_backward", [&](auto tag) {
    using T = decltype(tag);
    silu_backward_kernel<T><<<blocks_for(n), kThreads>>>(n, ptr<T>(grad_y), ptr<T>(x), ptr<T>(grad_x));
    check_launch("silu_backward");
  });
}

void rms_norm(const Tensor& x, const Tensor& weight, double eps, const Tensor& y, const Tensor& rstd) {
  const int64_t rows = x.size(0), n = x.size(1);
  if (rows == 0) return;
  dispatch_floating(x.dtype(), "rms_norm", [&](auto tag) {
    using T = decltype(tag);
    const T* w = weight.defined() ? ptr<T>(weight) : nullptr;
    rms_norm_kernel<T><<<blocks_for(rows, kRowsPerBlock), kRowsPerBlock * 32>>>(rows, n, T(eps), ptr<T>(x), w,
                                                                                 ptr<T>(y), ptr<T>(rstd));
    check_launch("rms_norm");
  });
}

void rms_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& rstd, const Tensor& weight,
                       const Tensor& grad_x, const Tensor& grad_weight) {
  const int64_t rows = x.size(0), n = x.size(1);
  dispatch_floating(x.dtype(), "rms_norm_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* w = weight.defined() ? ptr<T>(weight) : nullptr;
    if (grad_x.defined() && rows > 0) {
      rms_norm_backward_kernel<T><<<blocks_for(rows, kRowsPerBlock), kRowsPerBlock * 32>>>(
          rows, n, ptr<T>(grad_y), ptr<T>(x), ptr<T>(rstd), w, ptr<T>(grad_x));
      check_launch("rms_norm_backward");
    }
    if (grad_weight.defined() && n > 0) {
      rms_norm_weight_kernel<T><<<blocks_for(n), kThreads>>>(rows, n, ptr<T>(grad_y), ptr<T>(x), ptr<T>(rstd),
                                                             ptr<T>(grad_weight));
      check_launch("rms_norm_backward (weight)");
    }
  });
}

void rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse, const Tensor& out) {
  const int64_t t_count = x.size(1), h = x.size(2) / 2, pairs = x.numel() / 2;
  if (pairs == 0) return;
  dispatch_floating(x.dtype(), "rotary_embedding", [&](auto tag) {
    using T = decltype(tag);
    rotary_kernel<T><<<blocks_for(pairs), kThreads>>>(pairs, t_count, h, inverse ? T(-1) : T(1), ptr<T>(x),
                                                      ptr<T>(cos), ptr<T>(sin), ptr<T>(out));
    check_launch("rotary_embedding");
  });
}

}  // namespace gpu::kernels
