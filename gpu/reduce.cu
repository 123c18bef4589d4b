// gpu/reduce.cu — reductions (sum_to, max over a dim), softmax / log_softmax and their backward, the
// row gathers and scatters behind embedding and cross_entropy, and the fused Adam/AdamW update.
#include <cmath>
#include <limits>

#include "gpu/common.cuh"
#include "gpu/kernels.h"

namespace gpu::kernels {

using namespace gpu::detail;

namespace {

// Accumulator types: float sums in float (as PyTorch's CUDA reductions do), double in double.
template <typename T> struct Acc { using type = T; };
template <> struct Acc<bool> { using type = int64_t; };

// ---------------------------------------------------------------- sum_to

// One thread per output element: for many outputs that each sum a few inputs.
template <typename T>
__global__ void sum_thread_per_output(int64_t outputs, int64_t reduced, Indexer<1> kept, Indexer<1> red,
                                      const T* in, T* out) {
  GPU_GRID_STRIDE_LOOP(o, outputs) {
    int64_t base[1];
    kept.offsets(o, base);
    T acc = T(0);
    for (int64_t r = 0; r < reduced; ++r) {
      int64_t off[1];
      red.offsets(r, off);
      acc += in[base[0] + off[0]];
    }
    out[o] = acc;
  }
}

// One block per output element: its threads stride over the reduced elements, then a tree in shared memory.
template <typename T, int Threads>
__global__ void sum_block_per_output(int64_t outputs, int64_t reduced, Indexer<1> kept, Indexer<1> red, const T* in,
                                     T* out) {
  __shared__ T partial[Threads];
  for (int64_t o = blockIdx.x; o < outputs; o += gridDim.x) {
    int64_t base[1];
    kept.offsets(o, base);
    T acc = T(0);
    for (int64_t r = threadIdx.x; r < reduced; r += Threads) {
      int64_t off[1];
      red.offsets(r, off);
      acc += in[base[0] + off[0]];
    }
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int s = Threads / 2; s > 0; s >>= 1) {
      if (int(threadIdx.x) < s) partial[threadIdx.x] += partial[threadIdx.x + s];
      __syncthreads();
    }
    if (threadIdx.x == 0) out[o] = partial[0];
    __syncthreads();
  }
}

// ---------------------------------------------------------------- max over one dim

template <typename T>
__global__ void max_dim_kernel(int64_t rows, int64_t n, int64_t stride, Indexer<1> outer, const T* in, T* values,
                               int64_t* indices) {
  GPU_GRID_STRIDE_LOOP(row, rows) {
    int64_t base[1];
    outer.offsets(row, base);
    const T* x = in + base[0];
    T best = x[0];
    int64_t at = 0;
    for (int64_t j = 1; j < n; ++j) {
      const T v = x[j * stride];
      if constexpr (std::is_floating_point_v<T>) {
        if (best != best) break;  // NaN wins, as in PyTorch
        if (v != v || v > best) best = v, at = j;
      } else {
        if (v > best) best = v, at = j;
      }
    }
    values[row] = best;
    if (indices) indices[row] = at;
  }
}

// ---------------------------------------------------------------- softmax (one warp per row)

template <typename T> __device__ __forceinline__ T warp_max(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = nan_max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
template <typename T> __device__ __forceinline__ T flog(T x) {
  if constexpr (std::is_same_v<T, float>) return logf(x); else return log(x);
}

constexpr int kWarpsPerBlock = 4;

template <typename T>
__global__ void softmax_kernel(int64_t rows, int64_t n, int64_t si, int64_t so, Indexer<2> outer, bool log,
                               const T* in, T* out) {
  const int lane = threadIdx.x % 32;
  const int64_t first = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  for (int64_t row = first; row < rows; row += int64_t(gridDim.x) * kWarpsPerBlock) {
    int64_t base[2];
    outer.offsets(row, base);
    const T* x = in + base[0];
    T* y = out + base[1];
    T m = -std::numeric_limits<T>::infinity();
    for (int64_t j = lane; j < n; j += 32) m = nan_max(m, x[j * si]);
    m = warp_max(m);
    if (m != m || m == -std::numeric_limits<T>::infinity()) m = x[0];  // NaN and all -inf rows give NaN
    T sum = T(0);
    for (int64_t j = lane; j < n; j += 32) {
      const T e = fexp(x[j * si] - m);
      if (!log) y[j * so] = e;
      sum += e;
    }
    sum = warp_sum(sum);
    if (log) {
      const T log_sum = flog(sum);
      for (int64_t j = lane; j < n; j += 32) y[j * so] = x[j * si] - m - log_sum;
    } else {
      const T inv = T(1) / sum;
      for (int64_t j = lane; j < n; j += 32) y[j * so] *= inv;
    }
  }
}

template <typename T>
__global__ void softmax_backward_kernel(int64_t rows, int64_t n, int64_t sy, int64_t sg, int64_t sx, Indexer<3> outer,
                                        bool log, const T* py, const T* pg, T* px) {
  const int lane = threadIdx.x % 32;
  const int64_t first = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  for (int64_t row = first; row < rows; row += int64_t(gridDim.x) * kWarpsPerBlock) {
    int64_t base[3];
    outer.offsets(row, base);
    const T* y = py + base[0];
    const T* g = pg + base[1];
    T* gx = px + base[2];
    T dot = T(0);
    for (int64_t j = lane; j < n; j += 32) dot += log ? g[j * sg] : g[j * sg] * y[j * sy];
    dot = warp_sum(dot);
    for (int64_t j = lane; j < n; j += 32)
      gx[j * sx] = log ? g[j * sg] - fexp(y[j * sy]) * dot : y[j * sy] * (g[j * sg] - dot);
  }
}

// ---------------------------------------------------------------- rows: embedding, nll_loss

template <typename T>
__global__ void index_select_kernel(int64_t total, int64_t d, int64_t rs, int64_t cs, const int64_t* idx, const T* w,
                                    T* out) {
  GPU_GRID_STRIDE_LOOP(e, total) {
    const int64_t i = e / d, j = e - i * d;
    out[e] = w[idx[i] * rs + j * cs];
  }
}

template <typename T> __device__ __forceinline__ void atomic_add(T* at, T v) {
  if constexpr (std::is_same_v<T, int64_t>)
    atomicAdd(reinterpret_cast<unsigned long long*>(at), static_cast<unsigned long long>(v));
  else
    atomicAdd(at, v);
}

template <typename T>
__global__ void index_add_kernel(int64_t total, int64_t d, int64_t grs, int64_t gcs, int64_t wrs, int64_t wcs,
                                 const int64_t* idx, const T* g, T* w) {
  GPU_GRID_STRIDE_LOOP(e, total) {
    const int64_t i = e / d, j = e - i * d;
    atomic_add(&w[idx[i] * wrs + j * wcs], g[i * grs + j * gcs]);
  }
}

template <typename T>
__global__ void gather_rows_kernel(int64_t n, int64_t rs, int64_t cs, int64_t so, int64_t skip, const int64_t* idx,
                                   const T* v, T* out) {
  GPU_GRID_STRIDE_LOOP(i, n) out[i * so] = idx[i] == skip ? T(0) : v[i * rs + idx[i] * cs];
}

template <typename T>
__global__ void scatter_rows_kernel(int64_t n, int64_t sg, int64_t rs, int64_t cs, int64_t skip, const int64_t* idx,
                                    const T* g, T* v) {
  // each i touches its own row, so no two threads write the same element
  GPU_GRID_STRIDE_LOOP(i, n) if (idx[i] != skip) v[i * rs + idx[i] * cs] += g[i * sg];
}

// ---------------------------------------------------------------- Adam / AdamW

// The CPU loop (autograd/cpu/kernels/adam.cpp) in one thread per element, with the same operations in the same
// order: explicit round-to-nearest multiplies, adds, divisions and square roots stop nvcc from fusing a*b+c
// (the CPU rounds the product and the sum apart, as PyTorch's portable kernels do), so both devices compute
// the same bits.
template <typename F> struct AdamScalars {
  F step_size, bc2_sqrt, beta1, beta2, one_minus_beta1, one_minus_beta2, eps, wd, decay, grad_scale;
  bool decoupled, weight_decay;
};

template <typename F> __device__ __forceinline__ F mul_rn(F a, F b) {
  if constexpr (std::is_same_v<F, float>) return __fmul_rn(a, b); else return __dmul_rn(a, b);
}
template <typename F> __device__ __forceinline__ F add_rn(F a, F b) {
  if constexpr (std::is_same_v<F, float>) return __fadd_rn(a, b); else return __dadd_rn(a, b);
}
template <typename F> __device__ __forceinline__ F div_rn(F a, F b) {
  if constexpr (std::is_same_v<F, float>) return __fdiv_rn(a, b); else return __ddiv_rn(a, b);
}
template <typename F> __device__ __forceinline__ F sqrt_rn(F a) {
  if constexpr (std::is_same_v<F, float>) return __fsqrt_rn(a); else return __dsqrt_rn(a);
}

template <typename F>
__global__ void adam_kernel(int64_t n, AdamScalars<F> s, F* p, const F* g, F* m, F* v, F* vmax) {
  GPU_GRID_STRIDE_LOOP(i, n) {
    F pi = p[i], gi = mul_rn(g[i], s.grad_scale);  // clip_grad_norm_'s coefficient, fused (else 1)
    if (s.decoupled) pi = mul_rn(pi, s.decay);
    else if (s.weight_decay) gi = add_rn(gi, mul_rn(s.wd, pi));
    const F mi = add_rn(mul_rn(m[i], s.beta1), mul_rn(s.one_minus_beta1, gi));
    const F vi = add_rn(mul_rn(v[i], s.beta2), mul_rn(mul_rn(s.one_minus_beta2, gi), gi));
    m[i] = mi;
    v[i] = vi;
    F second = vi;
    if (vmax) {
      const F old = vmax[i];
      second = old > vi ? old : vi;  // std::max(vmax, v)
      vmax[i] = second;
    }
    const F denom = add_rn(div_rn(sqrt_rn(second), s.bc2_sqrt), s.eps);
    p[i] = add_rn(pi, div_rn(mul_rn(-s.step_size, mi), denom));
  }
}

void check_dtype(const Tensor& t, DType want, const char* op, const char* what) {
  if (t.dtype() != want)
    throw std::invalid_argument(std::string("gpu ") + op + ": " + what + " must be " +
                                std::string(autograd::dtype_name(want)) + ", got " +
                                std::string(autograd::dtype_name(t.dtype())));
}

}  // namespace

void sum_to(const Tensor& in, const Tensor& out) {
  const int64_t outputs = out.numel();
  if (outputs == 0) return;
  if (in.numel() == 0) return fill(out, 0.0);
  // Split the input's dims into kept ones (they index the contiguous output, in order) and reduced ones.
  const size_t nd = in.shape().size(), lead = nd - out.shape().size();
  Shape kept_shape, kept_strides, red_shape, red_strides;
  for (size_t d = 0; d < nd; ++d) {
    const bool reduced = d < lead || out.shape()[d - lead] == 1;
    (reduced ? red_shape : kept_shape).push_back(in.shape()[d]);
    (reduced ? red_strides : kept_strides).push_back(in.strides()[d]);
  }
  const int64_t reduced = in.numel() / outputs;
  Indexer<1> kept = make_indexer<1>(kept_shape, {&kept_strides}, "sum_to");
  Indexer<1> red = make_indexer<1>(red_shape, {&red_strides}, "sum_to");
  dispatch(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      throw std::invalid_argument("gpu sum_to: bool input (the op converts it to int64 first)");
    } else {
      if (reduced >= 32) {
        constexpr int threads = 128;
        const unsigned grid = unsigned(outputs < 65535 * 8 ? outputs : 65535 * 8);
        sum_block_per_output<T, threads><<<grid, threads>>>(outputs, reduced, kept, red, ptr<T>(in), ptr<T>(out));
      } else {
        sum_thread_per_output<T><<<blocks_for(outputs), kThreads>>>(outputs, reduced, kept, red, ptr<T>(in),
                                                                    ptr<T>(out));
      }
      check_launch("sum_to");
    }
  });
}

