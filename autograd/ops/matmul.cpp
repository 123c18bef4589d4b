// ops/matmul.cpp — matrix products with torch.matmul's rules:
//   1-D · 1-D → dot product (0-d);  1-D · N-D → the vector is a row (then squeezed);
//   N-D · 1-D → the vector is a column (then squeezed);  otherwise batched over broadcast batch dims.
#include <algorithm>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>

#include "autograd/backend.h"
#include "autograd/ops.h"
#include "autograd/numerics.h"
#include "autograd/ops/checks.h"

namespace autograd {

// aᵀ·b computed as (bᵀ·a)ᵀ: the same numbers (each entry is the same chain of products in the same
// order, and x·y == y·x exactly), but they land in the transposed layout. Backward uses it where that
// layout is the one the gradient's receiver keeps, so no copy follows (docs/parity.md, "same-bits layouts").
static Tensor a_transpose_b_in_transposed_layout(const Tensor& a, const Tensor& b) { return matmul(b.mT(), a).mT(); }

// Whether a product's gradient may take the transposed layout: not where a single row or column makes
// BLIS take its dot-product order, which differs between the two forms.
static bool layout_may_change(const Tensor& a, const Tensor& g) { return a.size(-1) != 1 && g.size(-1) != 1; }

// dB = Aᵀ·dC, in k's layout when B is a transposed view of a contiguous k (q @ kᵀ), unless broadcast
// batch dims are summed afterwards (a sum's order depends on the layout).
static Tensor gradient_of_b(const Tensor& a, const Tensor& b, const Tensor& g) {
  const bool b_transposed = !b.is_contiguous() && b.mT().is_contiguous();
  const bool summed = g.shape().size() != b.shape().size() || !std::equal(g.shape().begin(), g.shape().end() - 2, b.shape().begin());
  if (b_transposed && !summed && layout_may_change(a, g)) return a_transpose_b_in_transposed_layout(a, g);
  return matmul(a.mT(), g).sum_to(b.shape());
}

// The core product for inputs with ≥ 2 dims: one kernel call, one graph node, named after the PyTorch
// node that does the math: MmBackward0 for two matrices, BmmBackward0 for a batch (PyTorch records bmm,
// then an _unsafe_view back to the batch shape: docs/autograd.md lists such merges).
static Tensor batched_product(const Tensor& a, const Tensor& b, const char* name) {
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
  Tensor out = empty(with(m, n), a.dtype(), a.device());
  {
    NoGradGuard no_grad;  // the expanded views are kernel arguments, not graph nodes
    const Shape a_full = with(m, k), b_full = with(k, n);
    backend(a.device()).matmul(a.shape() == a_full ? a : a.expand(a_full), b.shape() == b_full ? b : b.expand(b_full),
                               out);
  }
  if (!needs_grad({a, b})) return out;
  // a frozen operand (a LoRA run's base weight) needs no gradient: its product is not computed at all
  const bool grad_a = a.requires_grad(), grad_b = b.requires_grad();
  Tensor recorded = record(name, out, {a, b}, {a, b}, [a, b, grad_a, grad_b](const Tensor& g) {
    // C = A·B  ⇒  dA = dC·Bᵀ,  dB = Aᵀ·dC   (summed over batch dims that were broadcast)
    return Grads{grad_a ? matmul(g, b.mT()).sum_to(a.shape()) : Tensor(), grad_b ? gradient_of_b(a, b, g) : Tensor()};
  });
  if (std::string_view(name) == "BmmBackward0") recorded.grad_fn()->outermost_name = "UnsafeViewBackward0";
  return recorded;
}

Tensor matmul(const Tensor& a, const Tensor& b) {
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
    return batched_product(a.unsqueeze(0), b.unsqueeze(1), "DotBackward0").reshape({});
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
    return record("UnsafeViewBackward0", out, {folded}, {}, [shape = folded.shape()](const Tensor& g) {
      return Grads{g.reshape(shape)};
    });
  }
  return batched_product(a, b, a.dim() == 2 && b.dim() == 2 ? "MmBackward0" : "BmmBackward0");
}

Tensor Tensor::matmul(const Tensor& other) const { return autograd::matmul(*this, other); }

