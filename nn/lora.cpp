// lora.cpp — choosing the adapted layers, and the adapters' checkpoints.
#include "nn/lora.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace nn {

using namespace autograd;

namespace {

// The Linear layers that `targets` name, in block order.
std::vector<Linear*> targeted_layers(const GPTModel& model, const std::vector<std::string>& targets) {
  std::vector<Linear*> out;
  for (const auto& block : *model.trf_blocks)
    for (const std::string& target : targets) {
      if (target == "attn")
        for (Linear* l : {block->att->W_query.get(), block->att->W_key.get(), block->att->W_value.get(),
                          block->att->out_proj.get()})
          out.push_back(l);
      else if (target == "mlp")
        for (Linear* l : {block->ff->expand.get(), block->ff->contract.get()}) out.push_back(l);
    }
  return out;
}

constexpr const char* kFormat = "scratchgrad-lora";
constexpr const char* kRunStatePrefix = "optimizer.";  // a training run's optimizer state, beside the adapters

}  // namespace

std::vector<std::string> parse_lora_targets(const std::string& text) {
  std::vector<std::string> targets;
  std::istringstream words(text);
  for (std::string word; std::getline(words, word, ',');) {
    if (word != "attn" && word != "mlp")
      throw std::invalid_argument(fmt::format("lora targets: '{}' is not a target (attn, mlp, or attn,mlp)", word));
    if (std::find(targets.begin(), targets.end(), word) == targets.end()) targets.push_back(word);
  }
  if (targets.empty()) throw std::invalid_argument("lora targets: none given (attn, mlp, or attn,mlp)");
  return targets;
}

NamedTensors add_lora(GPTModel& model, const LoraConfig& config) {
  for (const std::string& target : config.targets) parse_lora_targets(target);  // each a known name
  for (Tensor& p : model.parameters()) p.requires_grad_(false);
  for (Linear* layer : targeted_layers(model, config.targets)) layer->add_lora(config.rank, config.alpha);
  return lora_parameters(model);
}

NamedTensors lora_parameters(const Module& model) {
  NamedTensors out;
  for (const auto& [name, t] : model.named_parameters())
    if (name.find(".lora.") != std::string::npos) out.emplace_back(name, t);
  return out;
}

LoraAdapters::LoraAdapters(const GPTModel& model) {
  const char* attn[] = {"W_query", "W_key", "W_value", "out_proj"};
  for (size_t i = 0; i < model.trf_blocks->size(); ++i) {
    const TransformerBlock& block = (*model.trf_blocks)[i];
    const Linear* layers[] = {block.att->W_query.get(), block.att->W_key.get(), block.att->W_value.get(),
                              block.att->out_proj.get(), block.ff->expand.get(), block.ff->contract.get()};
    for (size_t k = 0; k < 6; ++k) {
      if (!layers[k]->lora) continue;
      const std::string path = k < 4 ? fmt::format("trf_blocks.{}.att.{}", i, attn[k])
                                     : fmt::format("trf_blocks.{}.ff.layers.{}", i, k == 4 ? 0 : 2);
      register_module(path + ".lora", layers[k]->lora);
    }
  }
}

void save_lora(const std::string& path, const GPTModel& model, const LoraConfig& config, const std::string& base_path,
               const std::map<std::string, std::string>& run_metadata, const NamedTensors& run_tensors) {
  NamedTensors tensors = lora_parameters(model);
  if (tensors.empty()) throw std::invalid_argument("save_lora: the model has no adapters");
  tensors.insert(tensors.end(), run_tensors.begin(), run_tensors.end());
  std::map<std::string, std::string> metadata = run_metadata;
  metadata["format"] = kFormat;
  metadata["base"] = base_path;
  metadata["rank"] = std::to_string(config.rank);
  metadata["alpha"] = fmt::format("{:.17g}", config.alpha);
  metadata["targets"] = fmt::format("{}", fmt::join(config.targets, ","));
  save_safetensors(path, tensors, metadata);
}

LoraCheckpoint load_lora(const std::string& path) {
  LoraCheckpoint out;
  out.checkpoint = load_safetensors(path);
  auto& meta = out.checkpoint.metadata;
  if (meta["format"] != kFormat)
    throw CheckpointError(fmt::format("{}: not a LoRA adapters file (metadata 'format' is not {})", path, kFormat));
  try {
    out.config.rank = std::stoll(meta.at("rank"));
    out.config.alpha = std::stod(meta.at("alpha"));
    out.config.targets = parse_lora_targets(meta.at("targets"));
  } catch (const std::exception& e) {
    throw CheckpointError(fmt::format("{}: LoRA metadata (rank, alpha, targets) missing or malformed ({})", path, e.what()));
  }
  if (out.config.rank < 1) throw CheckpointError(fmt::format("{}: LoRA rank {} is not positive", path, out.config.rank));
  out.base_path = meta["base"];
  return out;
}

void apply_lora(GPTModel& model, const LoraCheckpoint& adapters, const std::string& path) {
  try {
    add_lora(model, adapters.config);
  } catch (const std::invalid_argument& e) {
    throw CheckpointError(fmt::format("{}: {}", path, e.what()));
  }
  std::map<std::string, Tensor> given;
  for (const auto& [name, t] : adapters.checkpoint.tensors)
    if (!name.starts_with(kRunStatePrefix)) given.emplace(name, t);
  NoGradGuard no_grad;
  for (auto& [name, target] : lora_parameters(model)) {
    auto it = given.find(name);
    if (it == given.end()) throw CheckpointError(fmt::format("{}: adapter tensor '{}' is missing", path, name));
    if (it->second.shape() != target.shape())
      throw CheckpointError(fmt::format("{}: adapter tensor '{}' has shape {}, the base model needs {}", path, name,
                                        it->second.shape_str(), target.shape_str()));
    Tensor(target).copy_(it->second.to(target.dtype()));
    given.erase(it);
  }
  if (!given.empty())
    throw CheckpointError(fmt::format("{}: unexpected tensor '{}' (not an adapter of this model)", path, given.begin()->first));
}

void merge_lora(GPTModel& model) {
  for (Linear* layer : targeted_layers(model, {"attn", "mlp"}))
    if (layer->lora) layer->merge_lora();
}

}  // namespace nn