void max_dim(const Tensor& in, int64_t dim, const Tensor& values, const Tensor& indices) {
  const int64_t n = in.shape()[size_t(dim)], stride = in.strides()[size_t(dim)];
  const int64_t rows = values.numel();
  if (rows == 0) return;
  if (n == 0) throw std::invalid_argument("gpu max_dim: reduction over an empty dimension");
  Shape outer = in.shape();
  outer[size_t(dim)] = 1;
  Indexer<1> ix = make_indexer<1>(outer, {&in.strides()}, "max_dim");
  if (indices.defined()) check_dtype(indices, DType::Int64, "max_dim", "indices");
  dispatch(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    max_dim_kernel<T><<<blocks_for(rows), kThreads>>>(rows, n, stride, ix, ptr<T>(in), ptr<T>(values),
                                                      indices.defined() ? ptr<int64_t>(indices) : nullptr);
    check_launch("max_dim");
  });
}

void softmax(const Tensor& in, int64_t dim, bool log, const Tensor& out) {
  const int64_t n = in.shape()[size_t(dim)];
  const int64_t rows = n == 0 ? 0 : in.numel() / n;
  if (rows == 0) return;
  Shape outer = in.shape();
  outer[size_t(dim)] = 1;
  Indexer<2> ix = make_indexer<2>(outer, {&in.strides(), &out.strides()}, "softmax");
  dispatch_floating(in.dtype(), "softmax", [&](auto tag) {
    using T = decltype(tag);
    softmax_kernel<T><<<blocks_for(rows, kWarpsPerBlock), kWarpsPerBlock * 32>>>(
        rows, n, in.strides()[size_t(dim)], out.strides()[size_t(dim)], ix, log, ptr<T>(in), ptr<T>(out));
    check_launch(log ? "log_softmax" : "softmax");
  });
}

