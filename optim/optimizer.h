// optimizer.h — the Optimizer base: parameter groups, zero_grad, step, and a flat state_dict.
//
// An optimizer holds handles to the model's parameter tensors, reads their .grad after backward(), and
// updates their values in place (under NoGradGuard: an update is not part of any graph).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "nn/module.h"

namespace optim {

using autograd::Tensor;

// Hyper-parameters are kept by name, like the dicts of torch.optim's param_groups, so one base class
// serves every optimizer and a group can override any of them.
struct ParamGroup {
  std::vector<Tensor> params;
  std::map<std::string, double> options;
  double get(const std::string& key) const;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Sets every parameter's .grad to none (PyTorch 2's default; 1.13 zeroed them in place — the same
  // for training, and it frees the memory between steps).
  void zero_grad();
  virtual void step() = 0;

  std::vector<ParamGroup>& param_groups() { return groups_; }
  void add_param_group(std::vector<Tensor> params, std::map<std::string, double> overrides = {});

  // Flat, safetensors-friendly state: "state.<i>.<name>" per parameter (i counts across groups, as in
  // PyTorch) and "param_groups.<g>.<option>" as 0-d float64 tensors.
  nn::NamedTensors state_dict() const;
  void load_state_dict(const nn::NamedTensors& state);

 protected:
  Optimizer(std::vector<Tensor> params, std::map<std::string, double> defaults);
  // Per-parameter state tensors (momentum buffers, moment estimates), created on first use.
  Tensor& state(size_t param_index, const std::string& name, const Tensor& like);
  // The same for a parameter's entries already looked up (state_[param_index]): one map search per step.
  static Tensor& state(std::map<std::string, Tensor>& entries, const std::string& name, const Tensor& like);
  std::map<size_t, std::map<std::string, Tensor>> state_;
  uint64_t state_generation_ = 0;  // bumped whenever state_ is replaced, so caches of its entries know
  std::map<std::string, double> defaults_;
  std::vector<ParamGroup> groups_;
};

// SGD with momentum, dampening, Nesterov and L2 weight decay (torch.optim.SGD's update).
class SGD : public Optimizer {
 public:
  struct Options {
    double lr = 1e-3, momentum = 0, dampening = 0, weight_decay = 0;
    bool nesterov = false;
  };
  SGD(std::vector<Tensor> params, Options options);
  void step() override;
};

// Adam (Kingma & Ba) with PyTorch's exact update: bias correction, eps added after the square root,
// optional amsgrad; `decoupled` turns it into AdamW.
class Adam : public Optimizer {
 public:
  struct Options {
    double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
    bool amsgrad = false;
  };
  Adam(std::vector<Tensor> params, Options options);
  void step() override;
  // The step as if every gradient had first been multiplied by grad_scale (rounded to its type), without
  // writing the gradients, which keep their values: optim::clip_coefficient's coefficient here gives
  // clip_grad_norm_ then step(), bit for bit, with one read and write of every gradient fewer.
  void step(double grad_scale);

 protected:
  Adam(std::vector<Tensor> params, Options options, bool decoupled);
  bool decoupled_;
  // Each parameter's state tensors, found once (std::map entries stay where they are) instead of three
  // string-keyed searches per parameter per step; rebuilt when the state is replaced.
  struct Slots {
    Tensor* step = nullptr;
    Tensor* exp_avg = nullptr;
    Tensor* exp_avg_sq = nullptr;
    Tensor* max_exp_avg_sq = nullptr;
  };
  std::vector<Slots> slots_;
  uint64_t slots_generation_ = ~uint64_t(0);
  const void* slots_owner_ = nullptr;  // &state_ when built (a copied optimizer rebuilds its own)
};

// AdamW: weight decay shrinks the weights directly (θ ← θ·(1 − lr·wd)) instead of entering the moments.
class AdamW : public Adam {
 public:
  struct Options {
    double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 1e-2;
    bool amsgrad = false;
  };
  AdamW(std::vector<Tensor> params, Options options);
};

}  // namespace optim
