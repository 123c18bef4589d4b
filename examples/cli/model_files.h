// model_files.h — the checkpoints `train` writes and the other commands read: the character model's and
// the GPT's tensors and metadata, and a loaded model with its tokenizer (a LoRA run: its base with the
// adapters on).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nn/char_model.h"
#include "nn/gpt.h"
#include "nn/llama.h"
#include "nn/lora.h"
#include "nn/safetensors.h"
#include "text.h"
#include "train_tokenizer.h"

namespace cli {

std::map<std::string, std::string> model_metadata(const nn::CharModelConfig& c, const Vocabulary& vocab,
                                                  const std::u32string& sample_prompt, int64_t steps);

// The metadata value `key` as a positive whole number, else CheckpointError naming the file and the key.
int64_t metadata_int(const nn::Checkpoint& ck, const std::string& path, const std::string& key);

// A GPT's output head is tied to its token embedding (GPT-2's is): one matrix, saved once.
bool head_is_tied(const nn::GPTModel& model) ;

// The model's tensors for a checkpoint: a tied head is written once, as tok_emb.weight ("tied_head" = 1).
nn::NamedTensors gpt_state(const nn::GPTModel& model);

// The GPT's metadata: its sizes, characters (char), steps and sample prompt.
std::map<std::string, std::string> gpt_metadata(const nn::GPTConfig& c, const Vocabulary& vocab,
                                                const std::u32string& sample_prompt, int64_t steps,
                                                bool tied_head = false);

// A Llama of ours (train --model llama): its tensors under Hugging Face's names (model.embed_tokens.weight,
// model.layers.N.self_attn.q_proj.weight, ...; no lm_head.weight when tied), and metadata "format" =
// "scratchgrad-llama" with its config as config.json names it (vocab_size, hidden_size, intermediate_size,
// num_hidden_layers, num_attention_heads, num_key_value_heads, max_position_embeddings, rms_norm_eps,
// rope_theta, tie_word_embeddings), besides the characters or tokenizer, steps and sample prompt as a GPT's.
std::map<std::string, std::string> llama_metadata(const nn::LlamaConfig& c, const Vocabulary& vocab,
                                                  const std::u32string& sample_prompt, int64_t steps);

// A decoder's tensors for a checkpoint of ours: gpt_state for a GPT, a Llama's state_dict.
nn::NamedTensors decoder_state(const nn::LanguageModel& model);

// A run's checkpoint holds the optimizer's tensors under this prefix beside the model's.
constexpr const char* kOptimizerPrefix = "optimizer.";

// The tensors without the optimizer's.
nn::NamedTensors without_optimizer(const nn::NamedTensors& tensors);

struct LoadedModel {
  std::unique_ptr<nn::MiniSelfAttention> model;  // one of the two
  std::unique_ptr<nn::GPTModel> gpt;
  std::unique_ptr<nn::LlamaModel> llama;  // or a Llama of ours
  nn::LanguageModel* decoder() const { return gpt ? static_cast<nn::LanguageModel*>(gpt.get()) : llama.get(); }
  Vocabulary vocab{std::u32string()};
  std::u32string sample_prompt;
  nn::Checkpoint checkpoint;
  RunTokenizer tokenizer;             // bpe, gpt2: what the model reads and writes
  std::vector<int64_t> sample_ids;    // bpe, gpt2: the sample's prompt
  int64_t vocab_size() const { return tokenizer.is_char() ? vocab.size() : tokenizer.bpe->vocab_size(); }
};

// A checkpoint of `train` (either model), or of a LoRA fine-tune (its base with its adapters on).
LoadedModel load_model(const std::string& path, const std::string& gpt2_tokenizer_file = "");

// The model a LoRA file adapts, with the adapters on. `adapters` comes from nn::load_lora, which checked
// the file and that adapters.base_path is the base they were trained on; the base is read as --init reads
// it (GPT-2's safetensors, llm.c's .bin, a Hugging Face folder, or a GPT or Llama of ours, whose own adapters
// are merged first), with
// `heads` heads, else the run's recorded "heads", for a GPT-2 file that does not give its count.
// generate, eval and merge read a LoRA file through it.
std::unique_ptr<nn::LanguageModel> lora_model(const nn::LoraCheckpoint& adapters, const std::string& lora_path, int64_t heads,
                                         const std::string& gpt2_tokenizer_file = "");

}  // namespace cli
