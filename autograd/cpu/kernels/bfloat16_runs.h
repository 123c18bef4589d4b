// cpu/kernels/bfloat16_runs.h — float32 ↔ bfloat16 along one run of memory (bfloat16_runs.cpp), the CPU's
// fast loops for the widening backend's conversions (precision/widening_backend.h: BFloat16Runs).
#pragma once
#include <cstdint>

#include "autograd/dtype.h"

namespace autograd::cpu {

// to[i] = round_to_bfloat16(from[i]) for i < n
void round_run_to_bfloat16(const float* from, bfloat16* to, int64_t n);
// The same on the calling thread alone, written with streaming stores (around the caches, without first
// reading the lines they overwrite): for a copy that is read much later (AdamW's writes of autocast's kept
// weight copies, read by the next forward pass).
void round_run_streaming(const float* from, bfloat16* to, int64_t n);
// to[i] = widen(from[i]) for i < n
void widen_run_to_float32(const bfloat16* from, float* to, int64_t n);
// The same along `rows` runs of `length`, run r from from + from_at[r] to to + to_at[r], the rows split over
// the threads.
void round_rows_to_bfloat16(const float* from, const int64_t* from_at, bfloat16* to, const int64_t* to_at,
                            int64_t rows, int64_t length);
void widen_rows_to_float32(const bfloat16* from, const int64_t* from_at, float* to, const int64_t* to_at,
                           int64_t rows, int64_t length);

}  // namespace autograd::cpu
