// lanes.h — how the kernels read and write vectors: a whole GCC vector at any address, and up to 16
// floats for the AVX-512 kernels; and a square of vectors transposed in registers (transpose_rows).
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>

// These are always inlined into the AVX2 / AVX-512 functions that use them, so no vector ever crosses a
// call boundary and GCC's warning about the ABI of such calls does not apply.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace autograd::cpu {
namespace {  // internal linkage, as each kernel file's own copy had: GCC then inlines and allocates alike

// One vector V (a GCC vector type: float __attribute__((vector_size(32))) and the like) from p, or to p,
// at any alignment: a memcpy into or out of a plain variable, which the compiler turns into one unaligned
// vector load or store. It carries no target of its own: inlined, it takes the instructions of the
// function it is in (AVX-512, AVX2, SSE2 or WebAssembly), so every build and both numerics' kernels share it.
template <typename V, typename T> [[gnu::always_inline]] inline V load_vector(const T* p) {
  V v;
  __builtin_memcpy(&v, p, sizeof(V));
  return v;
}
template <typename V, typename T> [[gnu::always_inline]] inline void store_vector(T* p, const V& v) {
  __builtin_memcpy(p, &v, sizeof(V));
}

// One step of a VL x VL transpose held in VL registers: rows a and b (H apart, a's index with bit H
// clear) trade the off-diagonal H x H blocks of each 2H-wide group of lanes. After the steps H = 1, 2,
// 4, ..., VL/2 row r holds what column r held. Each step is one two-register shuffle per row, its lanes
// constants (lane j < VL of a, VL + j of b), so on AVX-512 it becomes vshufps, vpermt2ps or vshuff32x4.
// (__builtin_shufflevector: GCC 12 and clang both have it, the wasm build included.)
constexpr int lane_for_a(int64_t j, int64_t vl, int64_t h) { return int((j & h) == 0 ? j : vl + j - h); }
constexpr int lane_for_b(int64_t j, int64_t vl, int64_t h) { return int((j & h) == 0 ? j + h : vl + j); }
template <typename V, int64_t VL, int64_t H, size_t... J>
[[gnu::always_inline]] inline void trade_blocks(V& a, V& b, std::index_sequence<J...>) {
  const V new_a = __builtin_shufflevector(a, b, lane_for_a(J, VL, H)...);
  const V new_b = __builtin_shufflevector(a, b, lane_for_b(J, VL, H)...);
  a = new_a;
  b = new_b;
}
template <typename V, int64_t VL, int64_t H = 1> [[gnu::always_inline]] inline void transpose_rows(V* rows) {
  if constexpr (H < VL) {
#pragma GCC unroll 16
    for (int64_t r = 0; r < VL; ++r)
      if ((r & H) == 0) trade_blocks<V, VL, H>(rows[r], rows[r + H], std::make_index_sequence<size_t(VL)>());
    transpose_rows<V, VL, 2 * H>(rows);
  }
}

}  // namespace
}  // namespace autograd::cpu

#pragma GCC diagnostic pop

// On AMD's AVX-512 cores a masked 512-bit load or store is much slower than a plain one when the data
// streams from memory, even with every lane set. So whole vectors are read and written plainly, and only
// a last, partial one masked.
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
