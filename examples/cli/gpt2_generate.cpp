// gpt2_generate.cpp — `scratchgrad generate` on a GPT-2 checkpoint (Hugging Face's model.safetensors, or
// one written by nn::gpt2_state_dict): the model configured from the file's shapes, a prefill of the prompt,
// then one cached step per token, each id written as soon as it is chosen.
//
// The prompt comes as text (--prompt, encoded with --tokenizer-file's GPT-2 tokenizer) or as ids
// (--prompt-ids); the output is text, decoded token by token, or with --ids (or no tokenizer) the ids.
#include <chrono>
#include <ostream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "autograd/numerics.h"
#include "nn/generation.h"
#include "nn/gpt2.h"
#include "nn/lora.h"
#include "command_line.h"
#include "token_text.h"
#include "commands.h"
#include "sampling.h"

namespace cli {

namespace {

// GPT-2's <|endoftext|>: the last id of its 50,257-token vocabulary.
constexpr int64_t kGpt2Vocab = 50257, kEndOfText = 50256;

std::vector<int64_t> prompt_tokens(const GenerateOptions& o, const std::optional<tokenizer::Tokenizer>& tok,
                                   int64_t model_vocab) {
  if (o.prompt && !o.prompt_ids.empty()) throw UsageError("generate: give the prompt once: --prompt TEXT or --prompt-ids IDS");
  if (o.prompt) {
    if (!tok)
      throw UsageError("generate: a GPT-2 checkpoint needs its tokenizer to read --prompt TEXT: give --tokenizer-file "
                       "(the folder of encoder.json and vocab.bpe), or the prompt as token ids with --prompt-ids");
    if (o.prompt->empty()) throw UsageError("generate: the prompt is empty");
    return encode_for_model(*tok, *o.prompt, model_vocab, "generate: --prompt");
  }
  if (o.prompt_ids.empty())
    throw UsageError("generate: a GPT-2 checkpoint needs a prompt: --prompt TEXT with --tokenizer-file DIR, or "
                     "--prompt-ids \"464 3290 ...\"");
  return parse_token_ids(o.prompt_ids, "--prompt-ids");
}

std::optional<int64_t> stop_token(const GenerateOptions& o, const nn::GPTModel& model) {
  if (o.stop_id == -1) return std::nullopt;
  if (o.stop_id == -2) return model.cfg.vocab_size == kGpt2Vocab ? std::optional<int64_t>(kEndOfText) : std::nullopt;
  if (o.stop_id < 0 || o.stop_id >= model.cfg.vocab_size)
    throw UsageError(fmt::format("--stop-id {} is outside the vocabulary of {} (-1: never stop)", o.stop_id,
                                 model.cfg.vocab_size));
  return o.stop_id;
}

}  // namespace

std::vector<int64_t> parse_token_ids(const std::string& text, const std::string& flag) {
  std::string spaced = text;
  for (char& c : spaced)
    if (c == ',') c = ' ';
  std::istringstream words(spaced);
  std::vector<int64_t> ids;
  for (std::string word; words >> word;) {
    size_t used = 0;
    int64_t id = -1;
    try {
      id = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size() || id < 0)
      throw UsageError(fmt::format("{}: '{}' is not a token id (a non-negative integer)", flag, one_line(word.substr(0, 40))));
    ids.push_back(id);
  }
  if (ids.empty()) throw UsageError(fmt::format("{}: no token ids given", flag));
  return ids;
}

int run_generate_gpt2(const GenerateOptions& o, const std::string& path, nn::Checkpoint&& checkpoint,
                      std::ostream& out, std::ostream& report) {
  if (o.threads < 1) throw UsageError(fmt::format("--threads must be at least 1, got {}", o.threads));
  if (!(o.top_p > 0 && o.top_p <= 1)) throw UsageError(fmt::format("--top-p must be in (0, 1], got {}", o.top_p));
  if (o.heads < 0) throw UsageError(fmt::format("--heads must be positive, got {}", o.heads));
  nn::ContextFull at_end;
  try {
    at_end = nn::parse_context_full(o.context_full);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("--{}", e.what()));
  }
  autograd::set_num_threads(o.threads);
  use_numerics_for("gpt", o.numerics);
  // llm.c's gpt2_124M.bin is read as such; a safetensors file straight into the model (one model's memory),
  // unless the caller has read it already
  const std::unique_ptr<nn::GPTModel> model = !checkpoint.tensors.empty() ? nn::gpt2_from_checkpoint(std::move(checkpoint), path, o.heads)
                                              : nn::is_llmc_checkpoint(path) ? nn::load_llmc_gpt2(path)
                                                                             : nn::load_gpt2(path, o.heads);

  nn::GenerationOptions options;
  options.max_new_tokens = o.tokens;
  options.sampling = {.temperature = o.temperature, .top_k = o.top_k, .top_p = o.top_p};
  options.stop_token = stop_token(o, *model);
  options.at_context_end = at_end;
  std::optional<tokenizer::Tokenizer> tok;
  if (!o.tokenizer_file.empty()) tok = load_gpt2_tokenizer_for("generate", o.tokenizer_file);
  const std::vector<int64_t> prompt = prompt_tokens(o, tok, model->cfg.vocab_size);
  const bool as_text = tok && !o.print_ids;

  autograd::Generator gen(o.seed);
  bool first = true;
  Utf8Stream text;  // whole characters only: a token may end inside one
  if (as_text) {  // the prompt first, as the text it stands for
    if (o.prompt) {
      out << *o.prompt << std::flush;
    } else {
      try {
        out << text.push(tok->decode(std::vector<int32_t>(prompt.begin(), prompt.end()))) << std::flush;
      } catch (const tokenizer::TokenizerError& e) {
        throw UsageError(fmt::format("generate: --prompt-ids: {}", e.what()));
      }
    }
  }
  DurationNotice notice(o.tokens);
  auto write_token = [&](int64_t token, const autograd::Tensor&) {
    if (as_text) {
      if (token >= tok->vocab_size())
        throw UsageError(fmt::format("generate: the model chose token {}, which --tokenizer-file's vocabulary of {} "
                                     "does not have (pass --ids to see the ids)",
                                     token, tok->vocab_size()));
      out << text.push(tok->token_bytes(int32_t(token))) << std::flush;
    } else {
      out << (first ? "" : " ") << token << std::flush;  // streamed: each id as soon as it is chosen
    }
    first = false;
    notice.token_made();
  };
  const auto start = std::chrono::steady_clock::now();
  std::vector<int64_t> produced;
  try {
    produced = o.kv_cache ? nn::generate(*model, prompt, options, gen, write_token)
                          : nn::generate_uncached(*model, prompt, options, gen, write_token);
  } catch (const std::invalid_argument& e) {  // the prompt's ids, the context: the user's to fix
    throw UsageError(e.what());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (as_text) out << text.flush();
  out << "\n" << std::flush;
  report << fmt::format("{} tokens in {:.2f} s ({:.1f} tokens/s, prompt of {}, {} thread{})\n", produced.size(), seconds,
                        seconds > 0 ? double(produced.size()) / seconds : 0.0, prompt.size(), o.threads,
                        o.threads == 1 ? "" : "s");
  return 0;
}

}  // namespace cli
