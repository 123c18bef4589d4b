// scheduler.cpp — LambdaLR and the warm-up + cosine factor.
#include "optim/scheduler.h"

#include <cmath>
#include <numbers>
#include <stdexcept>

#include <fmt/format.h>

namespace optim {

LambdaLR::LambdaLR(Optimizer& optimizer, std::function<double(int64_t)> factor)
    : optimizer_(optimizer), factor_(std::move(factor)) {
  for (const ParamGroup& g : optimizer_.param_groups()) base_lrs_.push_back(g.get("lr"));
  apply();
}

void LambdaLR::step() {
  ++epoch_;
  apply();
}

void LambdaLR::apply() {
  std::vector<ParamGroup>& groups = optimizer_.param_groups();
  if (groups.size() != base_lrs_.size())
    throw std::logic_error(fmt::format("LambdaLR: the optimizer had {} parameter groups and now has {}",
                                       base_lrs_.size(), groups.size()));
  const double f = factor_(epoch_);
  for (size_t i = 0; i < groups.size(); ++i) groups[i].options["lr"] = base_lrs_[i] * f;
}

std::vector<double> LambdaLR::last_lr() const {
  std::vector<double> lrs;
  for (const ParamGroup& g : optimizer_.param_groups()) lrs.push_back(g.get("lr"));
  return lrs;
}

std::function<double(int64_t)> warmup_cosine(int64_t warmup, int64_t total, double min_ratio) {
  if (warmup < 0 || total <= warmup)
    throw std::invalid_argument(fmt::format("warmup_cosine: need 0 <= warmup < total, got warmup {} and total {}",
                                            warmup, total));
  return [=](int64_t k) {
    if (k < warmup) return double(k + 1) / double(warmup);
    const double progress = std::numbers::pi * double(k - warmup) / double(total - warmup);
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + std::cos(progress));
  };
}

}  // namespace optim
