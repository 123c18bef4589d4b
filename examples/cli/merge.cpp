// merge.cpp — `scratchgrad merge`: a LoRA run's adapters added into its base weights, written as a plain
// GPT-2 file.
#include "commands.h"

#include <ostream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "nn/gpt2.h"
#include "nn/lora.h"

namespace cli {

int run_merge(const MergeOptions& o, std::ostream& out) {
  if (o.lora.empty() || o.out.empty()) throw UsageError("merge: give --lora ADAPTERS and --out FILE");
  const nn::LoraCheckpoint adapters = nn::load_lora(o.lora);
  const std::string base = o.base.empty() ? adapters.base_path : o.base;
  if (base.empty()) throw UsageError(fmt::format("merge: {} names no base file; give --base", o.lora));
  nn::check_writable(o.out);
  const std::unique_ptr<nn::GPTModel> model = nn::load_gpt2(base, o.heads);
  nn::apply_lora(*model, adapters, o.lora);
  nn::merge_lora(*model);
  nn::save_safetensors(o.out, nn::gpt2_state_dict(*model), nn::gpt2_metadata(*model));
  out << fmt::format("merged {} (rank {}, alpha {}, {}) into {}: wrote {}\n", o.lora, adapters.config.rank,
                     adapters.config.alpha, fmt::join(adapters.config.targets, ","), base, o.out);
  return 0;
}

}  // namespace cli
