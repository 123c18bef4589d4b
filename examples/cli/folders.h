// folders.h — a Hugging Face model folder (nn/hf_folder.h: config.json, the weights, generation_config.json)
// as generate, eval and info read it: its model, the tokenizer.json beside it when there is one, its kind.
#pragma once
#include <memory>
#include <string>

#include "nn/hf_folder.h"
#include "nn/tokenizer/tokenizer.h"
#include "options.h"

namespace cli {

struct FolderModel {
  nn::HfFolder folder;
  std::unique_ptr<nn::LanguageModel> model;               // a LlamaModel, or a GPTModel for GPT2LMHeadModel
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer;  // DIR/tokenizer.json; null when the folder has none
  // A GPT-2 folder reads and refuses flags as GPT-2's model.safetensors does; the others are kLlamaFolder.
  ModelKind kind() const { return folder.is_gpt2() ? kGpt2File : kLlamaFolder; }
};

// The folder at `dir` with its model and tokenizer.json, every file checked (nn::CheckpointError naming the
// file and field; a tokenizer.json that cannot be read: UsageError naming it and `command`). GPT-2's folder
// takes its head count from config.json, so `heads_flag_given` (--heads) is refused for any folder.
// weights BFloat16 (generate --precision bf16): the model's matrices kept in bfloat16, a BF16 file's as stored.
FolderModel open_folder(const std::string& dir, const std::string& command, bool heads_flag_given,
                        autograd::DType weights = autograd::DType::Float32);

// "<dir>/tokenizer.json" when that file exists, else "".
std::string folder_tokenizer_file(const std::string& dir);

}  // namespace cli
