// merge.cpp — `scratchgrad merge`: a LoRA run's adapters added into its base weights, written as a plain
// GPT-2 file.
#include "commands.h"

#include <ostream>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "guards.h"
#include "model_files.h"
#include "nn/gpt2.h"
#include "nn/lora.h"

namespace cli {

int run_merge(const MergeOptions& o, std::ostream& out) {
  if (o.lora.empty() || o.out.empty()) throw UsageError("merge: give --lora ADAPTERS and --out FILE");
  if (o.heads < 0) throw UsageError(fmt::format("--heads must be positive, got {}", o.heads));
  use_kernels("");  // SCRATCHGRAD_KERNELS and SCRATCHGRAD_NUMERICS checked as every command checks them
  use_numerics_for("gpt", "");
  // The output replaces its file (by rename): it may be neither input, nor a device or a folder.
  check_distinct_files({{"--lora", o.lora}, {"--base", o.base}, {"--out", o.out}});
  const std::string target = checkpoint_target("--out", o.out);
  const nn::LoraCheckpoint adapters = nn::load_lora(o.lora, o.base);  // the base checked: the adapters' own
  if (adapters.base_path.empty()) throw UsageError(fmt::format("merge: {} names no base file; give --base", o.lora));
  if (o.base.empty()) check_distinct_files({{"--lora's base", adapters.base_path}, {"--out", o.out}});
  nn::check_writable(target);
  const std::unique_ptr<nn::LanguageModel> model = lora_model(adapters, o.lora, o.heads);
  nn::merge_lora(*model);
  if (dynamic_cast<const nn::LlamaModel*>(model.get())) {
    // Hugging Face's names are the Llama's own: the model.safetensors of a folder (float32; no lm_head.weight
    // when tied), to put beside the base folder's config.json and tokenizer.json
    nn::save_safetensors(target, model->state_dict(), {{"format", "pt"}});
  } else {
    const auto& gpt = dynamic_cast<const nn::GPTModel&>(*model);
    nn::NamedTensors merged;
    try {
      merged = nn::gpt2_state_dict(gpt);
    } catch (const std::invalid_argument&) {
      throw UsageError(fmt::format("merge: the base {} is a GPT without GPT-2's q, k, v biases and tied head, and merge "
                                   "writes GPT-2's layout (generate, eval and train --init read the adapters file as it "
                                   "is)",
                                   adapters.base_path));
    }
    nn::save_safetensors(target, merged, nn::gpt2_metadata(gpt));  // a temporary file renamed into place
  }
  out << fmt::format("merged {} (rank {}, alpha {}, {}) into {}: wrote {}\n", o.lora, adapters.config.rank,
                     adapters.config.alpha, fmt::join(adapters.config.targets, ","), adapters.base_path, o.out);
  return 0;
}

}  // namespace cli
