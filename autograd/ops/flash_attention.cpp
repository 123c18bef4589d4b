// ops/flash_attention.cpp — scaled dot-product attention in O(T·d) memory (FlashAttention).
//
//   scaled_dot_product_attention(q, k, v, causal, scale)  ==  softmax(q @ kᵀ · scale [masked]) @ v
//
// q [..., T, d], k [..., S, d], v [..., S, dv] → [..., T, dv]; the leading dims broadcast, scale defaults
// to 1/√d, and causal masks key j for query row i when j > i (PyTorch 2's is_causal: the mask aligned to
// the top left, so with T == S it is the usual causal attention). Written as the composition, the [T, S]
// scores and probabilities would be made and kept for backward: O(T²) memory per head. The CPU kernel
// (cpu/kernels/flash_attention.cpp, algorithm in docs/autograd.md) walks the keys in blocks with an online softmax
// and keeps, for backward, only q, k, v, the output and one number per query row, lse = log Σⱼ exp(sᵢⱼ);
// the backward recomputes the probabilities block by block from them. One node,
// ScaledDotProductAttentionBackward, stands for the whole composition.
//
// The values agree with the composed ops to rounding, not bit for bit: the kernel adds a row's terms in
// another order (block by block, rescaled) and multiplies the scores by the scale rather than dividing by
// √d. Under Numerics::exact it rounds every multiply and add on its own; under Numerics::fast it fuses
// them (FMA). Either way the result does not depend on the thread count.
// A device without the kernel (has_flash_attention() false: the CUDA backend) runs the composition.
#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "autograd/autocast.h"
#include "autograd/backend.h"
#include "autograd/ops.h"
#include "autograd/ops/checks.h"

namespace autograd {

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";

// The leading dims the three share after broadcasting; throws naming all three shapes if they do not fit.
Shape check_operands(const Tensor& q, const Tensor& k, const Tensor& v) {
  check_floating(q, kOp);
  check_same_dtype(q, k, kOp);
  check_same_dtype(q, v, kOp);
  check_same_device(q, k, kOp);
  check_same_device(q, v, kOp);
  auto refuse = [&](const std::string& why) {
    throw std::invalid_argument(fmt::format("{}: expected q [..., T, d], k [..., S, d] and v [..., S, dv] with "
                                            "broadcastable leading dims; {}: got q {}, k {}, v {}",
                                            kOp, why, q.shape_str(), k.shape_str(), v.shape_str()));
  };
  if (q.dim() < 2 || k.dim() < 2 || v.dim() < 2) refuse("each needs at least 2 dims");
  if (q.size(-1) != k.size(-1)) refuse("q and k differ in d (their last dim)");
  if (k.size(-2) != v.size(-2)) refuse("k and v differ in S (the number of keys)");
  auto leading = [](const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); };
  try {
    return broadcast_shapes(broadcast_shapes(leading(q), leading(k), kOp), leading(v), kOp);
  } catch (const std::invalid_argument&) {
    refuse("the leading dims do not broadcast");
  }
  return {};
}

Shape with_last(Shape batch, std::initializer_list<int64_t> last) {
  for (int64_t n : last) batch.push_back(n);
  return batch;
}

// The kernel reads rows with unit stride (any row and batch strides): copy only what lacks it.
Tensor unit_stride_rows(const Tensor& x) { return x.size(-1) <= 1 || x.strides().back() == 1 ? x : x.contiguous(); }

// What the op computes, written with the ordinary ops: for devices without the kernel.
Tensor composed_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale) {
  Tensor scores = matmul(q, k.mT()) * scale;
  if (causal)
    scores = scores.masked_fill(ones({q.size(-2), k.size(-2)}, DType::Bool, q.device()).triu(1),
                                -std::numeric_limits<double>::infinity());
  return matmul(softmax(scores, -1), v);
}

}  // namespace

