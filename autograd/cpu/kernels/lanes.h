// lanes.h — how the kernels read and write vectors: a whole GCC vector at any address, and up to 16
// floats for the AVX-512 kernels.
#pragma once

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
