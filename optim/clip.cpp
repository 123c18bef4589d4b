// clip.cpp — clip_grad_norm_, in torch/nn/utils/clip_grad.py's (1.13) order of operations, so the
// returned norm and the clipped gradients have PyTorch's bits.
#include "optim/clip.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace optim {

using namespace autograd;

// The gradients of `params` that are defined, checked to share a device and a dtype.
static std::vector<Tensor> gradients_to_clip(const std::vector<Tensor>& params, const char* op) {
  std::vector<Tensor> grads;
  for (const Tensor& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  for (const Tensor& g : grads)
    if (g.device() != grads[0].device() || g.dtype() != grads[0].dtype())
      throw std::invalid_argument(fmt::format("{}: gradients of {} on {} and {} on {} cannot be clipped together", op,
                                              dtype_name(grads[0].dtype()), grads[0].device().str(),
                                              dtype_name(g.dtype()), g.device().str()));
  return grads;
}

static ClipCoefficient coefficient_of(const std::vector<Tensor>& grads, double max_norm) {
  if (grads.empty()) return {zeros({}), 1.0};
  Tensor total = vector_norm(vector_norms(grads));  // one 2-norm per gradient, then the 2-norm of those
  // max_norm / (total + 1e-6) is Tensor.__rtruediv__ in Python: a reciprocal, then a multiplication
  Tensor coef = rdiv(1.0, total + 1e-6) * max_norm;
  return {total, std::min(coef.item(), 1.0)};  // clamp(max=1); std::min keeps a NaN
}

ClipCoefficient clip_coefficient(const std::vector<Tensor>& params, double max_norm) {
  NoGradGuard no_grad;
  return coefficient_of(gradients_to_clip(params, "clip_coefficient"), max_norm);
}

Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm) {
  NoGradGuard no_grad;
  std::vector<Tensor> grads = gradients_to_clip(params, "clip_grad_norm_");
  const ClipCoefficient clip = coefficient_of(grads, max_norm);
  // PyTorch multiplies by the clamped coefficient even when it is 1. x · 1 is x for every float (−0, ±inf and
  // NaN included), so that pass, a read and a write of every gradient, is left out then.
  if (clip.coefficient != 1.0)
    for (Tensor& g : grads) g.mul_(clip.coefficient);
  return clip.total_norm;
}

}  // namespace optim
