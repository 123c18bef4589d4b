// ops/attention.cpp — causal attention's two products without the masked half.
//
// In causal attention row i of the scores keeps only columns j <= i: the rest become -inf, the softmax
// turns them into exact zeros, and the product with v multiplies by those zeros. Computed densely, half
// of both products — and of their four backward products — is thrown away. These two ops tell the CPU
// kernels where the zeros are (cpu::MatmulStructure) so they skip that half, and give the dense ops' bits:
//
//   causal_scores(q, k, s)  ==  (q @ kᵀ / s).masked_fill(above the diagonal, -inf)
//   tril_matmul(p, v)       ==  tril(p) @ v      (== p @ v when p is zero above the diagonal, as the
//                                                  softmax of causal scores is)
//
// Why the same bits: every entry of a product is one chain acc = acc + a·b in order of the inner index
// (cpu/matmul.cpp). The skipped terms are products with an exact zero at the end of a chain (past the
// diagonal) or at its start (before it), and acc + (±0) == acc for every acc the chain can hold. The
// kernels keep the chain's 256-deep blocks where they were, so nothing else moves. (With an inf or NaN
// in v or q, the dense product's 0·inf would be NaN where ours is not.)
// On other devices, and for T <= 1, the ops are the dense compositions above.
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "autograd/cpu/cpu.h"
#include "autograd/ops.h"