// out = bias + x2d @ w, as one node (PyTorch's addmm: the bias is the starting value of the sum, so
// the kernel adds the product onto it block by block, as BLIS does with beta = 1).
// A linear's weight gradient Xᵀ·g (X: its input as rows), in [out, in] order where that gives the same
// bits: the layout of linear's weight, so its TBackward0 hands the leaf a gradient it can keep.
static Tensor linear_weight_gradient(const Tensor& x2d, const Tensor& g) {
  return layout_may_change(x2d, g) ? a_transpose_b_in_transposed_layout(x2d, g) : matmul(x2d.mT(), g);
}

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
  const bool grad_bias = bias.requires_grad(), grad_x = x2d.requires_grad(), grad_w = w.requires_grad();  // frozen: none
  return record("AddmmBackward0", out, {bias, x2d, w}, {x2d, w},
                [x2d, w, bshape = bias.shape(), grad_bias, grad_x, grad_w](const Tensor& g) {
    // out = b + X·W  ⇒  db = Σ_rows g,  dX = g·Wᵀ,  dW = Xᵀ·g
    return Grads{grad_bias ? g.sum_to(bshape) : Tensor(), grad_x ? matmul(g, w.mT()) : Tensor(),
                 grad_w ? linear_weight_gradient(x2d, g) : Tensor()};
  });
}

// linear's shapes: weight [out, in], x [..., in], bias [out] or undefined; `op` names the caller.
static void check_linear_shapes(const Tensor& x, const Tensor& weight, const Tensor& bias, const char* op) {
  if (weight.dim() != 2)
    throw std::invalid_argument(fmt::format("{}: weight must be 2-D [out, in], got {}", op, weight.shape_str()));
  if (x.dim() == 0 || x.size(-1) != weight.size(1))
    throw std::invalid_argument(fmt::format("{}: input of shape {} does not match weight {} (in_features {})", op,
                                            x.shape_str(), weight.shape_str(), weight.size(1)));
  if (bias.defined() && (bias.dim() != 1 || bias.size(0) != weight.size(0)))
    throw std::invalid_argument(fmt::format("{}: bias of shape {} does not match weight {} (out_features {})", op,
                                            bias.shape_str(), weight.shape_str(), weight.size(0)));
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_linear_shapes(x, weight, bias, "linear");
  if (!bias.defined()) return matmul(x, weight.t());  // MmBackward0 (then UnsafeViewBackward0 for a batch)
  if (x.dim() == 2) return addmm(bias, x, weight.t());
  // a batch of rows: flatten to one matrix, one addmm, view back (PyTorch's _flatten_3d_linear)
  Shape out_shape(x.shape().begin(), x.shape().end() - 1);
  out_shape.push_back(weight.size(0));
  return addmm(bias, x.reshape({shape_numel(Shape(x.shape().begin(), x.shape().end() - 1)), x.size(-1)}), weight.t())
      .view(out_shape);
}

// linear(gelu(h), weight, bias) as one node that keeps h and not gelu(h). The two-node graph keeps both
// (GeluBackward0 needs h, AddmmBackward0 needs gelu(h) for the weight's gradient); this one recomputes
// gelu(h) in backward instead, with the numerics of the forward pass, so it has the same bits. The GPT's
// feed-forward block uses it: its 4·emb_dim-wide activation is then kept once (docs/performance.md).
Tensor linear_after_gelu(const Tensor& h, const Tensor& weight, const Tensor& bias, const std::string& approximate) {
  const bool tanh = gelu_uses_tanh(approximate, h, "linear_after_gelu");
  check_linear_shapes(h, weight, bias, "linear_after_gelu");
  check_floating(h, "linear_after_gelu");
  Tensor out;
  {
    NoGradGuard no_grad;  // the forward is the two ops; the one node is recorded below
    out = linear(gelu(h, approximate), weight, bias);
  }
  if (!needs_grad({h, weight, bias})) return out;
  const Tensor hd = h.detach(), wd = weight.detach();
  const Shape bias_shape = bias.defined() ? bias.shape() : Shape{};
  const bool has_bias = bias.defined();
  const bool grad_weight = weight.requires_grad(), grad_bias = has_bias && bias.requires_grad();  // frozen: none
  const Numerics numerics_then = numerics();
  return record("LinearAfterGeluBackward", out, {h, weight, bias}, {h, weight},
                [hd, wd, grad_weight, grad_bias, bias_shape, approximate, tanh, numerics_then](const Tensor& g) {
    NumericsGuard same_numerics(numerics_then);
    // the steps of AddmmBackward0 / MmBackward0 and GeluBackward0, on gelu(h) recomputed
    const int64_t rows = hd.numel() / hd.size(-1);
    const Tensor g2d = g.reshape({rows, g.size(-1)});
    Tensor dw;
    if (grad_weight) {  // gelu(h) lives only as long as the weight's gradient needs it
      const Tensor x2d = gelu(hd, approximate).reshape({rows, hd.size(-1)});
      dw = linear_weight_gradient(x2d, g2d);
    }
    Tensor dh = matmul(g2d, wd).reshape(hd.shape());  // the gradient of gelu(h) (the product is h · weightᵀ)...
    backend(hd.device()).gelu_backward(dh, hd, tanh, dh);  // ...made h's in place (elementwise)
    return Grads{dh, grad_weight ? dw.t() : Tensor(), grad_bias ? g2d.sum_to(bias_shape) : Tensor()};
  });
}

}  // namespace autograd
