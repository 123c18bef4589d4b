// ops/attention.cpp — causal attention's two products without the masked half.
//
// In causal attention row i of the scores keeps only columns j <= i: the rest become -inf, the softmax
// turns them into exact zeros, and the product with v multiplies by those zeros. Computed densely, half
// of both products — and of their four backward products — is thrown away. These two ops tell the CPU
// kernels where the zeros are (MatmulStructure, backend.h) so they skip that half, and give the dense ops' bits:
//
//   causal_scores(q, k, s)  ==  (q @ kᵀ / s).masked_fill(above the diagonal, -inf)
//   tril_matmul(p, v)       ==  tril(p) @ v      (== p @ v when p is zero above the diagonal, as the
//                                                  softmax of causal scores is)
//
// Why the same bits: every entry of a product is one chain acc = acc + a·b in order of the inner index
// (cpu/kernels/matmul.cpp). The skipped terms are products with an exact zero at the end of a chain (past the
// diagonal) or at its start (before it), and acc + (±0) == acc for every acc the chain can hold. The
// kernels keep the chain's 256-deep blocks where they were, so nothing else moves. (With an inf or NaN
// in v or q, the dense product's 0·inf would be NaN where ours is not.)
// On devices without these kernels, and for T <= 1, the ops are the dense compositions above.
#include <algorithm>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "autograd/autocast.h"
#include "autograd/backend.h"
#include "autograd/ops.h"
#include "autograd/ops/checks.h"

namespace autograd {

namespace {

Tensor above_diagonal(int64_t t, Device device) { return ones({t, t}, DType::Bool, device).triu(1); }

void check_attention_operands(const char* op, const Tensor& a, const Tensor& b, bool square_a) {
  check_floating(a, op);
  check_same_dtype(a, b, op);
  check_same_device(a, b, op);
  const bool shapes_ok = a.dim() >= 2 && b.dim() == a.dim() && (!square_a || a.size(-1) == a.size(-2)) &&
                         b.size(-2) == a.size(-2) &&
                         std::equal(a.shape().begin(), a.shape().end() - 2, b.shape().begin());
  if (!shapes_ok)
    throw std::invalid_argument(fmt::format(
        "{}: expected shapes [..., T, {}] and [..., T, d] with the same leading dims, got {} and {}", op,
        square_a ? "T" : "d", a.shape_str(), b.shape_str()));
}

bool skips_work(const Tensor& a) { return a.size(-2) > 1 && backend(a.device()).has_causal_kernels(); }

// An uninitialised tensor of like's shape laid out as like is: when like is a permuted view of a
// contiguous tensor (the heads' q, k, v: [b, T, H, hd] seen as [b, H, T, hd]), the same permutation of a
// new contiguous one, else contiguous. The attention products write their results there, so the
// gradients of q, k, v and the context vectors reach the [b, T, D] layout they are viewed back to without
// a copy (the kernels take any output strides and compute the same numbers).
Tensor empty_in_layout_of(const Tensor& like) {
  const int64_t nd = like.dim();
  auto stride = [&like](int64_t d) { return like.strides()[size_t(d)]; };
  Shape order(static_cast<size_t>(nd));  // dims from the largest stride to the smallest
  for (int64_t d = 0; d < nd; ++d) order[size_t(d)] = d;
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return stride(x) > stride(y); });
  Shape permuted_shape;
  int64_t expected = 1;
  bool dense = true;
  for (int64_t d = nd - 1; d >= 0; --d) {
    const int64_t dim = order[size_t(d)];
    dense = dense && (like.size(dim) == 1 || stride(dim) == expected);
    expected *= like.size(dim);
  }
  if (!dense || like.is_contiguous()) return empty(like.shape(), like.dtype(), like.device());
  for (int64_t dim : order) permuted_shape.push_back(like.size(dim));
  Shape inverse(static_cast<size_t>(nd));
  for (int64_t d = 0; d < nd; ++d) inverse[size_t(order[size_t(d)])] = d;
  NoGradGuard no_grad;
  return empty(permuted_shape, like.dtype(), like.device()).permute(inverse);
}

// An uninitialised tensor of a @ b's shape, contiguous.
Tensor empty_product(const Tensor& a, const Tensor& b) {
  Shape shape = a.shape();
  shape.back() = b.size(-1);
  return empty(shape, a.dtype(), a.device());
}

// a @ b on and below the diagonal, divided by s, and `above` above it, in one pass where the device can
// (the CPU's fast kernels scale each tile's rows while they are still in the cache).
Tensor causal_product(const Tensor& a, const Tensor& b, double s, double above) {
  Tensor out = empty_product(a, b);
  backend(a.device()).causal_product(a, b, out, s, above);
  return out;
}

}  // namespace

