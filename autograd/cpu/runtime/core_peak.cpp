// cpu/runtime/core_peak.cpp — the FMA loop that measures one core's peak (see core_peak.h).
//
// Independent chains acc += a · b, in assembly so that no compiler hoists the loop-invariant a · b: as one
// fused multiply-add (the fast kernels' way) or as a multiply and then an add (the exact kernels' way; on
// Intel both share the two FMA ports, AMD Zen has separate add pipes). A chain's next round waits for its
// last (3-4 cycles), so the chains in flight are what keeps both units busy: 12 with AVX2's 16 registers
// (ymm0-11; a, b and the product in ymm13-15), 24 with AVX-512's 32 (zmm0-23; zmm29-31). On 64-bit ARM, NEON's
// fmla (fused) or fmul then fadd, 24 chains in 128-bit registers.
#include "autograd/cpu/runtime/core_peak.h"

#include <algorithm>
#include <chrono>

#include "autograd/cpu/kernels.h"
#include "autograd/cpu/runtime/runtime.h"

namespace autograd::cpu {

namespace {

#if defined(__x86_64__) && defined(__GNUC__)
#define SG_CHAINS_12(op) op(0) op(1) op(2) op(3) op(4) op(5) op(6) op(7) op(8) op(9) op(10) op(11)
#define SG_CHAINS_24(op) \
  SG_CHAINS_12(op) op(12) op(13) op(14) op(15) op(16) op(17) op(18) op(19) op(20) op(21) op(22) op(23)
#define SG_FMA_Y(i) "vfmadd231ps %%ymm14, %%ymm15, %%ymm" #i "\n\t"
#define SG_MUL_ADD_Y(i) "vmulps %%ymm14, %%ymm15, %%ymm13\n\tvaddps %%ymm13, %%ymm" #i ", %%ymm" #i "\n\t"
#define SG_FMA_Z(i) "vfmadd231ps %%zmm30, %%zmm31, %%zmm" #i "\n\t"
#define SG_MUL_ADD_Z(i) "vmulps %%zmm30, %%zmm31, %%zmm29\n\tvaddps %%zmm29, %%zmm" #i ", %%zmm" #i "\n\t"
#define SG_YMM_CLOBBERS \
  "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", \
      "xmm13", "xmm14", "xmm15", "cc"
#define SG_ZMM_CLOBBERS                                                                                       \
  SG_YMM_CLOBBERS, "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", \
      "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31"

constexpr float kPeakA = 1.0f, kPeakB = 1e-7f;  // the chains grow by 1e-7 a round: no overflow, no denormal

// The loop: a and b broadcast into registers A and B, then `rounds` rounds of the chains' instructions.
#define SG_PEAK_LOOP(A, B, chains, clobbers)                                                             \
  asm volatile("vbroadcastss %1, %%" A "\n\tvbroadcastss %2, %%" B "\n1:\n\t" chains "dec %0\n\tjnz 1b\n\tvzeroupper" \
               : "+r"(rounds)                                                                            \
               : "m"(kPeakA), "m"(kPeakB)                                                                \
               : clobbers)

[[gnu::target("avx2,fma")]] void avx2_rounds(bool fused, int64_t rounds) {
  if (fused)
    SG_PEAK_LOOP("ymm14", "ymm15", SG_CHAINS_12(SG_FMA_Y), SG_YMM_CLOBBERS);
  else
    SG_PEAK_LOOP("ymm14", "ymm15", SG_CHAINS_12(SG_MUL_ADD_Y), SG_YMM_CLOBBERS);
}

[[gnu::target("avx512f")]] void avx512_rounds(bool fused, int64_t rounds) {
  if (fused)
    SG_PEAK_LOOP("zmm30", "zmm31", SG_CHAINS_24(SG_FMA_Z), SG_ZMM_CLOBBERS);
  else
    SG_PEAK_LOOP("zmm30", "zmm31", SG_CHAINS_24(SG_MUL_ADD_Z), SG_ZMM_CLOBBERS);
}
#endif

#if defined(__aarch64__) && defined(__GNUC__)
// 64-bit ARM: NEON's 128-bit vectors (4 floats), which every ARMv8 core has, FMA included; 24 chains in
// v0-v23 (a, b and the product in v30, v31, v29) cover the 4-cycle latency of two or four FMA pipes.
#define SG_CHAINS_24(op)                                                                                     \
  op(0) op(1) op(2) op(3) op(4) op(5) op(6) op(7) op(8) op(9) op(10) op(11) op(12) op(13) op(14) op(15) op(16) \
      op(17) op(18) op(19) op(20) op(21) op(22) op(23)
#define SG_FMA_V(i) "fmla v" #i ".4s, v30.4s, v31.4s\n\t"
#define SG_MUL_ADD_V(i) "fmul v29.4s, v30.4s, v31.4s\n\tfadd v" #i ".4s, v" #i ".4s, v29.4s\n\t"
#define SG_V_CLOBBERS                                                                                          \
  "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12", "v13", "v14", "v15", "v16", \
      "v17", "v18", "v19", "v20", "v21", "v22", "v23", "v29", "v30", "v31", "cc"

constexpr float kPeakA = 1.0f, kPeakB = 1e-7f;  // the chains grow by 1e-7 a round: no overflow, no denormal

#define SG_PEAK_LOOP_NEON(chains)                                                            \
  asm volatile("ld1r {v30.4s}, [%1]\n\tld1r {v31.4s}, [%2]\n1:\n\t" chains "subs %0, %0, #1\n\tb.ne 1b" \
               : "+r"(rounds)                                                                \
               : "r"(&kPeakA), "r"(&kPeakB)                                                  \
               : SG_V_CLOBBERS, "memory")

void neon_rounds(bool fused, int64_t rounds) {
  if (fused)
    SG_PEAK_LOOP_NEON(SG_CHAINS_24(SG_FMA_V));
  else
    SG_PEAK_LOOP_NEON(SG_CHAINS_24(SG_MUL_ADD_V));
}
#endif

struct Peak {
  double flops_per_s = 0;
  const char* isa = "none";
};

Peak measure() {
#if defined(__aarch64__)
  const int bits = 128;  // NEON, with FMA, on every 64-bit ARM core
#else
  const int bits = avx512_kernels() && has_fma() ? 512 : has_avx2() && has_fma() ? 256 : 0;
#endif
  if (bits == 0) return {};
  constexpr int64_t kRounds = 1 << 12;  // one call: about 0.1 ms
  double best = 0;
  for (int run = 0; run < 20; ++run) {  // 20 runs of 50 calls: about 100 ms in all
    const auto start = std::chrono::steady_clock::now();
    double flops = 0;
    for (int call = 0; call < 50; ++call) flops += core_peak_rounds(bits, true, kRounds);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, flops / std::max(s, 1e-9));
  }
  return {best, bits == 512 ? "avx512" : bits == 256 ? "avx2" : "neon"};
}

const Peak& peak() {
  static const Peak measured = measure();  // once per process, on first use (thread-safe)
  return measured;
}

}  // namespace

