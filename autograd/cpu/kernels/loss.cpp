// cpu/kernels/loss.cpp — the negative log-likelihood loss, forward and backward, in PyTorch's order; and the
// row-wise gather and scatter it is made of on devices without a kernel of their own.
#include <algorithm>
#include <cstdint>

#include "autograd/cpu/kernels.h"
#include "autograd/cpu/kernels/loops.h"

namespace autograd::cpu {

namespace {

// PyTorch's nll_loss (mean, no class weights) adds the picked values with a cascade of its own
// (aten/src/ATen/native/LossNLL.cpp), not with sum(): 8 partial sums ("levels"). Row b's value is
// subtracted into level 0; then, if the low 4 bits of b are all zero, level 0 is added into level 1
// and emptied; if bits 4..7 are zero too, level 1 into level 2; and so on (4 bits per level, more for
// batches above 2^32). Ignored rows are skipped before any of this. The result is
// ((0 + L0) + L1) + ... + L7, divided by the number of rows not ignored (0/0 = NaN if all are).
// picked(b) is log_probs[b, targets[b]]; it is only asked for rows that are not ignored.
template <typename T, typename Picked>
T nll_loss_mean(int64_t n, Picked picked, const int64_t* targets, int64_t ignore_index) {
  constexpr int kLevels = 8;
  const int64_t ceil_log2 = n <= 2 ? 1 : 64 - __builtin_clzll(uint64_t(n - 1));
  const int64_t level_power = std::max<int64_t>(4, ceil_log2 / kLevels);
  const int64_t level_mask = (int64_t(1) << level_power) - 1;
  T levels[kLevels] = {};
  int64_t count = 0;
  for (int64_t b = 0; b < n; ++b) {
    if (targets[b] == ignore_index) continue;
    ++count;
    levels[0] -= picked(b);
    for (int j = 0; j + 1 < kLevels; ++j) {
      if ((b & (level_mask << (j * level_power))) != 0) break;
      levels[j + 1] += levels[j];
      levels[j] = T(0);
    }
  }
  T total = 0;
  for (T level : levels) total += level;
  return total / T(count);
}

}  // namespace

// The mean of −log_probs[b, targets[b]] over the rows not ignored, straight from the tensors' memory.
int64_t nll_loss(const Tensor& log_probs, const Tensor& targets, int64_t ignore_index, const Tensor& out) {
  const int64_t rows = log_probs.size(0), classes = log_probs.size(1);
  const int64_t* t = ptr<int64_t>(targets);
  const int64_t count = std::count_if(t, t + rows, [&](int64_t v) { return v != ignore_index; });
  dispatch_floating(log_probs.dtype(), "nll_loss", [&](auto tag) {
    using T = decltype(tag);
    const T* p = ptr<T>(log_probs);
    *ptr<T>(out) = nll_loss_mean<T>(rows, [&](int64_t b) { return p[b * classes + t[b]]; }, t, ignore_index);
  });
  return count;
}

// grad_in[i, targets[i]] += −grad / count for the rows not ignored.
void nll_loss_backward(const Tensor& grad, const Tensor& targets, int64_t ignore_index, int64_t count,
                       const Tensor& grad_in) {
  const int64_t rows = grad_in.size(0), classes = grad_in.size(1);
  dispatch_floating(grad.dtype(), "nll_loss backward", [&](auto tag) {
    using T = decltype(tag);
    const T coef = T(-grad.item<T>()) / T(count);
    const int64_t* t = ptr<int64_t>(targets);
    T* out = ptr<T>(grad_in);
    for (int64_t i = 0; i < rows; ++i)
      if (t[i] != ignore_index) out[i * classes + t[i]] += coef;
  });
}

void gather_rows(const Tensor& values, const Tensor& index, int64_t skip, const Tensor& out) {
  dispatch(values.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const int64_t n = index.numel(), c = values.shape()[1];
    const int64_t* idx = ptr<int64_t>(index);
    const T* v = ptr<T>(values);
    T* o = ptr<T>(out);
    for (int64_t i = 0; i < n; ++i) o[i] = idx[i] == skip ? T(0) : v[i * c + idx[i]];
  });
}

void scatter_rows(const Tensor& grad, const Tensor& index, int64_t skip, const Tensor& grad_values) {
  dispatch(grad.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const int64_t n = index.numel(), c = grad_values.shape()[1];
    const int64_t* idx = ptr<int64_t>(index);
    const T* g = ptr<T>(grad);
    T* v = ptr<T>(grad_values);
    for (int64_t i = 0; i < n; ++i)
      if (idx[i] != skip) v[i * c + idx[i]] += g[i];
  });
}

}  // namespace autograd::cpu
