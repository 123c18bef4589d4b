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

// A run's checkpoint holds the optimizer's tensors under this prefix beside the model's.
constexpr const char* kOptimizerPrefix = "optimizer.";

// The tensors without the optimizer's.
nn::NamedTensors without_optimizer(const nn::NamedTensors& tensors);

struct LoadedModel {
  std::unique_ptr<nn::MiniSelfAttention> model;  // one of the two
  std::unique_ptr<nn::GPTModel> gpt;
  Vocabulary vocab{std::u32string()};
  std::u32string sample_prompt;
  nn::Checkpoint checkpoint;
  RunTokenizer tokenizer;             // bpe, gpt2: what the model reads and writes
  std::vector<int64_t> sample_ids;    // bpe, gpt2: the sample's prompt
  int64_t vocab_size() const { return tokenizer.is_char() ? vocab.size() : tokenizer.bpe->vocab_size(); }
};

// A checkpoint of `train` (either model), or of a LoRA fine-tune (its base with its adapters on).
LoadedModel load_model(const std::string& path, const std::string& gpt2_tokenizer_file = "");

}  // namespace cli
