// folders.cpp — a Hugging Face model folder opened for the commands (see folders.h).
#include "folders.h"

#include <filesystem>

#include <fmt/format.h>

#include "guards.h"
#include "nn/generation.h"
#include "nn/tokenizer/hf_json.h"

namespace cli {

std::string folder_tokenizer_file(const std::string& dir) {
  const std::filesystem::path file = std::filesystem::path(dir) / "tokenizer.json";
  std::error_code ec;
  return std::filesystem::exists(file, ec) ? file.string() : "";
}

FolderModel open_folder(const std::string& dir, const std::string& command, bool heads_flag_given,
                        autograd::DType weights) {
  require(!heads_flag_given, fmt::format("--heads is for GPT-2's model.safetensors that does not say its head count; "
                                         "{} is a Hugging Face folder, whose config.json gives it: leave it out",
                                         dir));
  FolderModel m;
  m.folder = nn::read_hf_folder(dir);
  m.model = m.folder.is_gpt2() ? std::unique_ptr<nn::LanguageModel>(nn::load_gpt2_folder(m.folder))
                               : std::unique_ptr<nn::LanguageModel>(nn::load_llama_folder(m.folder, weights));
  if (weights == autograd::DType::BFloat16) nn::keep_weights_in_bfloat16(*m.model);  // (GPT-2's F32 file: rounded)
  if (const std::string file = folder_tokenizer_file(dir); !file.empty()) {
    try {
      m.tokenizer = std::make_shared<const tokenizer::Tokenizer>(tokenizer::load_tokenizer_json(file));
    } catch (const tokenizer::TokenizerError& e) {
      throw UsageError(fmt::format("{}: {}", command, e.what()));  // what() starts with the file
    }
  }
  return m;
}

}  // namespace cli
