// attention.h — the attention layers of the two seed documents, each reading like its Python.
//
//   SelfAttention_v1, SelfAttention_v2, CausalAttention, MultiHeadAttentionWrapper, MultiHeadAttention
//       chapter 3 of "Build a Large Language Model (From Scratch)", as quoted by "Attention from Scratch"
//   WorkshopMultiHeadAttention      the PyTorch workshop's MultiHeadAttention (W_q, W_k, W_v, W_o)
//   MultiheadAttention              torch.nn.MultiheadAttention (packed in_proj_weight, batch_first)
#pragma once
#include <optional>
#include <string>
#include <utility>

#include "nn/layers.h"

namespace nn {

// How a causal attention layer (MultiHeadAttention, MiniSelfAttention) computes softmax(q kᵀ/√d, causal) v.
enum class AttentionKernel {
  // The flash op where it pays and no one expects PyTorch's bits: under Numerics::fast, on the CPU, past
  // kFlashAttentionAbove positions and past the head dim, and (MultiHeadAttention) with no dropout on the
  // weights. Otherwise the composed ops, exactly as before.
  automatic,
  composed,  // always the composed ops (scores, mask, softmax, product): the [T, T] weights exist
  flash,     // always autograd::scaled_dot_product_attention: O(T·d) memory, the weights never made
};
// Above this many positions `automatic` may take the flash op. Below it the [T, T] matrices are small
// (128 × 128 per head), the composed graph reads like the Python, and the parity tests and seed programs
// (all at 16 positions or fewer) run their usual ops in either numerics. Measured (Intel Xeon, fast
// numerics, D 256): at T 128 the composed ops were faster (d256h4 95 against 108 ms a step, d256h1 71
// against 86 ms); at T 256 and 512 with 4 heads the flash op was (57 against 64 ms, 117 against 157 ms).
inline constexpr int64_t kFlashAttentionAbove = 128;
// Whether `kernel` means the flash op for t positions of x with heads of head_dim (`weights_dropout`:
// dropout on the attention weights would be applied, which the flash op cannot do). automatic also wants
// t > head_dim: per head the flash op keeps its output (t × head_dim) for backward where the composition
// keeps its weights (t × t), so it saves memory only past t = head_dim (docs/autograd.md; the time it
// takes is in docs/performance.md).
bool uses_flash_attention(AttentionKernel kernel, int64_t t, int64_t head_dim, const autograd::Tensor& x,
                          bool weights_dropout);
// "automatic", "composed" or "flash"; and back (anything else: std::invalid_argument naming `what`).
const char* attention_kernel_name(AttentionKernel kernel);
AttentionKernel parse_attention_kernel(const std::string& text, const std::string& what = "attention");

// Weights are raw matrices drawn from U[0, 1) (torch.rand), multiplied as x @ W.
class SelfAttention_v1 : public Module {
 public:
  SelfAttention_v1(int64_t d_in, int64_t d_out);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  Tensor W_query, W_key, W_value;
};

class SelfAttention_v2 : public Module {
 public:
  SelfAttention_v2(int64_t d_in, int64_t d_out, bool qkv_bias = false);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  // The attention weights of the last forward (for printing, as the book does).
  Tensor attention_weights(const Tensor& x) const;
  std::shared_ptr<Linear> W_query, W_key, W_value;
};

class CausalAttention : public Module {
 public:
  CausalAttention(int64_t d_in, int64_t d_out, int64_t context_length, double dropout, bool qkv_bias = false);
  Tensor forward(const Tensor& x) const;  // x: [batch, tokens, d_in]
  Tensor operator()(const Tensor& x) const { return forward(x); }
  int64_t d_out;
  std::shared_ptr<Linear> W_query, W_key, W_value;
  std::shared_ptr<Dropout> dropout;
  Tensor mask;  // buffer: triu(ones(context, context), diagonal=1) — 1 above the diagonal = the future
};

// Several CausalAttention heads side by side, their outputs concatenated on the last dim.
class MultiHeadAttentionWrapper : public Module {
 public:
  MultiHeadAttentionWrapper(int64_t d_in, int64_t d_out, int64_t context_length, double dropout, int64_t num_heads,
                            bool qkv_bias = false);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::shared_ptr<ModuleList<CausalAttention>> heads;
};

// One projection split into heads (the book's efficient version), with an output projection.
class MultiHeadAttention : public Module {
 public:
  MultiHeadAttention(int64_t d_in, int64_t d_out, int64_t context_length, double dropout, int64_t num_heads,
                     bool qkv_bias = false);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  int64_t d_out, num_heads, head_dim;
  std::shared_ptr<Linear> W_query, W_key, W_value, out_proj;
  std::shared_ptr<Dropout> dropout;
  Tensor mask;
  // The book's ops by default; the flash op past kFlashAttentionAbove tokens (and past head_dim) under fast
  // numerics when no dropout applies (see AttentionKernel). flash with dropout active on the weights is refused.
  AttentionKernel attention = AttentionKernel::automatic;
};

// The workshop's multi-head attention: biased W_q/W_k/W_v/W_o, an optional mask (0 = blocked).
class WorkshopMultiHeadAttention : public Module {
 public:
  WorkshopMultiHeadAttention(int64_t d_model, int64_t num_heads);
  Tensor forward(const Tensor& x, const Tensor& mask = Tensor()) const;
  Tensor operator()(const Tensor& x, const Tensor& mask = Tensor()) const { return forward(x, mask); }
  int64_t h, d_k;
  std::shared_ptr<Linear> W_q, W_k, W_v, W_o;
};

// torch.nn.MultiheadAttention(embed_dim, num_heads, batch_first=True) without dropout:
// Q, K and V come from one packed weight [3E, E] (rows: query, key, value) and bias [3E].
class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, bool batch_first = true);
  // Returns (output [B, T, E], attention weights averaged over heads [B, T, S]).
  std::pair<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask = Tensor()) const;
  std::pair<Tensor, Tensor> operator()(const Tensor& q, const Tensor& k, const Tensor& v,
                                       const Tensor& attn_mask = Tensor()) const {
    return forward(q, k, v, attn_mask);
  }
  int64_t embed_dim, num_heads, head_dim;
  bool batch_first;
  Tensor in_proj_weight, in_proj_bias;
  std::shared_ptr<Linear> out_proj;
};

}  // namespace nn
