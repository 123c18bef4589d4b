// cpu/kernels/elementwise.cpp — copies, fills, and the elementwise maps (unary, binary, where).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "autograd/cpu/kernels.h"
#include "autograd/cpu/kernels/loops.h"
#include "autograd/cpu/kernels/select_floats.h"
#include "autograd/cpu/libm/float_functions.h"

namespace autograd::cpu {

namespace {

template <typename T> T relu_of(T x) { return x > T(0) ? x : T(0); }

template <typename T> void unary_typed(UnaryOp op, const Tensor& in, const Tensor& out, double scalar) {
  const T s = T(scalar);
  switch (op) {
    case UnaryOp::Neg: return map1<T, T>(in, out, [](T x) { return T(-x); });
    case UnaryOp::Abs: return map1<T, T>(in, out, [](T x) { return x < T(0) ? T(-x) : x; });
    case UnaryOp::Relu: return map1<T, T>(in, out, [](T x) { return relu_of(x); });
    case UnaryOp::ReluMask: return map1<T, T>(in, out, [](T x) { return x > T(0) ? T(1) : T(0); });
    case UnaryOp::AddScalar: return map1<T, T>(in, out, [s](T x) { return T(x + s); });
    case UnaryOp::MulScalar: return map1<T, T>(in, out, [s](T x) { return T(x * s); });
    case UnaryOp::RSubScalar: return map1<T, T>(in, out, [s](T x) { return T(s - x); });
    case UnaryOp::EqScalar: return map1<T, bool>(in, out, [s](T x) { return x == s; });
    case UnaryOp::NeScalar: return map1<T, bool>(in, out, [s](T x) { return x != s; });
    case UnaryOp::LtScalar: return map1<T, bool>(in, out, [s](T x) { return x < s; });
    case UnaryOp::LeScalar: return map1<T, bool>(in, out, [s](T x) { return x <= s; });
    case UnaryOp::GtScalar: return map1<T, bool>(in, out, [s](T x) { return x > s; });
    case UnaryOp::GeScalar: return map1<T, bool>(in, out, [s](T x) { return x >= s; });
    default: break;
  }
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case UnaryOp::Exp: return map1<T, T>(in, out, [](T x) { return std::exp(x); });
      case UnaryOp::Log: return map1<T, T>(in, out, [](T x) { return std::log(x); });
      case UnaryOp::Sqrt: return map1<T, T>(in, out, [](T x) { return std::sqrt(x); });
      case UnaryOp::Tanh: return map1<T, T>(in, out, [](T x) { return exact_tanh(x); });  // float: float_functions.h
      case UnaryOp::DivScalar: return map1<T, T>(in, out, [s](T x) { return x / s; });
      case UnaryOp::RDivScalar: return map1<T, T>(in, out, [s](T x) { return s / x; });
      case UnaryOp::PowScalar:
        if (scalar == 2.0) return map1<T, T>(in, out, [](T x) { return x * x; });
        if (scalar == 0.5) return map1<T, T>(in, out, [](T x) { return std::sqrt(x); });
        return map1<T, T>(in, out, [s](T x) { return std::pow(x, s); });
      default: break;
    }
  }
  throw std::invalid_argument(fmt::format("unary op {} is not defined for dtype {}", int(op), dtype_name(in.dtype())));
}

template <typename T> void binary_typed(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  switch (op) {
    case BinaryOp::Add: return map2<T, T>(a, b, out, [](T x, T y) { return T(x + y); });
    case BinaryOp::Sub: return map2<T, T>(a, b, out, [](T x, T y) { return T(x - y); });
    case BinaryOp::Mul: return map2<T, T>(a, b, out, [](T x, T y) { return T(x * y); });
    case BinaryOp::Div:
      if constexpr (std::is_floating_point_v<T>) return map2<T, T>(a, b, out, [](T x, T y) { return x / y; });
      break;
    case BinaryOp::Eq: return map2<T, bool>(a, b, out, [](T x, T y) { return x == y; });
    case BinaryOp::Ne: return map2<T, bool>(a, b, out, [](T x, T y) { return x != y; });
    case BinaryOp::Lt: return map2<T, bool>(a, b, out, [](T x, T y) { return x < y; });
    case BinaryOp::Le: return map2<T, bool>(a, b, out, [](T x, T y) { return x <= y; });
    case BinaryOp::Gt: return map2<T, bool>(a, b, out, [](T x, T y) { return x > y; });
    case BinaryOp::Ge: return map2<T, bool>(a, b, out, [](T x, T y) { return x >= y; });
  }
  throw std::invalid_argument(fmt::format("binary op {} is not defined for dtype {}", int(op), dtype_name(a.dtype())));
}

// dst (contiguous) = src, a matrix with any strides: one loop nest, no iteration plan — the copies
// training makes most are small matrices.
template <typename T> void copy_matrix(const Tensor& src, const Tensor& dst) {
  const int64_t rows = src.size(0), cols = src.size(1);
  const int64_t rs = src.strides()[0], cs = src.strides()[1];
  const T* s = ptr<T>(src);
  T* d = ptr<T>(dst);
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = s + r * rs;
    T* out = d + r * cols;
    if (cs == 1) {
      for (int64_t c = 0; c < cols; ++c) out[c] = row[c];
    } else {
      for (int64_t c = 0; c < cols; ++c) out[c] = row[c * cs];
    }
  }
}

}  // namespace

