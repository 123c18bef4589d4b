// llama.h — the decoder of today's open models (Llama 3, Qwen2, Qwen3, SmolLM2, Mistral), module by module,
// with Hugging Face's names so that named_parameters() are the tensor names of a downloaded folder:
//
//   model.embed_tokens.weight                               [vocab, hidden]
//   model.layers.N.input_layernorm.weight                   [hidden]            RMSNorm before attention
//   model.layers.N.self_attn.q_proj.weight (+ .bias)        [heads · head_dim, hidden]   (bias: Qwen2)
//   model.layers.N.self_attn.k_proj / v_proj.weight (+ .bias) [kv_heads · head_dim, hidden]
//   model.layers.N.self_attn.q_norm / k_norm.weight         [head_dim]          Qwen3 only
//   model.layers.N.self_attn.o_proj.weight                  [hidden, heads · head_dim]
//   model.layers.N.post_attention_layernorm.weight          [hidden]            RMSNorm before the MLP
//   model.layers.N.mlp.gate_proj / up_proj.weight           [intermediate, hidden]
//   model.layers.N.mlp.down_proj.weight                     [hidden, intermediate]
//   model.norm.weight                                       [hidden]
//   lm_head.weight                                          [vocab, hidden]     absent when tied
//
// A block differs from GPT-2's (nn/gpt.h) in four places, each a module here (docs/llama.md walks them):
//   LayerNorm → RMSNorm (no mean, no shift), learned positions → rotary embeddings applied to q and k,
//   GELU MLP → SwiGLU MLP, multi-head → grouped-query attention (fewer key/value heads than query heads).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "nn/language_model.h"
#include "nn/layers.h"
#include "nn/rotary.h"

namespace nn {

// The fields of Hugging Face's config.json that shape the model (LlamaConfig, Qwen2Config, Qwen3Config,
// MistralConfig all read into this). The defaults are SmolLM2-135M's.
struct LlamaConfig {
  int64_t vocab_size = 49152;
  int64_t hidden_size = 576;
  int64_t intermediate_size = 1536;
  int64_t num_hidden_layers = 30;
  int64_t num_attention_heads = 9;
  int64_t num_key_value_heads = 3;
  int64_t head_dim = 0;  // 0: hidden_size / num_attention_heads; Qwen3 sets its own (128 at width 1024, 16 heads)
  int64_t max_position_embeddings = 8192;
  double rms_norm_eps = 1e-5;
  double rope_theta = 100000.0;
  std::optional<RopeScaling> rope_scaling;  // Llama 3.1/3.2's "llama3" stretch of the long wavelengths
  bool tie_word_embeddings = true;          // lm_head is embed_tokens (no lm_head.weight)
  bool attention_bias = false;              // biases on q_proj, k_proj, v_proj (Qwen2)
  bool qk_norm = false;                     // RMSNorm over each head of q and k before RoPE (Qwen3)
  double initializer_range = 0.02;          // the spread of the initial weights (from scratch)

