// ops/elementwise.cpp — + - * / and the unary functions, with NumPy broadcasting.
// Each backward ends in sum_to(input shape): where an input was broadcast (stretched along a dim), its
// gradient is the sum of the output gradient over that dim.
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "autograd/backend.h"
#include "autograd/ops.h"
#include "autograd/ops/checks.h"
#include "autograd/ops/gradients.h"

namespace autograd {

// ---------------------------------------------------------------- shared checks

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (x != y && x != 1 && y != 1)
      throw std::invalid_argument(fmt::format("{}: shapes {} and {} cannot be broadcast together (dimension {}: {} vs {})",
                                              op, shape_to_string(a), shape_to_string(b), i, x, y));
    out[i] = x == 1 ? y : x;
  }
  return out;
}

static void check_same_dtype_and_device(const Tensor& a, const Tensor& b, const char* op) {
  check_same_dtype(a, b, op);
  check_same_device(a, b, op);
}

// Broadcasts, allocates the output and runs the kernel; no graph.
static Tensor binary_kernel(BinaryOp op, const char* name, const Tensor& a, const Tensor& b) {
  check_same_dtype_and_device(a, b, name);
  if (op == BinaryOp::Div && !is_floating(a.dtype()))
    return binary_kernel(op, name, a.to(DType::Float32), b.to(DType::Float32));  // true division, as in PyTorch
  const DType out_dtype = is_comparison(op) ? DType::Bool : a.dtype();
  if (a.shape() == b.shape()) {  // nothing to broadcast (the usual case): no views to make
    Tensor out = empty(a.shape(), out_dtype, a.device());
    backend(a.device()).binary(op, a, b, out);
    return out;
  }
  Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  checked_nbytes(shape, out_dtype, name);  // a broadcast can be too big to count: say so under the op's name
  Tensor out = empty(shape, out_dtype, a.device());
  NoGradGuard no_grad;
  backend(a.device()).binary(op, a.shape() == shape ? a : a.expand(shape), b.shape() == shape ? b : b.expand(shape), out);
  return out;
}

static Tensor unary_kernel(UnaryOp op, const Tensor& a, double scalar = 0) {
  Tensor out = empty(a.shape(), is_comparison(op) ? DType::Bool : a.dtype(), a.device());
  backend(a.device()).unary(op, a, out, scalar);
  return out;
}

// An integer tensor meeting a fractional scalar (or a division) computes in float32, as PyTorch promotes.
static Tensor promote_for_scalar(const Tensor& a, double s, bool division) {
  if (is_floating(a.dtype())) return a;
  if (division || s != std::floor(s)) return a.to(DType::Float32);
  return a;
}

// ---------------------------------------------------------------- tensor ⊕ tensor
// Each input's gradient is summed down to its shape (sum_to): over the dims it was broadcast along.

// c = a + b  ⇒  da = g,  db = g
struct AddBackward0 final : BackwardFunction {
  Shape a_shape, b_shape;
  AddBackward0(const Shape& a_shape, const Shape& b_shape) : a_shape(a_shape), b_shape(b_shape) {}
  Grads apply(const Tensor& g) override { return {g.sum_to(a_shape), g.sum_to(b_shape)}; }
};

// c = a − b  ⇒  da = g,  db = −g
struct SubBackward0 final : BackwardFunction {
  Shape a_shape, b_shape;
  SubBackward0(const Shape& a_shape, const Shape& b_shape) : a_shape(a_shape), b_shape(b_shape) {}
  Grads apply(const Tensor& g) override { return {g.sum_to(a_shape), neg(g).sum_to(b_shape)}; }
};

// c = a·b  ⇒  da = g·b,  db = g·a
// (The inputs are saved as they are: they were made before this node, so holding them forms no cycle. An
// op that saves its *output* saves a detached handle: the output owns the node.)
struct MulBackward0 final : BackwardFunction {
  Tensor a, b;
  MulBackward0(const Tensor& a, const Tensor& b) : a(a), b(b) {}
  Grads apply(const Tensor& g) override { return {(g * b).sum_to(a.shape()), (g * a).sum_to(b.shape())}; }
};

