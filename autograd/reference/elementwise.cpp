// reference/elementwise.cpp — copy, fill and the elementwise maps: out[i] = f(in[i]) for every index i,
// every tensor read through its own strides (a broadcast operand has stride 0 where it repeats).
#include <cmath>
#include <stdexcept>
#include <type_traits>

#include <fmt/format.h>

#include "autograd/cpu/libm/float_functions.h"  // tanh of a float, the same bits on every CPU
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
      case UnaryOp::Tanh: return cpu::exact_tanh(x);  // a float's: the same bits on every CPU
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

// Writes x into dst[i], converted to dst's dtype (to bool: x != 0).
template <typename S> void store(const Tensor& dst, const Shape& i, S x) {
  switch (dst.dtype()) {
    case DType::Float32: at<float>(dst, i) = float(x); return;
    case DType::Float64: at<double>(dst, i) = double(x); return;
    case DType::Int64: at<int64_t>(dst, i) = int64_t(x); return;
    case DType::Bool: at<bool>(dst, i) = x != S(0); return;
    case DType::BFloat16: refuse_unwidened("reference copy");
  }
}

}  // namespace

// Each entry below picks its loop's instantiation for the dtype (strided.h: any_dtype) and calls it.

// dst[i] = src[i], converted to dst's dtype (to bool: x != 0). S is src's element type.
template <typename S> void copy(const Tensor& src, const Tensor& dst) {
  for (Index i(dst.shape()); i.valid(); i.next()) store(dst, i, at<S>(src, i));
}

void copy(const Tensor& src, const Tensor& dst) {
  // When the two share storage, a source element could be overwritten before it is read: read from a
  // copy of the source then (cloned under these kernels, into storage of its own).
  const Tensor from = src.impl().storage == dst.impl().storage ? src.detach().clone() : src;
  any_dtype(src, copy<float>, copy<double>, copy<int64_t>, copy<bool>)(from, dst);
}

// dst[i] = value
template <typename T> void fill(const Tensor& dst, double value) {
  for (Index i(dst.shape()); i.valid(); i.next()) at<T>(dst, i) = T(value);
}

void fill(const Tensor& dst, double value) { any_dtype(dst, fill<float>, fill<double>, fill<int64_t>, fill<bool>)(dst, value); }

// out[i] = f(in[i]), f one of the UnaryOps (unary_value), with the op's scalar s; a comparison writes a bool
template <typename T> void unary(UnaryOp op, const Tensor& in, const Tensor& out, double scalar) {
  const T s = T(scalar);
  if (is_comparison(op)) {
    for (Index i(out.shape()); i.valid(); i.next()) at<bool>(out, i) = compare(comparison_of(op), at<T>(in, i), s);
    return;
  }
  if (out.numel() == 0) unary_value(op, T(0), s);  // an op the dtype lacks is refused even on no elements
  for (Index i(out.shape()); i.valid(); i.next()) at<T>(out, i) = unary_value(op, at<T>(in, i), s);
}

void unary(UnaryOp op, const Tensor& in, const Tensor& out, double scalar) {
  any_dtype(in, unary<float>, unary<double>, unary<int64_t>, unary<bool>)(op, in, out, scalar);
}

// out[i] = a[i] op b[i], op one of the BinaryOps (binary_value); a comparison writes a bool
template <typename T> void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  if (is_comparison(op)) {
    for (Index i(out.shape()); i.valid(); i.next()) at<bool>(out, i) = compare(op, at<T>(a, i), at<T>(b, i));
    return;
  }
  if (out.numel() == 0) binary_value(op, T(0), T(1));
  for (Index i(out.shape()); i.valid(); i.next()) at<T>(out, i) = binary_value(op, at<T>(a, i), at<T>(b, i));
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  any_dtype(a, binary<float>, binary<double>, binary<int64_t>, binary<bool>)(op, a, b, out);
}

// out[i] = cond[i] ? a[i] : b[i]
template <typename T> void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  for (Index i(out.shape()); i.valid(); i.next()) at<T>(out, i) = at<bool>(cond, i) ? at<T>(a, i) : at<T>(b, i);
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  any_dtype(a, where<float>, where<double>, where<int64_t>, where<bool>)(cond, a, b, out);
}

// out[i] = mask[i] ? value : x[i]
template <typename T> void masked_fill(const Tensor& x, const Tensor& mask, double value, const Tensor& out) {
  for (Index i(out.shape()); i.valid(); i.next()) at<T>(out, i) = at<bool>(mask, i) ? T(value) : at<T>(x, i);
}

void masked_fill(const Tensor& x, const Tensor& mask, double value, const Tensor& out) {
  any_dtype(x, masked_fill<float>, masked_fill<double>, masked_fill<int64_t>, masked_fill<bool>)(x, mask, value, out);
}

}  // namespace autograd::reference
