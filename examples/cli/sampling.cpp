// sampling.cpp — a GPT's cached continuation, a model as generate sees it and its continuation, and the
// notice of a long generation.
#include "sampling.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>

#include <fmt/format.h>

#include "autograd/random/generator.h"
#include "token_text.h"

namespace cli {

using namespace autograd;

std::vector<int64_t> continue_text_cached(const nn::LanguageModel& model, std::vector<int64_t> ids, const Continuation& how,
                                          Generator& gen, const nn::OnToken& on_token) {
  const int64_t T = model.context_length();
  nn::KVCache cache = nn::make_kv_cache(model);
  for (int64_t n = 0; n < how.tokens; ++n) {
    const int64_t length = int64_t(ids.size());
    const bool fits = length <= T && cache.length == length - 1;  // all but the newest token are cached
    if (!fits) cache.length = 0;                                  // (re)fill from the window's start
    const int64_t start = fits ? length - 1 : std::max<int64_t>(0, length - T);
    const std::vector<int64_t> fresh(ids.begin() + start, ids.end());
    const Tensor logits = nn::forward_cached(model, from_vector(fresh, {1, int64_t(fresh.size())}), cache)[0].cpu();
    ids.push_back(nn::sample_token(logits, how.sampling, gen));
    if (on_token) on_token(ids.back(), logits);
    if (how.stops_at(ids.back())) break;
  }
  return ids;
}

int64_t GenerationModel::vocab() const { return lm ? lm->vocab_size() : mini->config.vocab; }

int64_t GenerationModel::context() const { return lm ? lm->context_length() : mini->config.context; }

int64_t GenerationModel::text_vocab() const { return bpe ? bpe->vocab_size() : int64_t(characters.size()); }

std::vector<int64_t> GenerationModel::encode(const std::string& text, const std::string& what) const {
  if (bpe) return encode_for_model(*bpe, text, vocab(), what);
  return Vocabulary(characters).encode(decode_utf8(text));  // (UsageError naming a character it lacks)
}

std::string GenerationModel::token_text(int64_t id) const {
  return bpe ? bpe->token_bytes(int32_t(id)) : encode_utf8(characters[size_t(id)]);
}

void continue_prompt(const GenerationModel& model, const std::vector<int64_t>& prompt, const Continuation& how,
                     bool kv_cache, Generator& gen, const nn::OnToken& on_token) {
  if (model.mini) {  // the workshop's model: no cache, the window recomputed each token
    continue_text(*model.mini, model.context(), prompt, how, gen, Device::cpu(), on_token);
  } else if (model.kind & kOurGpts) {  // train's GPT or Llama: as its run's sample
    if (kv_cache) continue_text_cached(*model.lm, prompt, how, gen, on_token);
    else continue_text(*model.lm, model.context(), prompt, how, gen, Device::cpu(), on_token);
  } else {  // GPT-2's and llm.c's files, folders: the context's end refused (before starting) or slid by half
    const nn::GenerationOptions options{.max_new_tokens = how.tokens, .sampling = how.sampling,
                                        .stop_tokens = how.stop_tokens, .at_context_end = model.at_context_end};
    try {
      if (kv_cache) nn::generate(*model.lm, prompt, options, gen, on_token);
      else nn::generate_uncached(*model.lm, prompt, options, gen, on_token);
    } catch (const std::invalid_argument& e) {  // the prompt's ids, the context: the user's to fix
      throw UsageError(e.what());
    }
  }
}

std::string format_duration(double seconds) {
  if (seconds < 60) return fmt::format("{:.1f}s", seconds);
  return fmt::format("{}m{:02d}s", int(seconds) / 60, int(seconds) % 60);
}

DurationNotice::DurationNotice(int64_t tokens) : tokens_(tokens), start_(std::chrono::steady_clock::now()) {}

void DurationNotice::token_made() {
  ++made_;
  if (said_) return;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (elapsed < 2) return;
  said_ = true;
  const double rate = double(made_) / elapsed, left = double(tokens_ - made_) / rate;
  if (left > 60)
    std::cerr << fmt::format("\n(generate: {} tokens at {:.0f} tokens/s take about {} in all; Ctrl-C stops)\n", tokens_,
                             rate, format_duration(elapsed + left))
              << std::flush;
}

}  // namespace cli
