// cpu/backend.cpp — the CPU device: every Backend entry, each handed to the kernel that implements it
// (kernels.h lists them by file).
#include <cstring>

#include "autograd/cpu/runtime/buffer_cache.h"
#include "autograd/cpu/kernels.h"
#include "autograd/cpu/kernels/bfloat16_runs.h"
#include "autograd/precision/widening_backend.h"

namespace autograd::cpu {

namespace {

class CpuBackend final : public Backend {
 public:
  void* allocate(size_t nbytes) override { return cached_allocate(nbytes); }
  void deallocate(void* p, size_t nbytes) override { cached_deallocate(p, nbytes); }
  void copy_to_cpu(const Tensor& src, void* dst, size_t nbytes) override { std::memcpy(dst, src.raw_data(), nbytes); }
  void copy_from_cpu(const void* src, const Tensor& dst, size_t nbytes) override {
    std::memcpy(dst.raw_data(), src, nbytes);
  }

  void copy(const Tensor& src, const Tensor& dst) override { cpu::copy(src, dst); }
  void fill(const Tensor& dst, double value) override { cpu::fill(dst, value); }
  void unary(UnaryOp op, const Tensor& in, const Tensor& out, double scalar) override {
    cpu::unary(op, in, out, scalar);
  }
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) override {
    cpu::binary(op, a, b, out);
  }
  void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) override {
    cpu::where(cond, a, b, out);
  }
  void masked_fill(const Tensor& x, const Tensor& mask, double value, const Tensor& out) override {
    cpu::masked_fill(x, mask, value, out);
  }

  void sum_to(const Tensor& in, const Tensor& out) override { cpu::sum_to(in, out); }
  void max_dim(const Tensor& in, int64_t dim, const Tensor& values, const Tensor& indices) override {
    cpu::max_dim(in, dim, values, indices);
  }