void copy(const Tensor& src, const Tensor& dst) {
  if (src.dtype() == dst.dtype() && dst.is_contiguous()) {
    if (src.is_contiguous()) {  // one block of bytes (memmove: x.copy_(x) is legal)
      if (src.numel() > 0) std::memmove(dst.raw_data(), src.raw_data(), size_t(src.numel()) * dtype_size(src.dtype()));
      return;
    }
    if (src.dim() == 2) {  // a bias row broadcast down addmm's output, a transposed gradient made contiguous
      dispatch(src.dtype(), [&](auto tag) { copy_matrix<decltype(tag)>(src, dst); });
      return;
    }
  }
  dispatch(src.dtype(), [&](auto s) {
    using S = decltype(s);
    dispatch(dst.dtype(), [&](auto d) {
      using D = decltype(d);
      if constexpr (std::is_same_v<D, bool>) map1<S, D>(src, dst, [](S x) { return x != S(0); });
      else map1<S, D>(src, dst, [](S x) { return D(x); });
    });
  });
}

void fill(const Tensor& dst, double value) {
  dispatch(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T v = T(value);
    if (v == T(0) && !std::signbit(double(value)) && dst.is_contiguous()) {  // zeros: all-zero bytes
      std::memset(dst.raw_data(), 0, size_t(dst.numel()) * sizeof(T));
      return;
    }
    // write-only: the old contents may be uninitialised (and, for bool, not even a valid bool)
    auto plan = make_plan<1>(dst.shape(), {&dst.strides()});
    T* p = ptr<T>(dst);
    parallel_for_each_run(plan, dst.numel(), [&](const auto& off, int64_t n, const auto& st) {
      for (int64_t i = 0; i < n; ++i) p[off[0] + i * st[0]] = v;
    });
  });
}

void unary(UnaryOp op, const Tensor& in, const Tensor& out, double scalar) {
  dispatch(in.dtype(), [&](auto tag) { unary_typed<decltype(tag)>(op, in, out, scalar); });
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  dispatch(a.dtype(), [&](auto tag) { binary_typed<decltype(tag)>(op, a, b, out); });
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  dispatch(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    auto plan = make_plan<4>(out.shape(), {&out.strides(), &cond.strides(), &a.strides(), &b.strides()});
    T* po = ptr<T>(out);
    const bool* pc = ptr<bool>(cond);
    const T* pa = ptr<T>(a);
    const T* pb = ptr<T>(b);
    parallel_for_each_run(plan, out.numel(), [&](const auto& off, int64_t n, const auto& st) {
      T* o = po + off[0];
      const bool* c = pc + off[1];
      const T* x = pa + off[2];
      const T* y = pb + off[3];
      // masked_fill is where(mask, value, x) with the value a stride-0 scalar: give the compiler a
      // plain loop for that and for all-contiguous operands, so it can use vectors
      if (st[0] == 1 && st[1] == 1 && st[2] == 0 && st[3] == 1) {
        const T value = *x;
        if constexpr (std::is_same_v<T, float>) select_floats(c, value, y, o, n);
        else for (int64_t i = 0; i < n; ++i) o[i] = c[i] ? value : y[i];
      } else if (st[0] == 1 && st[1] == 1 && st[2] == 1 && st[3] == 0) {  // where(cond, x, scalar)
        const T value = *y;
        for (int64_t i = 0; i < n; ++i) o[i] = c[i] ? x[i] : value;
      } else if (st[0] == 1 && st[1] == 1 && st[2] == 1 && st[3] == 1) {
        for (int64_t i = 0; i < n; ++i) o[i] = c[i] ? x[i] : y[i];
      } else {
        for (int64_t i = 0; i < n; ++i) o[i * st[0]] = c[i * st[1]] ? x[i * st[2]] : y[i * st[3]];
      }
    });
  });
}


// masked_fill's commonest case: contiguous floats, and a mask that repeats one contiguous block along
// the leading dims (the attention mask over a batch of score matrices; its expanded view has stride 0
// there). One select per repetition of the block.
static bool fill_by_repeated_mask(const Tensor& x, const Tensor& mask, double value, const Tensor& out) {
  if (x.dtype() != DType::Float32 || !x.is_contiguous() || !out.is_contiguous() || x.numel() == 0) return false;
  const int64_t nd = x.dim();
  int64_t lead = 0;  // the mask's stride is 0 on dims [0, lead) and contiguous on [lead, nd)
  while (lead < nd && mask.strides()[size_t(lead)] == 0) ++lead;
  int64_t period = 1;
  for (int64_t d = nd - 1; d >= lead; --d) {
    if (mask.size(d) != 1 && mask.strides()[size_t(d)] != period) return false;
    period *= mask.size(d);
  }
  const bool* m = static_cast<const bool*>(mask.raw_data());
  const float* in = ptr<float>(x);
  float* o = ptr<float>(out);
  for (int64_t r = 0, repeats = x.numel() / period; r < repeats; ++r)
    select_floats(m, float(value), in + r * period, o + r * period, period);
  return true;
}

void masked_fill(const Tensor& x, const Tensor& mask, double value, const Tensor& out) {
  if (fill_by_repeated_mask(x, mask, value, out)) return;
  Tensor scalar = empty({}, x.dtype(), x.device());
  fill(scalar, value);
  where(mask, scalar.expand(x.shape()), x, out);
}

}  // namespace autograd::cpu
