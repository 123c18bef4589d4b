// sampling.h — continuing a text token by token: greedy or sampled (temperature, top-k), with or without a
// GPT's key/value cache, and the notice a long generation gives.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "autograd/autograd.h"
#include "nn/generation.h"
#include "nn/gpt.h"
#include "options.h"

namespace cli {

using autograd::Device;
using autograd::from_vector;
using autograd::Generator;
using autograd::NoGradGuard;
using autograd::Tensor;

// The next token drawn from softmax(logits / temperature) among the top_k likeliest (0: all). The largest
// logit is subtracted before dividing, so a tiny temperature gives the likeliest token (never an overflow
// to inf and then NaN); logits that are not numbers are refused.
int64_t sample_token(const std::vector<double>& logits, double temperature, int64_t top_k, Generator& gen);

// Greedy (temperature 0) or sampled continuation of `ids`, feeding at most T characters at a time;
// `on_token` (if given) sees each new token as soon as it is made.
template <typename Model>
std::vector<int64_t> continue_text(const Model& model, int64_t T, std::vector<int64_t> ids, int64_t count,
                                   double temperature, int64_t top_k, Generator& gen, Device device,
                                   const std::function<void(int64_t)>& on_token = {}) {
  NoGradGuard no_grad;
  for (int64_t n = 0; n < count; ++n) {
    int64_t start = std::max<int64_t>(0, int64_t(ids.size()) - T);
    std::vector<int64_t> window(ids.begin() + start, ids.end());
    Tensor logits = model(from_vector(window, {1, int64_t(window.size())}).to(device)).select(1, -1)[0].cpu();
    ids.push_back(temperature == 0.0 ? int64_t(logits.argmax().item())
                                     : sample_token(logits.to_vector<double>(), temperature, top_k, gen));
    if (on_token) on_token(ids.back());
  }
  return ids;
}

// continue_text for a GPT, with a key/value cache (nn/generation.h): the window's prefill, then one position
// a token, each step's logits continue_text's to rounding. Once the text outgrows the context T, the
// window slides by one a token and every position moves, so each step is again a prefill of the last T
// tokens, as continue_text's recomputation is (though only the last position goes through the head).
std::vector<int64_t> continue_text_cached(const nn::GPTModel& model, std::vector<int64_t> ids, int64_t count,
                                          double temperature, int64_t top_k, Generator& gen,
                                          const std::function<void(int64_t)>& on_token);

// generate's continuation: continue_text_cached for a GPT unless --no-kv-cache, else continue_text.
template <typename Model>
void continue_for_generate(const GenerateOptions& o, const Model& model, int64_t T, const std::vector<int64_t>& ids,
                           Generator& gen, const std::function<void(int64_t)>& on_token) {
  if constexpr (std::is_same_v<Model, nn::GPTModel>)
    if (o.kv_cache) {
      continue_text_cached(model, ids, o.tokens, o.temperature, o.top_k, gen, on_token);
      return;
    }
  continue_text(model, T, ids, o.tokens, o.temperature, o.top_k, gen, Device::cpu(), on_token);
}

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