void softmax_backward(const Tensor& y, const Tensor& g, int64_t dim, bool log, const Tensor& gx) {
  const int64_t n = y.shape()[size_t(dim)];
  const int64_t rows = n == 0 ? 0 : y.numel() / n;
  if (rows == 0) return;
  Shape outer = y.shape();
  outer[size_t(dim)] = 1;
  Indexer<3> ix = make_indexer<3>(outer, {&y.strides(), &g.strides(), &gx.strides()}, "softmax_backward");
  const size_t d = size_t(dim);
  dispatch_floating(y.dtype(), "softmax_backward", [&](auto tag) {
    using T = decltype(tag);
    softmax_backward_kernel<T><<<blocks_for(rows, kWarpsPerBlock), kWarpsPerBlock * 32>>>(
        rows, n, y.strides()[d], g.strides()[d], gx.strides()[d], ix, log, ptr<T>(y), ptr<T>(g), ptr<T>(gx));
    check_launch("softmax_backward");
  });
}

void index_select_rows(const Tensor& weight, const Tensor& index, const Tensor& out) {
  check_dtype(index, DType::Int64, "index_select_rows", "index");
  const int64_t n = index.numel(), d = weight.shape()[1], total = n * d;
  if (total == 0) return;
  dispatch(weight.dtype(), [&](auto tag) {
    using T = decltype(tag);
    index_select_kernel<T><<<blocks_for(total), kThreads>>>(total, d, weight.strides()[0], weight.strides()[1],
                                                            ptr<int64_t>(index), ptr<T>(weight), ptr<T>(out));
    check_launch("index_select_rows");
  });
}

