// reference/strided.h — the only machinery the reference kernels use: an element of a tensor found
// through its strides, and a walk over every index of a shape.
//
// A tensor is storage seen through a shape, strides and an offset (tensor.h): element [i₀, i₁, ...] lives
// at raw_data() + Σ_d i_d·stride_d. Broadcast inputs arrive as expanded views (stride 0), transposes as
// swapped strides, slices with an offset: this one formula reads them all, with no copy and no special case.
#pragma once
#include <cstdint>
#include <functional>

#include "autograd/tensor.h"

namespace autograd::reference {

// Where element `index` (one entry per dim) lies, counted in elements from t's first one.
inline int64_t position(const Tensor& t, const Shape& index) {
  int64_t p = 0;
  for (size_t d = 0; d < index.size(); ++d) p += index[d] * t.strides()[d];
  return p;
}

// t[index], to read or to write; T is t's element type.
template <typename T> T& at(const Tensor& t, const Shape& index) {
  return static_cast<T*>(t.raw_data())[position(t, index)];
}

// Calls visit(index) for every index of `shape`, in row-major order (the last dim fastest). A shape with a
// zero in it has no index; a 0-d shape has one, {}.
inline void for_each_index(const Shape& shape, const std::function<void(const Shape&)>& visit) {
  for (int64_t n : shape)
    if (n == 0) return;
  Shape index(shape.size(), 0);
  while (true) {
    visit(index);
    int64_t d = int64_t(shape.size()) - 1;  // the odometer: bump the last dim, carry into the ones before
    for (; d >= 0; --d) {
      if (++index[size_t(d)] < shape[size_t(d)]) break;
      index[size_t(d)] = 0;
    }
    if (d < 0) return;
  }
}

// The index of `shape` that is the n-th in row-major order (the inverse of counting them).
inline Shape index_of(int64_t n, const Shape& shape) {
  Shape index(shape.size(), 0);
  for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
    index[size_t(d)] = n % shape[size_t(d)];
    n /= shape[size_t(d)];
  }
  return index;
}

// The shape with `dim` set to 1: walking it visits the first element of every row along `dim`.
inline Shape row_starts(Shape shape, int64_t dim) {
  shape[size_t(dim)] = 1;
  return shape;
}

// The matrix in the last two dims of t at batch index n (t's other dims): m(i, j) is t[n..., i, j].
template <typename T> struct Matrix {
  T* first;
  int64_t row_stride, col_stride;
  T& operator()(int64_t i, int64_t j) const { return first[i * row_stride + j * col_stride]; }
};
template <typename T> Matrix<T> matrix(const Tensor& t, Shape n) {
  const size_t row = n.size();
  n.push_back(0);
  n.push_back(0);
  return {&at<T>(t, n), t.strides()[row], t.strides()[row + 1]};
}

// The vector in the last dim of t at batch index n: v(i) is t[n..., i] (stored as a one-column matrix).
template <typename T> Matrix<T> vector(const Tensor& t, Shape n) {
  const size_t last = n.size();
  n.push_back(0);
  return {&at<T>(t, n), t.strides()[last], 0};
}

// The shape without its last `count` dims (the batch dims of a stack of matrices).
inline Shape leading(const Tensor& t, size_t count) { return Shape(t.shape().begin(), t.shape().end() - int64_t(count)); }

}  // namespace autograd::reference
