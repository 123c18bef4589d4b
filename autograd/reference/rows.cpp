// reference/rows.cpp — rows picked by index: an embedding's lookup and its backward, and the entries a
// loss picks out of each row (gather/scatter, nll_loss). Index tensors are int64 and contiguous, their
// values already range-checked by the op; idx[i] is the i-th of them in memory order.
#include "autograd/reference/kernels.h"
#include "autograd/reference/strided.h"

namespace autograd::reference {

namespace {
const int64_t* indices(const Tensor& index) { return static_cast<const int64_t*>(index.raw_data()); }
}  // namespace

// out[i, c] = weight[idx[i], c]      (out is contiguous: index's shape, then a dim of weight's row length)
void index_select_rows(const Tensor& weight, const Tensor& index, const Tensor& out) {
  dispatch(weight.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const int64_t n = index.numel(), d = weight.size(1);
    const int64_t* idx = indices(index);
    const Matrix<const T> W = matrix<const T>(weight, {});
    T* o = static_cast<T*>(out.raw_data());
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < d; ++c) o[i * d + c] = W(idx[i], c);
  });
}

// grad_weight[idx[i], c] += grad[i, c]   (a repeated index adds up, in order of i)
void index_add_rows(const Tensor& grad, const Tensor& index, const Tensor& grad_weight) {
  dispatch(grad.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const int64_t* idx = indices(index);
    const Matrix<const T> G = matrix<const T>(grad, {});
    const Matrix<T> GW = matrix<T>(grad_weight, {});
    for (int64_t i = 0; i < index.numel(); ++i)
      for (int64_t c = 0; c < grad_weight.size(1); ++c) GW(idx[i], c) = T(GW(idx[i], c) + G(i, c));
  });
}

// out[i] = values[i, idx[i]], or 0 where idx[i] == skip
void gather_rows(const Tensor& values, const Tensor& index, int64_t skip, const Tensor& out) {
  dispatch(values.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const int64_t* idx = indices(index);
    const Matrix<const T> V = matrix<const T>(values, {});
    for (int64_t i = 0; i < index.numel(); ++i) at<T>(out, {i}) = idx[i] == skip ? T(0) : V(i, idx[i]);
  });
}

// grad_values[i, idx[i]] += grad[i], except where idx[i] == skip
void scatter_rows(const Tensor& grad, const Tensor& index, int64_t skip, const Tensor& grad_values) {
  dispatch(grad.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const int64_t* idx = indices(index);
    const Matrix<T> GV = matrix<T>(grad_values, {});
    for (int64_t i = 0; i < index.numel(); ++i)
      if (idx[i] != skip) GV(i, idx[i]) = T(GV(i, idx[i]) + at<T>(grad, {i}));
  });
}

// loss = −(Σ_i log_probs[i, t_i]) / count, over the rows i whose target t_i is not ignore_index; count is
// how many those are (0/0 = NaN when all are ignored). Returns count.
int64_t nll_loss(const Tensor& log_probs, const Tensor& targets, int64_t ignore_index, const Tensor& out) {
  const int64_t* t = indices(targets);
  int64_t count = 0;
  dispatch_floating(log_probs.dtype(), "nll_loss", [&](auto tag) {
    using T = decltype(tag);
    const Matrix<const T> logp = matrix<const T>(log_probs, {});
    T sum = 0;
    for (int64_t i = 0; i < targets.numel(); ++i) {
      if (t[i] == ignore_index) continue;
      sum = sum + logp(i, t[i]);
      ++count;
    }
    at<T>(out, {}) = -sum / T(count);
  });
  return count;
}

// ∂loss/∂log_probs[i, t_i] = −grad / count on the rows not ignored; grad_in is 0 elsewhere already.
void nll_loss_backward(const Tensor& grad, const Tensor& targets, int64_t ignore_index, int64_t count,
                       const Tensor& grad_in) {
  const int64_t* t = indices(targets);
  dispatch_floating(grad.dtype(), "nll_loss backward", [&](auto tag) {
    using T = decltype(tag);
    const T each = -at<T>(grad, {}) / T(count);
    const Matrix<T> gx = matrix<T>(grad_in, {});
    for (int64_t i = 0; i < targets.numel(); ++i)
      if (t[i] != ignore_index) gx(i, t[i]) = gx(i, t[i]) + each;
  });
}

}  // namespace autograd::reference
