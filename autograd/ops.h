// ops.h — every differentiable (and a few non-differentiable) operation as a free function.
// Each is implemented in autograd/ops/<family>.cpp with its backward closure beside its forward code.
#pragma once
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "autograd/node.h"
#include "autograd/tensor.h"

namespace autograd {

// ---- elementwise, with NumPy broadcasting (ops/elementwise.cpp) ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double s);
Tensor sub(const Tensor& a, double s);
Tensor rsub(double s, const Tensor& a);  // s - a
Tensor mul(const Tensor& a, double s);
Tensor div(const Tensor& a, double s);
Tensor rdiv(double s, const Tensor& a);  // s / a
Tensor neg(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor relu(const Tensor& a);
Tensor abs(const Tensor& a);
Tensor pow(const Tensor& a, double exponent);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, double b);

// comparisons give bool tensors and no gradient
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double s);
Tensor ne(const Tensor& a, double s);
Tensor lt(const Tensor& a, double s);
Tensor le(const Tensor& a, double s);
Tensor gt(const Tensor& a, double s);
Tensor ge(const Tensor& a, double s);

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// ---- reductions (ops/reduce.cpp) ----
Tensor sum(const Tensor& a);
Tensor sum(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor sum(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim);
Tensor sum_to(const Tensor& a, const Shape& shape);
Tensor mean(const Tensor& a);
Tensor mean(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor max(const Tensor& a);
std::pair<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& a);
Tensor argmax(const Tensor& a, int64_t dim, bool keepdim = false);
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);
bool equal(const Tensor& a, const Tensor& b);  // same shape and exactly the same values

// ---- linear algebra (ops/matmul.cpp) ----
Tensor matmul(const Tensor& a, const Tensor& b);

// ---- causal attention without the masked half (ops/attention.cpp) ----
// The same bits as the dense ops, with the masked half of the products (forward and backward) skipped
// on the CPU: causal_scores(q, k, s) == (q @ kᵀ / s).masked_fill(above the diagonal, -inf) for q, k
// [..., T, d]; tril_matmul(p, v) == tril(p) @ v for p [..., T, T], v [..., T, d] (== p @ v for the
// softmax of causal scores).
Tensor causal_scores(const Tensor& q, const Tensor& k, double scale_divisor);
Tensor tril_matmul(const Tensor& p, const Tensor& v);

// ---- scaled dot-product attention in O(T·d) memory (ops/flash_attention.cpp) ----
// PyTorch 2's F.scaled_dot_product_attention without a mask or dropout: softmax(q kᵀ·scale) v for
// q [..., T, d], k [..., S, d], v [..., S, dv] → [..., T, dv], the leading dims broadcast. causal: row i
// sees keys j <= i only (PyTorch's is_causal, the mask aligned to the top left). scale defaults to 1/√d.
// On the CPU it is FlashAttention: the [T, S] scores are never stored, forward or backward; the values
// agree with the composed ops to rounding, not bit for bit (another order of additions).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal = false,
                                    std::optional<double> scale = std::nullopt);

// ---- shapes (ops/shape.cpp) ----
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& t, int64_t chunks, int64_t dim = 0);
// Views of `t` along `dim`: pieces of `size` (the last one shorter if needed), or of the given sizes.
std::vector<Tensor> split(const Tensor& t, int64_t size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& t, const std::vector<int64_t>& sizes, int64_t dim = 0);
Tensor flatten(const Tensor& t, int64_t start_dim = 0, int64_t end_dim = -1);  // torch.flatten
Tensor tril(const Tensor& t, int64_t diagonal = 0);
Tensor triu(const Tensor& t, int64_t diagonal = 0);

// ---- neural-network ops (ops/nn.cpp) ----
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
Tensor embedding(const Tensor& weight, const Tensor& indices);
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100);
Tensor nll_loss(const Tensor& log_probs, const Tensor& targets, int64_t ignore_index = -100);
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// linear of float32 x, weight and bias under autocast (autocast.h), as one node with the composed graph's
// bits: the roundings to bfloat16 and the widenings back made inside the products (ops/autocast_linear.cpp).
// linear calls it under autocast; it rounds whether or not a guard is active.
Tensor autocast_linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// approximate: "none" (x·Φ(x), with erf) or "tanh" (PyTorch's tanh approximation)
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
// linear(gelu(h, approximate), weight, bias) with the same bits, as one node that keeps h but not gelu(h)
// (recomputed in backward): the GPT's feed-forward keeps its widest activation once instead of twice.
Tensor linear_after_gelu(const Tensor& h, const Tensor& weight, const Tensor& bias = Tensor(),
                         const std::string& approximate = "none");