namespace autograd {

namespace {

using cpu::MatmulStructure;

Tensor above_diagonal(int64_t t, Device device) { return ones({t, t}, DType::Bool, device).triu(1); }

void check_attention_operands(const char* op, const Tensor& a, const Tensor& b, bool square_a) {
  if (a.dtype() != b.dtype() || !is_floating(a.dtype()))
    throw std::invalid_argument(fmt::format("{}: expected two floating tensors of one dtype, got {} and {}", op,
                                            dtype_name(a.dtype()), dtype_name(b.dtype())));
  if (a.device() != b.device())
    throw std::invalid_argument(
        fmt::format("{}: expected both tensors on one device, got {} and {}", op, a.device().str(), b.device().str()));
  const bool shapes_ok = a.dim() >= 2 && b.dim() == a.dim() && (!square_a || a.size(-1) == a.size(-2)) &&
                         b.size(-2) == a.size(-2) &&
                         std::equal(a.shape().begin(), a.shape().end() - 2, b.shape().begin());
  if (!shapes_ok)
    throw std::invalid_argument(fmt::format(
        "{}: expected shapes [..., T, {}] and [..., T, d] with the same leading dims, got {} and {}", op,
        square_a ? "T" : "d", a.shape_str(), b.shape_str()));
}

bool skips_work(const Tensor& a) { return a.device().is_cpu() && a.size(-2) > 1; }

// out = a @ b (a [..., M, K], b [..., K, N]) by the CPU kernels, told where a's or out's zeros are.
Tensor product(const Tensor& a, const Tensor& b, MatmulStructure structure) {
  Shape shape = a.shape();
  shape.back() = b.size(-1);
  Tensor out = empty(shape, a.dtype(), a.device());
  cpu::batched_matmul(a, b, out, structure);
  return out;
}

// Calls f(T* x_matrix, const T* y_matrix) for each t x t matrix of two contiguous [..., t, t] tensors,
// the matrices spread over threads when there are many elements.
template <typename T, typename F> void for_each_square(const Tensor& x, const Tensor& y, F f) {
  const int64_t t = x.size(-1), count = x.numel() / std::max<int64_t>(t * t, 1);
  T* px = x.data_ptr<T>();
  const T* py = y.data_ptr<T>();
  const int threads = x.numel() < (int64_t(1) << 15) ? 1 : get_num_threads();
  if (threads == 1) {  // no OpenMP region at all: even an if(false) one has a cost
    for (int64_t i = 0; i < count; ++i) f(px + i * t * t, py + i * t * t);
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < count; ++i) f(px + i * t * t, py + i * t * t);
}

// dst = src / s on and below the diagonal, `above` above it: one pass for what masked_fill and the
// division would do in two (the same values: x / s rounded once, as the division op does).
void scale_lower(const Tensor& dst, const Tensor& src, double s, double above) {
  const int64_t t = dst.size(-1);
  dispatch_floating(dst.dtype(), "causal_scores", [&](auto tag) {
    using T = decltype(tag);
    const T scale = T(s), fill = T(above);
    for_each_square<T>(dst, src, [&](T* d, const T* x) {
      for (int64_t i = 0; i < t; ++i) {  // two plain loops per row, so both run on vectors
        for (int64_t j = 0; j <= i; ++j) d[i * t + j] = x[i * t + j] / scale;
        for (int64_t j = i + 1; j < t; ++j) d[i * t + j] = fill;
      }
    });
  });
}

// Whether a contiguous [..., t, t] tensor is zero above every diagonal (a causal softmax's output is).
bool zero_above_diagonal(const Tensor& p) {
  if (!p.is_contiguous()) return false;
  const int64_t t = p.size(-1), count = p.numel() / std::max<int64_t>(t * t, 1);
  return dispatch_floating(p.dtype(), "tril_matmul", [&](auto tag) {
    using T = decltype(tag);
    const T* x = p.data_ptr<T>();
    for (int64_t m = 0; m < count; ++m, x += t * t)
      for (int64_t i = 0; i < t; ++i)
        for (int64_t j = i + 1; j < t; ++j)
          if (x[i * t + j] != T(0)) return false;
    return true;
  });
}

}  // namespace

Tensor causal_scores(const Tensor& q, const Tensor& k, double scale_divisor) {
  check_attention_operands("causal_scores", q, k, false);
  if (q.size(-1) != k.size(-1))
    throw std::invalid_argument(fmt::format("causal_scores: q and k need the same last dim, got {} and {}",
                                            q.shape_str(), k.shape_str()));
  const double neg_inf = -std::numeric_limits<double>::infinity();
  if (!skips_work(q))
    return (matmul(q, k.mT()) / scale_divisor).masked_fill(above_diagonal(q.size(-2), q.device()), neg_inf);

  Tensor out = product(q, k.mT(), MatmulStructure::lower_c);  // only entries on and below the diagonal
  scale_lower(out, out, scale_divisor, neg_inf);
  if (!needs_grad({q, k})) return out;
  return record("CausalScoresBackward", out, {q, k}, {q, k}, [q, k, scale_divisor](const Tensor& g_in) {
    // what masked_fill's backward and then the division's pass to the product: g / s, zero above the diagonal
    const Tensor g = g_in.contiguous();
    Tensor dscores = empty(g.shape(), g.dtype(), g.device());
    scale_lower(dscores, g, scale_divisor, 0.0);
    return Grads{product(dscores, k, MatmulStructure::lower_a),          // dq = dscores @ k
                 product(dscores.mT(), q, MatmulStructure::upper_a)};    // dk = dscoresᵀ @ q
  });
}

Tensor tril_matmul(const Tensor& p, const Tensor& v) {
  check_attention_operands("tril_matmul", p, v, true);
  if (!skips_work(p)) return matmul(p.tril(), v);

  Tensor lower;  // tril(p): the kernels read entries above the diagonal inside tiles that straddle it
  {
    NoGradGuard no_grad;
    lower = zero_above_diagonal(p) ? p : p.tril();
  }
  Tensor out = product(lower, v, MatmulStructure::lower_a);
  if (!needs_grad({p, v})) return out;
  return record("TrilMatmulBackward", out, {p, v}, {lower, v}, [lower, v](const Tensor& g) {
    Tensor dp = product(g, v.mT(), MatmulStructure::lower_c);  // g @ vᵀ on and below the diagonal...
    scale_lower(dp, dp, 1.0, 0.0);                              // ...and zero above: tril(p) ignores those
    return Grads{dp, product(lower.mT(), g, MatmulStructure::upper_a)};  // dv = tril(p)ᵀ @ g
  });
}

}  // namespace autograd
