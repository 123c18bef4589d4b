// Exercise 13, solved: one Adam step, in PyTorch 1.13's order of operations.
#include <cmath>

#include "../exercises.h"

namespace exercises {

void my_adam_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, int64_t step,
                  const AdamConfig& c) {
  NoGradGuard no_grad;  // an update is not part of any graph
  // torch.optim.Adam (single tensor), op by op; each op rounds to float on its own
  exp_avg.mul_(c.beta1).add_(grad, 1.0 - c.beta1);               // m = β1 m + (1 − β1) g
  exp_avg_sq.mul_(c.beta2).add_((grad * (1.0 - c.beta2)) * grad);  // v = β2 v + ((1 − β2) g) g   (addcmul_)
  const double bias_correction1 = 1.0 - std::pow(c.beta1, double(step));
  const double bias_correction2 = 1.0 - std::pow(c.beta2, double(step));
  const double step_size = c.lr / bias_correction1;
  Tensor denom = exp_avg_sq.sqrt() / std::sqrt(bias_correction2) + c.eps;  // √v / √(1 − β2ᵗ) + ε
  param.add_((exp_avg * -step_size) / denom);                             // θ −= step_size · m / denom  (addcdiv_)
}

}  // namespace exercises
