// Exercise 13: an Adam step, bit for bit with PyTorch's.
//
// For step t = 1, 2, ... with gradient g:
//
//     m = β1 m + (1 − β1) g                 v = β2 v + (1 − β2) g²
//     m̂ = m / (1 − β1ᵗ),  v̂ = v / (1 − β2ᵗ)   (bias correction: m and v start at 0)
//     θ = θ − lr · m̂ / (√v̂ + ε)
//
// "Bit for bit" means the same float roundings in the same order as torch.optim.Adam (1.13, one tensor
// at a time), op by op, each rounded to float:
//
//     m.mul_(β1).add_(g, 1 − β1)
//     v.mul_(β2), then v += ((1 − β2) · g) · g          (addcmul_: the scalar multiplies g first)
//     step_size = lr / (1 − β1ᵗ),  denom = √v / √(1 − β2ᵗ) + ε   (the scalars in double)
//     θ += (m · (−step_size)) / denom                   (addcdiv_)
//
// Work in place under NoGradGuard (an update is not part of any graph): t.mul_(s), t.add_(other),
// t.add_(other, alpha), t.sqrt(), t / s, t + s.
//
// Check it:  make exercise N=13     Explained in: docs/nn.md ("How an optimizer step works"),
//                                   autograd/cpu/kernels/adam.cpp, docs/parity.md
#include <cmath>

#include "exercises.h"

namespace exercises {

void my_adam_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, int64_t step,
                  const AdamConfig& config) {
  (void)param;
  (void)grad;
  (void)exp_avg;
  (void)exp_avg_sq;
  (void)step;
  (void)config;
  not_implemented(13);  // YOUR CODE
}

}  // namespace exercises

// Hints, one at a time:
// 1. √(1 − β2ᵗ) is a double: std::sqrt(1.0 - std::pow(beta2, double(step))).
// 2. (grad * (1 − β2)) * grad and grad * grad * (1 − β2) differ in the last bit now and then.
// 3. add_(t) with alpha 1 adds t as it is; add_(t, a) first rounds a · t, then adds.
