// clip.cpp — clip_grad_norm_, in torch/nn/utils/clip_grad.py's (1.13) order of operations, so the
// returned norm and the clipped gradients have PyTorch's bits.
#include "optim/clip.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace optim {

using namespace autograd;

Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm) {
  NoGradGuard no_grad;
  std::vector<Tensor> grads, norms;
  for (const Tensor& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return zeros({});
  for (const Tensor& g : grads) {
    if (g.device() != grads[0].device() || g.dtype() != grads[0].dtype())
      throw std::invalid_argument(fmt::format("clip_grad_norm_: gradients of {} on {} and {} on {} cannot be clipped "
                                              "together",
                                              dtype_name(grads[0].dtype()), grads[0].device().str(),
                                              dtype_name(g.dtype()), g.device().str()));
    norms.push_back(vector_norm(g));  // one 2-norm per gradient
  }
  Tensor total = vector_norm(stack(norms));  // then the 2-norm of those
  // max_norm / (total + 1e-6) is Tensor.__rtruediv__ in Python: a reciprocal, then a multiplication
  Tensor coef = rdiv(1.0, total + 1e-6) * max_norm;
  const double clamped = std::min(coef.item(), 1.0);  // clamp(max=1); std::min keeps a NaN
  // PyTorch multiplies by the clamped coefficient even when it is 1. x · 1 is x for every float (−0, ±inf and
  // NaN included), so that pass, a read and a write of every gradient, is left out then.
  if (clamped != 1.0)
    for (Tensor& g : grads) g.mul_(clamped);
  return total;
}

}  // namespace optim