// c = a / b  ⇒  da = g / b,  db = −g·a / b²
struct DivBackward0 final : BackwardFunction {
  Tensor a, b;
  DivBackward0(const Tensor& a, const Tensor& b) : a(a), b(b) {}
  Grads apply(const Tensor& g) override { return {(g / b).sum_to(a.shape()), (neg(g) * a / (b * b)).sum_to(b.shape())}; }
};

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel(BinaryOp::Add, "add", a, b);
  if (!needs_grad({a, b})) return out;
  return record("AddBackward0", out, {a, b}, {}, AddBackward0(a.shape(), b.shape()));
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel(BinaryOp::Sub, "sub", a, b);
  if (!needs_grad({a, b})) return out;
  return record("SubBackward0", out, {a, b}, {}, SubBackward0(a.shape(), b.shape()));
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel(BinaryOp::Mul, "mul", a, b);
  if (!needs_grad({a, b})) return out;
  return record("MulBackward0", out, {a, b}, {a, b}, MulBackward0(a, b));
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel(BinaryOp::Div, "div", a, b);
  if (!needs_grad({a, b})) return out;
  return record("DivBackward0", out, {a, b}, {a, b}, DivBackward0(a, b));
}

// ---------------------------------------------------------------- tensor ⊕ scalar

// c = a + s  ⇒  da = g
struct AddScalarBackward final : BackwardFunction {
  Grads apply(const Tensor& g) override { return {g}; }
};

// c = s − a, or c = −a  ⇒  da = −g
struct NegBackward0 final : BackwardFunction {
  Grads apply(const Tensor& g) override { return {neg(g)}; }
};

// c = a·s  ⇒  da = g·s
struct MulScalarBackward final : BackwardFunction {
  double s;
  explicit MulScalarBackward(double s) : s(s) {}
  Grads apply(const Tensor& g) override { return {g * s}; }
};

// c = a / s  ⇒  da = g / s
struct DivScalarBackward final : BackwardFunction {
  double s;
  explicit DivScalarBackward(double s) : s(s) {}
  Grads apply(const Tensor& g) override { return {g / s}; }
};

// c = s / a  ⇒  da = −g·s / a²
struct ScalarDivBackward final : BackwardFunction {
  Tensor a;
  double s;
  ScalarDivBackward(const Tensor& a, double s) : a(a), s(s) {}
  Grads apply(const Tensor& g) override { return {neg(g) * s / (a * a)}; }
};

Tensor add(const Tensor& a_in, double s) {
  Tensor a = promote_for_scalar(a_in, s, false);
  Tensor out = unary_kernel(UnaryOp::AddScalar, a, s);
  if (!needs_grad({a})) return out;
  return record("AddBackward0", out, {a}, {}, AddScalarBackward());
}
Tensor sub(const Tensor& a, double s) { return add(a, -s); }

Tensor rsub(double s, const Tensor& a_in) {
  Tensor a = promote_for_scalar(a_in, s, false);
  Tensor out = unary_kernel(UnaryOp::RSubScalar, a, s);
  if (!needs_grad({a})) return out;
  return record("RsubBackward1", out, {a}, {}, NegBackward0());
}

Tensor mul(const Tensor& a_in, double s) {
  Tensor a = promote_for_scalar(a_in, s, false);
  Tensor out = unary_kernel(UnaryOp::MulScalar, a, s);
  if (!needs_grad({a})) return out;
  return record("MulBackward0", out, {a}, {}, MulScalarBackward(s));
}

Tensor div(const Tensor& a_in, double s) {
  Tensor a = promote_for_scalar(a_in, s, true);
  Tensor out = unary_kernel(UnaryOp::DivScalar, a, s);
  if (!needs_grad({a})) return out;
  return record("DivBackward0", out, {a}, {}, DivScalarBackward(s));
}