void index_add_rows(const Tensor& grad, const Tensor& index, const Tensor& grad_weight) {
  check_dtype(index, DType::Int64, "index_add_rows", "index");
  const int64_t n = index.numel(), d = grad_weight.shape()[1], total = n * d;
  if (total == 0) return;
  if (grad.dtype() == DType::Bool) throw std::invalid_argument("gpu index_add_rows: bool tensors cannot be summed");
  dispatch(grad.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      index_add_kernel<T><<<blocks_for(total), kThreads>>>(total, d, grad.strides()[0], grad.strides()[1],
                                                           grad_weight.strides()[0], grad_weight.strides()[1],
                                                           ptr<int64_t>(index), ptr<T>(grad), ptr<T>(grad_weight));
      check_launch("index_add_rows");
    }
  });
}

void gather_rows(const Tensor& values, const Tensor& index, int64_t skip, const Tensor& out) {
  check_dtype(index, DType::Int64, "gather_rows", "index");
  const int64_t n = index.numel();
  if (n == 0) return;
  dispatch(values.dtype(), [&](auto tag) {
    using T = decltype(tag);
    gather_rows_kernel<T><<<blocks_for(n), kThreads>>>(n, values.strides()[0], values.strides()[1],
                                                       out.strides()[0], skip, ptr<int64_t>(index), ptr<T>(values),
                                                       ptr<T>(out));
    check_launch("gather_rows");
  });
}

