// reference/elementwise.cpp — copy, fill and the elementwise maps: out[i] = f(in[i]) for every index i,
// every tensor read through its own strides (a broadcast operand has stride 0 where it repeats).
#include <cmath>
#include <stdexcept>
#include <type_traits>

#include <fmt/format.h>

#include "autograd/reference/kernels.h"
#include "autograd/reference/strided.h"

namespace autograd::reference {

namespace {

// x op y for the six comparisons.
template <typename T> bool compare(BinaryOp op, T x, T y) {
  switch (op) {
    case BinaryOp::Eq: return x == y;
    case BinaryOp::Ne: return x != y;
    case BinaryOp::Lt: return x < y;
    case BinaryOp::Le: return x <= y;
    case BinaryOp::Gt: return x > y;
    default: return x >= y;  // Ge
  }
}

// The comparison a scalar comparison makes (EqScalar is x == s, ...): both enums list them in one order.
BinaryOp comparison_of(UnaryOp op) { return BinaryOp(int(BinaryOp::Eq) + int(op) - int(UnaryOp::EqScalar)); }

// f(x) for the unary ops that keep the dtype; s is the op's scalar, in x's type.
template <typename T> T unary_value(UnaryOp op, T x, T s) {
  switch (op) {
    case UnaryOp::Neg: return T(-x);
    case UnaryOp::Abs: return x < T(0) ? T(-x) : x;
    case UnaryOp::Relu: return x > T(0) ? x : T(0);
    case UnaryOp::ReluMask: return x > T(0) ? T(1) : T(0);  // relu's derivative
    case UnaryOp::AddScalar: return T(x + s);
    case UnaryOp::MulScalar: return T(x * s);
    case UnaryOp::RSubScalar: return T(s - x);
    default: break;
  }
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case UnaryOp::Exp: return std::exp(x);
      case UnaryOp::Log: return std::log(x);
      case UnaryOp::Sqrt: return std::sqrt(x);
      case UnaryOp::Tanh: return std::tanh(x);
      case UnaryOp::DivScalar: return x / s;
      case UnaryOp::RDivScalar: return s / x;
      case UnaryOp::PowScalar: return std::pow(x, s);
      default: break;
    }
  }
  throw std::invalid_argument(fmt::format("unary op {} is not defined for dtype {}", int(op), dtype_name(dtype_of<T>::value)));
}

// x op y for the arithmetic binary ops.
template <typename T> T binary_value(BinaryOp op, T x, T y) {
  switch (op) {
    case BinaryOp::Add: return T(x + y);
    case BinaryOp::Sub: return T(x - y);
    case BinaryOp::Mul: return T(x * y);
    default: break;
  }
  if constexpr (std::is_floating_point_v<T>)
    if (op == BinaryOp::Div) return x / y;
  throw std::invalid_argument(fmt::format("binary op {} is not defined for dtype {}", int(op), dtype_name(dtype_of<T>::value)));
}

template <typename T> void unary_typed(UnaryOp op, const Tensor& in, const Tensor& out, double scalar) {
  const T s = T(scalar);
  if (is_comparison(op)) {  // out[i] = (in[i] op s), a bool
    for_each_index(out.shape(), [&](const Shape& i) { at<bool>(out, i) = compare(comparison_of(op), at<T>(in, i), s); });
    return;
  }
  if (out.numel() == 0) unary_value(op, T(0), s);  // an op the dtype lacks is refused even on no elements
  for_each_index(out.shape(), [&](const Shape& i) { at<T>(out, i) = unary_value(op, at<T>(in, i), s); });
}

template <typename T> void binary_typed(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  if (is_comparison(op)) {
    for_each_index(out.shape(), [&](const Shape& i) { at<bool>(out, i) = compare(op, at<T>(a, i), at<T>(b, i)); });
    return;
  }
  if (out.numel() == 0) binary_value(op, T(0), T(1));
  for_each_index(out.shape(), [&](const Shape& i) { at<T>(out, i) = binary_value(op, at<T>(a, i), at<T>(b, i)); });
}

}  // namespace

// dst[i] = src[i], converted to dst's dtype (to bool: x != 0).
void copy(const Tensor& src, const Tensor& dst) {
  // When the two share storage, a source element could be overwritten before it is read: read from a
  // copy of the source then (cloned under these kernels, into storage of its own).
  Tensor from = src.impl().storage == dst.impl().storage ? src.detach().clone() : src;
  dispatch(src.dtype(), [&](auto s) {
    using S = decltype(s);
    dispatch(dst.dtype(), [&](auto d) {
      using D = decltype(d);
      for_each_index(dst.shape(), [&](const Shape& i) {
        const S x = at<S>(from, i);
        if constexpr (std::is_same_v<D, bool>) at<D>(dst, i) = x != S(0);
        else at<D>(dst, i) = D(x);
      });
    });
  });
}

// dst[i] = value
void fill(const Tensor& dst, double value) {
  dispatch(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    for_each_index(dst.shape(), [&](const Shape& i) { at<T>(dst, i) = T(value); });
  });
}

void unary(UnaryOp op, const Tensor& in, const Tensor& out, double scalar) {
  dispatch(in.dtype(), [&](auto tag) { unary_typed<decltype(tag)>(op, in, out, scalar); });
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  dispatch(a.dtype(), [&](auto tag) { binary_typed<decltype(tag)>(op, a, b, out); });
}

// out[i] = cond[i] ? a[i] : b[i]
void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  dispatch(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    for_each_index(out.shape(), [&](const Shape& i) { at<T>(out, i) = at<bool>(cond, i) ? at<T>(a, i) : at<T>(b, i); });
  });
}

// out[i] = mask[i] ? value : x[i]
void masked_fill(const Tensor& x, const Tensor& mask, double value, const Tensor& out) {
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    for_each_index(out.shape(), [&](const Shape& i) { at<T>(out, i) = at<bool>(mask, i) ? T(value) : at<T>(x, i); });
  });
}

}  // namespace autograd::reference
