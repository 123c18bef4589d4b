// ops/autocast_linear.cpp — linear under autocast (autocast.h) as one node.
//
// Composed, a Linear under autocast is five nodes: x, W and b each rounded to bfloat16 (ToCopyBackward0),
// the bfloat16 addmm (its float32 sums rounded to bfloat16), and that product widened back to float32; its
// backward rounds the incoming gradient, makes the two gradient products in bfloat16 and widens each back.
// Every bfloat16 product there is written only to be widened at once: for GPT-2 at B 4, T 64 that is each
// weight's gradient (124 M values a step) and each activation. As one node the same values are rounded at
// the same places, inside the products' stores (Backend::bfloat16_product_widened):
//
//   y  = widen(round(round(x)·round(W)ᵀ + round(b)))
//   dx = widen(round(round(g)·round(W)))
//   dW = widen(round(round(g)ᵀ·round(x)))          in W's layout
//   db = widen(round(Σ_rows round(g)))
//
// round(W) and round(b) are the weights' kept copies (autocast_operand). tests/test_autocast_linear.cpp
// holds the node to the composed graph bit for bit, forward and backward.
#include "autograd/autocast.h"
#include "autograd/backend.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/ops/checks.h"

namespace autograd {

namespace {

// t rounded to bfloat16, as a plain value (the node records the rounding as part of itself).
Tensor rounded(const Tensor& t) {
  NoGradGuard no_grad;
  return t.to(DType::BFloat16);
}

// a [M, K] · b [K, N] for bfloat16 a and b, each sum (plus bias) rounded to bfloat16, into a fresh float32
// [M, N]; `transposed`: laid out as the transpose of a contiguous [N, M] (a weight's gradient, made in the
// layout the composed graph makes it in, which its product stores fastest).
Tensor widened_product(const Tensor& a, const Tensor& b, const Tensor& bias = Tensor(), bool transposed = false) {
  const Tensor out = transposed ? empty({b.size(1), a.size(0)}, DType::Float32, a.device()).t()
                                : empty({a.size(0), b.size(1)}, DType::Float32, a.device());
  backend(a.device()).bfloat16_product_widened(a, b, bias, out);
  return out;
}

struct AutocastLinearBackward final : BackwardFunction {
  Tensor x16, w16;  // round(x) as rows [R, in], round(W) [out, in]
  Shape x_shape, bias_shape;
  bool grad_x, grad_w, grad_b;  // a frozen input gets no gradient
  AutocastLinearBackward(const Tensor& x16, const Tensor& w16, const Tensor& x, const Tensor& weight,
                         const Tensor& bias)
      : x16(x16), w16(w16), x_shape(x.shape()), bias_shape(bias.defined() ? bias.shape() : Shape{}),
        grad_x(x.requires_grad()), grad_w(weight.requires_grad()), grad_b(bias.defined() && bias.requires_grad()) {}
  Grads apply(const Tensor& g) override {
    const Tensor g16 = rounded(g.reshape({x16.size(0), w16.size(0)}));
    Tensor dx = grad_x ? widened_product(g16, w16).reshape(x_shape) : Tensor();
    Tensor dw = grad_w ? widened_product(x16.mT(), g16, Tensor(), /*transposed=*/true).t() : Tensor();
    Tensor db = grad_b ? g16.sum_to(bias_shape).to(DType::Float32) : Tensor();
    return {dx, dw, db};
  }
};

}  // namespace

Tensor autocast_linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_linear_shapes(x, weight, bias, "autocast_linear");
  for (const Tensor& t : {x, weight, bias})
    if (t.defined() && t.dtype() != DType::Float32)
      throw std::invalid_argument(fmt::format("autocast_linear: expects float32 input, weight and bias, got a {} tensor {}",
                                              dtype_name(t.dtype()), t.shape_str()));
  check_same_device(x, weight, "autocast_linear");
  if (bias.defined()) check_same_device(x, bias, "autocast_linear");
  const int64_t in = weight.size(1), out_features = weight.size(0);
  Tensor x16, w16, bias32;
  {
    NoGradGuard no_grad;  // the roundings are this node's; W's and b's are their kept copies
    x16 = rounded(x.reshape({x.numel() / std::max<int64_t>(in, 1), in}));
    w16 = autocast_operand(weight);
    if (bias.defined()) bias32 = autocast_operand(bias).to(DType::Float32);
  }
  Shape out_shape(x.shape().begin(), x.shape().end() - 1);
  out_shape.push_back(out_features);
  const Tensor out = widened_product(x16, w16.t(), bias32).view(out_shape);
  if (!needs_grad({x, weight, bias})) return out;
  return record("AutocastLinearBackward", out, {x, weight, bias}, {x16, w16},
                AutocastLinearBackward(x16, w16, x, weight, bias));
}

}  // namespace autograd