double core_peak_rounds([[maybe_unused]] int bits, [[maybe_unused]] bool fused, [[maybe_unused]] int64_t rounds) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (rounds < 1) return 0;
  if (bits == 512 && __builtin_cpu_supports("avx512f")) {
    avx512_rounds(fused, rounds);
    return 2.0 * 16 * 24 * double(rounds);
  }
  if (bits == 256 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    avx2_rounds(fused, rounds);
    return 2.0 * 8 * 12 * double(rounds);
  }
#elif defined(__aarch64__) && defined(__GNUC__)
  if (rounds < 1) return 0;
  if (bits == 128) {
    neon_rounds(fused, rounds);
    return 2.0 * 4 * 24 * double(rounds);
  }
#endif
  return 0;
}

namespace {

// The vdpbf16ps loop (cpu/kernels/matmul_bfloat16.cpp), timed as measure() times the FMA loop.
Peak measure_bfloat16() {
  if (bfloat16_peak_rounds(1) == 0) return measure();  // the portable path: float32 FMAs
  constexpr int64_t kRounds = 1 << 12;
  double best = 0;
  for (int run = 0; run < 20; ++run) {
    const auto start = std::chrono::steady_clock::now();
    double flops = 0;
    for (int call = 0; call < 50; ++call) flops += bfloat16_peak_rounds(kRounds);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, flops / std::max(s, 1e-9));
  }
  return {best, "avx512_bf16"};
}

const Peak& bfloat16_peak() {
  static const Peak measured = measure_bfloat16();
  return measured;
}

}  // namespace

double bfloat16_core_peak_flops() { return bfloat16_peak().flops_per_s; }
double measure_bfloat16_core_peak_flops() { return measure_bfloat16().flops_per_s; }
const char* bfloat16_core_peak_isa() { return bfloat16_peak().isa; }

double core_peak_flops() { return peak().flops_per_s; }
double measure_core_peak_flops() { return measure().flops_per_s; }
const char* core_peak_isa() { return peak().isa; }

}  // namespace autograd::cpu
