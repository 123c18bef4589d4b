// cpu/runtime/runtime.cpp — the process-wide CPU settings: flush-to-zero, BLIS start-up and its kernel family, the
// thread count, and the CPU feature checks the kernels branch on (see runtime.h).
#include "autograd/cpu/runtime/runtime.h"

// BLIS and the flush-to-zero controls are optional: the WebAssembly build (examples/lab/) has neither, and needs
// neither for the exact kernels.
#if __has_include(<blis.h>)
#include <blis.h>
#define SCRATCHGRAD_HAVE_BLIS 1
#endif
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace autograd::cpu {

namespace {

int num_threads = 1;

// Denormal numbers (below ~1e-38) take a slow microcode path on x86 (and on many ARM cores), which slows
// training ~5x once gradients get tiny. Flush-to-zero makes them plain zeros, as PyTorch's
// set_flush_denormal(True) does, with the same bits on both: x86's FTZ + DAZ and ARM's FZ each flush
// subnormal inputs and results. PyTorch does not flush by default, so wherever an input or a result is
// subnormal (say exp(-100) in a softmax) our value is 0 and PyTorch's is not;
// SCRATCHGRAD_DENORMALS=keep leaves them alone, for bit-for-bit comparisons with plain PyTorch.
void flush_denormals() {
  const char* env = std::getenv("SCRATCHGRAD_DENORMALS");
  if (env && std::strcmp(env, "keep") == 0) return;
  set_flush_denormals(true);
}

#if defined(__SSE__)
constexpr unsigned kMxcsrFtzDaz = 0x8040;  // MXCSR bit 15 (flush to zero) and bit 6 (denormals are zero)
#elif defined(__aarch64__)
constexpr uint64_t kFpcrFz = uint64_t{1} << 24;  // FPCR bit 24 (FZ): subnormal inputs and results are zeros
uint64_t read_fpcr() {
  uint64_t fpcr;
  asm volatile("mrs %0, fpcr" : "=r"(fpcr));
  return fpcr;
}
void write_fpcr(uint64_t fpcr) { asm volatile("msr fpcr, %0" : : "r"(fpcr)); }
#endif

// BLIS 0.9 cannot count this CPU's AVX-512 FMA units and falls back to its AVX2 "haswell" kernels;
// its "skx" kernels are ~1.7x faster on large products. Choose them where the CPU has AVX-512, unless
// the user already set BLIS_ARCH_TYPE (theirs wins). Must happen before BLIS initialises.
void choose_blis_kernels() {
#if defined(SCRATCHGRAD_HAVE_BLIS) && defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) setenv("BLIS_ARCH_TYPE", "0", /*overwrite=*/0);
#endif
}

void set_blis_threads([[maybe_unused]] int threads) {
#ifdef SCRATCHGRAD_HAVE_BLIS
  bli_thread_set_num_threads(threads);
#endif
}

}  // namespace

bool flushing_denormals() {
#if defined(__SSE__)
  return (_mm_getcsr() & kMxcsrFtzDaz) == kMxcsrFtzDaz;
#elif defined(__aarch64__)
  return (read_fpcr() & kFpcrFz) != 0;
#else
  return false;  // (no such control here: the WebAssembly build keeps subnormals)
#endif
}

void set_flush_denormals([[maybe_unused]] bool on) {
#if defined(__SSE__)
  _mm_setcsr(on ? _mm_getcsr() | kMxcsrFtzDaz : _mm_getcsr() & ~kMxcsrFtzDaz);
#elif defined(__aarch64__)
  write_fpcr(on ? read_fpcr() | kFpcrFz : read_fpcr() & ~kFpcrFz);
#endif
}

int thread_count_from_setting(const char* text) {
  if (text == nullptr || *text == '\0') return 0;
  // read whole, as nn/numbers.h reads a user's numbers (autograd sits below nn/, so the check is here):
  // "2x" is not 2, and 99999999999 is not wrapped into range
  int threads = 0;
  const char* end = text + std::strlen(text);
  const auto [stop, error] = std::from_chars(text, end, threads);
  if (error != std::errc() || stop != end || threads < 1 || threads > kMaxThreadsSetting) return 0;
  return threads;
}

void init_cpu_runtime() {
  static std::once_flag once;
  std::call_once(once, [] {
    flush_denormals();
    choose_blis_kernels();
#ifdef SCRATCHGRAD_HAVE_BLIS
    bli_init();
#endif
    // (a bad value is refused by the command line before it does anything; a library program keeps 1)
    if (const int threads = thread_count_from_setting(std::getenv("SCRATCHGRAD_THREADS"))) num_threads = threads;
    set_blis_threads(num_threads);
  });
}

namespace {
// Runs at load time so every program gets FTZ/DAZ and the kernel choice before its first op.
[[maybe_unused]] const bool runtime_ready = (init_cpu_runtime(), true);
}  // namespace

void set_num_threads(int threads) {
  init_cpu_runtime();
  num_threads = std::max(1, threads);
  set_blis_threads(num_threads);
}
int get_num_threads() { return num_threads; }

const char* blis_kernel_name() {
  init_cpu_runtime();
#ifdef SCRATCHGRAD_HAVE_BLIS
  return bli_arch_string(bli_arch_query_id());
#else
  return "none (built without BLIS)";
#endif
}

bool avx512_kernels() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool yes = (__builtin_cpu_init(), __builtin_cpu_supports("avx512f") &&
                                                     __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw")) &&
                          std::getenv("SCRATCHGRAD_NO_AVX512") == nullptr && has_avx2();
  return yes;
#else
  return false;
#endif
}

bool has_avx2() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool yes = (__builtin_cpu_init(), __builtin_cpu_supports("avx2")) && std::getenv("SCRATCHGRAD_NO_AVX2") == nullptr;
  return yes;
#else
  return false;
#endif
}

bool has_fma() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool yes = (__builtin_cpu_init(), __builtin_cpu_supports("fma"));
  return yes;
#elif defined(__aarch64__)
  return true;
#else
  return false;
#endif
}

}  // namespace autograd::cpu
