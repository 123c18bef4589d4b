// finetune.cpp — the flags, checks and sizes of `train --init FILE` (finetune.h).
#include "finetune.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "nn/gpt2.h"
#include "nn/safetensors.h"
#include "text.h"

namespace cli {

void apply_finetune_options(TrainOptions& o, const std::function<bool(const char*)>& given) {
  const bool lora_flags = given("--lora-rank") || given("--lora-alpha") || given("--lora-targets");
  if (o.init.empty()) {
    if (lora_flags)
      throw UsageError("--lora-rank, --lora-alpha and --lora-targets adapt trained weights: give --init FILE");
    return;
  }
  if (given("--model") && o.model != "gpt" && o.model != "llama")
    throw UsageError(fmt::format("--model {} with --init: a fine-tune trains the GPT that {} holds", o.model, o.init));
  for (const char* flag : {"--preset", "--dim", "--layers", "--vocab-size", "--kv-heads", "--ffn-dim"})
    if (given(flag))
      throw UsageError(fmt::format("{} cannot be given with --init: the model's shape comes from {} (leave out --preset, "
                                   "--dim, --layers and --vocab-size)",
                                   flag, o.init));
  // The shapes of a GPT-2 file do not say how its width splits into heads: --heads says it for a file
  // whose metadata does not (checked against the file when it is read). The run's o.heads is the model's.
  if (given("--heads")) {
    if (o.heads < 1) throw UsageError(fmt::format("--heads must be at least 1, got {}", o.heads));
    o.init_heads = std::exchange(o.heads, TrainOptions().heads);
  }
  if (given("--lora-rank") && o.lora_rank < 1)
    throw UsageError(fmt::format("--lora-rank must be at least 1 (leave it out for a full fine-tune), got {}", o.lora_rank));
  if (!given("--lora-rank") && lora_flags) throw UsageError("--lora-alpha and --lora-targets need --lora-rank R");
  o.model = "gpt";
  o.context_set = given("--context");
  // a fine-tune's recipe: llm.c's CPU batch, a short run, a learning rate small enough to keep what the
  // weights know (adapters start from zero and take a larger one)
  auto fill = [&](const char* flag, auto& field, auto value) {
    if (!given(flag)) field = value;
  };
  fill("--batch", o.batch, int64_t(4));
  fill("--steps", o.steps, int64_t(200));
  fill("--warmup", o.warmup, o.steps / 10);
  fill("--lr", o.lr, o.lora_rank > 0 ? 1e-3 : 1e-4);
  fill("--eval-every", o.eval_every, std::max<int64_t>(o.steps / 10, 1));
  fill("--sample", o.sample_tokens, int64_t(50));
  if (!given("--tokenizer")) o.tokenizer.clear();  // the file's own: gpt2 for GPT-2, the checkpoint's for ours
}

std::unique_ptr<nn::GPTModel> load_gpt2_weights(const std::string& path, int64_t heads) {
  if (nn::is_llmc_checkpoint(path)) return nn::load_llmc_gpt2(path, heads);
  if (!nn::is_gpt2_file(path)) return nullptr;
  return nn::load_gpt2(path, heads);  // each tensor read straight into its parameter: one model's memory
}

void check_heads_agree(int64_t given, const nn::GPTModel& model, const std::string& path) {
  if (given > 0 && given != model.cfg.n_heads)
    throw UsageError(fmt::format("--heads {}: {} records its own head count, {} (a head count is for a GPT-2 file that "
                                 "does not give its own)",
                                 given, path, model.cfg.n_heads));
}

void set_dropout(nn::LanguageModel& model, double p) {
  if (auto* gpt = dynamic_cast<nn::GPTModel*>(&model)) gpt->cfg.drop_rate = p;
  std::function<void(nn::Module&)> visit = [&](nn::Module& m) {
    if (auto* dropout = dynamic_cast<nn::Dropout*>(&m)) dropout->p = p;
    for (const auto& [name, child] : m.named_children()) visit(*child);
  };
  visit(model);
}

nn::LoraConfig lora_config(const TrainOptions& o, const nn::LanguageModel& model) {
  nn::LoraConfig config{.rank = o.lora_rank, .alpha = o.lora_alpha};
  try {
    config.targets = nn::parse_lora_targets(o.lora_targets);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("--lora-targets '{}': {}", o.lora_targets, e.what()));
  }
  if (!(std::isfinite(o.lora_alpha) && o.lora_alpha > 0))
    throw UsageError(fmt::format("--lora-alpha must be a positive number, got {}", o.lora_alpha));
  if (o.lora_rank < 1) throw UsageError(fmt::format("--lora-rank must be at least 1, got {}", o.lora_rank));
  // a GPT's targeted layers are D → D, D → 4D or 4D → D: their smaller side is D (a Llama's k and v
  // projections may be narrower)
  const int64_t limit = nn::lora_rank_limit(model, config.targets);
  if (limit == 0)
    throw UsageError(fmt::format("--lora-targets {}: the model has no such layers (a GPT's are q,k,v,o,up,down)",
                                 o.lora_targets));
  if (o.lora_rank > limit)
    throw UsageError(fmt::format("--lora-rank {} is larger than the adapted layers: the model's width is {}, and a rank "
                                 "above a layer's smaller side (min(in, out) = {}) adds nothing a full update lacks",
                                 o.lora_rank, limit, limit));
  return config;
}

int64_t finetune_context(const TrainOptions& o, const nn::LanguageModel& model, const std::string& path) {
  const int64_t model_context = model.context_length();
  if (!o.context_set) return std::min<int64_t>(64, model_context);
  if (o.context > model_context)
    throw UsageError(fmt::format("--context {} is longer than the context of {} ({} positions)", o.context, path,
                                 model_context));
  return o.context;
}

void check_same_vocabulary(const nn::LanguageModel& model, const std::string& path, int64_t tokenizer_vocab,
                           const std::string& tokenizer) {
  if (model.vocab_size() == tokenizer_vocab) return;
  throw UsageError(fmt::format("{} has a vocabulary of {} tokens and the {} tokenizer {}: the model reads the text's "
                               "token ids, so the two must be the same (GPT-2's weights read GPT-2's tokens: "
                               "--tokenizer gpt2 --tokenizer-file DIR)",
                               path, model.vocab_size(), tokenizer, tokenizer_vocab));
}

double finetune_bytes(const nn::LanguageModel& model, int64_t trained, const TrainOptions& o) {
  // (the run's options carry the model's sizes: finetune_model set them from the file)
  const double B = double(o.batch), T = double(o.context), D = double(o.dim), L = double(o.layers);
  const double V = double(model.vocab_size()), H = double(o.heads);
  const double weights = 4 * double(model.num_parameters()), training_state = 12 * double(trained);
  const double activations = 4 * B * T * (L * (16 * D + H * T) + 3 * V);
  return weights + training_state + activations;
}

}  // namespace cli
