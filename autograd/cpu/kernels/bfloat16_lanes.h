// bfloat16_lanes.h — 16 float32 lanes rounded to bfloat16 as dtype.h's round_to_bfloat16 rounds them
// (AVX-512), for the bfloat16 products' stores (matmul_bfloat16.cpp: a loop of 16 round_to_bfloat16 calls,
// left to the compiler, took twice as long there).
#pragma once
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

namespace autograd::cpu {
namespace {  // inlined into each AVX-512 function that uses it

// Add 0x7FFF plus the lowest kept bit, keep the top half; a NaN becomes the quiet 0x7FC0. The 16 results
// sit in the low halves of the 32-bit lanes (vpmovdw stores them as 16 bits each). The masked forms with
// every lane kept: GCC 12 warns falsely on the unmasked ones.
[[gnu::target("avx512f"), gnu::always_inline]] inline __m512i bfloat16_lanes(__m512 x) {
  constexpr __mmask16 all = 0xFFFF;
  const __m512i bits = _mm512_castps_si512(x);
  const __m512i lowest_kept = _mm512_and_si512(_mm512_maskz_srli_epi32(all, bits, 16), _mm512_set1_epi32(1));
  const __m512i carried = _mm512_add_epi32(bits, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), lowest_kept));
  const __m512i top = _mm512_maskz_srli_epi32(all, carried, 16);
  return _mm512_mask_mov_epi32(top, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), _mm512_set1_epi32(0x7FC0));
}

}  // namespace
}  // namespace autograd::cpu

#endif
