// select_floats.h — where(mask, value, y) on floats, 16 at a time where the CPU has AVX-512, 8 with AVX2.
//
// masked_fill (and its backward) is where(mask, value, x) with a scalar value. Baseline x86-64 has no
// vector blend, so the compiler leaves that loop one value at a time; this is the loop written with
// AVX-512 masks (or AVX2 blends). A select copies bits: the result is the same whichever way it runs.
#pragma once
#include <cstdint>

namespace autograd::cpu {

// out[i] = mask[i] ? value : y[i] for 0 <= i < n.
void select_floats(const bool* mask, float value, const float* y, float* out, int64_t n);

}  // namespace autograd::cpu
