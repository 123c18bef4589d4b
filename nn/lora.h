// lora.h — LoRA fine-tuning of a GPTModel: adapters on chosen Linear layers, the rest frozen; a checkpoint
// of the adapters alone that names its base file; and merging the adapters into the weights.
//
// Targets: "attn" = each block's W_query, W_key, W_value and out_proj (GPT-2's c_attn and c_proj);
// "mlp" = each block's feed-forward expand and contract (c_fc and mlp.c_proj). The embeddings, the
// LayerNorms and the tied head are never adapted.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "nn/gpt.h"
#include "nn/safetensors.h"

namespace nn {

struct LoraConfig {
  int64_t rank = 8;
  double alpha = 16;  // the update is scaled by alpha / rank
  std::vector<std::string> targets = {"attn"};
};

// "attn", "mlp" or "attn,mlp" → the list; anything else throws std::invalid_argument naming the word.
std::vector<std::string> parse_lora_targets(const std::string& text);

// Freezes every parameter of `model` and adds a fresh adapter to each targeted Linear. Returns the adapters'
// parameters (the only ones that now require grad), named as in model.named_parameters():
// "trf_blocks.0.att.W_query.lora.A", ... — what the optimizer gets.
NamedTensors add_lora(GPTModel& model, const LoraConfig& config);

// The adapters' parameters of a model that has them (empty if none).
NamedTensors lora_parameters(const Module& model);

// The adapters of a model as a Module of their own, each LoRA under its layer's path (its parameters are
// named as lora_parameters names them): what an optimizer, gradient clipping or data parallelism is given
// when only the adapters train. It shares the model's tensors, and lives no longer than the model.
class LoraAdapters : public Module {
 public:
  explicit LoraAdapters(const GPTModel& model);
};

// Writes the adapters alone, with metadata "format" = "scratchgrad-lora", "base" = base_path (the file the
// frozen weights came from), rank, alpha and targets. A training run adds its own metadata and tensors
// (its optimizer's state, under names that start with "optimizer."), which apply_lora leaves alone.
void save_lora(const std::string& path, const GPTModel& model, const LoraConfig& config, const std::string& base_path,
               const std::map<std::string, std::string>& run_metadata = {}, const NamedTensors& run_tensors = {});

struct LoraCheckpoint {
  LoraConfig config;
  std::string base_path;
  Checkpoint checkpoint;
};
// Reads an adapters file; CheckpointError if it is not one.
LoraCheckpoint load_lora(const std::string& path);

// Adds the checkpoint's adapters to `model` (built from the base file) and loads their values: every adapter
// of the configuration must be in the file with its shape, and nothing else but a training run's
// "optimizer." tensors (CheckpointError naming it).
void apply_lora(GPTModel& model, const LoraCheckpoint& adapters, const std::string& path);

// Merges every adapter into its weight (W += (α/r)·B·A) and removes it: a plain GPTModel again.
void merge_lora(GPTModel& model);

}  // namespace nn