  int64_t head_size() const { return head_dim > 0 ? head_dim : hidden_size / num_attention_heads; }
  // The model's numbers, counted from the shapes (what `info` and docs/llama.md state without building it).
  int64_t parameter_count() const;
  // What the key/value cache holds a position: 2 · layers · kv_heads · head_dim numbers.
  int64_t cache_numbers_per_position() const { return 2 * num_hidden_layers * num_key_value_heads * head_size(); }
  // Throws std::invalid_argument naming the field that cannot make a model (a size below 1, heads that do
  // not divide into key/value groups, a width that does not split into heads when head_dim is not given,
  // an odd head size, which RoPE cannot pair, eps or theta not positive).
  void check() const;
};

// The norms (input_layernorm, post_attention_layernorm, q_norm, k_norm, norm) are nn::RMSNorm (nn/layers.h):
// x · rsqrt(mean(x²) + eps) · weight over the last dim, as Hugging Face's LlamaRMSNorm.

// Attention in which the heads·head_dim queries share kv_heads key/value heads: query head h reads
// key/value head h ÷ (heads ÷ kv_heads). Positions enter as a rotation of q and k (RoPE), so the scores
// q·k depend on the distance between two positions only; no position embedding is added to x.
class LlamaAttention : public Module {
 public:
  explicit LlamaAttention(const LlamaConfig& cfg);
  // x [B, T, hidden]; cos, sin [T, head_dim/2] for the T positions (rope_tables). With `cache_keys` and
  // `cache_values` ([B, kv_heads, capacity, head_dim]), the new keys and values are written at positions
  // past .. past+T−1 and the queries attend to every cached position as well. Causal either way.
  Tensor forward(const Tensor& x, const Tensor& cos, const Tensor& sin, Tensor* cache_keys = nullptr,
                 Tensor* cache_values = nullptr, int64_t past = 0) const;
  int64_t num_heads, num_kv_heads, head_dim;
  std::shared_ptr<Linear> q_proj, k_proj, v_proj, o_proj;
  std::shared_ptr<RMSNorm> q_norm, k_norm;  // null unless cfg.qk_norm
};

// down(silu(gate(x)) · up(x)): the gate, through SiLU, decides how much of each of the `intermediate`
// features of up(x) passes (a gated linear unit, "SwiGLU"); no biases.
class LlamaMLP : public Module {
 public:
  explicit LlamaMLP(const LlamaConfig& cfg);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::shared_ptr<Linear> gate_proj, up_proj, down_proj;
};

// Pre-norm residual block: x + attn(norm(x)), then x + mlp(norm(x)).
class LlamaDecoderLayer : public Module {
 public:
  LlamaDecoderLayer(const LlamaConfig& cfg, int64_t index = 0);
  Tensor forward(const Tensor& x, const Tensor& cos, const Tensor& sin, Tensor* cache_keys = nullptr,
                 Tensor* cache_values = nullptr, int64_t past = 0) const;
  std::shared_ptr<LlamaAttention> self_attn;
  std::shared_ptr<LlamaMLP> mlp;
  std::shared_ptr<RMSNorm> input_layernorm, post_attention_layernorm;

 private:
  std::string attention_line, mlp_line;  // "model.layers.0: x = x + self_attn(input_layernorm(x))", ...
};

// The stack under "model." (Hugging Face's LlamaModel): embed_tokens, layers, norm.
class LlamaDecoder : public Module {
 public:
  explicit LlamaDecoder(const LlamaConfig& cfg);
  std::shared_ptr<Embedding> embed_tokens;
  std::shared_ptr<ModuleList<LlamaDecoderLayer>> layers;
  std::shared_ptr<RMSNorm> norm;
};

// Hugging Face's LlamaForCausalLM: the decoder and the output head (lm_head, or embed_tokens when tied).
// Built outside a SkipInitGuard, it draws its initial values as Hugging Face's _init_weights does for a
// model trained from scratch: every Linear and Embedding weight from N(0, initializer_range), biases 0,
// norm weights 1 — from the project's generator, so manual_seed(s) first reproduces them. In train mode
// (nothing in it depends on the mode: it has no dropout).
class LlamaModel : public LanguageModel {
 public:
  explicit LlamaModel(const LlamaConfig& cfg);
  // ids int64 [B, T], T ≤ max_position_embeddings → logits [B, T, vocab]
  Tensor forward(const Tensor& ids) const override;
  Tensor operator()(const Tensor& ids) const { return forward(ids); }
  // The cache holds the kv_heads only: 2 · layers · kv_heads · head_dim numbers a position.
  KVCache make_kv_cache(int64_t batch = 1, int64_t capacity = 0) const override;
  Tensor forward_cached(const Tensor& ids, KVCache& cache) const override;
  int64_t context_length() const override { return cfg.max_position_embeddings; }
  int64_t vocab_size() const override { return cfg.vocab_size; }

  // cos, sin [count, head_dim/2] for positions start .. start+count−1, in `like`'s dtype and on its device.
  std::pair<Tensor, Tensor> rope(int64_t start, int64_t count, const Tensor& like) const;
  // The output head's weight: lm_head's, or embed_tokens' when tied.
  const Tensor& head_weight() const;

  LlamaConfig cfg;
  std::shared_ptr<LlamaDecoder> model;
  std::shared_ptr<Linear> lm_head;  // null when tied
  Tensor inv_freq;                  // [head_dim/2] RoPE's frequencies (not a parameter, not saved)

 private:
  void init_weights();
};

}  // namespace nn
