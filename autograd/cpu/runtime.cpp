// cpu/runtime.cpp — the process-wide CPU settings: FTZ/DAZ, BLIS start-up and its kernel family, the
// thread count, and the CPU feature checks the kernels branch on (see runtime.h).
#include "autograd/cpu/runtime.h"

#include <blis.h>
#include <xmmintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace autograd::cpu {

namespace {

int num_threads = 1;

// Denormal numbers (below ~1e-38) take a slow microcode path on x86, which slows training ~5x once
// gradients get tiny. Flush-to-zero and denormals-are-zero make them plain zeros, as PyTorch's
// set_flush_denormal(True) does. PyTorch does not flush by default, so wherever an input or a result
// is subnormal (say exp(-100) in a softmax) our value is 0 and PyTorch's is not;
// SCRATCHGRAD_DENORMALS=keep leaves them alone, for bit-for-bit comparisons with plain PyTorch.
void flush_denormals() {
  const char* env = std::getenv("SCRATCHGRAD_DENORMALS");
  if (env && std::strcmp(env, "keep") == 0) return;
  _mm_setcsr(_mm_getcsr() | 0x8040);
}

// BLIS 0.9 cannot count this CPU's AVX-512 FMA units and falls back to its AVX2 "haswell" kernels;
// its "skx" kernels are ~1.7x faster on large products. Choose them where the CPU has AVX-512, unless
// the user already set BLIS_ARCH_TYPE (theirs wins). Must happen before BLIS initialises.
void choose_blis_kernels() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) setenv("BLIS_ARCH_TYPE", "0", /*overwrite=*/0);
}

}  // namespace

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

namespace {
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

bool avx512_kernels() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool yes = (__builtin_cpu_init(), __builtin_cpu_supports("avx512f") &&
                                                     __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw")) &&
                          std::getenv("SCRATCHGRAD_NO_AVX512") == nullptr;
  return yes;
#else
  return false;
#endif
}

bool has_avx2() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool yes = (__builtin_cpu_init(), __builtin_cpu_supports("avx2"));
  return yes;
#else
  return false;
#endif
}

}  // namespace autograd::cpu
