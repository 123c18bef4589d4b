// cpu/adam.cpp — the Adam/AdamW update as one loop per parameter.
//
// PyTorch 1.13 (single-tensor Adam) runs this as a chain of tensor ops, each rounding to float:
//   g  = grad (+ wd·θ)                       m  = β1·m + (1−β1)·g        v = β2·v + (1−β2)·g·g
//   denom = sqrt(v) / sqrt(1 − β2^t) + eps   θ  = θ − (lr / (1 − β1^t)) · m / denom
// The loop below keeps that order of operations and the float rounding of every single op, as PyTorch's
// portable kernels (ATEN_CPU_CAPABILITY=default) compute them: `a.add_(b, alpha)` is a + (alpha·b),
// addcmul_ is v + ((value·g)·g), addcdiv_ is p + ((value·m)/denom) — every product and quotient rounded
// on its own, no fused multiply-add (the portable build is compiled for baseline x86-64, which has none;
// PyTorch's AVX2 build fuses a + alpha·b and lands a bit away in about half of the updates).
#include <cmath>

#include "autograd/backend.h"
#include "autograd/cpu/cpu.h"

namespace autograd::cpu {

template <typename F>
static void adam_update_typed(const AdamStep& s, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                              const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq) {
  const int64_t n = param.numel();
  F* p = param.data_ptr<F>();
  const F* g = grad.data_ptr<F>();
  F* m = exp_avg.data_ptr<F>();
  F* v = exp_avg_sq.data_ptr<F>();
  F* vmax = s.amsgrad ? max_exp_avg_sq.data_ptr<F>() : nullptr;

  const double bias_correction1 = 1.0 - std::pow(s.beta1, double(s.step));
  const double bias_correction2 = 1.0 - std::pow(s.beta2, double(s.step));
  // scalars are rounded to the parameter's type once, as PyTorch does when a Python float meets a tensor
  const F step_size = F(s.lr / bias_correction1);
  const F bc2_sqrt = F(std::sqrt(bias_correction2));
  const F beta1 = F(s.beta1), beta2 = F(s.beta2);
  const F one_minus_beta1 = F(1.0 - s.beta1), one_minus_beta2 = F(1.0 - s.beta2);
  const F eps = F(s.eps), wd = F(s.weight_decay);
  const F decay = F(1.0 - s.lr * s.weight_decay);

  for (int64_t i = 0; i < n; ++i) {
    F gi = g[i];
    if (s.decoupled_weight_decay) p[i] = p[i] * decay;
    else if (s.weight_decay != 0.0) gi = gi + wd * p[i];                 // grad.add(param, alpha=wd)
    m[i] = m[i] * beta1 + one_minus_beta1 * gi;                          // exp_avg.mul_(β1).add_(g, alpha=1−β1)
    v[i] = v[i] * beta2 + one_minus_beta2 * gi * gi;                     // .mul_(β2).addcmul_(g, g, value=1−β2)
    F second = v[i];
    if (vmax) second = vmax[i] = std::max(vmax[i], v[i]);
    const F denom = std::sqrt(second) / bc2_sqrt + eps;                  // (sqrt(v) / √bc2).add_(eps)
    p[i] = p[i] + (-step_size) * m[i] / denom;                           // addcdiv_(m, denom, value=−step_size)
  }
}

void adam_update_cpu(const AdamStep& s, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                     const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq) {
  if (param.dtype() == DType::Float64) adam_update_typed<double>(s, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq);
  else adam_update_typed<float>(s, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq);
}

}  // namespace autograd::cpu
