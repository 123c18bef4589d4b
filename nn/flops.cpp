// flops.cpp — the model FLOPs of a GPT training token (see flops.h).
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

}  // namespace nn
