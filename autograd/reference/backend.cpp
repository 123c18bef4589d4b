// reference/backend.cpp — the reference kernels behind the Backend interface. Memory is the CPU's: a
// tensor allocated under one set of kernels may be freed under the other.
//
// Not overridden, so written once in autograd/backend.cpp with the entries below: find_index_outside (a
// scan) and add_rows_into_gradient.
#include <cstring>

#include "autograd/cpu/kernels.h"
#include "autograd/reference/backend.h"
#include "autograd/reference/kernels.h"
#include "autograd/precision/widening_backend.h"

namespace autograd::reference {

namespace {

class ReferenceBackend final : public Backend {
 public:
  void* allocate(size_t nbytes) override { return cpu::cpu_backend().allocate(nbytes); }
  void deallocate(void* p, size_t nbytes) override { cpu::cpu_backend().deallocate(p, nbytes); }
  void copy_to_cpu(const Tensor& src, void* dst, size_t nbytes) override { std::memcpy(dst, src.raw_data(), nbytes); }
  void copy_from_cpu(const void* src, const Tensor& dst, size_t nbytes) override {
    std::memcpy(dst.raw_data(), src, nbytes);
  }

  void copy(const Tensor& src, const Tensor& dst) override { reference::copy(src, dst); }
  void fill(const Tensor& dst, double value) override { reference::fill(dst, value); }
  void unary(UnaryOp op, const Tensor& in, const Tensor& out, double scalar) override {
    reference::unary(op, in, out, scalar);
  }
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) override {
    reference::binary(op, a, b, out);
  }
  void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) override {
    reference::where(cond, a, b, out);
  }
  void masked_fill(const Tensor& x, const Tensor& mask, double value, const Tensor& out) override {
    reference::masked_fill(x, mask, value, out);
  }

  void sum_to(const Tensor& in, const Tensor& out) override { reference::sum_to(in, out); }
  void max_dim(const Tensor& in, int64_t dim, const Tensor& values, const Tensor& indices) override {
    reference::max_dim(in, dim, values, indices);
  }

  void matmul(const Tensor& a, const Tensor& b, const Tensor& out) override { reference::matmul(a, b, out); }
  void addmm(const Tensor& bias, const Tensor& a, const Tensor& b, const Tensor& out) override {
    reference::addmm(bias, a, b, out);
  }
  bool has_causal_kernels() const override { return true; }
  // (every entry computed: the zeros a structure promises add nothing)
  void matmul_structured(const Tensor& a, const Tensor& b, const Tensor& out, MatmulStructure) override {
    reference::matmul(a, b, out);
  }
  void causal_product(const Tensor& a, const Tensor& b, const Tensor& out, double divisor, double above) override {
    reference::causal_product(a, b, out, divisor, above);
  }
  void causal_scale(const Tensor& dst, const Tensor& src, double divisor, double above) override {
    reference::causal_scale(dst, src, divisor, above);
  }
  bool zero_above_diagonal(const Tensor& p) override { return reference::zero_above_diagonal(p); }
  bool has_flash_attention() const override { return true; }
  void flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale,
                       const Tensor& out, const Tensor& lse) override {
    reference::flash_attention(q, k, v, causal, scale, out, lse);
  }
  void flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                const Tensor& lse, const Tensor& grad_out, bool causal, double scale,
                                const Tensor& dq, const Tensor& dk, const Tensor& dv) override {
    reference::flash_attention_backward(q, k, v, out, lse, grad_out, causal, scale, dq, dk, dv);
  }

  void softmax(const Tensor& in, int64_t dim, bool log, const Tensor& out) override {
    reference::softmax(in, dim, log, out);
  }
  void softmax_backward(const Tensor& y, const Tensor& g, int64_t dim, bool log, const Tensor& gx) override {
    reference::softmax_backward(y, g, dim, log, gx);
  }

  void index_select_rows(const Tensor& weight, const Tensor& index, const Tensor& out) override {
    reference::index_select_rows(weight, index, out);
  }
  void index_add_rows(const Tensor& grad, const Tensor& index, const Tensor& grad_weight) override {
    reference::index_add_rows(grad, index, grad_weight);
  }
  void gather_rows(const Tensor& values, const Tensor& index, int64_t skip, const Tensor& out) override {
    reference::gather_rows(values, index, skip, out);
  }
  void scatter_rows(const Tensor& grad, const Tensor& index, int64_t skip, const Tensor& grad_values) override {
    reference::scatter_rows(grad, index, skip, grad_values);
  }
  int64_t nll_loss(const Tensor& log_probs, const Tensor& targets, int64_t ignore_index, const Tensor& out) override {
    return reference::nll_loss(log_probs, targets, ignore_index, out);
  }
  void nll_loss_backward(const Tensor& grad, const Tensor& targets, int64_t ignore_index, int64_t count,
                         const Tensor& grad_in) override {
    reference::nll_loss_backward(grad, targets, ignore_index, count, grad_in);
  }

  void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y,
                  const Tensor& mean, const Tensor& rstd) override {
    reference::layer_norm(x, weight, bias, eps, y, mean, rstd);
  }
  void layer_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                           const Tensor& weight, const Tensor& grad_x, const Tensor& grad_weight,
                           const Tensor& grad_bias) override {
    reference::layer_norm_backward(grad_y, x, mean, rstd, weight, grad_x, grad_weight, grad_bias);
  }
  void gelu(const Tensor& x, bool tanh, const Tensor& y) override { reference::gelu(x, tanh, y); }
  void gelu_backward(const Tensor& grad_y, const Tensor& x, bool tanh, const Tensor& grad_x) override {
    reference::gelu_backward(grad_y, x, tanh, grad_x);
  }
  void silu(const Tensor& x, const Tensor& y) override { reference::silu(x, y); }
  void silu_backward(const Tensor& grad_y, const Tensor& x, const Tensor& grad_x) override {
    reference::silu_backward(grad_y, x, grad_x);
  }
  void rms_norm(const Tensor& x, const Tensor& weight, double eps, const Tensor& y, const Tensor& rstd) override {
    reference::rms_norm(x, weight, eps, y, rstd);
  }
  void rms_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& rstd, const Tensor& weight,
                         const Tensor& grad_x, const Tensor& grad_weight) override {
    reference::rms_norm_backward(grad_y, x, rstd, weight, grad_x, grad_weight);
  }
  void rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse,
                        const Tensor& out) override {
    reference::rotary_embedding(x, cos, sin, inverse, out);
  }
  // (`all` picks PyTorch's order of additions for a whole-tensor variance; the math is the same)
  void var(const Tensor& x, double correction, bool take_sqrt, bool /*all*/, const Tensor& out) override {
    reference::var(x, correction, take_sqrt, out);
  }
  void norm2(const Tensor& x, const Tensor& out) override { reference::norm2(x, out); }

  void adam_update(const AdamStep& step, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                   const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq) override {
    reference::adam_update(step, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq);
  }
};

}  // namespace

Backend& reference_backend() {
  // never destroyed, as the CPU's (cpu/backend.cpp); bfloat16 tensors are computed in float32 in front of it
  static Backend& instance = widening_backend(*new ReferenceBackend, reference::bfloat16_matmul);
  return instance;
}

}  // namespace autograd::reference