void scatter_rows(const Tensor& grad, const Tensor& index, int64_t skip, const Tensor& grad_values) {
  check_dtype(index, DType::Int64, "scatter_rows", "index");
  const int64_t n = index.numel();
  if (n == 0) return;
  dispatch(grad.dtype(), [&](auto tag) {
    using T = decltype(tag);
    scatter_rows_kernel<T><<<blocks_for(n), kThreads>>>(n, grad.strides()[0], grad_values.strides()[0],
                                                        grad_values.strides()[1], skip, ptr<int64_t>(index),
                                                        ptr<T>(grad), ptr<T>(grad_values));
    check_launch("scatter_rows");
  });
}

void adam_update(const AdamStep& st, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                 const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq) {
  const int64_t n = param.numel();
  if (n == 0) return;
  for (const Tensor* t : {&grad, &exp_avg, &exp_avg_sq})
    if (t->dtype() != param.dtype() || t->numel() != n || !t->is_contiguous())
      throw std::invalid_argument("gpu adam_update: gradient and state must be contiguous and match the parameter");
  if (!param.is_contiguous()) throw std::invalid_argument("gpu adam_update: the parameter must be contiguous");
  const double bias_correction1 = 1.0 - std::pow(st.beta1, double(st.step));
  const double bias_correction2 = 1.0 - std::pow(st.beta2, double(st.step));
  dispatch_floating(param.dtype(), "adam_update", [&](auto tag) {
    using F = decltype(tag);
    // scalars rounded to the parameter's type once, exactly as the CPU kernel does
    AdamScalars<F> s{F(st.lr / bias_correction1), F(std::sqrt(bias_correction2)), F(st.beta1), F(st.beta2),
                     F(1.0 - st.beta1), F(1.0 - st.beta2), F(st.eps), F(st.weight_decay),
                     F(1.0 - st.lr * st.weight_decay), F(st.grad_scale), st.decoupled_weight_decay,
                     st.weight_decay != 0.0};
    F* vmax = st.amsgrad ? ptr<F>(max_exp_avg_sq) : nullptr;
    adam_kernel<F><<<blocks_for(n), kThreads>>>(n, s, ptr<F>(param), ptr<F>(grad), ptr<F>(exp_avg),
                                                ptr<F>(exp_avg_sq), vmax);
    check_launch("adam_update");
  });
}

}  // namespace gpu::kernels
