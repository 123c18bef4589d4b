// reference/strided.h — the only machinery the reference kernels use: an element of a tensor found
// through its strides, a walk over every index of a shape, and the choice of a kernel's instantiation for
// a dtype. (tools/gdb/step-into.gdb skips this file: a `step` goes from a kernel's call into its loop.)
//
// A tensor is storage seen through a shape, strides and an offset (tensor.h): element [i₀, i₁, ...] lives
// at raw_data() + Σ_d i_d·stride_d. Broadcast inputs arrive as expanded views (stride 0), transposes as
// swapped strides, slices with an offset: this one formula reads them all, with no copy and no special case.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

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

// Every index of a shape, one after the other in row-major order (the last dim fastest), as a loop:
//     for (Index i(shape); i.valid(); i.next())  ... at<T>(t, i) ...
// A shape with a zero in it has no index; a 0-d shape has one, {}.
class Index {
 public:
  explicit Index(const Shape& shape) : shape_(shape), index_(shape.size(), 0) {
    for (int64_t n : shape) valid_ = valid_ && n > 0;
  }
  bool valid() const { return valid_; }
  // The odometer: bump the last dim, carry into the ones before; past the last index, no longer valid.
  void next() {
    for (size_t d = index_.size(); d-- > 0;) {
      if (++index_[d] < shape_[d]) return;
      index_[d] = 0;
    }
    valid_ = false;
  }
  operator const Shape&() const { return index_; }
  int64_t operator[](size_t d) const { return index_[d]; }

 private:
  Shape shape_, index_;
  bool valid_ = true;
};

// The instantiation of a kernel template for t's dtype, for the kernels of floating point numbers only:
//     floating(t, "softmax", softmax<float>, softmax<double>)(arguments...)
// calls softmax<float> for a float32 t. Any other dtype is refused, naming the op.
template <typename Kernel> Kernel* floating(const Tensor& t, const char* op, Kernel* for_float, Kernel* for_double) {
  if (t.dtype() == DType::Float32) return for_float;
  if (t.dtype() == DType::Float64) return for_double;
  throw std::invalid_argument(std::string(op) + ": expected a floating point tensor, got " +
                              std::string(dtype_name(t.dtype())));
}

// The same for the kernels of every dtype.
template <typename Kernel>
Kernel* any_dtype(const Tensor& t, Kernel* for_float, Kernel* for_double, Kernel* for_int64, Kernel* for_bool) {
  switch (t.dtype()) {
    case DType::Float32: return for_float;
    case DType::Float64: return for_double;
    case DType::Int64: return for_int64;
    case DType::Bool: return for_bool;
    case DType::BFloat16: refuse_unwidened("reference kernel");
  }
  return for_float;
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
