// cpu/kernels/bfloat16_runs.cpp — float32 ↔ bfloat16 along one run of memory: the conversions a training
// step under autocast makes of every weight (rounded for the products) and every weight gradient (widened
// back to float32), several times the parameter count a step. The widening backend hands them the tensors
// that lie in memory in one order (precision/widening_backend.cpp); its plain loop is the reference.
//
// Each element as dtype.h's round_to_bfloat16 and widen convert it (the same bits: tests/test_bfloat16.cpp),
// 16 at a time with AVX-512; a long run is split over the threads (a run of 38.6 M, GPT-2's embedding,
// is memory-bound, and two cores read and write it faster than one).
#include "autograd/cpu/kernels/bfloat16_runs.h"

#include <algorithm>

#include "autograd/cpu/kernels/bfloat16_lanes.h"
#include "autograd/cpu/runtime/runtime.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SCRATCHGRAD_X86_RUNS 1
#endif

namespace autograd::cpu {

namespace {

constexpr int64_t kThreadedRun = int64_t(1) << 18;  // elements; below this, one thread

#ifdef SCRATCHGRAD_X86_RUNS
// round_to_bfloat16 on 16 lanes (bfloat16_lanes.h), then the tail one by one
[[gnu::target("avx512f")]] void round_avx512(const float* from, bfloat16* to, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(to + i),
                        _mm512_maskz_cvtepi32_epi16(0xFFFF, bfloat16_lanes(_mm512_loadu_ps(from + i))));
  for (; i < n; ++i) to[i] = round_to_bfloat16(from[i]);
}

// widen on 16 lanes: the 16 bits become the top half of a float32
[[gnu::target("avx512f")]] void widen_avx512(const bfloat16* from, float* to, int64_t n) {
  constexpr __mmask16 all = 0xFFFF;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i half = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + i));
    const __m512i wide = _mm512_maskz_slli_epi32(all, _mm512_maskz_cvtepu16_epi32(all, half), 16);
    _mm512_storeu_ps(to + i, _mm512_castsi512_ps(wide));
  }
  for (; i < n; ++i) to[i] = widen(from[i]);
}
#endif

void round_plain(const float* from, bfloat16* to, int64_t n) {
  for (int64_t i = 0; i < n; ++i) to[i] = round_to_bfloat16(from[i]);
}
void widen_plain(const bfloat16* from, float* to, int64_t n) {
  for (int64_t i = 0; i < n; ++i) to[i] = widen(from[i]);
}

// run(from + first, to + first, count) over n elements: in one piece, or one piece a thread for a long run
template <typename S, typename D> void split(void (*run)(const S*, D*, int64_t), const S* from, D* to, int64_t n) {
  const int threads = n >= kThreadedRun ? get_num_threads() : 1;
  if (threads <= 1) return run(from, to, n);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int t = 0; t < threads; ++t) {
    const int64_t first = n * t / threads, last = n * (t + 1) / threads;
    run(from + first, to + first, last - first);
  }
}

}  // namespace

void round_run_to_bfloat16(const float* from, bfloat16* to, int64_t n) {
#ifdef SCRATCHGRAD_X86_RUNS
  if (avx512_kernels()) return split(round_avx512, from, to, n);
#endif
  split(round_plain, from, to, n);
}

void widen_run_to_float32(const bfloat16* from, float* to, int64_t n) {
#ifdef SCRATCHGRAD_X86_RUNS
  if (avx512_kernels()) return split(widen_avx512, from, to, n);
#endif
  split(widen_plain, from, to, n);
}

}  // namespace autograd::cpu
