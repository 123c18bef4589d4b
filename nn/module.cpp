// module.cpp — walking the module tree.
#include "nn/module.h"

#include <functional>
#include <map>
#include <set>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace nn {

using namespace autograd;

Tensor Module::register_parameter(const std::string& name, Tensor value) {
  if (value.defined()) {
    value.requires_grad_(true);
    value.impl().name = name;
  }
  parameters_.emplace_back(name, value);
  return value;
}

void Module::set_parameter(const std::string& name, const Tensor& value) {
  for (auto& [n, t] : parameters_)
    if (n == name) {
      t = value;
      return;
    }
  throw std::invalid_argument(fmt::format("set_parameter: this module has no parameter '{}'", name));
}

void Module::unregister_module(const std::string& name) {
  const auto before = children_.size();
  std::erase_if(children_, [&](const auto& child) { return child.first == name; });
  if (children_.size() == before)
    throw std::invalid_argument(fmt::format("unregister_module: this module has no submodule '{}'", name));
}

Tensor Module::register_buffer(const std::string& name, Tensor value) {
  buffers_.emplace_back(name, value);
  return value;
}

void Module::collect(const std::string& prefix, NamedTensors& out, bool params, bool buffers, bool recurse) const {
  if (params)
    for (const auto& [name, t] : parameters_)
      if (t.defined()) out.emplace_back(prefix + name, t);
  if (buffers)
    for (const auto& [name, t] : buffers_)
      if (t.defined()) out.emplace_back(prefix + name, t);
  if (recurse)
    for (const auto& [name, child] : children_) child->collect(prefix + name + ".", out, params, buffers, true);
}

std::vector<Tensor> tensors_of(const NamedTensors& named) {
  std::vector<Tensor> out;
  out.reserve(named.size());
  for (const auto& [name, t] : named) out.push_back(t);
  return out;
}

NamedTensors Module::named_parameters() const {
  NamedTensors all, out;
  collect("", all, true, false, true);
  std::set<const TensorImpl*> seen;  // a parameter shared by two submodules is listed once
  for (auto& entry : all)
    if (seen.insert(&entry.second.impl()).second) out.push_back(entry);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

NamedTensors Module::named_buffers() const {
  NamedTensors out;
  collect("", out, false, true, true);
  return out;
}

NamedTensors Module::state_dict() const {
  NamedTensors out;
  // depth-first, each module's own entries before its children's, as torch does
  std::function<void(const std::string&, const Module&)> visit = [&](const std::string& prefix, const Module& m) {
    m.collect(prefix, out, true, true, false);
    for (const auto& [name, child] : m.children_) visit(prefix + name + ".", *child);
  };
  visit("", *this);
  return out;
}

void Module::load_state_dict(const NamedTensors& state, bool strict) {
  std::map<std::string, Tensor> given(state.begin(), state.end());
  NamedTensors mine = state_dict();
  std::vector<std::string> missing;
  for (auto& [name, target] : mine) {
    auto it = given.find(name);
    if (it == given.end()) {
      missing.push_back(name);
      continue;
    }
    const Tensor& source = it->second;
    if (source.shape() != target.shape())
      throw std::invalid_argument(fmt::format("load_state_dict: size mismatch for {}: copying a param with shape {}, "
                                              "the shape in the current model is {}",
                                              name, source.shape_str(), target.shape_str()));
    NoGradGuard no_grad;
    Tensor(target).copy_(source.to(target.dtype()).to(target.device()));
    given.erase(it);
  }
  if (!strict) return;
  if (!missing.empty())
    throw std::invalid_argument(fmt::format("load_state_dict: missing key(s) in state_dict: \"{}\"",
                                            fmt::join(missing, "\", \"")));
  if (!given.empty()) {
    std::vector<std::string> unexpected;
    for (auto& [name, t] : given) unexpected.push_back(name);
    throw std::invalid_argument(fmt::format("load_state_dict: unexpected key(s) in state_dict: \"{}\"",
                                            fmt::join(unexpected, "\", \"")));
  }
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::to(Device device) {
  NamedTensors all;
  collect("", all, true, true, true);
  for (auto& [name, t] : all) {
    if (t.device() == device) continue;
    Tensor moved = t.detach().contiguous().to(device);
    TensorImpl& impl = t.impl();
    impl.storage = moved.impl().storage;
    impl.strides = moved.strides();
    impl.offset = moved.offset();
    impl.grad = nullptr;
  }
}

void Module::zero_grad() {
  for (Tensor& p : parameters()) p.set_grad(Tensor());
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const Tensor& p : parameters()) n += p.numel();
  return n;
}

}  // namespace nn
