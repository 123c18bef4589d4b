// backend.h — the kernel fence: one entry per kernel, and the device registry.
//
// Ops (autograd/ops/*.cpp) decide shapes, dtypes and the graph; kernels (autograd/cpu/, gpu/) only move
// numbers. A kernel receives tensors whose shapes already agree (broadcast inputs arrive as expanded
// views with stride 0) and an output allocated by the op. Nothing here knows about autograd.
// Entries with a body are composites: backend.cpp writes them with the other entries, so a device
// only overrides them where it has something faster (the CPU does, for all of them).
#pragma once
#include <cstddef>
#include <string>

#include "autograd/tensor.h"

namespace autograd {

enum class UnaryOp {
  Neg, Exp, Log, Sqrt, Tanh, Relu, Abs,
  AddScalar, MulScalar, DivScalar, PowScalar, RSubScalar, RDivScalar,  // use the `scalar` argument
  ReluMask,                                                  // 1 where x > 0, else 0 (relu's backward)
  EqScalar, NeScalar, LtScalar, LeScalar, GtScalar, GeScalar  // comparisons → bool output
};
enum class BinaryOp { Add, Sub, Mul, Div, Eq, Ne, Lt, Le, Gt, Ge };
inline bool is_comparison(BinaryOp op) { return op >= BinaryOp::Eq; }
inline bool is_comparison(UnaryOp op) { return op >= UnaryOp::EqScalar; }

// What a product may take for granted about where its zeros are, to skip work that cannot change a bit
// (causal attention, ops/attention.cpp). The CPU's exact kernels use it; BLIS and the narrow-row path
// compute the full product, which gives the same entries when the promised zeros are there.
enum class MatmulStructure {
  dense,    // nothing
  lower_c,  // only C[i, j] with j <= i is wanted: tiles wholly above the diagonal are not computed
  lower_a,  // A is square and A[i, p] == 0 for p > i (a causal softmax, tril)
  upper_a,  // A is square and A[i, p] == 0 for p < i (the transpose of one)
};

struct AdamStep {
  double lr, beta1, beta2, eps, weight_decay;
  bool amsgrad;
  bool decoupled_weight_decay;  // AdamW: shrink the weights instead of adding wd·θ to the gradient
  int64_t step;                 // 1 on the first update
  // Each gradient is first multiplied by this, rounded to its type: clip_grad_norm_'s scaling, fused into
  // the update (optim::clip_coefficient, Adam::step(grad_scale)). 1 changes no bit.
  double grad_scale = 1;
};

// How a product of bfloat16 operands stores its float32 sums: `bias` (float32 [N], or undefined) added to
// every row's sums first, as addmm adds it; then into a float32 out as they are, or with `rounded` each
// rounded to bfloat16 and widened back (autocast's product, rounded as PyTorch's autocast output is, handed
// on in float32 in the same store); a bfloat16 out always gets them rounded once.
struct ProductStore {
  Tensor bias;
  bool rounded = false;
};

// Columns of Wᵀ in one panel of a weight packed for generation (pack_panels, ops/panels.cpp: [P, K, 16]).
constexpr int64_t kPanelWidth = 16;

class Backend {
 public:
  virtual ~Backend() = default;
  // Why this device cannot run anything (no driver, no GPU, ...); empty when it can. Asked once.
  virtual std::string unusable_reason() const { return {}; }
  virtual void* allocate(size_t nbytes) = 0;
  virtual void deallocate(void* ptr, size_t nbytes) = 0;

