// ops/matmul.cpp — matrix products with torch.matmul's rules:
//   1-D · 1-D → dot product (0-d);  1-D · N-D → the vector is a row (then squeezed);
//   N-D · 1-D → the vector is a column (then squeezed);  otherwise batched over broadcast batch dims.
#include <algorithm>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>

#include "autograd/autocast.h"
#include "autograd/backend.h"
#include "autograd/ops.h"
#include "autograd/numerics.h"
#include "autograd/ops/checks.h"
#include "autograd/ops/gradients.h"

namespace autograd {

// An uninitialised tensor for a product of `shape`: laid out as `layout` is when that is the transpose of a
// contiguous tensor of this shape (a transposed weight, kᵀ), else contiguous. A gradient keeps its input's
// layout this way, as PyTorch's do: the receiver (a weight's TBackward0, k's transpose) then gets a
// contiguous gradient it can keep without a copy, and sums over it later add in PyTorch's order. How to
// fill such memory is the kernel's business (cpu/kernels/matmul.cpp computes it as the transposed product).
static Tensor empty_product(const Shape& shape, const Tensor& like, const Tensor& layout) {
  const bool transposed = layout.defined() && layout.shape() == shape && !layout.is_contiguous() && layout.mT().is_contiguous();
  if (!transposed) return empty(shape, like.dtype(), like.device());
  NoGradGuard no_grad;
  Shape swapped = shape;
  std::swap(swapped[swapped.size() - 2], swapped[swapped.size() - 1]);
  return empty(swapped, like.dtype(), like.device()).mT();
}

// The core product for inputs with ≥ 2 dims: one kernel call, one graph node, named after the PyTorch
// node that does the math: MmBackward0 for two matrices, BmmBackward0 for a batch (PyTorch records bmm,
// then an _unsafe_view back to the batch shape: docs/autograd.md lists such merges). The result is laid
// out as `layout` when given (empty_product).
static Tensor batched_product(const Tensor& a, const Tensor& b, const char* name, const Tensor& layout = Tensor());

// a @ b (each with ≥ 2 dims) in memory laid out as `layout` (empty_product): how the backward functions
// below give a weight, or k, its gradient in its own layout.
static Tensor matmul(const Tensor& a, const Tensor& b, const Tensor& layout) {
  return batched_product(a, b, a.dim() == 2 && b.dim() == 2 ? "MmBackward0" : "BmmBackward0", layout);
}

// C = A·B  ⇒  dA = g·Bᵀ,  dB = Aᵀ·g   (each summed over the batch dims that were broadcast; dB in B's layout)
struct MatmulBackward final : BackwardFunction {
  Tensor a, b;
  bool grad_a, grad_b;  // a frozen operand (a LoRA run's base weight) needs no gradient: its product is not computed
  MatmulBackward(const Tensor& a, const Tensor& b) : a(a), b(b), grad_a(a.requires_grad()), grad_b(b.requires_grad()) {}
  Grads apply(const Tensor& g) override {
    Tensor da = grad_a ? matmul(g, b.mT()).sum_to(a.shape()) : Tensor();
    Tensor db = grad_b ? matmul(a.mT(), g, /*layout=*/b).sum_to(b.shape()) : Tensor();
    return {da, db};
  }
};

static Tensor batched_product(const Tensor& a, const Tensor& b, const char* name, const Tensor& layout) {
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  if (b.size(-2) != k)
    throw std::invalid_argument(fmt::format("matmul: shapes {} and {} cannot be multiplied ({} != {})", a.shape_str(),
                                            b.shape_str(), k, b.size(-2)));
  Shape batch(a.shape().begin(), a.shape().end() - 2);
  const bool same_batch = a.dim() == b.dim() && std::equal(batch.begin(), batch.end(), b.shape().begin());
  if (!same_batch) {
    try {
      batch = broadcast_shapes(batch, Shape(b.shape().begin(), b.shape().end() - 2), "matmul");
    } catch (const std::invalid_argument&) {  // name the operands, not just their batch dims
      throw std::invalid_argument(fmt::format(
          "matmul: the batch dimensions of shapes {} and {} cannot be broadcast together", a.shape_str(), b.shape_str()));
    }
  }
  auto with = [&batch](int64_t r, int64_t c) {
    Shape s = batch;
    s.push_back(r);
    s.push_back(c);
    return s;
  };
  checked_nbytes(with(m, n), a.dtype(), "matmul");  // a broadcast batch can make the product too big to count
  Tensor out = empty_product(with(m, n), a, layout);
  {
    NoGradGuard no_grad;  // the expanded views are kernel arguments, not graph nodes
    const Shape a_full = with(m, k), b_full = with(k, n);
    backend(a.device()).matmul(a.shape() == a_full ? a : a.expand(a_full), b.shape() == b_full ? b : b.expand(b_full),
                               out);
  }
  if (!needs_grad({a, b})) return out;
  Tensor recorded = record(name, out, {a, b}, {a, b}, MatmulBackward(a, b));
  if (std::string_view(name) == "BmmBackward0") recorded.grad_fn()->outermost_name = "UnsafeViewBackward0";
  return recorded;
}

// y = x seen with another shape  ⇒  dx = g reshaped back
struct UnsafeViewBackward0 final : BackwardFunction {
  Shape in_shape;
  explicit UnsafeViewBackward0(const Shape& in_shape) : in_shape(in_shape) {}
  Grads apply(const Tensor& g) override { return {g.reshape(in_shape)}; }
};

Tensor matmul(const Tensor& a, const Tensor& b) {
  // under autocast: bfloat16 operands, float32 sums, the product rounded to bfloat16 (autocast.h)
  if (autocast_applies(a, b)) return matmul(autocast_operand(a), autocast_operand(b)).to(DType::Float32);
  check_same_dtype(a, b, "matmul");
  check_floating(a, "matmul");
  check_same_device(a, b, "matmul");
  if (a.dim() == 0 || b.dim() == 0)
    throw std::invalid_argument(fmt::format("matmul: both arguments need at least 1 dimension, got shapes {} and {}",
                                            a.shape_str(), b.shape_str()));
  if (a.dim() == 1 && b.dim() == 1) {
    if (a.size(0) != b.size(0))
      throw std::invalid_argument(fmt::format("matmul: 1-D tensors of sizes {} and {} have no dot product",
                                              a.size(0), b.size(0)));
    const Tensor column = b.unsqueeze(1);  // (two nodes: one statement each, so their order is fixed)
    const Tensor row = a.unsqueeze(0);
    return batched_product(row, column, "DotBackward0").reshape({});
  }
  // Checked here, with the caller's shapes: below, vectors become matrices and a batch folds into rows.
  const int64_t k_a = a.size(-1), k_b = b.dim() == 1 ? b.size(0) : b.size(-2);
  if (k_a != k_b)
    throw std::invalid_argument(fmt::format("matmul: shapes {} and {} cannot be multiplied ({} != {})", a.shape_str(),
                                            b.shape_str(), k_a, k_b));
  if (a.dim() == 1) return batched_product(a.unsqueeze(0), b, "MmBackward0").squeeze(-2);
  if (b.dim() == 1) return batched_product(a, b.unsqueeze(-1), "MvBackward0").squeeze(-1);
  if (a.dim() > 2 && b.dim() == 2) {
    // [..., M, K] @ [K, N]: fold the batch into the rows for one big product (as PyTorch does)
    Shape out_shape(a.shape().begin(), a.shape().end() - 1);
    out_shape.push_back(b.size(1));
    // (the row count spelled out: reshape cannot infer a -1 next to a size-0 K)
    Tensor folded = batched_product(a.reshape({shape_numel(Shape(a.shape().begin(), a.shape().end() - 1)), a.size(-1)}), b,
                                    "MmBackward0");
    Tensor out = folded.detach().view(out_shape);
    if (!needs_grad({folded})) return out;
    return record("UnsafeViewBackward0", out, {folded}, {}, UnsafeViewBackward0(folded.shape()));
  }
  return batched_product(a, b, a.dim() == 2 && b.dim() == 2 ? "MmBackward0" : "BmmBackward0");
}

Tensor Tensor::matmul(const Tensor& other) const { return autograd::matmul(*this, other); }

// out = b + X·W  ⇒  db = Σ_rows g,  dX = g·Wᵀ,  dW = Xᵀ·g   (dW in W's layout: linear's transposed weight)
struct AddmmBackward0 final : BackwardFunction {
  Tensor x2d, w;
  Shape bias_shape;
  bool grad_bias, grad_x, grad_w;  // a frozen input gets no gradient
  AddmmBackward0(const Tensor& bias, const Tensor& x2d, const Tensor& w)
      : x2d(x2d), w(w), bias_shape(bias.shape()), grad_bias(bias.requires_grad()), grad_x(x2d.requires_grad()),
        grad_w(w.requires_grad()) {}
  Grads apply(const Tensor& g) override {
    Tensor db = grad_bias ? g.sum_to(bias_shape) : Tensor();
    Tensor dx = grad_x ? matmul(g, w.mT()) : Tensor();
    Tensor dw = grad_w ? matmul(x2d.mT(), g, /*layout=*/w) : Tensor();
    return {db, dx, dw};
  }
};

// out = bias + x2d @ w, as one node (PyTorch's addmm: the bias is the starting value of the sum, so
// the kernel adds the product onto it block by block, as BLIS does with beta = 1).
static Tensor addmm(const Tensor& bias, const Tensor& x2d, const Tensor& w) {
  const bool same_dtype = bias.dtype() == x2d.dtype() && x2d.dtype() == w.dtype() && is_floating(x2d.dtype());
  const bool same_device = bias.device() == x2d.device() && x2d.device() == w.device();
  Tensor out;
  if (same_dtype && same_device) {  // linear checked the shapes
    out = empty({x2d.size(0), w.size(1)}, x2d.dtype(), x2d.device());
    NoGradGuard no_grad;
    backend(x2d.device()).addmm(bias.contiguous(), x2d, w, out);
  } else {  // inputs matmul will refuse, with its own message
    NoGradGuard no_grad;
    out = bias + matmul(x2d, w);
  }
  if (!needs_grad({bias, x2d, w})) return out;
  return record("AddmmBackward0", out, {bias, x2d, w}, {x2d, w}, AddmmBackward0(bias, x2d, w));
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_linear_shapes(x, weight, bias, "linear");
  if (autocast_applies(x, weight)) {  // bfloat16 operands and bias, float32 sums (autocast.h)
    const bool all_float32 = x.dtype() == DType::Float32 && weight.dtype() == DType::Float32 &&
                             (!bias.defined() || bias.dtype() == DType::Float32);
    if (all_float32) return autocast_linear(x, weight, bias);  // the same, as one node
    return linear(autocast_operand(x), autocast_operand(weight), autocast_operand(bias)).to(DType::Float32);
  }
  if (!bias.defined()) return matmul(x, weight.t());  // MmBackward0 (then UnsafeViewBackward0 for a batch)
  if (x.dim() == 2) return addmm(bias, x, weight.t());
  // a batch of rows: flatten to one matrix, one addmm, view back (PyTorch's _flatten_3d_linear). The two
  // nodes are made one statement at a time, TBackward0 first: as arguments of one call, their order would be
  // the compiler's (C++ leaves it unspecified; GCC makes them in opposite orders on x86-64 and aarch64).
  Shape out_shape(x.shape().begin(), x.shape().end() - 1);
  out_shape.push_back(weight.size(0));
  const Tensor weight_t = weight.t();
  const Tensor rows = x.reshape({shape_numel(Shape(x.shape().begin(), x.shape().end() - 1)), x.size(-1)});
  return addmm(bias, rows, weight_t).view(out_shape);
}

// out = gelu(h)·Wᵀ + b, with x = gelu(h) as rows (X) and g as rows:
//   db = Σ_rows g,   dW = gᵀ·X,   dh = (g·W) ⊙ gelu'(h)
// the steps of AddmmBackward0 (or MmBackward0) and GeluBackward0, on gelu(h) recomputed with the numerics
// of the forward pass: the same bits as the two nodes.
struct LinearAfterGeluBackward final : BackwardFunction {
  Tensor h, weight;  // detached: h's history is this node's input edge
  Shape bias_shape;
  std::string approximate;
  bool tanh, grad_weight, grad_bias;  // a frozen weight or bias gets no gradient
  Numerics numerics_then;
  LinearAfterGeluBackward(const Tensor& h, const Tensor& weight, const Tensor& bias, const std::string& approximate,
                          bool tanh)
      : h(h.detach()), weight(weight.detach()), bias_shape(bias.defined() ? bias.shape() : Shape{}),
        approximate(approximate), tanh(tanh), grad_weight(weight.requires_grad()),
        grad_bias(bias.defined() && bias.requires_grad()), numerics_then(numerics()) {}
  Grads apply(const Tensor& g) override {
    NumericsGuard same_numerics(numerics_then);
    const int64_t rows = h.numel() / h.size(-1);
    const Tensor g2d = g.reshape({rows, g.size(-1)});
    Tensor dw;
    if (grad_weight) {  // gelu(h) lives only as long as the weight's gradient needs it
      const Tensor x2d = gelu(h, approximate).reshape({rows, h.size(-1)});
      dw = matmul(x2d.mT(), g2d, /*layout=*/weight.t()).t();  // [out, in], as the weight
    }
    const Tensor dgelu = matmul(g2d, weight).reshape(h.shape());  // the gradient of gelu(h)...
    const Tensor dh = gelu_gradient(dgelu, h, tanh, /*dx=*/dgelu);    // ...made h's, in place
    return {dh, dw, grad_bias ? g2d.sum_to(bias_shape) : Tensor()};
  }
};

// linear(gelu(h), weight, bias) as one node that keeps h and not gelu(h). The two-node graph keeps both
// (GeluBackward0 needs h, AddmmBackward0 needs gelu(h) for the weight's gradient); this one recomputes
// gelu(h) in backward instead, with the numerics of the forward pass, so it has the same bits. The GPT's
// feed-forward block uses it: its 4·emb_dim-wide activation is then kept once (docs/performance.md).
Tensor linear_after_gelu(const Tensor& h, const Tensor& weight, const Tensor& bias, const std::string& approximate) {
  const bool tanh = gelu_uses_tanh(approximate, h, "linear_after_gelu");
  check_linear_shapes(h, weight, bias, "linear_after_gelu");
  check_floating(h, "linear_after_gelu");
  // under autocast, the two ops: each node then multiplies in bfloat16, in backward too (autocast.h)
  if (autocast_applies(h, weight)) return linear(gelu(h, approximate), weight, bias);
  Tensor out;
  {
    NoGradGuard no_grad;  // the forward is the two ops; the one node is recorded below
    out = linear(gelu(h, approximate), weight, bias);
  }
  if (!needs_grad({h, weight, bias})) return out;
  return record("LinearAfterGeluBackward", out, {h, weight, bias}, {h, weight},
                LinearAfterGeluBackward(h, weight, bias, approximate, tanh));
}

}  // namespace autograd
