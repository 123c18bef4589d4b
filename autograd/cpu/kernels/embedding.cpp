// cpu/kernels/embedding.cpp — rows picked by index (an embedding's lookup), added back by index (its backward),
// and the range check of the indices.
#include <cstdint>

#include "autograd/cpu/kernels.h"
#include "autograd/cpu/kernels/loops.h"

namespace autograd::cpu {

// The output (or the gradient) is a tensor of its own, never a view of the weight, so the pointers are
// marked __restrict: without that GCC checks for overlap before every row and keeps a second copy of
// each loop, a cost that short rows (the seed's are 24 floats) pay in full on every row.
template <typename T>
void copy_rows(int64_t n, int64_t d, const int64_t* idx, const T* __restrict w, int64_t row_stride, T* __restrict o) {
  for (int64_t i = 0; i < n; ++i) {
    const T* __restrict row = w + idx[i] * row_stride;
    for (int64_t j = 0; j < d; ++j) o[i * d + j] = row[j];
  }
}

// grad_weight[idx[i]] += grad[i], row after row in order (a repeated index adds up in that order).
template <typename T> void add_rows(int64_t n, int64_t d, const int64_t* idx, const T* __restrict g, T* __restrict w) {
  for (int64_t i = 0; i < n; ++i) {
    T* __restrict row = w + idx[i] * d;
    for (int64_t j = 0; j < d; ++j) row[j] += g[i * d + j];
  }
}

void index_select_rows(const Tensor& weight, const Tensor& index, const Tensor& out) {
  dispatch(weight.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const int64_t n = index.numel(), d = weight.shape()[1];
    const int64_t r = weight.strides()[0], c = weight.strides()[1];
    const int64_t* idx = ptr<int64_t>(index);
    const T* w = ptr<T>(weight);
    T* o = ptr<T>(out);
    if (c == 1) {  // a plain loop: rows are short, and a memcpy call per row costs more than the copy
      copy_rows(n, d, idx, w, r, o);
      return;
    }
    for (int64_t i = 0; i < n; ++i) {
      const T* row = w + idx[i] * r;
      for (int64_t j = 0; j < d; ++j) o[i * d + j] = row[j * c];
    }
  });
}

void index_add_rows(const Tensor& grad, const Tensor& index, const Tensor& grad_weight) {
  dispatch(grad.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const int64_t n = index.numel(), d = grad_weight.shape()[1];
    const int64_t* idx = ptr<int64_t>(index);
    const T* g = ptr<T>(grad);
    T* w = ptr<T>(grad_weight);
    add_rows(n, d, idx, g, w);
  });
}

// The flat position of the first index outside [0, limit) that is not `allowed`, or -1.
int64_t find_index_outside(const Tensor& index, int64_t limit, int64_t allowed) {
  const int64_t* values = ptr<int64_t>(index);
  for (int64_t i = 0, n = index.numel(); i < n; ++i)
    if ((values[i] < 0 || values[i] >= limit) && values[i] != allowed) return i;
  return -1;
}

}  // namespace autograd::cpu
