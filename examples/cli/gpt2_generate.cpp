// gpt2_generate.cpp — others' files opened for `scratchgrad generate` (Hugging Face's GPT-2 model.safetensors,
// one written by nn::gpt2_state_dict, llm.c's .bin, or a Hugging Face folder): the model configured from the file's shapes (--heads where
// the file does not say), GPT-2's tokenizer from --tokenizer-file (else the prompt and the output are ids),
// <|endoftext|> as the default stop token, and --context-full. generate.cpp continues it as any other model;
// and the token ids that --prompt-ids, --ids-file and a checkpoint's sample are written as.
#include <sstream>

#include <fmt/format.h>

#include "command_line.h"
#include "folders.h"
#include "nn/gpt2.h"
#include "nn/numbers.h"
#include "sampling.h"
#include "token_text.h"

namespace cli {

namespace {

// GPT-2's <|endoftext|>: the last id of its 50,257-token vocabulary.
constexpr int64_t kGpt2Vocab = 50257, kEndOfText = 50256;

}  // namespace

GenerationModel open_gpt2_for_generate(const GenerateOptions& o, ModelKind kind) {
  GenerationModel m;
  m.kind = kind;
  m.at_context_end = nn::parse_context_full(o.context_full);  // (checked by run_generate)
  // llm.c's gpt2_124M.bin is read as such; a safetensors file straight into the model (one model's memory)
  if (kind == kLlmcFile) m.lm = nn::load_llmc_gpt2(o.checkpoint);
  else  // bf16: the matrices kept in bfloat16, rounded as they are read
    m.lm = nn::load_gpt2(o.checkpoint, o.heads,
                         bf16_precision(o.precision, o.numerics) ? autograd::DType::BFloat16 : autograd::DType::Float32);
  if (m.lm->vocab_size() == kGpt2Vocab) m.end_of_text = {kEndOfText};
  if (!o.tokenizer_file.empty())
    m.bpe = std::make_shared<tokenizer::Tokenizer>(load_gpt2_tokenizer_for("generate", o.tokenizer_file));
  return m;
}

GenerationModel open_folder_for_generate(const GenerateOptions& o) {
  FolderModel folder = open_folder(o.checkpoint, "generate", o.given.count("--heads") > 0,
                                   bf16_precision(o.precision, o.numerics) ? autograd::DType::BFloat16
                                                                          : autograd::DType::Float32);
  GenerationModel m;
  m.kind = folder.kind();
  m.at_context_end = nn::parse_context_full(o.context_full);
  m.lm = std::move(folder.model);
  m.bpe = folder.tokenizer;
  // GPT-2's folder may take GPT-2's tokenizer from --tokenizer-file (a Llama folder's is its tokenizer.json:
  // the flag is refused for it with the others that cannot apply)
  if (!o.tokenizer_file.empty() && folder.folder.is_gpt2())
    m.bpe = std::make_shared<tokenizer::Tokenizer>(load_gpt2_tokenizer_for("generate", o.tokenizer_file));
  m.end_of_text = folder.folder.eos_token_ids;
  if (m.end_of_text.empty() && folder.folder.is_gpt2() && m.lm->vocab_size() == kGpt2Vocab) m.end_of_text = {kEndOfText};
  return m;
}

std::vector<int64_t> parse_token_ids(const std::string& text, const std::string& flag) {
  std::string spaced = text;
  for (char& c : spaced)
    if (c == ',') c = ' ';
  std::istringstream words(spaced);
  std::vector<int64_t> ids;
  for (std::string word; words >> word;) {
    const std::optional<int64_t> id = nn::parse_whole(word, 0);  // whole: "12x" is not 12
    if (!id)
      throw UsageError(fmt::format("{}: '{}' is not a token id (a non-negative integer)", flag, one_line(word.substr(0, 40))));
    ids.push_back(*id);
  }
  if (ids.empty()) throw UsageError(fmt::format("{}: no token ids given", flag));
  return ids;
}

}  // namespace cli
