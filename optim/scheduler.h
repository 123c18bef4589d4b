// scheduler.h — learning-rate schedules (torch.optim.lr_scheduler.LambdaLR) and the GPT's warm-up +
// cosine factor.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "optim/optimizer.h"

namespace optim {

// Each group's lr = its initial lr · factor(k), k the number of step() calls so far (0 at construction,
// which already applies factor(0)), as LambdaLR does.
class LambdaLR {
 public:
  LambdaLR(Optimizer& optimizer, std::function<double(int64_t)> factor);
  void step();
  int64_t last_epoch() const { return epoch_; }
  std::vector<double> last_lr() const;

 private:
  void apply();
  Optimizer& optimizer_;
  std::function<double(int64_t)> factor_;
  std::vector<double> base_lrs_;
  int64_t epoch_ = 0;
};

// The factor of a linear warm-up over `warmup` steps ((k + 1)/warmup), then a cosine decay from 1 to
// min_ratio at step `total`: min_ratio + (1 − min_ratio)·½·(1 + cos(π(k − warmup)/(total − warmup))),
// evaluated in doubles in that order (the fixtures' Python lambda).
std::function<double(int64_t)> warmup_cosine(int64_t warmup, int64_t total, double min_ratio);

}  // namespace optim
