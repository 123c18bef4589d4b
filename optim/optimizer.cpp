// optimizer.cpp — the base class and SGD.
#include "optim/optimizer.h"

#include <stdexcept>

#include <fmt/format.h>

namespace optim {

using namespace autograd;

double ParamGroup::get(const std::string& key) const {
  auto it = options.find(key);
  if (it == options.end()) throw std::logic_error("optimizer: param group has no option '" + key + "'");
  return it->second;
}

Optimizer::Optimizer(std::vector<Tensor> params, std::map<std::string, double> defaults)
    : defaults_(std::move(defaults)) {
  if (params.empty()) throw std::invalid_argument("optimizer: got an empty parameter list");
  add_param_group(std::move(params));
}

void Optimizer::add_param_group(std::vector<Tensor> params, std::map<std::string, double> overrides) {
  for (const Tensor& p : params)
    if (!p.is_leaf() || !p.requires_grad())
      throw std::invalid_argument(fmt::format("optimizer: can only optimize leaf tensors that require grad (got "
                                              "shape {}{})",
                                              p.shape_str(), p.is_leaf() ? ", requires_grad=false" : ", non-leaf"));
  ParamGroup g{std::move(params), defaults_};
  for (auto& [key, value] : overrides) {
    if (!g.options.count(key)) throw std::invalid_argument("optimizer: unknown option '" + key + "'");
    g.options[key] = value;
  }
  groups_.push_back(std::move(g));
}

void Optimizer::zero_grad() {
  for (ParamGroup& g : groups_)
    for (Tensor& p : g.params) p.set_grad(Tensor());
}

Tensor& Optimizer::state(size_t index, const std::string& name, const Tensor& like) {
  return state(state_[index], name, like);
}

Tensor& Optimizer::state(std::map<std::string, Tensor>& entries, const std::string& name, const Tensor& like) {
  Tensor& t = entries[name];
  if (!t.defined()) t = zeros_like(like);
  return t;
}

nn::NamedTensors Optimizer::state_dict() const {
  nn::NamedTensors out;
  for (const auto& [index, entries] : state_)
    for (const auto& [name, t] : entries) out.emplace_back(fmt::format("state.{}.{}", index, name), t);
  for (size_t g = 0; g < groups_.size(); ++g)
    for (const auto& [key, value] : groups_[g].options)
      out.emplace_back(fmt::format("param_groups.{}.{}", g, key), scalar_tensor(value, DType::Float64));
  return out;
}

void Optimizer::load_state_dict(const nn::NamedTensors& state) {
  std::vector<Tensor> params;  // numbered across groups, as the keys count them
  for (const ParamGroup& g : groups_) params.insert(params.end(), g.params.begin(), g.params.end());
  const size_t total = params.size();
  std::map<size_t, std::map<std::string, Tensor>> loaded;
  for (const auto& [key, value] : state) {
    if (key.rfind("state.", 0) == 0) {
      size_t dot = key.find('.', 6);
      if (dot == std::string::npos) throw std::invalid_argument("optimizer load_state_dict: malformed key '" + key + "'");
      size_t index = std::stoul(key.substr(6, dot - 6));
      if (index >= total)
        throw std::invalid_argument(fmt::format("optimizer load_state_dict: key '{}' refers to parameter {} but the "
                                                "optimizer has {}",
                                                key, index, total));
      // Per-element state (momentum, moments) must fit its parameter, and lives on its device in its dtype
      // (the update loop reads them side by side); 0-d entries such as `step` are kept as they are.
      const Tensor& param = params[index];
      if (value.dim() != 0 && value.shape() != param.shape())
        throw std::invalid_argument(fmt::format("optimizer load_state_dict: '{}' has shape {} but parameter {} has "
                                                "shape {}",
                                                key, value.shape_str(), index, param.shape_str()));
      loaded[index][key.substr(dot + 1)] =
          value.dim() == 0 ? value.clone() : value.to(param.dtype()).to(param.device()).clone();
    } else if (key.rfind("param_groups.", 0) == 0) {
      size_t dot = key.find('.', 13);
      size_t g = std::stoul(key.substr(13, dot - 13));
      if (g >= groups_.size() || dot == std::string::npos)
        throw std::invalid_argument("optimizer load_state_dict: no param group for key '" + key + "'");
      groups_[g].options[key.substr(dot + 1)] = value.item();
    } else {
      throw std::invalid_argument("optimizer load_state_dict: unexpected key '" + key + "'");
    }
  }
  state_ = std::move(loaded);
  ++state_generation_;
}

// ---------------------------------------------------------------- SGD

SGD::SGD(std::vector<Tensor> params, Options o)
    : Optimizer(std::move(params), {{"lr", o.lr},
                                    {"momentum", o.momentum},
                                    {"dampening", o.dampening},
                                    {"weight_decay", o.weight_decay},
                                    {"nesterov", o.nesterov ? 1.0 : 0.0}}) {
  if (o.lr < 0) throw std::invalid_argument(fmt::format("SGD: invalid learning rate {}", o.lr));
  if (o.momentum < 0) throw std::invalid_argument(fmt::format("SGD: invalid momentum {}", o.momentum));
  if (o.weight_decay < 0) throw std::invalid_argument(fmt::format("SGD: invalid weight_decay {}", o.weight_decay));
  if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
    throw std::invalid_argument("SGD: Nesterov momentum requires a momentum and zero dampening");
}

void SGD::step() {
  NoGradGuard no_grad;
  size_t index = 0;
  for (ParamGroup& group : groups_) {
    const double lr = group.get("lr"), momentum = group.get("momentum"), dampening = group.get("dampening"),
                 weight_decay = group.get("weight_decay");
    const bool nesterov = group.get("nesterov") != 0;
    for (Tensor& param : group.params) {
      const size_t i = index++;
      Tensor d_p = param.grad();
      if (!d_p.defined()) continue;
      if (weight_decay != 0) d_p = d_p + param * weight_decay;  // L2 penalty: ∇(wd/2·θ²) = wd·θ
      if (momentum != 0) {
        auto& entries = state_[i];
        auto it = entries.find("momentum_buffer");
        if (it == entries.end()) {
          it = entries.emplace("momentum_buffer", d_p.clone()).first;  // first step: the buffer is the gradient
        } else {
          it->second.mul_(momentum).add_(d_p, 1.0 - dampening);
        }
        d_p = nesterov ? d_p + it->second * momentum : it->second;
      }
      param.add_(d_p, -lr);
    }
  }
}

}  // namespace optim
