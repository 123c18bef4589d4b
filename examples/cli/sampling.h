// sampling.h — continuing a text token by token, for every model `generate` reads: how the next token is
// chosen (nn::sample_token: greedy, temperature, top-k, top-p — one sampler for every model), the loops of
// train's checkpoints (with or without a GPT's key/value cache), a model as generate sees it whatever its
// file, and the notice a long generation gives.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "nn/char_model.h"
#include "nn/generation.h"
#include "nn/gpt.h"
#include "nn/tokenizer/tokenizer.h"
#include "options.h"

namespace cli {

using autograd::Device;
using autograd::from_vector;
using autograd::Generator;
using autograd::NoGradGuard;
using autograd::Tensor;

// How a text is continued: how many tokens at most, how each is chosen, and after which one to stop.
struct Continuation {
  int64_t tokens = 0;
  nn::SamplingOptions sampling{.temperature = 0.0};  // greedy unless given a temperature
  std::vector<int64_t> stop_tokens;                  // stop after making any of these
  bool stops_at(int64_t token) const { return std::find(stop_tokens.begin(), stop_tokens.end(), token) != stop_tokens.end(); }
};

// The greedy continuation of `tokens` tokens (train's sample at the end of a run).
inline Continuation greedy(int64_t tokens) {
  Continuation how;
  how.tokens = tokens;
  return how;
}

// Continues `ids`, feeding the model at most its last T tokens at a time: once the text outgrows the
// context, the window slides by one token a step. `on_token` (if given) sees each new token, and the logits
// it was chosen from, as soon as it is made. Returns the ids, the prompt's and the new ones.
template <typename Model>
std::vector<int64_t> continue_text(const Model& model, int64_t T, std::vector<int64_t> ids, const Continuation& how,
                                   Generator& gen, Device device, const nn::OnToken& on_token = {}) {
  NoGradGuard no_grad;
  for (int64_t n = 0; n < how.tokens; ++n) {
    const int64_t start = std::max<int64_t>(0, int64_t(ids.size()) - T);
    const std::vector<int64_t> window(ids.begin() + start, ids.end());
    const Tensor logits = model(from_vector(window, {1, int64_t(window.size())}).to(device)).select(1, -1)[0].cpu();
    ids.push_back(nn::sample_token(logits, how.sampling, gen));
    if (on_token) on_token(ids.back(), logits);
    if (how.stops_at(ids.back())) break;
  }
  return ids;
}

// continue_text for a GPT or a Llama, with a key/value cache (nn/generation.h): the window's prefill, then one position
// a token, each step's logits continue_text's to rounding. Once the text outgrows the context T, the
// window slides by one a token and every position moves, so each step is again a prefill of the last T
// tokens, as continue_text's recomputation is (though only the last position goes through the head).
std::vector<int64_t> continue_text_cached(const nn::LanguageModel& model, std::vector<int64_t> ids, const Continuation& how,
                                          Generator& gen, const nn::OnToken& on_token = {});

// A model as `generate` sees it, whatever its file: generate.cpp opens train's checkpoints,
// gpt2_generate.cpp GPT-2's and llm.c's files; generate.cpp continues them all alike.
struct GenerationModel {
  ModelKind kind = kCharModel;
  std::unique_ptr<nn::MiniSelfAttention> mini;  // the workshop's model, or
  std::unique_ptr<nn::LanguageModel> lm;        // a GPT (train's, GPT-2's or llm.c's) or a Llama (train's, a folder's)
  // How its tokens read as text: one character each, or a byte-level BPE's bytes; neither for GPT-2's
  // files without --tokenizer-file (whose prompt and output are then ids).
  std::u32string characters;
  std::shared_ptr<const tokenizer::Tokenizer> bpe;
  std::vector<int64_t> sample_prompt;  // the prompt when none is given: the run's sample's (empty: none)
  // the tokens generation stops after by default: GPT-2's <|endoftext|>, a folder's eos_token_id(s)
  std::vector<int64_t> end_of_text;
  nn::ContextFull at_context_end = nn::ContextFull::refuse;  // others' files and folders (train's: slide by one)

  int64_t vocab() const;    // the model's ids are 0 .. vocab() - 1
  int64_t context() const;  // the positions it sees at once
  bool has_text() const { return !characters.empty() || bpe != nullptr; }
  int64_t text_vocab() const;  // the ids its characters or tokenizer can spell
  // `text` as the model's ids; UsageError (naming `what`) for a character or token the model has no row for.
  std::vector<int64_t> encode(const std::string& text, const std::string& what) const;
  std::string token_text(int64_t id) const;  // the bytes of one id below text_vocab()
};

// Continues `prompt` (ids below the model's vocabulary) as `how` says, passing each new token and its
// logits to `on_token`: train's checkpoints as their runs' samples were made (the window slides by one token
// past the context), GPT-2's and llm.c's files as model.at_context_end says. `kv_cache` false recomputes the
// whole window for every token (the reference the cache is tested against).
void continue_prompt(const GenerationModel& model, const std::vector<int64_t>& prompt, const Continuation& how,
                     bool kv_cache, Generator& gen, const nn::OnToken& on_token);

// GPT-2's or llm.c's file at o.checkpoint opened for generate (gpt2_generate.cpp): --heads, --tokenizer-file
// and --context-full read.
GenerationModel open_gpt2_for_generate(const GenerateOptions& o, ModelKind kind);
// A Hugging Face folder at o.checkpoint opened for generate (gpt2_generate.cpp): its model, its tokenizer.json
// (or, for GPT-2's, --tokenizer-file), its eos_token_id(s) as the stop tokens, --context-full read.
GenerationModel open_folder_for_generate(const GenerateOptions& o);

// 12.3s, or 4m05s.
std::string format_duration(double seconds);

// A long generation says how long it will take: after two seconds, once, on stderr, when the tokens left
// need more than a minute at the rate so far (--tokens is bounded only by int64; the text streams anyway).
class DurationNotice {
 public:
  explicit DurationNotice(int64_t tokens);
  void token_made();

 private:
  int64_t tokens_, made_ = 0;
  bool said_ = false;
  std::chrono::steady_clock::time_point start_;
};
}  // namespace cli
