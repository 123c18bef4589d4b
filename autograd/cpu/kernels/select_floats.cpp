// select_floats.cpp — see select_floats.h.
#include "autograd/cpu/kernels/select_floats.h"

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's AVX-512 headers (see exp_floats.cpp)
#include <immintrin.h>
#define SCRATCHGRAD_HAVE_AVX512_SELECT 1
#endif

#include "autograd/cpu/kernels.h"
#include "autograd/cpu/kernels/lanes.h"
#include "autograd/cpu/runtime/runtime.h"

namespace autograd::cpu {

namespace {

#ifdef SCRATCHGRAD_HAVE_AVX512_SELECT
[[gnu::target("avx512f,avx512bw,avx512vl")]] void select_avx512(const bool* mask, float value, const float* y, float* out, int64_t n) {
  const __m512 fill = _mm512_set1_ps(value);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 lanes = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    // 16 bools (one byte each, 0 or 1) → a lane mask of the true ones
    const __m512i flags = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(lanes, mask + i));
    const __mmask16 chosen = _mm512_test_epi32_mask(flags, flags);
    const __m512 kept = load_lanes(y + i, lanes);
    store_lanes(out + i, lanes, _mm512_mask_blend_ps(chosen, kept, fill));
  }
}

// The same with AVX2 (AMD Zen 3 has no AVX-512): 8 bools widened to 8 lanes, compared with zero, and a
// blend. Without it an AVX2 CPU runs the loop below, one value at a time: GCC does not vectorise its
// bool test.
[[gnu::target("avx2")]] void select_avx2(const bool* mask, float value, const float* y, float* out, int64_t n) {
  const __m256 fill = _mm256_set1_ps(value);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    int64_t bytes;
    __builtin_memcpy(&bytes, mask + i, sizeof bytes);
    const __m256i flags = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(bytes));
    const __m256 chosen = _mm256_castsi256_ps(_mm256_cmpgt_epi32(flags, _mm256_setzero_si256()));
    _mm256_storeu_ps(out + i, _mm256_blendv_ps(_mm256_loadu_ps(y + i), fill, chosen));
  }
  for (; i < n; ++i) out[i] = mask[i] ? value : y[i];
}
#endif

}  // namespace

void select_floats(const bool* mask, float value, const float* y, float* out, int64_t n) {
#ifdef SCRATCHGRAD_HAVE_AVX512_SELECT
  if (avx512_kernels()) return select_avx512(mask, value, y, out, n);
  if (has_avx2()) return select_avx2(mask, value, y, out, n);
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = mask[i] ? value : y[i];
}

}  // namespace autograd::cpu
