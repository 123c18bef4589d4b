// adam.cpp — Adam and AdamW. The arithmetic of one step is a single fused loop per parameter on its
// device (autograd/cpu/kernels/adam.cpp on the CPU); this file keeps the bookkeeping: steps and state.
#include <stdexcept>

#include <fmt/format.h>

#include "autograd/backend.h"
#include "optim/optimizer.h"

namespace optim {

using namespace autograd;

static std::map<std::string, double> adam_defaults(double lr, double beta1, double beta2, double eps, double wd,
                                                   bool amsgrad) {
  if (lr < 0) throw std::invalid_argument(fmt::format("Adam: invalid learning rate {}", lr));
  if (eps < 0) throw std::invalid_argument(fmt::format("Adam: invalid epsilon {}", eps));
  if (beta1 < 0 || beta1 >= 1 || beta2 < 0 || beta2 >= 1)
    throw std::invalid_argument(fmt::format("Adam: invalid betas ({}, {}); each must be in [0, 1)", beta1, beta2));
  if (wd < 0) throw std::invalid_argument(fmt::format("Adam: invalid weight_decay {}", wd));
  return {{"lr", lr}, {"beta1", beta1}, {"beta2", beta2}, {"eps", eps}, {"weight_decay", wd},
          {"amsgrad", amsgrad ? 1.0 : 0.0}};
}

Adam::Adam(std::vector<Tensor> params, Options o) : Adam(std::move(params), o, false) {}

Adam::Adam(std::vector<Tensor> params, Options o, bool decoupled)
    : Optimizer(std::move(params), adam_defaults(o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.amsgrad)),
      decoupled_(decoupled) {}

AdamW::AdamW(std::vector<Tensor> params, Options o)
    : Adam(std::move(params), Adam::Options{o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.amsgrad}, true) {}

void Adam::step() { step(1.0); }

void Adam::step(double grad_scale) {
  NoGradGuard no_grad;
  const Tensor scalar = scalar_tensor(0, DType::Float64);  // the shape and dtype of a new `step` entry
  size_t index = 0, count = 0;
  for (const ParamGroup& group : groups_) count += group.params.size();
  if (slots_generation_ != state_generation_ || slots_owner_ != &state_ || slots_.size() != count) {
    slots_.assign(count, Slots{});
    slots_generation_ = state_generation_;
    slots_owner_ = &state_;
  }
  for (ParamGroup& group : groups_) {
    // the group's options, read once per step (each is a map lookup)
    const bool amsgrad = group.get("amsgrad") != 0;
    AdamStep s{group.get("lr"), group.get("beta1"), group.get("beta2"), group.get("eps"),
               group.get("weight_decay"), amsgrad, decoupled_, 0, grad_scale};
    for (Tensor& param : group.params) {
      const size_t i = index++;
      Tensor grad = param.grad();
      if (!grad.defined()) continue;
      if (grad.device() != param.device() || grad.shape() != param.shape())
        throw std::logic_error(fmt::format("Adam: gradient {} on {} for parameter {} on {}", grad.shape_str(),
                                           grad.device().str(), param.shape_str(), param.device().str()));
      // `step` is kept as a tensor (as PyTorch does) so it round-trips through state_dict
      Slots& slots = slots_[i];
      if (!slots.step) {
        std::map<std::string, Tensor>& entries = state_[i];
        slots = {&state(entries, "step", scalar), &state(entries, "exp_avg", param),
                 &state(entries, "exp_avg_sq", param), nullptr};
      }
      if (amsgrad && !slots.max_exp_avg_sq) slots.max_exp_avg_sq = &state(state_[i], "max_exp_avg_sq", param);
      Tensor& step = *slots.step;
      Tensor& exp_avg = *slots.exp_avg;
      Tensor& exp_avg_sq = *slots.exp_avg_sq;
      Tensor max_exp_avg_sq = amsgrad ? *slots.max_exp_avg_sq : Tensor();
      if (step.device().is_cpu() && step.dtype() == DType::Float64 && step.numel() == 1) {
        double& count = *step.data_ptr<double>();  // the usual case, without a fill kernel per parameter
        s.step = int64_t(count) + 1;
        count = double(s.step);
        step.impl().storage->bump_version();
      } else {
        s.step = int64_t(step.item()) + 1;
        step.fill_(double(s.step));
      }
      // a weight autocast keeps a bfloat16 copy of (autograd/autocast.h) gets it written in the same pass
      const Tensor rounded = autograd::writable_bfloat16_copy(param);
      if (rounded.defined())
        backend(param.device()).adam_update_rounding(s, param.contiguous(), grad.contiguous(), exp_avg, exp_avg_sq,
                                                     max_exp_avg_sq, rounded);
      else
        backend(param.device()).adam_update(s, param.contiguous(), grad.contiguous(), exp_avg, exp_avg_sq,
                                            max_exp_avg_sq);
      param.impl().storage->bump_version();
      if (rounded.defined()) autograd::bfloat16_copy_written(param);
    }
  }
}

}  // namespace optim
