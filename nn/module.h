// module.h — nn::Module: a named tree of parameters, buffers and submodules, as in torch.nn.Module.
//
// A module registers what it owns under the names PyTorch would use, so a state_dict key like
// "heads.0.W_query.weight" means the same thing here and in Python. Parameters are plain Tensors that
// require grad; since a Tensor is a handle, the member field and the registered entry are one tensor.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/autograd.h"

namespace nn {

using autograd::Tensor;
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;  // ordered, like PyTorch's OrderedDict

// The tensors of `named`, in order, without their names: what an optimizer or a param group takes.
std::vector<Tensor> tensors_of(const NamedTensors& named);

class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Own parameters first, then each submodule's, recursively (PyTorch's order).
  NamedTensors named_parameters() const;
  std::vector<Tensor> parameters() const;
  NamedTensors named_buffers() const;
  // Per module: parameters, then buffers, then submodules — the key order of torch's state_dict().
  NamedTensors state_dict() const;
  // Copies values into the registered tensors. strict: every key must match, none may be left over.
  // Errors name the key and the shapes.
  void load_state_dict(const NamedTensors& state, bool strict = true);

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // Moves every parameter and buffer to `device` in place: the tensors keep their identity (handles
  // held elsewhere, e.g. by an optimizer, see the moved data).
  void to(autograd::Device device);
  void zero_grad();  // sets every parameter's .grad to none (PyTorch 2's default set_to_none=True)
  // Makes the parameter registered as `name` (own, not a submodule's) be `value` — Python's
  // `module.weight = other_parameter`, e.g. to tie two layers' weights. The member field that held the
  // old tensor must be updated by the caller.
  void set_parameter(const std::string& name, const Tensor& value);

  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const { return children_; }
  int64_t num_parameters() const;

 protected:
  // Marks `value` as a parameter (requires_grad) and returns it.
  Tensor register_parameter(const std::string& name, Tensor value);
  Tensor register_buffer(const std::string& name, Tensor value);
  template <typename M> std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    children_.emplace_back(name, module);
    return module;
  }
  void unregister_module(const std::string& name);  // std::invalid_argument if there is none by that name

 private:
  void collect(const std::string& prefix, NamedTensors& out, bool params, bool buffers, bool recurse) const;

  NamedTensors parameters_;
  NamedTensors buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

}  // namespace nn
