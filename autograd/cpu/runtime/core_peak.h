// cpu/runtime/core_peak.h — one core's arithmetic peak, measured: the ceiling that bench_ops' product rates
// and the model-FLOPs utilisation (MFU) of the benchmarks and the trainer are fractions of.
#pragma once
#include <cstdint>

namespace autograd::cpu {

// The float32 FLOP/s of one core running fused multiply-adds on the widest vectors the fast kernels use:
// AVX-512 where avx512_kernels() (24 independent chains, 16 lanes), else AVX2 with FMA (12 chains, 8 lanes);
// on 64-bit ARM, NEON (24 chains, 4 lanes).
// Measured on the first call (about 100 ms: the best of 20 short runs, so a run another process interrupted
// does not count), then remembered for the process. 0 where the CPU has neither (no figure, not a wrong one).
double core_peak_flops();
// The same measurement again, not remembered: for a benchmark that measures around its timed work and keeps
// the best, since anything that disturbs a measurement can only make the peak look lower (and MFU higher).
double measure_core_peak_flops();
// "avx512", "avx2", "neon" or "none": the vectors core_peak_flops measured.
const char* core_peak_isa();

// The same for bfloat16 products (bfloat16 operands, float32 sums), by the path bfloat16_matmul takes on this
// CPU (cpu/kernels/matmul_bfloat16.cpp): 24 chains of vdpbf16ps where it has AVX512_BF16 (each instruction
// the work of two float32 FMAs: 64 FLOPs), else the float32 FMA peak above, since the portable path widens
// the operands and runs the float32 kernel. The MFU of a bf16 run (train --precision bf16,
// bench_gpt2_train --precision bf16) is over this peak. Measured once, as core_peak_flops is.
double bfloat16_core_peak_flops();
double measure_bfloat16_core_peak_flops();
// "avx512_bf16", or core_peak_isa()'s name for the float32 loop the portable path is bound by.
const char* bfloat16_core_peak_isa();

// One run of the measurement: `rounds` rounds of every chain's instruction(s), fused (one FMA: the fast
// kernels' way) or not (a multiply, then an add: the exact kernels' way). Returns the FLOPs it did, or 0
// where the CPU lacks the instructions (bits 512: AVX-512 F; 256: AVX2 and FMA; 128: NEON, on aarch64 only).
// bench_ops times it.
double core_peak_rounds(int bits, bool fused, int64_t rounds);

}  // namespace autograd::cpu
