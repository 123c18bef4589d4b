// gpu/kernels.h — the kernel launchers in gpu/*.cu, callable from host-only C++ (internal).
// Each takes tensors whose data lives on the GPU; shapes and dtypes were checked by the op.
#pragma once
#include "autograd/backend.h"

namespace gpu::kernels {

using autograd::AdamStep;
using autograd::BinaryOp;
using autograd::Tensor;
using autograd::UnaryOp;

// elementwise.cu
void copy(const Tensor& src, const Tensor& dst);
void fill(const Tensor& dst, double value);
void unary(UnaryOp op, const Tensor& in, const Tensor& out, double scalar);
void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);
void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out);

// reduce.cu
void sum_to(const Tensor& in, const Tensor& out);
void max_dim(const Tensor& in, int64_t dim, const Tensor& values, const Tensor& indices);
void softmax(const Tensor& in, int64_t dim, bool log, const Tensor& out);
void softmax_backward(const Tensor& y, const Tensor& grad_out, int64_t dim, bool log, const Tensor& grad_in);
void index_select_rows(const Tensor& weight, const Tensor& index, const Tensor& out);
void index_add_rows(const Tensor& grad, const Tensor& index, const Tensor& grad_weight);
void gather_rows(const Tensor& values, const Tensor& index, int64_t skip, const Tensor& out);
void scatter_rows(const Tensor& grad, const Tensor& index, int64_t skip, const Tensor& grad_values);
void adam_update(const AdamStep& step, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                 const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq);

// llama.cu
void silu(const Tensor& x, const Tensor& y);
void silu_backward(const Tensor& grad_y, const Tensor& x, const Tensor& grad_x);
void rms_norm(const Tensor& x, const Tensor& weight, double eps, const Tensor& y, const Tensor& rstd);
void rms_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& rstd, const Tensor& weight,
                       const Tensor& grad_x, const Tensor& grad_weight);
void rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse, const Tensor& out);

// matmul.cpp (cuBLAS)
void matmul(const Tensor& a, const Tensor& b, const Tensor& out);

}  // namespace gpu::kernels
