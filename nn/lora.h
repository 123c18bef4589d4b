// lora.h — LoRA fine-tuning of a GPT or a Llama (any model whose Linear layers are named as theirs):
// adapters on chosen Linear layers, the rest frozen; a checkpoint of the adapters alone that names its base
// file; and merging the adapters into the weights.
//
// Each adaptable layer has a role, found from the end of its path: q, k, v, o (GPT's att.W_query, W_key,
// W_value, out_proj — GPT-2's c_attn and c_proj; a Llama's self_attn.q_proj, k_proj, v_proj, o_proj),
// gate, up, down (a Llama's mlp.gate_proj, up_proj, down_proj; GPT's feed-forward expand is its up, its
// contract its down — GPT-2's c_fc and mlp.c_proj). Targets: "attn" = q,k,v,o; "mlp" = gate,up,down; or
// single roles ("q,v"). The embeddings, the norms and the output head are never adapted.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
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
// Throws std::invalid_argument when the model has no layer of the targets (a GPT's "gate").
NamedTensors add_lora(Module& model, const LoraConfig& config);

// The largest rank the targeted layers can take: the smallest of their sides (GPT's: its width D).
int64_t lora_rank_limit(const Module& model, const std::vector<std::string>& targets);

// The adapters' parameters of a model that has them (empty if none).
NamedTensors lora_parameters(const Module& model);

// The adapters of a model as a Module of their own, each LoRA under its layer's path (its parameters are
// named as lora_parameters names them): what an optimizer, gradient clipping or data parallelism is given
// when only the adapters train. It shares the model's tensors, and lives no longer than the model.
class LoraAdapters : public Module {
 public:
  explicit LoraAdapters(const Module& model);
};

// What identifies a file: its size and a hash of its bytes (16 hex digits). The hash is FNV-1a's step,
// h = (h ^ w) * prime, over the file's 8-byte little-endian words w (its last bytes, if any, one at a time):
// each step is a bijection of h, so a file that differs in any one word gives another hash, and a word at a
// time is 8 times fewer multiplications than FNV-1a over bytes. It tells a replaced file, not a forged one.
struct FileFingerprint {
  uint64_t bytes = 0;
  std::string hash;
  bool operator==(const FileFingerprint&) const = default;
};
// The fingerprint of the regular file at `path` (read whole); of a Hugging Face folder, its model.safetensors
// (or model.safetensors.index.json). CheckpointError naming it if it cannot be read.
FileFingerprint fingerprint_file(const std::string& path);

// The file a LoRA run's frozen weights came from: its path, and its fingerprint when they were read.
struct LoraBase {
  std::string path;
  FileFingerprint file;
};
LoraBase lora_base(const std::string& path);  // `path` fingerprinted now

// Writes the adapters alone, with metadata "format" = "scratchgrad-lora", "base" = base.path (the file the
// frozen weights came from), "base_bytes" and "base_hash" (its fingerprint), rank, alpha and targets. A
// training run adds its own metadata and tensors (its optimizer's state, under names that start with
// "optimizer."), which apply_lora leaves alone.
void save_lora(const std::string& path, const Module& model, const LoraConfig& config, const LoraBase& base,
               const std::map<std::string, std::string>& run_metadata = {}, const NamedTensors& run_tensors = {});

struct LoraCheckpoint {
  LoraConfig config;
  std::string base_path;                    // the base it names (or the one given instead)
  std::optional<FileFingerprint> base_file;  // the base's fingerprint when the adapters were trained
  Checkpoint checkpoint;
};
// The adapters file `path` (already read into `checkpoint`), checked: its format; rank, a whole number of
// at least 1; alpha, a finite number above 0; targets; every adapter's values finite; the base's
// fingerprint well formed. CheckpointError naming the file and the field. Its base is not looked at.
LoraCheckpoint read_lora(Checkpoint&& checkpoint, const std::string& path);

// Refuses (CheckpointError) `base_path` as the base of the adapters at `lora_path` unless it is the file
// they were trained on: the same size and hash as recorded (naming both files and both fingerprints). A
// file written before the base's fingerprint was recorded has none to compare with, and passes.
void check_lora_base(const LoraCheckpoint& adapters, const std::string& lora_path, const std::string& base_path);

// read_lora and check_lora_base together: the adapters file, and its base (the one it names, or `base`
// when given: merge --base) checked to be the file they were trained on. Every command reads a LoRA
// file through this.
LoraCheckpoint load_lora(const std::string& path, const std::string& base = "");
LoraCheckpoint load_lora(Checkpoint&& checkpoint, const std::string& path, const std::string& base = "");

// Adds the checkpoint's adapters to `model` (built from the base file) and loads their values: the rank at
// most the model's width (the adapted layers' smaller side), every adapter of the configuration in the
// file with its shape, and nothing else but a training run's "optimizer." tensors (CheckpointError
// naming it).
void apply_lora(Module& model, const LoraCheckpoint& adapters, const std::string& path);

// Merges every adapter into its weight (W += (α/r)·B·A) and removes it: a plain model again.
void merge_lora(Module& model);

}  // namespace nn
