// sampling.cpp — the next token from a model's logits, a GPT's cached continuation, and the notice of a long
// generation.
#include "sampling.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>

#include <fmt/format.h>

#include "autograd/random/generator.h"

namespace cli {

using namespace autograd;

// The next token drawn from softmax(logits / temperature) among the top_k likeliest (0: all). The largest
// logit is subtracted before dividing, so a tiny temperature gives the likeliest token (never an overflow
// to inf and then NaN); logits that are not numbers are refused.
int64_t sample_token(const std::vector<double>& logits, double temperature, int64_t top_k, Generator& gen) {
  for (double l : logits)
    if (std::isnan(l))
      throw UsageError("the model's logits are not numbers (NaN): its parameters are damaged; retrain it");
  const double largest = *std::max_element(logits.begin(), logits.end());
  double cutoff = -std::numeric_limits<double>::infinity();
  if (top_k > 0 && top_k < int64_t(logits.size())) {
    std::vector<double> sorted = logits;
    std::nth_element(sorted.begin(), sorted.begin() + (top_k - 1), sorted.end(), std::greater<>());
    cutoff = sorted[size_t(top_k - 1)];
  }
  std::vector<double> weights(logits.size());
  double total = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    // (l - largest) / t is at most 0: exp of it is in [0, 1], and 1 for the likeliest
    weights[i] = logits[i] < cutoff ? 0.0 : std::exp((logits[i] - largest) / temperature);
    if (std::isnan(weights[i])) weights[i] = logits[i] == largest ? 1.0 : 0.0;  // inf - inf: a logit of +inf
    total += weights[i];
  }
  double u = 0;
  random::uniform(gen, &u, 1, 0.0, 1.0);
  u *= total;
  int64_t pick = -1;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] == 0) continue;
    pick = int64_t(i);  // the last one with any weight, should rounding leave u past them all
    if (u < weights[i]) break;
    u -= weights[i];
  }
  return pick;
}

// continue_text for a GPT, with a key/value cache (nn/generation.h): the window's prefill, then one position
// a token, each step's logits continue_text's to rounding. Once the text outgrows the context T, the
// window slides by one a token and every position moves, so each step is again a prefill of the last T
// tokens, as continue_text's recomputation is (though only the last position goes through the head).
std::vector<int64_t> continue_text_cached(const nn::GPTModel& model, std::vector<int64_t> ids, int64_t count,
                                          double temperature, int64_t top_k, Generator& gen,
                                          const std::function<void(int64_t)>& on_token) {
  const int64_t T = model.cfg.context_length;
  nn::KVCache cache = nn::make_kv_cache(model);
  for (int64_t n = 0; n < count; ++n) {
    const int64_t length = int64_t(ids.size());
    const bool fits = length <= T && cache.length == length - 1;  // all but the newest token are cached
    if (!fits) cache.length = 0;                                  // (re)fill from the window's start
    const int64_t start = fits ? length - 1 : std::max<int64_t>(0, length - T);
    const std::vector<int64_t> fresh(ids.begin() + start, ids.end());
    const Tensor logits = nn::forward_cached(model, from_vector(fresh, {1, int64_t(fresh.size())}), cache)[0];
    ids.push_back(temperature == 0.0 ? int64_t(logits.argmax().item())
                                     : sample_token(logits.to_vector<double>(), temperature, top_k, gen));
    if (on_token) on_token(ids.back());
  }
  return ids;
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