// With s = q·kᵀ·scale (−∞ where j > i if causal), P = exp(s − lse) = softmax(s) and out = P·v:
//   dv = Pᵀ·g,   dP = g·vᵀ,   dS = P ⊙ (dP − Σ_row g ⊙ out)   (softmax's backward),
//   dq = dS·k·scale,   dk = dSᵀ·q·scale
// in one call of the device's kernel, which recomputes P block by block from q, k and lse and never stores a
// [T, S] matrix (FlashAttention-2's backward; reference/attention.cpp has it row by row). The gradients come
// in the broadcast batch shape of the saved operands, and are summed down to each input's shape.
struct ScaledDotProductAttentionBackward final : BackwardFunction {
  Tensor q, k, v, out, lse;  // the operands as the kernel read them (batch dims expanded), the output, log Σ exp
  bool causal;
  double scale;
  Shape q_shape, k_shape, v_shape;
  ScaledDotProductAttentionBackward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                    const Tensor& lse, bool causal, double scale, const Shape& q_shape,
                                    const Shape& k_shape, const Shape& v_shape)
      : q(q), k(k), v(v), out(out), lse(lse), causal(causal), scale(scale), q_shape(q_shape), k_shape(k_shape),
        v_shape(v_shape) {}
  Grads apply(const Tensor& g) override {
    Tensor dq = empty(q.shape(), q.dtype(), q.device());
    Tensor dk = empty(k.shape(), k.dtype(), k.device());
    Tensor dv = empty(v.shape(), v.dtype(), v.device());
    backend(q.device()).flash_attention_backward(q, k, v, out, lse, unit_stride_rows(g), causal, scale, dq, dk, dv);
    return {dq.sum_to(q_shape), dk.sum_to(k_shape), dv.sum_to(v_shape)};
  }
};

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                                    std::optional<double> scale) {
  const Shape batch = check_operands(q, k, v);
  if (scale && !std::isfinite(*scale))
    throw std::invalid_argument(fmt::format("{}: scale must be finite, got {} (q {})", kOp, *scale, q.shape_str()));
  const double s = scale.value_or(1.0 / std::sqrt(double(q.size(-1))));
  if (autocast_applies(q, k) && v.dtype() == DType::Float32)  // bfloat16 operands, float32 sums (autocast.h)
    return scaled_dot_product_attention(autocast_operand(q), autocast_operand(k), autocast_operand(v), causal, s)
        .to(DType::Float32);
  if (!backend(q.device()).has_flash_attention()) return composed_attention(q, k, v, causal, s);

  const int64_t T = q.size(-2), S = k.size(-2), d = q.size(-1), dv = v.size(-1);
  Tensor qx, kx, vx;  // the operands as the kernel reads them: unit-stride rows, the batch dims expanded
  {
    NoGradGuard no_grad;
    qx = unit_stride_rows(q).expand(with_last(batch, {T, d}));
    kx = unit_stride_rows(k).expand(with_last(batch, {S, d}));
    vx = unit_stride_rows(v).expand(with_last(batch, {S, dv}));
  }
  const Shape out_shape = with_last(batch, {T, dv});
  checked_nbytes(out_shape, q.dtype(), kOp);
  Tensor out = empty(out_shape, q.dtype(), q.device());
  Tensor lse = empty(with_last(batch, {T}), q.dtype(), q.device());  // log Σⱼ exp(sᵢⱼ) per query row
  backend(q.device()).flash_attention(qx, kx, vx, causal, s, out, lse);
  if (!needs_grad({q, k, v})) return out;

  const Tensor saved_out = out.detach();  // the output owns the node: keep a handle without its history
  return record("ScaledDotProductAttentionBackward", out, {q, k, v}, {qx, kx, vx, saved_out, lse},
                ScaledDotProductAttentionBackward(qx, kx, vx, saved_out, lse, causal, s, q.shape(), k.shape(),
                                                  v.shape()));
}

}  // namespace autograd
