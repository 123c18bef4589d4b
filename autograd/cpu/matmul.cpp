// cpu/matmul.cpp — matrix products: a small loop kernel for tiny products, BLIS for the rest.
//
// BLIS's typed API takes a row stride and a column stride for every operand, so a transposed view
// (x.transpose(-2, -1)) is passed as-is: its strides swap and nothing is copied. This file also owns the
// process-wide CPU settings that BLIS reads once: kernel family, thread count, denormal flushing.
#include <blis.h>
#include <xmmintrin.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>

#include "autograd/cpu/cpu.h"
#include "autograd/cpu/loops.h"

namespace autograd {

namespace {

int num_threads = 1;

// Denormal numbers (below ~1e-38) take a slow microcode path on x86, which slows training ~5x once
// gradients get tiny. Flush-to-zero and denormals-are-zero make them plain zeros, as PyTorch's
// set_flush_denormal(True) does.
void flush_denormals() { _mm_setcsr(_mm_getcsr() | 0x8040); }

// BLIS 0.9 cannot count this CPU's AVX-512 FMA units and falls back to its AVX2 "haswell" kernels;
// its "skx" kernels are ~1.7x faster on large products. Choose them where the CPU has AVX-512, unless
// the user already set BLIS_ARCH_TYPE (theirs wins). Must happen before BLIS initialises.
void choose_blis_kernels() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) setenv("BLIS_ARCH_TYPE", "0", /*overwrite=*/0);
}

void init_cpu_runtime() {
  static std::once_flag once;
  std::call_once(once, [] {
    flush_denormals();
    choose_blis_kernels();
    bli_init();
    if (const char* env = std::getenv("SCRATCHGRAD_THREADS")) num_threads = std::max(1, std::atoi(env));
    bli_thread_set_num_threads(num_threads);
  });
}

// Runs at load time so every program gets FTZ/DAZ and the kernel choice before its first op.
[[maybe_unused]] const bool runtime_ready = (init_cpu_runtime(), true);

}  // namespace

void set_num_threads(int threads) {
  init_cpu_runtime();
  num_threads = std::max(1, threads);
  bli_thread_set_num_threads(num_threads);
}
int get_num_threads() { return num_threads; }

const char* blis_kernel_name() {
  init_cpu_runtime();
  return bli_arch_string(bli_arch_query_id());
}

namespace cpu {

namespace {

template <typename T> T* ptr(const Tensor& t) { return static_cast<T*>(t.raw_data()); }

// C = A @ B for one small matrix: i-k-j order so the inner loop runs along contiguous rows of B and C.
template <typename T>
void small_gemm(int64_t m, int64_t n, int64_t k, const T* a, int64_t ars, int64_t acs, const T* b, int64_t brs,
                int64_t bcs, T* c, int64_t crs, int64_t ccs) {
  for (int64_t i = 0; i < m; ++i) {
    T* crow = c + i * crs;
    for (int64_t j = 0; j < n; ++j) crow[j * ccs] = T(0);
    for (int64_t p = 0; p < k; ++p) {
      const T av = a[i * ars + p * acs];
      const T* brow = b + p * brs;
      if (bcs == 1 && ccs == 1) {
        for (int64_t j = 0; j < n; ++j) crow[j] += av * brow[j];
      } else {
        for (int64_t j = 0; j < n; ++j) crow[j * ccs] += av * brow[j * bcs];
      }
    }
  }
}

// BLIS rejects some stride pairs for dims of size 1 or stride 0; give those dims a harmless stride.
void normalise_strides(int64_t rows, int64_t cols, int64_t& rs, int64_t& cs) {
  if (rows == 1) rs = cols * std::max<int64_t>(cs, 1);
  if (cols == 1) cs = 1;
  if (rows == 1 && cols == 1) rs = cs = 1;
}

template <typename T>
void blis_gemm(int64_t m, int64_t n, int64_t k, const T* a, int64_t ars, int64_t acs, const T* b, int64_t brs,
               int64_t bcs, T* c, int64_t crs, int64_t ccs) {
  normalise_strides(m, k, ars, acs);
  normalise_strides(k, n, brs, bcs);
  normalise_strides(m, n, crs, ccs);
  T one = 1, zero = 0;
  if constexpr (std::is_same_v<T, float>)
    bli_sgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, m, n, k, &one, const_cast<T*>(a), ars, acs, const_cast<T*>(b),
              brs, bcs, &zero, c, crs, ccs);
  else
    bli_dgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, m, n, k, &one, const_cast<T*>(a), ars, acs, const_cast<T*>(b),
              brs, bcs, &zero, c, crs, ccs);
}

}  // namespace

void batched_matmul(const Tensor& a_in, const Tensor& b_in, const Tensor& out) {
  init_cpu_runtime();
  // A stride of 0 inside a matrix (an expanded row/column) is legal for us but not for BLIS: copy those.
  auto matrix_ok = [](const Tensor& t) { return t.strides()[t.dim() - 1] != 0 && t.strides()[t.dim() - 2] != 0; };
  const Tensor a = matrix_ok(a_in) || a_in.numel() == 0 ? a_in : a_in.clone();
  const Tensor b = matrix_ok(b_in) || b_in.numel() == 0 ? b_in : b_in.clone();
  const int64_t nd = out.dim();
  const int64_t m = out.shape()[size_t(nd - 2)], n = out.shape()[size_t(nd - 1)], k = a.shape()[size_t(nd - 1)];
  Shape batch(out.shape().begin(), out.shape().end() - 2);
  Shape sa(a.strides().begin(), a.strides().end() - 2), sb(b.strides().begin(), b.strides().end() - 2),
      so(out.strides().begin(), out.strides().end() - 2);
  const int64_t ars = a.strides()[size_t(nd - 2)], acs = a.strides()[size_t(nd - 1)];
  const int64_t brs = b.strides()[size_t(nd - 2)], bcs = b.strides()[size_t(nd - 1)];
  const int64_t crs = out.strides()[size_t(nd - 2)], ccs = out.strides()[size_t(nd - 1)];
  const bool small = m * n * k <= kSmallMatmulFlops;
  dispatch_floating(out.dtype(), "matmul", [&](auto tag) {
    using T = decltype(tag);
    const T* pa = ptr<T>(a);
    const T* pb = ptr<T>(b);
    T* pc = ptr<T>(out);
    if (m * n == 0) return;
    auto plan = make_plan<3>(batch, {&so, &sa, &sb});
    for_each_run(plan, shape_numel(batch), [&](const auto& off, int64_t count, const auto& st) {
      for (int64_t i = 0; i < count; ++i) {
        const T* ai = pa + off[1] + i * st[1];
        const T* bi = pb + off[2] + i * st[2];
        T* ci = pc + off[0] + i * st[0];
        if (k == 0) {  // an empty sum is zero
          for (int64_t r = 0; r < m; ++r)
            for (int64_t c = 0; c < n; ++c) ci[r * crs + c * ccs] = T(0);
        } else if (small) small_gemm(m, n, k, ai, ars, acs, bi, brs, bcs, ci, crs, ccs);
        else blis_gemm(m, n, k, ai, ars, acs, bi, brs, bcs, ci, crs, ccs);
      }
    });
  });
}

}  // namespace cpu
}  // namespace autograd
