// cpu/kernels/bfloat16_runs.cpp — float32 ↔ bfloat16 along one run of memory: the conversions a training
// step under autocast makes of every weight (rounded for the products) and every weight gradient (widened
// back to float32), several times the parameter count a step. The widening backend hands them the tensors
// that lie in memory in one order (precision/widening_backend.cpp); its plain loop is the reference.
//
// Each element as dtype.h's round_to_bfloat16 and widen convert it (integer adds, shifts and a select:
// the same bits in any vector width, tests/test_bfloat16.cpp), through the elementwise kernels' loops
// (loops.h): compiled for AVX-512 where the CPU has it, a long run split over the threads (a run of 38.6 M,
// GPT-2's embedding, is memory-bound, and two cores read and write it faster than one).
#include "autograd/cpu/kernels/bfloat16_runs.h"

#include "autograd/cpu/kernels/bfloat16_lanes.h"
#include "autograd/cpu/kernels/loops.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace autograd::cpu {

void round_run_to_bfloat16(const float* from, bfloat16* to, int64_t n) {
  parallel_ranges(n, 1, [&](int64_t first, int64_t last) {
    contiguous_loop(last - first, [&](int64_t i) { to[first + i] = round_to_bfloat16(from[first + i]); });
  });
}

#if defined(__x86_64__) && defined(__GNUC__)
// A long run (a weight's gradient, 4 MB and more) is widened with streaming stores: its float32 copy is
// not read again soon (the optimizer reads it after the whole backward pass), and a streaming store does
// not first read the line it overwrites, a third of the run's memory traffic.
[[gnu::target("avx512f,avx512bw")]] void widen_streaming(const bfloat16* from, float* to, int64_t n) {
  int64_t i = 0;
  for (; i < n && reinterpret_cast<uintptr_t>(to + i) % 64; ++i) to[i] = widen(from[i]);
  for (; i + 16 <= n; i += 16) {
    const __m256i half = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + i));
    _mm512_stream_si512(reinterpret_cast<__m512i*>(to + i), _mm512_slli_epi32(_mm512_cvtepu16_epi32(half), 16));
  }
  for (; i < n; ++i) to[i] = widen(from[i]);
  _mm_sfence();
}
#endif

#if defined(__x86_64__) && defined(__GNUC__)
[[gnu::target("avx512f,avx512bw")]] void round_streaming_avx512(const float* from, bfloat16* to, int64_t n) {
  int64_t i = 0;
  for (; i < n && reinterpret_cast<uintptr_t>(to + i) % 32; ++i) to[i] = round_to_bfloat16(from[i]);
  for (; i + 16 <= n; i += 16) {
    const __m512i rounded = bfloat16_lanes(_mm512_loadu_ps(from + i));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(to + i), _mm512_maskz_cvtepi32_epi16(0xFFFF, rounded));
  }
  for (; i < n; ++i) to[i] = round_to_bfloat16(from[i]);
  _mm_sfence();
}
#endif

void round_run_streaming(const float* from, bfloat16* to, int64_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (avx512_kernels()) return round_streaming_avx512(from, to, n);
#endif
  for (int64_t i = 0; i < n; ++i) to[i] = round_to_bfloat16(from[i]);
}

void widen_run_to_float32(const bfloat16* from, float* to, int64_t n) {
  parallel_ranges(n, 1, [&](int64_t first, int64_t last) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (n >= (int64_t(1) << 20) && avx512_kernels()) return widen_streaming(from + first, to + first, last - first);
#endif
    contiguous_loop(last - first, [&](int64_t i) { to[first + i] = widen(from[first + i]); });
  });
}

// Row r of `rows` from from + from_at[r] to to + to_at[r], each converted as `convert` does, the rows split
// over the threads.
template <typename S, typename D, typename Convert>
void convert_rows(const S* from, const int64_t* from_at, D* to, const int64_t* to_at, int64_t rows, int64_t length,
                  Convert convert) {
  parallel_ranges(rows, length, [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r) {
      const S* f = from + from_at[r];
      D* t = to + to_at[r];
      contiguous_loop(length, [&](int64_t i) { t[i] = convert(f[i]); });
    }
  });
}

void round_rows_to_bfloat16(const float* from, const int64_t* from_at, bfloat16* to, const int64_t* to_at,
                            int64_t rows, int64_t length) {
  convert_rows(from, from_at, to, to_at, rows, length, [](float x) { return round_to_bfloat16(x); });
}

void widen_rows_to_float32(const bfloat16* from, const int64_t* from_at, float* to, const int64_t* to_at,
                           int64_t rows, int64_t length) {
  convert_rows(from, from_at, to, to_at, rows, length, [](bfloat16 x) { return widen(x); });
}

}  // namespace autograd::cpu
