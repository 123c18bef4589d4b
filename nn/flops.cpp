// flops.cpp — the model FLOPs of a GPT's or a Llama's training token (see flops.h).
#include "nn/flops.h"

namespace nn {

double gpt_training_flops_per_token(const GPTModel& model, int64_t T) {
  const bool tied = &model.out_head->weight.impl() == &model.tok_emb->weight.impl();
  double flops = 0;
  for (const auto& [name, p] : model.named_parameters()) {
    const bool lookup = name.starts_with("pos_emb.") || (name.starts_with("tok_emb.") && !tied);
    if (!lookup) flops += (p.requires_grad() ? 6.0 : 4.0) * double(p.numel());
  }
  const double L = double(model.cfg.n_layers), D = double(model.cfg.emb_dim);
  return flops + 12.0 * L * D * double(T);
}

double llama_training_flops_per_token(const LlamaModel& model, int64_t T) {
  const bool tied = model.lm_head == nullptr;
  double flops = 0;
  for (const auto& [name, p] : model.named_parameters()) {
    const bool lookup = name == "model.embed_tokens.weight" && !tied;
    if (!lookup) flops += (p.requires_grad() ? 6.0 : 4.0) * double(p.numel());
  }
  const LlamaConfig& c = model.cfg;
  const double L = double(c.num_hidden_layers), width = double(c.num_attention_heads * c.head_size());
  return flops + 12.0 * L * width * double(T);
}

}  // namespace nn
