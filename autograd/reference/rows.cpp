// reference/rows.cpp — rows picked by index: an embedding's lookup and its backward, and the entries a
// loss picks out of each row (gather/scatter, nll_loss). Index tensors are int64 and contiguous, their
// values already range-checked by the op; idx[i] is the i-th of them in memory order.
#include "autograd/reference/kernels.h"
#include "autograd/reference/strided.h"

namespace autograd::reference {

namespace {
const int64_t* indices(const Tensor& index) { return static_cast<const int64_t*>(index.raw_data()); }
}  // namespace

// Each entry picks its loop's instantiation for the dtype (strided.h: floating, any_dtype) and calls it.

// out[i, c] = weight[idx[i], c]      (out is contiguous: index's shape, then a dim of weight's row length)
template <typename T> void index_select_rows(const Tensor& weight, const Tensor& index, const Tensor& out) {
  const int64_t n = index.numel(), d = weight.size(1);
  const int64_t* idx = indices(index);
  const Matrix<const T> W = matrix<const T>(weight, {});
  T* o = static_cast<T*>(out.raw_data());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < d; ++c) o[i * d + c] = W(idx[i], c);
}

void index_select_rows(const Tensor& weight, const Tensor& index, const Tensor& out) {
  any_dtype(weight, index_select_rows<float>, index_select_rows<double>, index_select_rows<int64_t>,
            index_select_rows<bool>)(weight, index, out);
}

// grad_weight[idx[i], c] += grad[i, c]   (a repeated index adds up, in order of i)
template <typename T> void index_add_rows(const Tensor& grad, const Tensor& index, const Tensor& grad_weight) {
  const int64_t* idx = indices(index);
  const Matrix<const T> G = matrix<const T>(grad, {});
  const Matrix<T> GW = matrix<T>(grad_weight, {});
  for (int64_t i = 0; i < index.numel(); ++i)
    for (int64_t c = 0; c < grad_weight.size(1); ++c) GW(idx[i], c) = T(GW(idx[i], c) + G(i, c));
}

void index_add_rows(const Tensor& grad, const Tensor& index, const Tensor& grad_weight) {
  any_dtype(grad, index_add_rows<float>, index_add_rows<double>, index_add_rows<int64_t>,
            index_add_rows<bool>)(grad, index, grad_weight);
}

// out[i] = values[i, idx[i]], or 0 where idx[i] == skip
template <typename T> void gather_rows(const Tensor& values, const Tensor& index, int64_t skip, const Tensor& out) {
  const int64_t* idx = indices(index);
  const Matrix<const T> V = matrix<const T>(values, {});
  for (int64_t i = 0; i < index.numel(); ++i) at<T>(out, {i}) = idx[i] == skip ? T(0) : V(i, idx[i]);
}

void gather_rows(const Tensor& values, const Tensor& index, int64_t skip, const Tensor& out) {
  any_dtype(values, gather_rows<float>, gather_rows<double>, gather_rows<int64_t>, gather_rows<bool>)(values, index,
                                                                                                     skip, out);
}

// grad_values[i, idx[i]] += grad[i], except where idx[i] == skip
template <typename T> void scatter_rows(const Tensor& grad, const Tensor& index, int64_t skip, const Tensor& grad_values) {
  const int64_t* idx = indices(index);
  const Matrix<T> GV = matrix<T>(grad_values, {});
  for (int64_t i = 0; i < index.numel(); ++i)
    if (idx[i] != skip) GV(i, idx[i]) = T(GV(i, idx[i]) + at<T>(grad, {i}));
}

void scatter_rows(const Tensor& grad, const Tensor& index, int64_t skip, const Tensor& grad_values) {
  any_dtype(grad, scatter_rows<float>, scatter_rows<double>, scatter_rows<int64_t>, scatter_rows<bool>)(grad, index,
                                                                                                       skip, grad_values);
}

// loss = −(Σ_i log_probs[i, t_i]) / count, over the rows i whose target t_i is not ignore_index; count is
// how many those are (0/0 = NaN when all are ignored). Returns count.
template <typename T>
int64_t nll_loss(const Tensor& log_probs, const Tensor& targets, int64_t ignore_index, const Tensor& out) {
  const int64_t* t = indices(targets);
  int64_t count = 0;
  const Matrix<const T> logp = matrix<const T>(log_probs, {});
  T sum = 0;
  for (int64_t i = 0; i < targets.numel(); ++i) {
    if (t[i] == ignore_index) continue;
    sum = sum + logp(i, t[i]);
    ++count;
  }
  at<T>(out, {}) = -sum / T(count);
  return count;
}

int64_t nll_loss(const Tensor& log_probs, const Tensor& targets, int64_t ignore_index, const Tensor& out) {
  return floating(log_probs, "nll_loss", nll_loss<float>, nll_loss<double>)(log_probs, targets, ignore_index, out);
}

// ∂loss/∂log_probs[i, t_i] = −grad / count on the rows not ignored; grad_in is 0 elsewhere already.
template <typename T>
void nll_loss_backward(const Tensor& grad, const Tensor& targets, int64_t ignore_index, int64_t count,
                       const Tensor& grad_in) {
  const int64_t* t = indices(targets);
  const T each = -at<T>(grad, {}) / T(count);
  const Matrix<T> gx = matrix<T>(grad_in, {});
  for (int64_t i = 0; i < targets.numel(); ++i)
    if (t[i] != ignore_index) gx(i, t[i]) = gx(i, t[i]) + each;
}

void nll_loss_backward(const Tensor& grad, const Tensor& targets, int64_t ignore_index, int64_t count,
                       const Tensor& grad_in) {
  floating(grad, "nll_loss backward", nll_loss_backward<float>, nll_loss_backward<double>)(grad, targets, ignore_index,
                                                                                          count, grad_in);
}

}  // namespace autograd::reference
