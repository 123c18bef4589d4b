// hf_folder.h — a model folder as Hugging Face publishes it (what `huggingface-cli download` writes):
//
//   config.json                      the architecture and its shape (required)
//   model.safetensors                the weights, or shards listed by
//   model.safetensors.index.json     {"weight_map": {tensor name: shard file}}
//   generation_config.json           eos_token_id (one or a list), when present
//   tokenizer.json                   (read by the tokenizer, nn/tokenizer/)
//
// Read: LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM and MistralForCausalLM into nn::LlamaModel,
// GPT2LMHeadModel into the book's GPTModel (nn/gpt2.h) with the config's head count. Anything the model
// here does not compute — another architecture, a mixture of experts, another activation or normalisation,
// a sliding attention window in use, an unknown rope_scaling — is refused with a CheckpointError naming the
// file and the config field, never read into a model that would compute something else.
//
// Weights in BF16, F16 or F32 (F64 too) are widened to float32 as they are read, each tensor straight into
// its parameter: a load holds the float32 model and a 64K-value buffer (nn/safetensors.h). Every tensor's
// name, shape and values (no NaN or infinity) are checked; a missing or unexpected one is refused by name.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nn/gpt.h"
#include "nn/llama.h"
#include "nn/safetensors.h"

namespace nn {

// A directory holding a config.json: what the command line reads as a Hugging Face folder.
bool is_hf_folder(const std::string& path);

struct HfFolder {
  std::string path;          // the folder
  std::string architecture;  // config.json's architectures[0], e.g. "Qwen3ForCausalLM"
  bool is_gpt2() const { return architecture == "GPT2LMHeadModel"; }
  LlamaConfig llama;             // the Llama family's shape (not for GPT-2)
  GPTConfig gpt2;                // GPT-2's: vocab_size, n_positions, n_embd, n_head, n_layer (dropout 0, q/k/v biases)
  double layer_norm_epsilon = 1e-5;  // GPT-2's
  // generation_config.json's eos_token_id, else config.json's (one id or several; none when neither says).
  std::vector<int64_t> eos_token_ids;
  // model.safetensors, or the index's shards in the order of their names; full paths.
  std::vector<std::string> weight_files;
  // For shards: the shard (full path) the index puts each tensor in. Empty for one model.safetensors.
  std::map<std::string, std::string> shard_of;
};

// Reads and checks config.json, generation_config.json and the index (no weights are read).
// Throws CheckpointError: "<folder>/config.json: <field> ...".
HfFolder read_hf_folder(const std::string& path);

// The model of a Llama-family folder, every weight read and checked; in eval mode. weights BFloat16 (for
// generate --precision bf16): the matrices (projections, embedding, head) are kept in bfloat16, a BF16 file's
// read as they are stored, never widened (keep_weights_in_bfloat16, nn/generation.h); the norms' float32.
std::unique_ptr<LlamaModel> load_llama_folder(const HfFolder& folder,
                                              autograd::DType weights = autograd::DType::Float32);
// The GPT-2 of a GPT2LMHeadModel folder (its model.safetensors through load_gpt2, with the config's n_head),
// its sizes checked against the config's; in eval mode.
std::unique_ptr<GPTModel> load_gpt2_folder(const HfFolder& folder);
// Either, as the folder's architecture says.
std::unique_ptr<LanguageModel> load_hf_folder(const std::string& path);

// Writes `model` as a Hugging Face folder that read_hf_folder (and Hugging Face's own loader) reads back:
// config.json for `architecture` (one of the Llama family's; its fields from model.cfg), model.safetensors
// in float32 under the model's names ("format": "pt"), and generation_config.json with `eos_token_ids`
// when there are any. The folder is created if need be; each file is replaced whole or not at all
// (nn/atomic_file.h). What a merge or a fine-tuning run saves. Throws CheckpointError naming the file.
void save_llama_folder(const LlamaModel& model, const std::string& path, const std::string& architecture,
                       const std::vector<int64_t>& eos_token_ids = {});

}  // namespace nn