  void matmul(const Tensor& a, const Tensor& b, const Tensor& out) override { batched_matmul(a, b, out); }
  void addmm(const Tensor& bias, const Tensor& a, const Tensor& b, const Tensor& out) override {
    batched_matmul(a, b, out, MatmulStructure::dense, /*add_to_out=*/false, bias);
  }
  bool has_causal_kernels() const override { return true; }
  void panel_linear(const Tensor& x, const Tensor& panels, const Tensor& bias, const Tensor& out) override {
    if (!cpu::row_times_panels(x, panels, bias, out)) Backend::panel_linear(x, panels, bias, out);
  }
  void matmul_structured(const Tensor& a, const Tensor& b, const Tensor& out, MatmulStructure structure) override {
    batched_matmul(a, b, out, structure);
  }
  void causal_scale(const Tensor& dst, const Tensor& src, double divisor, double above) override {
    cpu::causal_scale(dst, src, divisor, above);
  }
  void causal_product(const Tensor& a, const Tensor& b, const Tensor& out, double divisor, double above) override {
    cpu::causal_product(a, b, out, divisor, above);
  }
  bool zero_above_diagonal(const Tensor& p) override { return cpu::zero_above_diagonal(p); }
  bool has_flash_attention() const override { return true; }
  void flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale,
                       const Tensor& out, const Tensor& lse) override {
    cpu::flash_attention(q, k, v, causal, scale, out, lse);
  }
  void flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                const Tensor& lse, const Tensor& grad_out, bool causal, double scale,
                                const Tensor& dq, const Tensor& dk, const Tensor& dv) override {
    cpu::flash_attention_backward(q, k, v, out, lse, grad_out, causal, scale, dq, dk, dv);
  }

  void softmax(const Tensor& in, int64_t dim, bool log, const Tensor& out) override {
    cpu::softmax(in, dim, log, out);
  }
  void softmax_backward(const Tensor& y, const Tensor& g, int64_t dim, bool log, const Tensor& gx) override {
    cpu::softmax_backward(y, g, dim, log, gx);
  }

  void index_select_rows(const Tensor& weight, const Tensor& index, const Tensor& out) override {
    cpu::index_select_rows(weight, index, out);
  }
  void index_add_rows(const Tensor& grad, const Tensor& index, const Tensor& grad_weight) override {
    cpu::index_add_rows(grad, index, grad_weight);
  }
  int64_t find_index_outside(const Tensor& index, int64_t limit, int64_t allowed) override {
    return cpu::find_index_outside(index, limit, allowed);
  }
  void gather_rows(const Tensor& values, const Tensor& index, int64_t skip, const Tensor& out) override {
    cpu::gather_rows(values, index, skip, out);
  }
  void scatter_rows(const Tensor& grad, const Tensor& index, int64_t skip, const Tensor& grad_values) override {
    cpu::scatter_rows(grad, index, skip, grad_values);
  }
  int64_t nll_loss(const Tensor& log_probs, const Tensor& targets, int64_t ignore_index, const Tensor& out) override {
    return cpu::nll_loss(log_probs, targets, ignore_index, out);
  }
  void nll_loss_backward(const Tensor& grad, const Tensor& targets, int64_t ignore_index, int64_t count,
                         const Tensor& grad_in) override {
    cpu::nll_loss_backward(grad, targets, ignore_index, count, grad_in);
  }

  void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y,
                  const Tensor& mean, const Tensor& rstd) override {
    cpu::layer_norm(x, weight, bias, eps, y, mean, rstd);
  }
  void layer_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                           const Tensor& weight, const Tensor& grad_x, const Tensor& grad_weight,
                           const Tensor& grad_bias) override {
    cpu::layer_norm_backward(grad_y, x, mean, rstd, weight, grad_x, grad_weight, grad_bias);
  }
  void gelu(const Tensor& x, bool tanh, const Tensor& y) override { cpu::gelu(x, tanh, y); }
  void gelu_backward(const Tensor& grad_y, const Tensor& x, bool tanh, const Tensor& grad_x) override {
    cpu::gelu_backward(grad_y, x, tanh, grad_x);
  }
  void silu(const Tensor& x, const Tensor& y) override { cpu::silu(x, y); }
  void silu_backward(const Tensor& grad_y, const Tensor& x, const Tensor& grad_x) override {
    cpu::silu_backward(grad_y, x, grad_x);
  }
  void rms_norm(const Tensor& x, const Tensor& weight, double eps, const Tensor& y, const Tensor& rstd) override {
    cpu::rms_norm(x, weight, eps, y, rstd);
  }
  void rms_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& rstd, const Tensor& weight,
                         const Tensor& grad_x, const Tensor& grad_weight) override {
    cpu::rms_norm_backward(grad_y, x, rstd, weight, grad_x, grad_weight);
  }
  void rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse,
                        const Tensor& out) override {
    cpu::rotary_embedding(x, cos, sin, inverse, out);
  }
  void var(const Tensor& x, double correction, bool take_sqrt, bool all, const Tensor& out) override {
    cpu::var(x, correction, take_sqrt, all, out);
  }
  void norm2(const Tensor& x, const Tensor& out) override { cpu::norm2(x, out); }
  void norm2_each(const std::vector<Tensor>& xs, const Tensor& out) override { cpu::norm2_each(xs, out); }

  void adam_update(const AdamStep& step, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                   const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq) override {
    adam_update_cpu(step, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq);
  }
  void adam_update_rounding(const AdamStep& step, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                            const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, const Tensor& rounded) override {
    if (param.dtype() != DType::Float32)
      return Backend::adam_update_rounding(step, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, rounded);
    adam_update_cpu(step, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, rounded);
  }
};

}  // namespace

Backend& cpu_backend() {
  // Never destroyed: a tensor held by a static (a program's global model) is freed during static
  // destruction, possibly after this function's own statics, and must still find its backend.
  // bfloat16 tensors are computed in float32 in front of it (widening_backend.h).
  static Backend& instance = widening_backend(*new CpuBackend, bfloat16_matmul, bfloat16_row_times_panels,
                                              {round_run_to_bfloat16, widen_run_to_float32, round_rows_to_bfloat16,
                                               widen_rows_to_float32});
  return instance;
}

}  // namespace autograd::cpu
