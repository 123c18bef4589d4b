// llama.cpp — the Llama-family decoder, each forward written as its formula.
#include "nn/llama.h"

#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "nn/generation.h"

namespace nn {

using namespace autograd;

void LlamaConfig::check() const {
  auto at_least_one = [](int64_t value, const char* field) {
    if (value < 1) throw std::invalid_argument(fmt::format("Llama config: {} must be at least 1, got {}", field, value));
  };
  at_least_one(vocab_size, "vocab_size");
  at_least_one(hidden_size, "hidden_size");
  at_least_one(intermediate_size, "intermediate_size");
  at_least_one(num_hidden_layers, "num_hidden_layers");
  at_least_one(num_attention_heads, "num_attention_heads");
  at_least_one(num_key_value_heads, "num_key_value_heads");
  at_least_one(max_position_embeddings, "max_position_embeddings");
  if (head_dim < 0) throw std::invalid_argument(fmt::format("Llama config: head_dim must be positive, got {}", head_dim));
  if (num_attention_heads % num_key_value_heads != 0)
    throw std::invalid_argument(fmt::format(
        "Llama config: num_attention_heads {} is not a multiple of num_key_value_heads {} (each key/value head "
        "serves a whole group of query heads)",
        num_attention_heads, num_key_value_heads));
  if (head_dim == 0 && hidden_size % num_attention_heads != 0)
    throw std::invalid_argument(fmt::format("Llama config: hidden_size {} does not split into num_attention_heads {} "
                                            "(give head_dim)",
                                            hidden_size, num_attention_heads));
  if (head_size() % 2 != 0)
    throw std::invalid_argument(
        fmt::format("Llama config: head_dim {} is odd (RoPE rotates pairs of dimensions)", head_size()));
  if (!(rms_norm_eps > 0) || !std::isfinite(rms_norm_eps))
    throw std::invalid_argument(fmt::format("Llama config: rms_norm_eps must be positive, got {}", rms_norm_eps));
  if (!(rope_theta > 0) || !std::isfinite(rope_theta))
    throw std::invalid_argument(fmt::format("Llama config: rope_theta must be positive, got {}", rope_theta));
}

int64_t LlamaConfig::parameter_count() const {
  const int64_t d = head_size(), q_width = num_attention_heads * d, kv_width = num_key_value_heads * d;
  const int64_t attention = hidden_size * q_width + 2 * hidden_size * kv_width + q_width * hidden_size +
                            (attention_bias ? q_width + 2 * kv_width : 0) + (qk_norm ? 2 * d : 0);
  const int64_t mlp = 3 * hidden_size * intermediate_size;
  const int64_t block = attention + mlp + 2 * hidden_size;  // and its two norms
  const int64_t embedding = vocab_size * hidden_size;
  return embedding + num_hidden_layers * block + hidden_size + (tie_word_embeddings ? 0 : embedding);
}

namespace {

// [B, T, heads·head_dim] → [B, heads, T, head_dim]: each head's positions as rows of a matrix.
Tensor split_heads(const Tensor& y, int64_t heads, int64_t head_dim) {
  return y.view({y.size(0), y.size(1), heads, head_dim}).transpose(1, 2);
}

// [B, kv_heads, S, d] → [B, kv_heads·n_rep, S, d], each key/value head repeated for the n_rep query heads
// of its group (Hugging Face's repeat_kv): query head h then meets key/value head h ÷ n_rep. The gradient
// of the copies (expand's) sums back into the one head they came from.
Tensor repeat_kv(const Tensor& kv, int64_t n_rep) {
  if (n_rep == 1) return kv;
  const int64_t b = kv.size(0), kv_heads = kv.size(1), s = kv.size(2), d = kv.size(3);
  return kv.unsqueeze(2).expand({b, kv_heads, n_rep, s, d}).reshape({b, kv_heads * n_rep, s, d});
}

}  // namespace

// ---- attention

LlamaAttention::LlamaAttention(const LlamaConfig& cfg)
    : num_heads(cfg.num_attention_heads), num_kv_heads(cfg.num_key_value_heads), head_dim(cfg.head_size()) {
  q_proj = register_module("q_proj", std::make_shared<Linear>(cfg.hidden_size, num_heads * head_dim, cfg.attention_bias));
  k_proj = register_module("k_proj", std::make_shared<Linear>(cfg.hidden_size, num_kv_heads * head_dim, cfg.attention_bias));
  v_proj = register_module("v_proj", std::make_shared<Linear>(cfg.hidden_size, num_kv_heads * head_dim, cfg.attention_bias));
  o_proj = register_module("o_proj", std::make_shared<Linear>(num_heads * head_dim, cfg.hidden_size, false));
  if (cfg.qk_norm) {
    q_norm = register_module("q_norm", std::make_shared<RMSNorm>(head_dim, cfg.rms_norm_eps));
    k_norm = register_module("k_norm", std::make_shared<RMSNorm>(head_dim, cfg.rms_norm_eps));
  }
}

Tensor LlamaAttention::forward(const Tensor& x, const Tensor& cos, const Tensor& sin, Tensor* cache_keys,
                               Tensor* cache_values, int64_t past) const {
  const int64_t b = x.size(0), t = x.size(1);
  Tensor q = split_heads((*q_proj)(x), num_heads, head_dim);     // [B, heads, T, d]
  Tensor k = split_heads((*k_proj)(x), num_kv_heads, head_dim);  // [B, kv_heads, T, d]
  Tensor v = split_heads((*v_proj)(x), num_kv_heads, head_dim);
  if (q_norm) {  // Qwen3: each head's q and k brought to unit RMS (times a learned scale), so no score blows up
    q = q_norm->forward(q);
    k = k_norm->forward(k);
  }
  // The position enters here, and only here: pair j of q and of k turns by angle position · θ_j.
  q = rotary_embedding(q, cos, sin);
  k = rotary_embedding(k, cos, sin);
  if (cache_keys) {  // generation: keep the new keys and values, attend to all of them
    cache_keys->narrow(2, past, t).copy_(k);
    cache_values->narrow(2, past, t).copy_(v);
    k = cache_keys->narrow(2, 0, past + t);
    v = cache_values->narrow(2, 0, past + t);
  }
  const int64_t n_rep = num_heads / num_kv_heads;
  k = repeat_kv(k, n_rep);
  v = repeat_kv(v, n_rep);

  Tensor scores = matmul(q, k.transpose(2, 3)) * (1.0 / std::sqrt(double(head_dim)));  // [B, heads, T, past+T]
  if (t > 1)  // new position i sees keys up to its own, past + i: not key past + j for j > i
    scores = masked_fill(scores, triu(ones({t, past + t}), past + 1).to_bool().to(scores.device()),
                         -std::numeric_limits<double>::infinity());
  Tensor context = matmul(softmax(scores, -1), v);  // [B, heads, T, d]
  return (*o_proj)(context.transpose(1, 2).contiguous().view({b, t, num_heads * head_dim}));
}

// ---- the feed-forward

LlamaMLP::LlamaMLP(const LlamaConfig& cfg) {
  gate_proj = register_module("gate_proj", std::make_shared<Linear>(cfg.hidden_size, cfg.intermediate_size, false));
  up_proj = register_module("up_proj", std::make_shared<Linear>(cfg.hidden_size, cfg.intermediate_size, false));
  down_proj = register_module("down_proj", std::make_shared<Linear>(cfg.intermediate_size, cfg.hidden_size, false));
}

Tensor LlamaMLP::forward(const Tensor& x) const {
  // One statement each: C++ leaves the order of an operator's operands open, and the order the nodes are made
  // in is the order backward visits them (the same bits on every compiler, docs/arm.md).
  const Tensor gate = silu((*gate_proj)(x));
  const Tensor up = (*up_proj)(x);
  return (*down_proj)(gate * up);
}

// ---- the block

LlamaDecoderLayer::LlamaDecoderLayer(const LlamaConfig& cfg, int64_t index)
    : attention_line(fmt::format("model.layers.{}: x = x + self_attn(input_layernorm(x))", index)),
      mlp_line(fmt::format("model.layers.{}: x = x + mlp(post_attention_layernorm(x))", index)) {
  self_attn = register_module("self_attn", std::make_shared<LlamaAttention>(cfg));
  mlp = register_module("mlp", std::make_shared<LlamaMLP>(cfg));
  input_layernorm = register_module("input_layernorm", std::make_shared<RMSNorm>(cfg.hidden_size, cfg.rms_norm_eps));
  post_attention_layernorm =
      register_module("post_attention_layernorm", std::make_shared<RMSNorm>(cfg.hidden_size, cfg.rms_norm_eps));
}

Tensor LlamaDecoderLayer::forward(const Tensor& x_in, const Tensor& cos, const Tensor& sin, Tensor* cache_keys,
                                  Tensor* cache_values, int64_t past) const {
  CallSite line(attention_line);  // labels every node recorded below, for traces and graphs
  Tensor x = x_in + self_attn->forward(input_layernorm->forward(x_in), cos, sin, cache_keys, cache_values, past);
  line.set(mlp_line);
  return x + mlp->forward(post_attention_layernorm->forward(x));
}

// ---- the model

LlamaDecoder::LlamaDecoder(const LlamaConfig& cfg) {
  embed_tokens = register_module("embed_tokens", std::make_shared<Embedding>(cfg.vocab_size, cfg.hidden_size));
  layers = register_module("layers", std::make_shared<ModuleList<LlamaDecoderLayer>>());
  for (int64_t i = 0; i < cfg.num_hidden_layers; ++i) layers->push_back(std::make_shared<LlamaDecoderLayer>(cfg, i));
  norm = register_module("norm", std::make_shared<RMSNorm>(cfg.hidden_size, cfg.rms_norm_eps));
}

LlamaModel::LlamaModel(const LlamaConfig& c) : cfg(c) {
  cfg.check();
  {
    SkipInitGuard drawn_below;  // Linear's and Embedding's own initial values are torch.nn's, not Llama's
    model = register_module("model", std::make_shared<LlamaDecoder>(cfg));
    if (!cfg.tie_word_embeddings)
      lm_head = register_module("lm_head", std::make_shared<Linear>(cfg.hidden_size, cfg.vocab_size, false));
  }
  inv_freq = rope_inverse_frequencies(cfg.head_size(), cfg.rope_theta, cfg.rope_scaling);
  if (!SkipInitGuard::active()) init_weights();
}

// Hugging Face's _init_weights for these models, module by module in the order they were registered.
void LlamaModel::init_weights() {
  NoGradGuard no_grad;
  std::function<void(const Module&)> visit = [&](const Module& m) {
    if (auto* linear = dynamic_cast<const Linear*>(&m)) {
      Tensor weight = linear->weight;
      normal_(weight, 0.0, cfg.initializer_range);
      if (linear->bias.defined()) Tensor(linear->bias).zero_();
    } else if (auto* embedding = dynamic_cast<const Embedding*>(&m)) {
      Tensor weight = embedding->weight;
      normal_(weight, 0.0, cfg.initializer_range);
    } else if (auto* norm = dynamic_cast<const RMSNorm*>(&m)) {
      Tensor(norm->weight).fill_(1.0);
    }
    for (const auto& [name, child] : m.named_children()) visit(*child);
  };
  visit(*this);
}

std::pair<Tensor, Tensor> LlamaModel::rope(int64_t start, int64_t count, const Tensor& like) const {
  auto [cos, sin] = rope_tables(inv_freq, start, count);  // float32, as Hugging Face computes them
  return {cos.to(like.dtype()).to(like.device()), sin.to(like.dtype()).to(like.device())};
}

const Tensor& LlamaModel::head_weight() const { return lm_head ? lm_head->weight : model->embed_tokens->weight; }

namespace {

Tensor output_head(const LlamaModel& m, const Tensor& x) {
  if (m.lm_head) return (*m.lm_head)(x);
  const Embedding& table = *m.model->embed_tokens;  // tied: logits = x · Eᵀ (packed for generation, or as it is)
  return table.packed() ? panel_linear(x, table.panels, m.cfg.vocab_size) : linear(x, table.weight);
}

}  // namespace

Tensor LlamaModel::forward(const Tensor& ids) const {
  if (ids.dim() != 2 || ids.size(1) < 1 || ids.size(1) > cfg.max_position_embeddings)
    throw std::invalid_argument(fmt::format("LlamaModel: expected token ids [batch, tokens] with 1 to {} tokens, got {}",
                                            cfg.max_position_embeddings, ids.shape_str()));
  CallSite line("x = model.embed_tokens(ids)");
  Tensor x = (*model->embed_tokens)(ids);
  const auto [cos, sin] = rope(0, ids.size(1), x);  // no position is added to x: RoPE turns q and k instead
  for (const auto& layer : *model->layers) x = layer->forward(x, cos, sin);
  line.set("logits = lm_head(model.norm(x))");
  return output_head(*this, model->norm->forward(x));
}

KVCache LlamaModel::make_kv_cache(int64_t batch, int64_t capacity) const {
  return zeroed_kv_cache(model->layers->size(), batch, cfg.num_key_value_heads, capacity, cfg.head_size(),
                         cfg.max_position_embeddings, model->embed_tokens->table());
}

Tensor LlamaModel::forward_cached(const Tensor& ids, KVCache& cache) const {
  cache.check_step(ids, model->layers->size(), "forward_cached");
  const int64_t past = cache.length, t = ids.size(1);
  NoGradGuard no_grad;
  Tensor x = (*model->embed_tokens)(ids);
  const auto [cos, sin] = rope(past, t, x);  // the new positions' angles: past .. past + t − 1
  for (size_t i = 0; i < model->layers->size(); ++i)
    x = (*model->layers)[i].forward(x, cos, sin, &cache.keys[i], &cache.values[i], past);
  cache.length = past + t;
  // Only the last position's next-token logits are needed: the head (hidden × vocab) runs once, not t times.
  return output_head(*this, model->norm->forward(x.narrow(1, t - 1, 1))).view({ids.size(0), cfg.vocab_size});
}

}  // namespace nn
