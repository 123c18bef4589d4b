// ops/matmul.cpp — matrix products with torch.matmul's rules:
//   1-D · 1-D → dot product (0-d);  1-D · N-D → the vector is a row (then squeezed);
//   N-D · 1-D → the vector is a column (then squeezed);  otherwise batched over broadcast batch dims.
#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "autograd/backend.h"
#include "autograd/cpu/cpu.h"
#include "autograd/ops.h"

namespace autograd {

// A product's dB = Aᵀ·dC. When B is a transposed view of a contiguous tensor (q @ k.transpose(-2, -1))
// it is computed as (dCᵀ·A)ᵀ: every entry is the same chain Σ_r A[r, i]·dC[r, j] in the same order
// (a·b == b·a exactly), but it lands in the layout of k, so the TransposeBackward0 and ViewBackward0
// after it pass it on as views instead of copying it into place. Not where a single row or column would
// take BLIS's dot-product order, nor where broadcast batch dims are summed afterwards (a sum's order
// depends on the layout).
static Tensor gradient_of_b(const Tensor& a, const Tensor& b, const Tensor& g) {
  const bool b_transposed = !b.is_contiguous() && b.mT().is_contiguous();
  const bool summed = g.shape().size() != b.shape().size() || !std::equal(g.shape().begin(), g.shape().end() - 2, b.shape().begin());
  if (!b_transposed || summed || a.size(-1) == 1 || g.size(-1) == 1) return matmul(a.mT(), g).sum_to(b.shape());
  return matmul(g.mT(), a).mT();
}

// The core product for inputs with ≥ 2 dims: one kernel call, one graph node. The node carries the
// name PyTorch shows for the same call: MmBackward0 for two matrices, UnsafeViewBackward0 for a batch
// (torch.matmul runs bmm, then an _unsafe_view back to the batch shape).
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
  Tensor out = empty(with(m, n), a.dtype(), a.device());
  {
    NoGradGuard no_grad;  // the expanded views are kernel arguments, not graph nodes
    const Shape a_full = with(m, k), b_full = with(k, n);
    backend(a.device()).matmul(a.shape() == a_full ? a : a.expand(a_full), b.shape() == b_full ? b : b.expand(b_full),
                               out);
  }
  if (!needs_grad({a, b})) return out;
  const Tensor& x = a;  // inputs are saved as they are (see mul in elementwise.cpp)
  const Tensor& y = b;
  return record(name, out, {a, b}, {x, y}, [x, y](const Tensor& g) {
    // C = A·B  ⇒  dA = dC·Bᵀ,  dB = Aᵀ·dC   (summed over batch dims that were broadcast)
    return Grads{matmul(g, y.mT()).sum_to(x.shape()), gradient_of_b(x, y, g)};
  });
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype())
    throw std::invalid_argument(fmt::format("matmul: dtype mismatch: {} (shape {}) and {} (shape {})",
                                            dtype_name(a.dtype()), a.shape_str(), dtype_name(b.dtype()), b.shape_str()));
  if (!is_floating(a.dtype()))
    throw std::invalid_argument(fmt::format("matmul: expected floating point tensors, got {} (shapes {} and {})",
                                            dtype_name(a.dtype()), a.shape_str(), b.shape_str()));
  if (a.device() != b.device())
    throw std::invalid_argument(fmt::format("matmul: expected both tensors on the same device, got {} and {}",
                                            a.device().str(), b.device().str()));
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
    Tensor folded = batched_product(a.reshape({-1, a.size(-1)}), b, "MmBackward0");
    Tensor out = folded.detach().view(out_shape);
    return record("UnsafeViewBackward0", out, {folded}, {}, [shape = folded.shape()](const Tensor& g) {
      return Grads{g.reshape(shape)};
    });
  }
  return batched_product(a, b, a.dim() == 2 && b.dim() == 2 ? "MmBackward0" : "UnsafeViewBackward0");
}

Tensor Tensor::matmul(const Tensor& other) const { return autograd::matmul(*this, other); }

// out = bias + x2d @ w, as one node (PyTorch's addmm: the bias is the starting value of the sum).
// On the CPU the kernel starts every row's sum from the bias row and adds the product onto it, block by
// block, as BLIS does with beta = 1: (bias + chain₀) + chain₁ — one pass, and PyTorch's bits for any K.
// addmm's dW = xᵀ·g ([in, out]), computed as (gᵀ·x)ᵀ: every entry is the same chain Σ_r x[r, i]·g[r, o]
// in the same order (a·b == b·a exactly), but the numbers land in [out, in] order — the layout of
// linear's weight, so its TBackward0 hands the leaf a contiguous gradient the leaf can keep instead of
// copying it. (With a single row or column BLIS would take a dot-product order that differs between
// the two forms: those keep the plain one.)
static Tensor weight_gradient(const Tensor& x, const Tensor& g) {
  if (x.size(1) == 1 || g.size(1) == 1) return matmul(x.mT(), g);
  return matmul(g.mT(), x).mT();
}

static Tensor addmm(const Tensor& bias, const Tensor& x2d, const Tensor& w) {
  Tensor out;
  {
    NoGradGuard no_grad;
    const bool same_dtype = bias.dtype() == x2d.dtype() && x2d.dtype() == w.dtype() && is_floating(x2d.dtype());
    if (x2d.device().is_cpu() && bias.device().is_cpu() && w.device().is_cpu() && same_dtype) {  // linear checked shapes
      out = empty({x2d.size(0), w.size(1)}, x2d.dtype(), x2d.device());
      cpu::batched_matmul(x2d, w, out, cpu::MatmulStructure::dense, /*add_to_out=*/false, bias.contiguous());
    } else {  // other devices, and inputs matmul will refuse with its own message
      out = bias + matmul(x2d, w);  // the bias row broadcast over the batch rows
    }
  }
  if (!needs_grad({bias, x2d, w})) return out;
  const Tensor& x = x2d;
  const Tensor& y = w;
  return record("AddmmBackward0", out, {bias, x2d, w}, {x, y}, [x, y, bshape = bias.shape()](const Tensor& g) {
    return Grads{g.sum_to(bshape), matmul(g, y.mT()), weight_gradient(x, g)};
  });
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (weight.dim() != 2)
    throw std::invalid_argument(fmt::format("linear: weight must be 2-D [out, in], got {}", weight.shape_str()));
  if (x.dim() == 0 || x.size(-1) != weight.size(1))
    throw std::invalid_argument(fmt::format("linear: input of shape {} does not match weight {} (in_features {})",
                                            x.shape_str(), weight.shape_str(), weight.size(1)));
  if (bias.defined() && (bias.dim() != 1 || bias.size(0) != weight.size(0)))
    throw std::invalid_argument(fmt::format("linear: bias of shape {} does not match weight {} (out_features {})",
                                            bias.shape_str(), weight.shape_str(), weight.size(0)));
  if (!bias.defined()) return matmul(x, weight.t());  // MmBackward0, or UnsafeViewBackward0 for a batch
  if (x.dim() == 2) return addmm(bias, x, weight.t());
  // a batch of rows: flatten to one matrix, one addmm, view back (PyTorch's _flatten_3d_linear)
  Shape out_shape(x.shape().begin(), x.shape().end() - 1);
  out_shape.push_back(weight.size(0));
  return addmm(bias, x.reshape({-1, x.size(-1)}), weight.t()).view(out_shape);
}

}  // namespace autograd