Tensor rdiv(double s, const Tensor& a_in) {
  Tensor a = promote_for_scalar(a_in, s, true);
  Tensor out = unary_kernel(UnaryOp::RDivScalar, a, s);
  if (!needs_grad({a})) return out;
  return record("DivBackward0", out, {a}, {a}, ScalarDivBackward(a, s));
}

// ---------------------------------------------------------------- unary functions

// y = exp(a)  ⇒  da = g·y   (the output, saved detached)
struct ExpBackward0 final : BackwardFunction {
  Tensor y;
  explicit ExpBackward0(const Tensor& y) : y(y) {}
  Grads apply(const Tensor& g) override { return {g * y}; }
};

// y = log(a)  ⇒  da = g / a
struct LogBackward0 final : BackwardFunction {
  Tensor a;
  explicit LogBackward0(const Tensor& a) : a(a) {}
  Grads apply(const Tensor& g) override { return {g / a}; }
};

// y = √a  ⇒  da = g / (2y)
struct SqrtBackward0 final : BackwardFunction {
  Tensor y;
  explicit SqrtBackward0(const Tensor& y) : y(y) {}
  Grads apply(const Tensor& g) override { return {g / (y * 2.0)}; }
};

// y = tanh(a)  ⇒  da = g·(1 − y²)
struct TanhBackward0 final : BackwardFunction {
  Tensor y;
  explicit TanhBackward0(const Tensor& y) : y(y) {}
  Grads apply(const Tensor& g) override { return {g * rsub(1.0, y * y)}; }
};

// y = relu(a)  ⇒  da = g where y > 0, else 0
struct ReluBackward0 final : BackwardFunction {
  Tensor y;
  explicit ReluBackward0(const Tensor& y) : y(y) {}
  Grads apply(const Tensor& g) override;  // (below: it uses unary_kernel)
};

// y = |a|  ⇒  da = g·sign(a)
struct AbsBackward0 final : BackwardFunction {
  Tensor a;
  explicit AbsBackward0(const Tensor& a) : a(a) {}
  Grads apply(const Tensor& g) override { return {g * (gt(a, 0.0).to(a.dtype()) - lt(a, 0.0).to(a.dtype()))}; }
};

// y = aᵖ  ⇒  da = g·p·aᵖ⁻¹
struct PowBackward0 final : BackwardFunction {
  Tensor a;
  double p;
  PowBackward0(const Tensor& a, double p) : a(a), p(p) {}
  Grads apply(const Tensor& g) override { return {g * (pow(a, p - 1.0) * p)}; }
};

Grads ReluBackward0::apply(const Tensor& g) { return {g * unary_kernel(UnaryOp::ReluMask, y)}; }

Tensor neg(const Tensor& a) {
  Tensor out = unary_kernel(UnaryOp::Neg, a);
  if (!needs_grad({a})) return out;
  return record("NegBackward0", out, {a}, {}, NegBackward0());
}

Tensor exp(const Tensor& a) {
  check_floating(a, "exp");
  Tensor out = unary_kernel(UnaryOp::Exp, a);
  if (!needs_grad({a})) return out;
  Tensor y = out.detach();  // d(e^x)/dx = e^x: reuse the output
  return record("ExpBackward0", out, {a}, {y}, ExpBackward0(y));
}

Tensor log(const Tensor& a) {
  check_floating(a, "log");
  Tensor out = unary_kernel(UnaryOp::Log, a);
  if (!needs_grad({a})) return out;
  return record("LogBackward0", out, {a}, {a}, LogBackward0(a));
}

Tensor sqrt(const Tensor& a) {
  check_floating(a, "sqrt");
  Tensor out = unary_kernel(UnaryOp::Sqrt, a);
  if (!needs_grad({a})) return out;
  Tensor y = out.detach();
  return record("SqrtBackward0", out, {a}, {y}, SqrtBackward0(y));
}

