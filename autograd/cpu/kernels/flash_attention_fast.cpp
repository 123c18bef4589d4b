// cpu/kernels/flash_attention_fast.cpp — the FlashAttention kernels for Numerics::fast: the body of
// cpu/kernels/flash_attention_kernels.h built with fused = true, so that each a·b + c of its products and running
// sums is one fused multiply-add (one rounding instead of two) in the AVX2+FMA and AVX-512 builds below. Every sum keeps exact's order; results agree with exact to a few
// float roundings. On a CPU without FMA there is no fast build, and fast numerics run the exact kernels.
#include "autograd/cpu/kernels/flash_attention_kernels.h"

#include "autograd/cpu/runtime/runtime.h"

namespace autograd::cpu::flash {

namespace {

#if defined(__x86_64__) && defined(__GNUC__)
SCRATCHGRAD_FLASH_KERNELS(fast_avx2, [[gnu::target("avx2,fma")]], 32, true)
SCRATCHGRAD_FLASH_KERNELS(fast_avx512, [[gnu::target("avx512f,avx512vl,fma")]], 64, true)
#endif

}  // namespace

template <typename F> const Kernels<F>* fast_kernels() {
#if defined(__x86_64__) && defined(__GNUC__)
  if (avx512_kernels() && has_fma()) return &fast_avx512<F>;
  if (has_avx2() && has_fma()) return &fast_avx2<F>;
#endif
  return nullptr;
}

template const Kernels<float>* fast_kernels<float>();
template const Kernels<double>* fast_kernels<double>();

}  // namespace autograd::cpu::flash