// ---- a Linear's weight laid out for generation (ops/panels.cpp) ----
// W [out, in] as panels [ceil(out / 16), in, 16]: panel i holds Wᵀ's columns 16i .. 16i + 15, p by p (zeros
// past `out`), so that one row times W reads each panel as one run of memory (a cached generation step).
Tensor pack_panels(const Tensor& weight);
// W back from its panels, exactly.
Tensor unpack_panels(const Tensor& panels, int64_t out_features);
// linear(x, W, bias) for W packed by pack_panels: in fast numerics the same bits; no gradient (a packed
// weight only generates: refused when grad mode is on and an input requires grad).
Tensor panel_linear(const Tensor& x, const Tensor& panels, int64_t out_features, const Tensor& bias = Tensor());
// Rows of a table packed by pack_panels (a head tied to its embedding): out[..., :] = W[indices[...], :], no gradient.
Tensor panel_rows(const Tensor& panels, const Tensor& indices, int64_t num_rows);
// ---- the Llama family's ops (ops/llama.cpp), rounded as PyTorch 1.13's CPU kernels and Hugging Face's modules ----
// x·σ(x) (torch.nn.functional.silu): the gate of the SwiGLU feed-forward, down(silu(gate(x))·up(x)).
Tensor silu(const Tensor& x);
// Over the last dim: x · rsqrt(mean(x²) + eps) · weight (weight [D] or undefined), as Hugging Face's
// LlamaRMSNorm computes it (in x's own float32 or float64).
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps);
// Rotary position embedding in Hugging Face's rotate_half convention: x [..., T, d] (d even, h = d/2),
// cos and sin [T, h] (x's dtype and device; no gradient; nn/rotary.h makes them). For j < h:
//   y[j] = x[j]·cos[t, j] − x[j+h]·sin[t, j],   y[j+h] = x[j+h]·cos[t, j] + x[j]·sin[t, j]
Tensor rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin);

// ---- normalisation and statistics (ops/norm.cpp), rounded as PyTorch 1.13's CPU kernels ----
// Normalises over the trailing dims `normalized_shape`; weight and bias (that shape) may be undefined.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
// (y, mean, rstd): mean and rstd have x's shape with the normalized dims of size 1.
std::tuple<Tensor, Tensor, Tensor> native_layer_norm(const Tensor& x, const Shape& normalized_shape,
                                                     const Tensor& weight, const Tensor& bias, double eps);
// unbiased: divide by n − 1 (Bessel's correction), else by n. Without a dim: over every element.
Tensor var(const Tensor& x, int64_t dim, bool unbiased = true, bool keepdim = false);
Tensor var(const Tensor& x, bool unbiased = true);
Tensor std(const Tensor& x, int64_t dim, bool unbiased = true, bool keepdim = false);
Tensor std(const Tensor& x, bool unbiased = true);
// The 2-norm of all elements, √(Σ x²) (torch.linalg.vector_norm(x), = torch.norm(x, 2.0)).
Tensor vector_norm(const Tensor& x);
// The 2-norm of each tensor, as a 1-D tensor: stack([vector_norm(x) for x in xs]) (PyTorch's
// torch._foreach_norm, stacked), each entry with vector_norm's bits. One floating dtype and one device for
// all. Without gradients the norms run in one backend call, which on the CPU spreads them over the threads.
Tensor vector_norms(const std::vector<Tensor>& xs);

// ---- operators ----
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator+(const Tensor& a, double s) { return add(a, s); }
inline Tensor operator-(const Tensor& a, double s) { return sub(a, s); }
inline Tensor operator*(const Tensor& a, double s) { return mul(a, s); }
inline Tensor operator/(const Tensor& a, double s) { return div(a, s); }
inline Tensor operator+(double s, const Tensor& a) { return add(a, s); }
inline Tensor operator-(double s, const Tensor& a) { return rsub(s, a); }
inline Tensor operator*(double s, const Tensor& a) { return mul(a, s); }
inline Tensor operator/(double s, const Tensor& a) { return rdiv(s, a); }
inline Tensor operator-(const Tensor& a) { return neg(a); }
inline Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
inline Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
inline Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
inline Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
inline Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
inline Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
inline Tensor operator==(const Tensor& a, double s) { return eq(a, s); }
inline Tensor operator!=(const Tensor& a, double s) { return ne(a, s); }
inline Tensor operator<(const Tensor& a, double s) { return lt(a, s); }
inline Tensor operator<=(const Tensor& a, double s) { return le(a, s); }
inline Tensor operator>(const Tensor& a, double s) { return gt(a, s); }
inline Tensor operator>=(const Tensor& a, double s) { return ge(a, s); }
inline Tensor operator&&(const Tensor&, const Tensor&) = delete;  // use mul on bool/float tensors instead

}  // namespace autograd
