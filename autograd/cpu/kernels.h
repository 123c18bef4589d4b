// cpu/kernels.h — the CPU backend's kernels, one function per Backend entry (backend.h says what each
// computes), grouped by the file that holds them. cpu/backend.cpp puts them behind the Backend interface;
// nothing above the fence includes this header.
#pragma once
#include <cstdint>

#include "autograd/backend.h"

namespace autograd::cpu {

Backend& cpu_backend();

// elementwise.cpp
void copy(const Tensor& src, const Tensor& dst);
void fill(const Tensor& dst, double value);
void unary(UnaryOp op, const Tensor& in, const Tensor& out, double scalar);
void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);
void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out);
void masked_fill(const Tensor& x, const Tensor& mask, double value, const Tensor& out);

// sums.cpp
void sum_to(const Tensor& in, const Tensor& out);
void max_dim(const Tensor& in, int64_t dim, const Tensor& values, const Tensor& indices);

// softmax.cpp
void softmax(const Tensor& in, int64_t dim, bool log, const Tensor& out);
void softmax_backward(const Tensor& y, const Tensor& g, int64_t dim, bool log, const Tensor& gx);

// embedding.cpp
void index_select_rows(const Tensor& weight, const Tensor& index, const Tensor& out);
void index_add_rows(const Tensor& grad, const Tensor& index, const Tensor& grad_weight);
int64_t find_index_outside(const Tensor& index, int64_t limit, int64_t allowed);

// loss.cpp
void gather_rows(const Tensor& values, const Tensor& index, int64_t skip, const Tensor& out);
void scatter_rows(const Tensor& grad, const Tensor& index, int64_t skip, const Tensor& grad_values);
int64_t nll_loss(const Tensor& log_probs, const Tensor& targets, int64_t ignore_index, const Tensor& out);
void nll_loss_backward(const Tensor& grad, const Tensor& targets, int64_t ignore_index, int64_t count,
                       const Tensor& grad_in);

// matmul.cpp
// out[..., M, N] = a[..., M, K] @ b[..., K, N]; batch dims identical (expanded views allowed).
// Products are added in PyTorch's order by the exact kernels (or BLIS when SCRATCHGRAD_MATMUL=blis).
// add_to_out: out holds the sum's starting value and every block of the sum is added to it, as BLIS
// does for addmm (beta = 1): (bias + chain₀) + chain₁ + ...
// start_row (optional, [N] contiguous, out's dtype): the starting value is this row on every row of out,
// as if it had been copied down out and add_to_out set (addmm's bias, without the copy).
void batched_matmul(const Tensor& a, const Tensor& b, const Tensor& out,
                    MatmulStructure structure = MatmulStructure::dense, bool add_to_out = false,
                    const Tensor& start_row = Tensor());
// out [1, N] = x [1, K] · Wᵀ (+ bias [N]) for a weight packed in panels [P, K, 16] (autograd/ops/panels.cpp),
// each panel read as one run of memory, with the bits of linear(x, W, bias). False (nothing written) where
// linear would not run the FMA kernels, for several rows, or for layouts it does not take: the caller then
// multiplies the unpacked weight (Backend::panel_linear).
bool row_times_panels(const Tensor& x, const Tensor& panels, const Tensor& bias, const Tensor& out);
// out = a @ b on and below the diagonal of every [t, t] matrix, divided by divisor, and `above` past it:
// causal scores (ops/attention.cpp). The fast kernels scale each tile's rows as they finish them.
void causal_product(const Tensor& a, const Tensor& b, const Tensor& out, double divisor, double above);
// Which products BLIS computes (SCRATCHGRAD_MATMUL at start-up): none (the exact kernels, BLIS's
// generic order without FMA), the large ones ("blis"), or every one PyTorch hands to BLIS ("blis-all":
// this machine's BLIS kernels, so PyTorch's bits wherever PyTorch ran on the same BLIS sub-configuration).
enum class MatmulMode { exact, blis_large, blis_all };
void set_matmul_mode(MatmulMode mode);
MatmulMode matmul_mode();
// Below this many multiply-adds a BLIS call's fixed cost outweighs its speed, and a plain loop wins.
inline constexpr int64_t kSmallMatmulFlops = 16 * 1024;

// matmul_bfloat16.cpp
// out (float32) = a @ b for bfloat16 a and b, float32 sums: the AVX512_BF16 kernel where the CPU has it,
// else each operand widened to float32 and the float32 product (widening_backend.h calls it).
void bfloat16_matmul(const Tensor& a, const Tensor& b, const Tensor& out, const ProductStore& how = {});
// "avx512_bf16" or "float32 (widened)": the path bfloat16_matmul takes on this CPU.
const char* bfloat16_kernel_name();
// out [1, N] (float32) = a (bfloat16, one row of K) times a bfloat16 weight packed in panels [P, K, 16]
// (autograd/ops/panels.cpp): each column one float32 chain of FMAs over p. False (nothing written) where
// the CPU has no AVX-512 or the layouts are not contiguous: the caller then takes the general way.
bool bfloat16_row_times_panels(const Tensor& a, const Tensor& panels, const Tensor& out);
// One core's bfloat16 product peak, for bench_ops: `rounds` rounds of 24 independent chains of vdpbf16ps;
// returns the FLOPs done (2 per multiply-add), 0 where the CPU lacks AVX512_BF16.
double bfloat16_peak_rounds(int64_t rounds);

// attention.cpp
void causal_scale(const Tensor& dst, const Tensor& src, double divisor, double above);
bool zero_above_diagonal(const Tensor& p);

// flash_attention.cpp
void flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale, const Tensor& out,
                     const Tensor& lse);
void flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                              const Tensor& grad_out, bool causal, double scale, const Tensor& dq, const Tensor& dk,
                              const Tensor& dv);

// normalization.cpp
void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y,
                const Tensor& mean, const Tensor& rstd);
void layer_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                         const Tensor& weight, const Tensor& grad_x, const Tensor& grad_weight, const Tensor& grad_bias);
void var(const Tensor& x, double correction, bool take_sqrt, bool all, const Tensor& out);
void norm2(const Tensor& x, const Tensor& out);
void norm2_each(const std::vector<Tensor>& xs, const Tensor& out);

// gelu.cpp
void gelu(const Tensor& x, bool tanh, const Tensor& y);
void gelu_backward(const Tensor& grad_y, const Tensor& x, bool tanh, const Tensor& grad_x);

// llama.cpp
void silu(const Tensor& x, const Tensor& y);
void silu_backward(const Tensor& grad_y, const Tensor& x, const Tensor& grad_x);
void rms_norm(const Tensor& x, const Tensor& weight, double eps, const Tensor& y, const Tensor& rstd);
void rms_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& rstd, const Tensor& weight,
                       const Tensor& grad_x, const Tensor& grad_weight);
void rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse, const Tensor& out);

// adam.cpp
// `rounded`, if defined (bfloat16, contiguous; a float32 param's): the new values rounded into it in the same pass
void adam_update_cpu(const AdamStep& step, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                     const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, const Tensor& rounded = Tensor());

}  // namespace autograd::cpu
