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

#include "autograd/cpu/kernels/loops.h"

namespace autograd::cpu {

void round_run_to_bfloat16(const float* from, bfloat16* to, int64_t n) {
  parallel_ranges(n, 1, [&](int64_t first, int64_t last) {
    contiguous_loop(last - first, [&](int64_t i) { to[first + i] = round_to_bfloat16(from[first + i]); });
  });
}

void widen_run_to_float32(const bfloat16* from, float* to, int64_t n) {
  parallel_ranges(n, 1, [&](int64_t first, int64_t last) {
    contiguous_loop(last - first, [&](int64_t i) { to[first + i] = widen(from[first + i]); });
  });
}

}  // namespace autograd::cpu