// The products and the mask the backward functions below are made of, each named for what it computes.
// The kernels skip the products with the zeros each one promises (MatmulStructure, backend.h): exact
// zeros, which change no sum.

// g / s on and below the diagonal of every [T, T] matrix, 0 above it
static Tensor lower_triangle_of(const Tensor& g, double s) {
  Tensor out = empty(g.shape(), g.dtype(), g.device());
  backend(g.device()).causal_scale(out, g.contiguous(), s, 0.0);
  return out;
}

// a @ b where a is zero above its diagonal, laid out as `layout` (see empty_in_layout_of)
static Tensor lower_triangular_matmul(const Tensor& a, const Tensor& b, const Tensor& layout) {
  Tensor out = empty_in_layout_of(layout);
  backend(a.device()).matmul_structured(a, b, out, MatmulStructure::lower_a);
  return out;
}

// a @ b where a is zero below its diagonal, laid out as `layout`
static Tensor upper_triangular_matmul(const Tensor& a, const Tensor& b, const Tensor& layout) {
  Tensor out = empty_in_layout_of(layout);
  backend(a.device()).matmul_structured(a, b, out, MatmulStructure::upper_a);
  return out;
}

// tril(a @ b): the product on and below the diagonal, 0 above it (only those entries are computed)
static Tensor tril_of_matmul(const Tensor& a, const Tensor& b) {
  Tensor out = empty_product(a, b);
  backend(a.device()).causal_product(a, b, out, 1.0, 0.0);
  return out;
}

// scores = q·kᵀ / s, then −∞ above the diagonal  ⇒
//   dscores = g / s on and below the diagonal, 0 above   (masked_fill's backward, then the division's)
//   dq = dscores·k,   dk = dscoresᵀ·q                    (the product's)
// each gradient laid out as its input is (the heads' views of one [b, T, D] tensor: no copy to merge them).
struct CausalScoresBackward final : BackwardFunction {
  Tensor q, k;
  double s;
  CausalScoresBackward(const Tensor& q, const Tensor& k, double s) : q(q), k(k), s(s) {}
  Grads apply(const Tensor& g) override {
    const Tensor dscores = lower_triangle_of(g, s);
    return {lower_triangular_matmul(dscores, k, /*layout=*/q), upper_triangular_matmul(dscores.mT(), q, /*layout=*/k)};
  }
};

// out = tril(p)·v  ⇒  dp = tril(g·vᵀ)   (only p's lower triangle was read),   dv = tril(p)ᵀ·g
struct TrilMatmulBackward final : BackwardFunction {
  Tensor lower_p, v;  // lower_p = tril(p)
  TrilMatmulBackward(const Tensor& lower_p, const Tensor& v) : lower_p(lower_p), v(v) {}
  Grads apply(const Tensor& g) override {
    return {tril_of_matmul(g, v.mT()), upper_triangular_matmul(lower_p.mT(), g, /*layout=*/v)};
  }
};

Tensor causal_scores(const Tensor& q, const Tensor& k, double scale_divisor) {
  check_attention_operands("causal_scores", q, k, false);
  if (q.size(-1) != k.size(-1))
    throw std::invalid_argument(fmt::format("causal_scores: q and k need the same last dim, got {} and {}",
                                            q.shape_str(), k.shape_str()));
  if (autocast_applies(q, k))  // bfloat16 operands, float32 sums (autocast.h)
    return causal_scores(autocast_operand(q), autocast_operand(k), scale_divisor).to(DType::Float32);
  const double neg_inf = -std::numeric_limits<double>::infinity();
  if (!skips_work(q))
    return (matmul(q, k.mT()) / scale_divisor).masked_fill(above_diagonal(q.size(-2), q.device()), neg_inf);

  Tensor out = causal_product(q, k.mT(), scale_divisor, neg_inf);  // only entries on and below the diagonal
  if (!needs_grad({q, k})) return out;
  return record("CausalScoresBackward", out, {q, k}, {q, k}, CausalScoresBackward(q, k, scale_divisor));
}

Tensor tril_matmul(const Tensor& p, const Tensor& v) {
  check_attention_operands("tril_matmul", p, v, true);
  if (autocast_applies(p, v)) return tril_matmul(autocast_operand(p), autocast_operand(v)).to(DType::Float32);
  if (!skips_work(p)) return matmul(p.tril(), v);

  Tensor lower;  // tril(p): the kernels read entries above the diagonal inside tiles that straddle it
  {
    NoGradGuard no_grad;
    lower = backend(p.device()).zero_above_diagonal(p) ? p : p.tril();
  }
  Tensor out = lower_triangular_matmul(lower, v, /*layout=*/v);  // see empty_in_layout_of
  if (!needs_grad({p, v})) return out;
  return record("TrilMatmulBackward", out, {p, v}, {lower, v}, TrilMatmulBackward(lower, v));
}

}  // namespace autograd
