// gpt.h — the GPT of chapter 4 of "Build a Large Language Model (From Scratch)": LayerNorm, GELU,
// FeedForward, TransformerBlock (pre-LN) and GPTModel, with the book's names, so state_dict keys read
// as in Python ("trf_blocks.0.att.W_query.weight", "final_norm.scale"). Constructed after
// manual_seed(s), a model draws its initial values in torch's order and holds torch's numbers.
// LayerNorm and GELU are the fused ops (layer_norm, gelu), which round as PyTorch's kernels do.
#pragma once
#include <memory>
#include <string>
#include <utility>

#include "nn/attention.h"
#include "nn/language_model.h"
#include "nn/layers.h"

namespace nn {

struct GPTConfig {
  int64_t vocab_size = 50257;
  int64_t context_length = 1024;
  int64_t emb_dim = 768;
  int64_t n_heads = 12;
  int64_t n_layers = 12;
  double drop_rate = 0.1;
  bool qkv_bias = false;
};

// scale·(x − mean)/√(var + eps) + shift over the last dim (biased var), scale = 1, shift = 0 at first.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t emb_dim, double eps = 1e-5);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  double eps;
  Tensor scale, shift;
};

// ½x·(1 + tanh(√(2/π)·(x + 0.044715x³))) — the book's approximation (gelu(x, "tanh")).
class GELU : public Module {
 public:
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
};

// Linear(D, 4D) → GELU → Linear(4D, D), registered as "layers.0", "layers.1", "layers.2".
class FeedForward : public Module {
 public:
  explicit FeedForward(const GPTConfig& cfg);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::shared_ptr<Linear> expand, contract;  // layers.0 and layers.2
  std::shared_ptr<GELU> gelu;                // layers.1
};

// x + drop(att(norm1(x))), then x + drop(ff(norm2(x))).
class TransformerBlock : public Module {
 public:
  // `index`: its place in GPTModel's trf_blocks, for the call-site labels traces and graphs show.
  explicit TransformerBlock(const GPTConfig& cfg, int64_t index = 0);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::shared_ptr<MultiHeadAttention> att;
  std::shared_ptr<FeedForward> ff;
  std::shared_ptr<LayerNorm> norm1, norm2;
  std::shared_ptr<Dropout> drop_shortcut;

 private:
  std::string attention_line, attention_residual, ff_line, ff_residual;  // "trf_blocks.0: x = att(norm1(x))", ...
};

class GPTModel : public LanguageModel {
 public:
  explicit GPTModel(const GPTConfig& cfg);
  // in_idx: int64 [B, T], T <= context_length → logits [B, T, vocab_size]
  Tensor forward(const Tensor& in_idx) const override;
  Tensor operator()(const Tensor& in_idx) const { return forward(in_idx); }
  // The cache holds every head (GPT's keys and values are not shared); both in nn/generation.cpp.
  KVCache make_kv_cache(int64_t batch = 1, int64_t capacity = 0) const override;
  Tensor forward_cached(const Tensor& ids, KVCache& cache) const override;
  int64_t context_length() const override { return cfg.context_length; }
  int64_t vocab_size() const override { return cfg.vocab_size; }
  // tok_emb + pos_emb, after drop_emb: what the blocks receive
  Tensor embed(const Tensor& in_idx) const;
  // out_head.weight = tok_emb.weight (one matrix, listed once, as tok_emb.weight); out_head's own
  // initial weight was drawn and is dropped, as in Python.
  void tie_weights();

  GPTConfig cfg;
  std::shared_ptr<Embedding> tok_emb, pos_emb;
  std::shared_ptr<Dropout> drop_emb;
  std::shared_ptr<ModuleList<TransformerBlock>> trf_blocks;
  std::shared_ptr<LayerNorm> final_norm;
  std::shared_ptr<Linear> out_head;
};

// AdamW's two groups as the book sets them up: the weights of every Linear layer (decayed), and all
// other parameters (embeddings, biases, LayerNorm scale/shift), each in named_parameters() order.
// A Linear weight tied to an embedding counts as a Linear weight.
std::pair<NamedTensors, NamedTensors> weight_decay_groups(const Module& model);

}  // namespace nn
