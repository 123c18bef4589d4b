// reference/kernels.h — the reference kernels, one function per Backend entry (backend.h says what each
// computes), grouped by the file that holds them. reference/backend.cpp puts them behind the Backend
// interface. Every one is a plain loop over strided tensors, float32 and float64 (and int64/bool where the
// CPU's kernel takes them), with its math in a comment above it.
#pragma once
#include <cstdint>

#include "autograd/backend.h"

namespace autograd::reference {

// elementwise.cpp
void copy(const Tensor& src, const Tensor& dst);
void fill(const Tensor& dst, double value);
void unary(UnaryOp op, const Tensor& in, const Tensor& out, double scalar);
void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);
void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out);
void masked_fill(const Tensor& x, const Tensor& mask, double value, const Tensor& out);

// reduce.cpp
void sum_to(const Tensor& in, const Tensor& out);
void max_dim(const Tensor& in, int64_t dim, const Tensor& values, const Tensor& indices);
void var(const Tensor& x, double correction, bool take_sqrt, const Tensor& out);
void norm2(const Tensor& x, const Tensor& out);

// matmul.cpp
void matmul(const Tensor& a, const Tensor& b, const Tensor& out);
void addmm(const Tensor& bias, const Tensor& a, const Tensor& b, const Tensor& out);
// out (float32) = a @ b for bfloat16 a and b: each product widened to float32, added into a float32 sum
void bfloat16_matmul(const Tensor& a, const Tensor& b, const Tensor& out, const ProductStore& how = {});
void causal_product(const Tensor& a, const Tensor& b, const Tensor& out, double divisor, double above);
void causal_scale(const Tensor& dst, const Tensor& src, double divisor, double above);
bool zero_above_diagonal(const Tensor& p);

// softmax.cpp
void softmax(const Tensor& in, int64_t dim, bool log, const Tensor& out);
void softmax_backward(const Tensor& y, const Tensor& grad_out, int64_t dim, bool log, const Tensor& grad_in);

// attention.cpp
void flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale, const Tensor& out,
                     const Tensor& lse);
void flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                              const Tensor& grad_out, bool causal, double scale, const Tensor& dq, const Tensor& dk,
                              const Tensor& dv);

// rows.cpp: embedding rows, the loss's picked entries
void index_select_rows(const Tensor& weight, const Tensor& index, const Tensor& out);
void index_add_rows(const Tensor& grad, const Tensor& index, const Tensor& grad_weight);
void gather_rows(const Tensor& values, const Tensor& index, int64_t skip, const Tensor& out);
void scatter_rows(const Tensor& grad, const Tensor& index, int64_t skip, const Tensor& grad_values);
int64_t nll_loss(const Tensor& log_probs, const Tensor& targets, int64_t ignore_index, const Tensor& out);
void nll_loss_backward(const Tensor& grad, const Tensor& targets, int64_t ignore_index, int64_t count,
                       const Tensor& grad_in);

// gpt.cpp: layer norm, GELU, Adam
void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y,
                const Tensor& mean, const Tensor& rstd);
void layer_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                         const Tensor& weight, const Tensor& grad_x, const Tensor& grad_weight, const Tensor& grad_bias);
void gelu(const Tensor& x, bool tanh, const Tensor& y);
void gelu_backward(const Tensor& grad_y, const Tensor& x, bool tanh, const Tensor& grad_x);
void adam_update(const AdamStep& step, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                 const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq);

// llama.cpp: SiLU, RMS norm, rotary embedding
void silu(const Tensor& x, const Tensor& y);
void silu_backward(const Tensor& grad_y, const Tensor& x, const Tensor& grad_x);
void rms_norm(const Tensor& x, const Tensor& weight, double eps, const Tensor& y, const Tensor& rstd);
void rms_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& rstd, const Tensor& weight,
                       const Tensor& grad_x, const Tensor& grad_weight);
void rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse, const Tensor& out);

}  // namespace autograd::reference
