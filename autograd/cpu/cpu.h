// cpu/cpu.h — the CPU backend's entry points and runtime settings.
#pragma once
#include "autograd/backend.h"

namespace autograd::cpu {

Backend& cpu_backend();

// Whether the kernels' AVX-512 twins run: the CPU has AVX-512 F, VL and BW (every AVX-512 CPU since
// Skylake-SP and Zen 4) and SCRATCHGRAD_NO_AVX512 is not set. The twins do the same IEEE operations as
// their baseline versions, so this changes speed, never bits (tests/test_avx512_paths.cpp).
bool avx512_kernels();

// What a product may take for granted about where its zeros are, to skip work that cannot change a bit
// (causal attention, ops/attention.cpp). The exact kernels use it; BLIS and the narrow-row path compute
// the full product, which gives the same entries when the promised zeros are there.
enum class MatmulStructure {
  dense,    // nothing
  lower_c,  // only C[i, j] with j <= i is wanted: tiles wholly above the diagonal are not computed
  lower_a,  // A is square and A[i, p] == 0 for p > i (a causal softmax, tril)
  upper_a,  // A is square and A[i, p] == 0 for p < i (the transpose of one)
};

// out[..., M, N] = a[..., M, K] @ b[..., K, N]; batch dims identical (expanded views allowed).
// Products are added in PyTorch's order by the exact kernels (or BLIS when SCRATCHGRAD_MATMUL=blis).
// add_to_out: out holds the sum's starting value and every block of the sum is added to it, as BLIS
// does for addmm (beta = 1): (bias + chain₀) + chain₁ + ...
// start_row (optional, [N] contiguous, out's dtype): the starting value is this row on every row of out,
// as if it had been copied down out and add_to_out set (addmm's bias, without the copy).
void batched_matmul(const Tensor& a, const Tensor& b, const Tensor& out,
                    MatmulStructure structure = MatmulStructure::dense, bool add_to_out = false,
                    const Tensor& start_row = Tensor());

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
