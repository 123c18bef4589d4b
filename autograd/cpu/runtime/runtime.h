// cpu/runtime/runtime.h — process-wide CPU settings: threads, flush-to-zero, BLIS start-up, CPU features.
#pragma once

namespace autograd::cpu {

// Threads used by BLIS and the CPU kernels (default 1, or SCRATCHGRAD_THREADS).
void set_num_threads(int threads);
int get_num_threads();

// The most threads SCRATCHGRAD_THREADS may ask for.
inline constexpr int kMaxThreadsSetting = 1024;
// SCRATCHGRAD_THREADS's value as a thread count: a whole number from 1 to kMaxThreadsSetting written
// plainly, else 0 (the value is not used: "2x", "0", "-1", 99999999999, "" all give 0).
int thread_count_from_setting(const char* text);

// Which BLIS kernel family is in use ("skx", "haswell", ...), after start-up selection.
const char* blis_kernel_name();

// FTZ/DAZ on, BLIS's kernel family chosen and BLIS started, SCRATCHGRAD_THREADS read: once per
// process. It runs at load time; kernels that need BLIS call it too (cheap after the first time).
void init_cpu_runtime();

// Subnormal floats flushed to zero or not, in the calling thread's floating-point control register: x86's
// MXCSR (FTZ for results, DAZ for inputs) or ARM's FPCR (its FZ bit does both). init_cpu_runtime() turns
// flushing on for the process (threads started after it inherit the register); these read and set it.
bool flushing_denormals();
void set_flush_denormals(bool on);

// Flushing off in this thread for the lifetime of one of these, then back as it was: printing and parsing
// need exact subnormals (with DAZ or FZ the CPU reads 5e-324 as 0 in every comparison).
class KeepSubnormals {
 public:
  KeepSubnormals() : was_on_(flushing_denormals()) { set_flush_denormals(false); }
  ~KeepSubnormals() { set_flush_denormals(was_on_); }
  KeepSubnormals(const KeepSubnormals&) = delete;
  KeepSubnormals& operator=(const KeepSubnormals&) = delete;

 private:
  bool was_on_;
};

// Whether the kernels' AVX-512 twins run: the CPU has AVX-512 F, VL and BW (every AVX-512 CPU since
// Skylake-SP and Zen 4) and SCRATCHGRAD_NO_AVX512 is not set. The twins do the same IEEE operations as
// their baseline versions, so this changes speed, never bits (tests/test_avx512_paths.cpp).
bool avx512_kernels();
// Whether the kernels' AVX2 twins run: the CPU has AVX2 and SCRATCHGRAD_NO_AVX2 is not set (which turns
// off the AVX-512 twins too, leaving the baseline x86-64 kernels). In exact numerics the twins change
// speed, never bits (tests/test_avx512_paths.cpp); the fast numerics' products need AVX2 for their FMAs.
bool has_avx2();
// Whether the CPU has fused multiply-add instructions (the fast numerics' kernels, numerics.h, need them):
// x86's FMA3 where the CPU reports it; every 64-bit ARM core (FMA is part of ARMv8's base instructions).
bool has_fma();

}  // namespace autograd::cpu
