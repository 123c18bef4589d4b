// lanes.h — the AVX-512 kernels' way to read and write up to 16 floats.
//
// On AMD's AVX-512 cores a masked 512-bit load or store is much slower than a plain one when the data
// streams from memory, even with every lane set. So whole vectors are read and written plainly, and only
// a last, partial one masked.
#pragma once
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

namespace autograd::cpu {

// p[0..16) where `lanes` is set, zero elsewhere.
[[gnu::target("avx512f")]] inline __m512 load_lanes(const float* p, __mmask16 lanes) {
  return lanes == __mmask16(0xffff) ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(lanes, p);
}

[[gnu::target("avx512f")]] inline void store_lanes(float* p, __mmask16 lanes, __m512 v) {
  if (lanes == __mmask16(0xffff)) _mm512_storeu_ps(p, v);
  else _mm512_mask_storeu_ps(p, lanes, v);
}

}  // namespace autograd::cpu
#endif
