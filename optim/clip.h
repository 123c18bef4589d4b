// clip.h — gradient clipping by the total 2-norm (torch.nn.utils.clip_grad_norm_, PyTorch 1.13).
#pragma once
#include <vector>

#include "autograd/autograd.h"

namespace optim {

// Scales every defined .grad of `params` by min(1, max_norm / (total + 1e-6)), where total is the
// 2-norm of all the gradients together, and returns total (0-d, before clipping). As in PyTorch, total
// is the norm of the per-tensor norms. PyTorch always multiplies the gradients, by exactly 1 when they
// are small enough; here that multiplication, which changes no bit, is left out.
autograd::Tensor clip_grad_norm_(const std::vector<autograd::Tensor>& params, double max_norm);

// What clip_grad_norm_ computes, with nothing scaled: the total norm (0-d, as it returns it) and the
// coefficient it would multiply the gradients by, min(1, max_norm / (total + 1e-6)) (NaN with a NaN norm).
// Adam::step(coefficient) then does the clipping inside the update, one pass over the gradients fewer.
struct ClipCoefficient {
  autograd::Tensor total_norm;
  double coefficient = 1;
};
ClipCoefficient clip_coefficient(const std::vector<autograd::Tensor>& params, double max_norm);

}  // namespace optim