Tensor tanh(const Tensor& a) {
  check_floating(a, "tanh");
  Tensor out = unary_kernel(UnaryOp::Tanh, a);
  if (!needs_grad({a})) return out;
  Tensor y = out.detach();
  return record("TanhBackward0", out, {a}, {y}, TanhBackward0(y));
}

Tensor relu(const Tensor& a) {
  Tensor out = unary_kernel(UnaryOp::Relu, a);
  if (!needs_grad({a})) return out;
  Tensor y = out.detach();
  return record("ReluBackward0", out, {a}, {y}, ReluBackward0(y));
}

Tensor abs(const Tensor& a) {
  Tensor out = unary_kernel(UnaryOp::Abs, a);
  if (!needs_grad({a})) return out;
  return record("AbsBackward0", out, {a}, {a}, AbsBackward0(a));
}

Tensor pow(const Tensor& a, double p) {
  check_floating(a, "pow");
  Tensor out = unary_kernel(UnaryOp::PowScalar, a, p);
  if (!needs_grad({a})) return out;
  return record("PowBackward0", out, {a}, {a}, PowBackward0(a, p));
}

// c = where(cond, a, b)  ⇒  da = g where cond, else 0;  db = g where not cond, else 0
struct WhereBackward0 final : BackwardFunction {
  Tensor cond;
  Shape a_shape, b_shape;
  WhereBackward0(const Tensor& cond, const Shape& a_shape, const Shape& b_shape)
      : cond(cond), a_shape(a_shape), b_shape(b_shape) {}
  Grads apply(const Tensor& g) override {
    Tensor zero = zeros({}, g.dtype(), g.device());
    return {where(cond, g, zero).sum_to(a_shape), where(cond, zero, g).sum_to(b_shape)};
  }
};

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  if (cond.dtype() != DType::Bool)
    throw std::invalid_argument(fmt::format("where: condition must be a bool tensor, got {} (shape {})",
                                            dtype_name(cond.dtype()), cond.shape_str()));
  check_same_dtype_and_device(a, b, "where");
  Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  checked_nbytes(shape, a.dtype(), "where");
  Tensor out = empty(shape, a.dtype(), a.device());
  {
    NoGradGuard no_grad;
    backend(a.device()).where(cond.expand(shape), a.expand(shape), b.expand(shape), out);
  }
  if (!needs_grad({a, b})) return out;
  return record("WhereBackward0", out, {a, b}, {cond}, WhereBackward0(cond, a.shape(), b.shape()));
}

Tensor where(const Tensor& cond, const Tensor& a, double b) {
  return where(cond, a, full({}, b, a.dtype(), a.device()));
}

// ---------------------------------------------------------------- comparisons (no gradient)

