// cpu/cpu.h — the CPU backend's entry points and runtime settings.
#pragma once
#include "autograd/backend.h"

namespace autograd::cpu {

Backend& cpu_backend();

// out[..., M, N] = a[..., M, K] @ b[..., K, N]; batch dims identical (expanded views allowed).
// Tiny products go to a register-blocked loop, the rest to BLIS with the operands' own strides.
void batched_matmul(const Tensor& a, const Tensor& b, const Tensor& out);

void adam_update_cpu(const AdamStep& step, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                     const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq);

// Below this many multiply-adds a BLIS call (about 1.4 µs of fixed cost) loses to a plain loop.
inline constexpr int64_t kSmallMatmulFlops = 16 * 1024;

}  // namespace autograd::cpu

namespace autograd {

// Threads used by BLIS and the CPU kernels (default 1, or SCRATCHGRAD_THREADS).
void set_num_threads(int threads);
int get_num_threads();

// Which BLIS kernel family is in use ("skx", "haswell", ...), after start-up selection.
const char* blis_kernel_name();

}  // namespace autograd
