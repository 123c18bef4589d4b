// tests/cpu_features.h — what the CPU itself has, for the tests that skip or expect a difference where an
// instruction set is missing. One place for the x86-only compiler builtins: GCC has no
// __builtin_cpu_supports on aarch64, where these answer for ARMv8 (FMA in every core, no AVX).
//
// These ask the CPU, not the engine's choice: autograd::cpu::avx512_kernels() and has_avx2() also read
// SCRATCHGRAD_NO_AVX512 / SCRATCHGRAD_NO_AVX2, which some tests set in a second process to compare paths.
#pragma once

#include "autograd/cpu/runtime/runtime.h"

namespace testing_helpers {

inline bool cpu_has_avx512f() {
#if defined(__x86_64__) && defined(__GNUC__)
  return __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}

inline bool cpu_has_avx2() {
#if defined(__x86_64__) && defined(__GNUC__)
  return __builtin_cpu_supports("avx2");
#else
  return false;
#endif
}

// Fused multiply-add: x86's FMA3 where the CPU has it, every ARMv8 core (runtime.h's has_fma()).
inline bool cpu_has_fma() { return autograd::cpu::has_fma(); }

}  // namespace testing_helpers
