// libtorch/common.h — what the two libtorch twins share besides bench/common.h: PyTorch's process set-up
// (threads, flushed denormals), the batches, and zero_grad(set_to_none=True).
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace bench::libtorch {

// What the Python twins do first: torch.set_flush_denormal(True), torch.set_num_threads(n). libtorch's
// matrix products go to BLIS (libblas.so.3) like PyTorch's, and BLIS's threads follow BLIS_NUM_THREADS,
// which compare.sh sets: set_num_threads does not reach them.
inline void set_up(int64_t threads) {
  at::globalContext().setFlushDenormal(true);
  torch::set_num_threads(int(threads));
}

// The Python twins' batch(): B random windows of T tokens, the targets one token later. randint draws
// from the default generator in the same order as torch.randint (and nn::random_windows).
inline std::pair<torch::Tensor, torch::Tensor> batch(const torch::Tensor& data, int64_t B, int64_t T) {
  torch::Tensor starts = torch::randint(0, data.size(0) - T - 1, {B}, torch::kLong);
  std::vector<torch::Tensor> xs, ys;
  for (int64_t k = 0; k < B; ++k) {
    const int64_t j = starts[k].item<int64_t>();
    xs.push_back(data.slice(0, j, j + T));
    ys.push_back(data.slice(0, j + 1, j + T + 1));
  }
  return {torch::stack(xs), torch::stack(ys)};
}

// opt.zero_grad(set_to_none=True), as the Python twins call it (libtorch 1.13's zero_grad() zeroes in place).
inline void zero_grad_set_to_none(torch::optim::Optimizer& opt) {
  for (auto& group : opt.param_groups())
    for (auto& p : group.params()) p.mutable_grad() = torch::Tensor();
}

}  // namespace bench::libtorch