  // dst and src have the same shape; dtypes may differ (conversion).
  virtual void copy(const Tensor& src, const Tensor& dst) = 0;
  virtual void fill(const Tensor& dst, double value) = 0;
  virtual void unary(UnaryOp op, const Tensor& in, const Tensor& out, double scalar) = 0;
  virtual void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) = 0;
  virtual void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) = 0;
  // out = x with `value` where mask (bool, expanded to x's shape) is true.
  virtual void masked_fill(const Tensor& x, const Tensor& mask, double value, const Tensor& out);

  // out (contiguous) has the input's shape with the reduced dims of size 1, or fewer leading dims; gets the sums.
  virtual void sum_to(const Tensor& in, const Tensor& out) = 0;
  // max over one dim; out/indices have that dim removed-as-1 (keepdim layout). indices may be undefined.
  virtual void max_dim(const Tensor& in, int64_t dim, const Tensor& values, const Tensor& indices) = 0;

  // out[..., M, N] = a[..., M, K] @ b[..., K, N], all with identical batch shapes (expanded views allowed).
  virtual void matmul(const Tensor& a, const Tensor& b, const Tensor& out) = 0;
  // out[M, N] = bias + a[M, K] @ b[K, N], the bias ([N], contiguous) as the sum's starting value (addmm).
  virtual void addmm(const Tensor& bias, const Tensor& a, const Tensor& b, const Tensor& out);
  // out [M, N] (float32, any strides) = a [M, K] @ b [K, N] (+ bias [N], float32, or undefined) for bfloat16
  // a and b, each sum rounded to bfloat16 and widened back: autocast's product handed on in float32
  // (ops/autocast_linear.cpp). This default makes the bfloat16 product, then widens it.
  virtual void bfloat16_product_widened(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out);

  // out [M, N] = x [M, K] · Wᵀ (+ bias [N], or undefined) for W [N, K] packed in panels [P, K, 16]
  // (ops/panels.cpp: panel i holds Wᵀ's columns 16i .. 16i + 15, zeros past N). By default W is unpacked and
  // multiplied as linear multiplies it (addmm, or matmul); the CPU reads one row's panels as runs of memory.
  virtual void panel_linear(const Tensor& x, const Tensor& panels, const Tensor& bias, const Tensor& out);

  // Causal attention (ops/attention.cpp). A device without these kernels says false, and the ops use
  // the dense composition instead; the three entries below are only called where it says true.
  virtual bool has_causal_kernels() const { return false; }
  // out = a @ b, told where a's or out's zeros are (see MatmulStructure).
  virtual void matmul_structured(const Tensor& a, const Tensor& b, const Tensor& out, MatmulStructure structure);
  // dst = src / divisor on and below the diagonal of every [t, t] matrix, `above` above it (contiguous).
  virtual void causal_scale(const Tensor& dst, const Tensor& src, double divisor, double above);
  // out (contiguous [..., t, t]) = a @ b on and below the diagonal, divided by divisor, `above` past it:
  // by default matmul_structured (lower_c) and then causal_scale; a device may do both in one pass.
  virtual void causal_product(const Tensor& a, const Tensor& b, const Tensor& out, double divisor, double above);
  // whether a [..., t, t] tensor is zero above every diagonal
  virtual bool zero_above_diagonal(const Tensor& p);

  // Scaled dot-product attention in O(T·d) memory (ops/flash_attention.cpp). A device without these
  // kernels says false, and the op runs the composition (matmul, softmax) instead. q [..., T, d],
  // k [..., S, d], v [..., S, dv] share their batch dims (expanded views allowed) and have unit stride in
  // their last dim; causal: row i sees keys j <= i. Writes out [..., T, dv] (contiguous) = softmax(q kᵀ·scale) v
  // and lse [..., T] (contiguous) = each row's log Σⱼ exp(scoreᵢⱼ), all backward needs besides q, k, v, out.
  virtual bool has_flash_attention() const { return false; }
  virtual void flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale,
                               const Tensor& out, const Tensor& lse);
  // The gradients for grad_out [..., T, dv] (unit stride in its last dim): dq, dk, dv (contiguous, the
  // batch dims of out) are overwritten, not added to.
  virtual void flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                        const Tensor& lse, const Tensor& grad_out, bool causal, double scale,
                                        const Tensor& dq, const Tensor& dk, const Tensor& dv);

  // The gradients of softmax, log_softmax, gelu, layer_norm, silu, rms_norm, nll_loss and the flash attention
  // are entries too (*_backward): each formula in one pass over its tensors, called by the op's backward function.
  virtual void softmax(const Tensor& in, int64_t dim, bool log, const Tensor& out) = 0;
  // grad_in for y = softmax (log=false): y * (g - sum(g*y)); for y = log_softmax: g - exp(y) * sum(g)
  virtual void softmax_backward(const Tensor& y, const Tensor& grad_out, int64_t dim, bool log,
                                const Tensor& grad_in) = 0;

  // out[i, :] = weight[index[i], :]; index is int64 and already range-checked.
  virtual void index_select_rows(const Tensor& weight, const Tensor& index, const Tensor& out) = 0;
  // grad_weight[index[i], :] += grad[i, :] (repeated indices accumulate).
  virtual void index_add_rows(const Tensor& grad, const Tensor& index, const Tensor& grad_weight) = 0;
  // The same rows added into an existing gradient (contiguous) as `grad_weight += dense` adds the dense
  // gradient index_add_rows makes from zeros, but touching only the rows in `index`: each distinct row's sum
  // made from zero in the order of the indices (the dense gradient's bits), then added to that row. The
  // base class groups the indices on the host and calls index_add_rows twice. True when done; a device may
  // return false, and the caller then adds a dense gradient.
  virtual bool add_rows_into_gradient(const Tensor& grad, const Tensor& index, const Tensor& grad_weight);
  // out[i] = values[i, index[i]] for rows whose index is not `skip` (those get 0).
  virtual void gather_rows(const Tensor& values, const Tensor& index, int64_t skip, const Tensor& out) = 0;
  // grad_values[i, index[i]] += grad[i] (index already range-checked, `skip` rows untouched).
  virtual void scatter_rows(const Tensor& grad, const Tensor& index, int64_t skip, const Tensor& grad_values) = 0;

  // The flat position of the first index (int64, contiguous) outside [0, limit) that is not `allowed`;
  // -1 when there is none.
  virtual int64_t find_index_outside(const Tensor& index, int64_t limit, int64_t allowed);
  // out (0-d) = mean of −log_probs[i, targets[i]] ([N, C], [N], contiguous) over the rows whose target is
  // not ignore_index, added in PyTorch's order; returns how many rows that is.
  virtual int64_t nll_loss(const Tensor& log_probs, const Tensor& targets, int64_t ignore_index, const Tensor& out);
  // grad_in[i, targets[i]] += −grad / count (grad 0-d, grad_in zero-filled [N, C]) on rows not ignored.
  virtual void nll_loss_backward(const Tensor& grad, const Tensor& targets, int64_t ignore_index, int64_t count,
                                 const Tensor& grad_in);

  // The GPT's kernels (ops/norm.cpp, ops/nn.cpp), in PyTorch 1.13's order of operations.
  // A device without its own runs the CPU's on host copies (backend.cpp): the same bits, slowly.
  //
  // Layer normalisation of each row of x [M, N] (contiguous): y = (x − mean)·rstd·weight + bias with
  // rstd = 1/√(var + eps), var biased; weight and bias ([N], contiguous) may each be undefined (1 and 0).
  // mean and rstd ([M]) are written for the backward.
  virtual void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y,
                          const Tensor& mean, const Tensor& rstd);
  // Its gradients for grad_y [M, N] (contiguous); each of grad_x, grad_weight, grad_bias is written if defined.
  virtual void layer_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                   const Tensor& weight, const Tensor& grad_x, const Tensor& grad_weight,
                                   const Tensor& grad_bias);
  // y = gelu(x) (same shapes): the tanh approximation if `tanh`, else x·Φ(x) with erf.
  virtual void gelu(const Tensor& x, bool tanh, const Tensor& y);
  virtual void gelu_backward(const Tensor& grad_y, const Tensor& x, bool tanh, const Tensor& grad_x);
  // out[i] = the variance (or with take_sqrt the standard deviation) of row i of x [R, n] (contiguous),
  // dividing by n − correction. all: x is the whole tensor as one row, and PyTorch's all-reduce form is
  // used (a two-pass sum around the float mean) instead of the per-row Welford pass.
  virtual void var(const Tensor& x, double correction, bool take_sqrt, bool all, const Tensor& out);
  // out (0-d) = √(Σ x²) over a contiguous x.
  virtual void norm2(const Tensor& x, const Tensor& out);
  // out[i] (1-D, one entry per tensor) = norm2 of xs[i], each contiguous, all of out's dtype: each entry
  // has norm2's bits. The base class runs norm2 on each in turn; the CPU backend spreads the tensors over
  // its threads (clip_grad_norm_'s pass over every gradient is bound by memory, and one core cannot draw
  // all of the machine's bandwidth).
  virtual void norm2_each(const std::vector<Tensor>& xs, const Tensor& out);

  // The Llama family's kernels (ops/llama.cpp), in PyTorch 1.13's order of operations. A device without
  // its own runs the CPU's on host copies (backend.cpp), as for the GPT's.
  //
  // y = silu(x) = x / (1 + exp(−x)) (x, y contiguous, same shape).
  virtual void silu(const Tensor& x, const Tensor& y);
  // grad_x = grad_y · σ(x) · (1 + x·(1 − σ(x))), σ(x) = 1 / (1 + exp(−x)) (all contiguous).
  virtual void silu_backward(const Tensor& grad_y, const Tensor& x, const Tensor& grad_x);
  // RMS normalisation of each row of x [M, N] (contiguous): rstd = 1/√(Σ x²/N + eps), y = weight·(x·rstd);
  // weight ([N], contiguous) may be undefined (1). rstd ([M]) is written for the backward.
  virtual void rms_norm(const Tensor& x, const Tensor& weight, double eps, const Tensor& y, const Tensor& rstd);
  // Its gradients for grad_y [M, N] (contiguous); grad_x and grad_weight are each written if defined.
  virtual void rms_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& rstd, const Tensor& weight,
                                 const Tensor& grad_x, const Tensor& grad_weight);
  // Rotary position embedding, Hugging Face's rotate_half pairing: x [R, T, d] (contiguous, d = 2h),
  // cos and sin [T, h] (contiguous), out [R, T, d]. For j < h, with c = cos[t, j] and s = sin[t, j]:
  //   out[j] = x[j]·c − x[j+h]·s,   out[j+h] = x[j+h]·c + x[j]·s.
  // inverse: rotate by the opposite angle (s → −s), which is the rotation's gradient.
  virtual void rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse,
                                const Tensor& out);

  // One Adam/AdamW step for one parameter, fused into a single pass (see optim/adam.cpp for the math).
  // All tensors are contiguous with the parameter's shape; max_exp_avg_sq is undefined unless amsgrad.
  virtual void adam_update(const AdamStep& step, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                           const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq) = 0;
  // The same step, and the parameter's new values rounded into `rounded` (bfloat16, contiguous, its shape):
  // the weight's copy that autocast keeps (autocast.h), written in the same pass where the device can (the
  // CPU's loop). This default updates, then rounds in a second pass.
  virtual void adam_update_rounding(const AdamStep& step, const Tensor& param, const Tensor& grad,
                                    const Tensor& exp_avg, const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq,
                                    const Tensor& rounded);

  // moves a contiguous tensor between this device and the CPU
  virtual void copy_to_cpu(const Tensor& src, void* dst, size_t nbytes) = 0;
  virtual void copy_from_cpu(const void* src, const Tensor& dst, size_t nbytes) = 0;
};

Backend& backend(Device device);
// W [N, K] back from its panels [P, K, 16] (one copy on `device`, contiguous): what a product without a
// kernel for panels multiplies (Backend::panel_linear), and autograd::unpack_panels.
Tensor unpacked_weight(Backend& device, const Tensor& panels, int64_t out_features);
void register_backend(DeviceType type, Backend* backend);  // gpu/ calls this at start-up
// Whether this build has a backend for the device type, usable or not (has_backend(device) says usable).
bool has_registered_backend(DeviceType type);

// dst = src (same shape and dtype, both contiguous) where the two live on different devices.
void copy_across_devices(const Tensor& src, const Tensor& dst);

}  // namespace autograd
