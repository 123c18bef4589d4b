// gpt.cpp — the book's GPT, each forward line for line with its Python.
#include "nn/gpt.h"

#include <functional>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

namespace nn {

using namespace autograd;

LayerNorm::LayerNorm(int64_t emb_dim, double eps_) : eps(eps_) {
  scale = register_parameter("scale", ones({emb_dim}));
  shift = register_parameter("shift", zeros({emb_dim}));
}

Tensor LayerNorm::forward(const Tensor& x) const { return layer_norm(x, {scale.size(0)}, scale, shift, eps); }

Tensor GELU::forward(const Tensor& x) const { return gelu(x, "tanh"); }

FeedForward::FeedForward(const GPTConfig& cfg) {
  auto layers = register_module("layers", std::make_shared<ModuleList<Module>>());
  expand = std::make_shared<Linear>(cfg.emb_dim, 4 * cfg.emb_dim);
  gelu = std::make_shared<GELU>();
  contract = std::make_shared<Linear>(4 * cfg.emb_dim, cfg.emb_dim);
  layers->push_back(expand);
  layers->push_back(gelu);
  layers->push_back(contract);
}

// The book's contract(gelu(expand(x))), with the last two as one op (linear_after_gelu: the same bits, but
// backward recomputes the 4·emb_dim-wide GELU output instead of keeping it, a quarter of a block's memory).
Tensor FeedForward::forward(const Tensor& x) const {
  // the adapter reads the GELU's output; packed for generation, the contraction runs panel_linear
  if (contract->lora || contract->packed()) return (*contract)((*gelu)((*expand)(x)));
  return linear_after_gelu((*expand)(x), contract->weight, contract->bias, "tanh");
}

TransformerBlock::TransformerBlock(const GPTConfig& cfg, int64_t index)
    : attention_line(fmt::format("trf_blocks.{}: x = att(norm1(x))", index)),
      attention_residual(fmt::format("trf_blocks.{}: x = drop_shortcut(x) + shortcut", index)),
      ff_line(fmt::format("trf_blocks.{}: x = ff(norm2(x))", index)),
      ff_residual(fmt::format("trf_blocks.{}: return drop_shortcut(x) + shortcut", index)) {
  att = register_module("att", std::make_shared<MultiHeadAttention>(cfg.emb_dim, cfg.emb_dim, cfg.context_length,
                                                                    cfg.drop_rate, cfg.n_heads, cfg.qkv_bias));
  ff = register_module("ff", std::make_shared<FeedForward>(cfg));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(cfg.emb_dim));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(cfg.emb_dim));
  drop_shortcut = register_module("drop_shortcut", std::make_shared<Dropout>(cfg.drop_rate));
}

Tensor TransformerBlock::forward(const Tensor& x_in) const {
  CallSite line(attention_line);  // labels every node recorded below, for traces and graphs
  Tensor shortcut = x_in;  // shortcut connection for the attention block
  Tensor x = (*norm1)(x_in);
  x = (*att)(x);
  line.set(attention_residual);
  x = (*drop_shortcut)(x);
  x = x + shortcut;

  line.set(ff_line);
  shortcut = x;  // and for the feed-forward block
  x = (*norm2)(x);
  x = (*ff)(x);
  line.set(ff_residual);
  x = (*drop_shortcut)(x);
  return x + shortcut;
}

// Construction order = torch's order of draws: tok_emb, pos_emb, each block (its attention's four
// Linears, then the feed-forward's two), then out_head.
GPTModel::GPTModel(const GPTConfig& c) : cfg(c) {
  tok_emb = register_module("tok_emb", std::make_shared<Embedding>(cfg.vocab_size, cfg.emb_dim));
  pos_emb = register_module("pos_emb", std::make_shared<Embedding>(cfg.context_length, cfg.emb_dim));
  drop_emb = register_module("drop_emb", std::make_shared<Dropout>(cfg.drop_rate));
  trf_blocks = register_module("trf_blocks", std::make_shared<ModuleList<TransformerBlock>>());
  for (int64_t i = 0; i < cfg.n_layers; ++i) trf_blocks->push_back(std::make_shared<TransformerBlock>(cfg, i));
  final_norm = register_module("final_norm", std::make_shared<LayerNorm>(cfg.emb_dim));
  out_head = register_module("out_head", std::make_shared<Linear>(cfg.emb_dim, cfg.vocab_size, false));
}

Tensor GPTModel::embed(const Tensor& in_idx) const {
  if (in_idx.dim() != 2 || in_idx.size(1) > cfg.context_length)
    throw std::invalid_argument(fmt::format("GPTModel: expected token ids [batch, tokens] with at most {} tokens, got {}",
                                            cfg.context_length, in_idx.shape_str()));
  const int64_t seq_len = in_idx.size(1);
  Tensor tok_embeds = (*tok_emb)(in_idx);
  Tensor pos_embeds = (*pos_emb)(arange(seq_len).to(in_idx.device()));
  return (*drop_emb)(tok_embeds + pos_embeds);
}

Tensor GPTModel::forward(const Tensor& in_idx) const {
  CallSite line("x = drop_emb(tok_emb(in_idx) + pos_emb(arange(T)))");
  Tensor x = embed(in_idx);
  for (const auto& block : *trf_blocks) x = (*block)(x);
  line.set("logits = out_head(final_norm(x))");
  x = (*final_norm)(x);
  return (*out_head)(x);
}

void GPTModel::tie_weights() {
  out_head->weight = tok_emb->weight;
  out_head->set_parameter("weight", tok_emb->weight);
}

std::pair<NamedTensors, NamedTensors> weight_decay_groups(const Module& model) {
  std::set<const autograd::TensorImpl*> linear_weights;
  std::function<void(const Module&)> visit = [&](const Module& m) {
    if (auto* linear = dynamic_cast<const Linear*>(&m)) linear_weights.insert(&linear->weight.impl());
    for (const auto& [name, child] : m.named_children()) visit(*child);
  };
  visit(model);
  std::pair<NamedTensors, NamedTensors> groups;
  for (const auto& entry : model.named_parameters())
    (linear_weights.count(&entry.second.impl()) ? groups.first : groups.second).push_back(entry);
  return groups;
}

}  // namespace nn