Tensor eq(const Tensor& a, const Tensor& b) { return binary_kernel(BinaryOp::Eq, "eq", a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary_kernel(BinaryOp::Ne, "ne", a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary_kernel(BinaryOp::Lt, "lt", a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return binary_kernel(BinaryOp::Le, "le", a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary_kernel(BinaryOp::Gt, "gt", a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary_kernel(BinaryOp::Ge, "ge", a, b); }
// The kernel converts the scalar to the tensor's type, so an integer tensor meeting 2.5 is promoted first
// (else 2 < 2.5 would be computed as 2 < 2).
Tensor eq(const Tensor& a, double s) { return unary_kernel(UnaryOp::EqScalar, promote_for_scalar(a, s, false), s); }
Tensor ne(const Tensor& a, double s) { return unary_kernel(UnaryOp::NeScalar, promote_for_scalar(a, s, false), s); }
Tensor lt(const Tensor& a, double s) { return unary_kernel(UnaryOp::LtScalar, promote_for_scalar(a, s, false), s); }
Tensor le(const Tensor& a, double s) { return unary_kernel(UnaryOp::LeScalar, promote_for_scalar(a, s, false), s); }
Tensor gt(const Tensor& a, double s) { return unary_kernel(UnaryOp::GtScalar, promote_for_scalar(a, s, false), s); }
Tensor ge(const Tensor& a, double s) { return unary_kernel(UnaryOp::GeScalar, promote_for_scalar(a, s, false), s); }

// ---------------------------------------------------------------- methods, conversions, in-place

Tensor Tensor::abs() const { return autograd::abs(*this); }
Tensor Tensor::exp() const { return autograd::exp(*this); }
Tensor Tensor::log() const { return autograd::log(*this); }
Tensor Tensor::sqrt() const { return autograd::sqrt(*this); }
Tensor Tensor::tanh() const { return autograd::tanh(*this); }
Tensor Tensor::relu() const { return autograd::relu(*this); }
Tensor Tensor::pow(double exponent) const { return autograd::pow(*this, exponent); }

// y = a converted to another dtype or device  ⇒  da = g converted back
struct ToCopyBackward0 final : BackwardFunction {
  DType dtype;
  Device device;
  ToCopyBackward0(DType dtype, Device device) : dtype(dtype), device(device) {}
  Grads apply(const Tensor& g) override { return {g.to(dtype).to(device)}; }
};

Tensor Tensor::to(DType target) const {
  if (target == dtype()) return *this;
  Tensor out = empty(shape(), target, device());
  backend(device()).copy(*this, out);
  return record_conversion(*this, out);
}

Tensor record_conversion(const Tensor& x, Tensor converted) {
  // integer results carry no gradient
  if (!is_floating(converted.dtype()) || !is_floating(x.dtype()) || !needs_grad({x})) return converted;
  return record("ToCopyBackward0", std::move(converted), {x}, {}, ToCopyBackward0(x.dtype(), x.device()));
}

Tensor Tensor::to(Device target) const {
  if (target == device()) return *this;
  Tensor out = empty(shape(), dtype(), target);
  copy_across_devices(contiguous(), out);
  if (!needs_grad({*this})) return out;
  return record("ToCopyBackward0", out, {*this}, {}, ToCopyBackward0(dtype(), device()));
}

// In-place writes are fine on tensors without history (optimizer updates run under NoGradGuard). On a
// leaf that requires grad they would silently corrupt the gradient, so they are refused, as in PyTorch.
static void check_in_place_allowed(const Tensor& t, const char* op) {
  if (!is_grad_enabled() || !t.requires_grad()) return;
  throw std::runtime_error(fmt::format(
      "{}: {} (shape {}) is being used in an in-place operation that autograd cannot follow; wrap the update in "
      "NoGradGuard or use the out-of-place op",
      op, t.is_leaf() ? "a leaf tensor that requires grad" : "a tensor with autograd history", t.shape_str()));
}

Tensor& Tensor::fill_(double value) {
  check_in_place_allowed(*this, "fill_");
  backend(device()).fill(*this, value);
  impl().storage->bump_version();
  return *this;
}

Tensor& Tensor::copy_(const Tensor& src) {
  check_in_place_allowed(*this, "copy_");
  if (src.device() != device())
    throw std::invalid_argument(fmt::format("copy_: source on {} but destination on {}", src.device().str(), device().str()));
  NoGradGuard no_grad;
  backend(device()).copy(src.expand(shape()), *this);
  impl().storage->bump_version();
  return *this;
}

Tensor& Tensor::add_(const Tensor& other, double alpha) {
  check_in_place_allowed(*this, "add_");
  check_same_dtype_and_device(*this, other, "add_");
  NoGradGuard no_grad;
  Tensor addend = alpha == 1.0 ? other : other * alpha;
  backend(device()).binary(BinaryOp::Add, *this, addend.expand(shape()), *this);
  impl().storage->bump_version();
  return *this;
}

Tensor& Tensor::mul_(double factor) {
  check_in_place_allowed(*this, "mul_");
  backend(device()).unary(UnaryOp::MulScalar, *this, *this, factor);
  impl().storage->bump_version();
  return *this;
}

}  // namespace autograd
