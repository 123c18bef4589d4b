// perplexity.h — how well a language model predicts a text: the mean loss over every token, scored with a
// sliding window so that texts longer than the context are covered and most tokens see a long left context.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "autograd/autograd.h"

namespace nn {

struct TextLoss {
  double total_nll = 0;     // Σ −ln p(token | the tokens before it in its window), in nats
  int64_t predictions = 0;  // tokens scored: every id but the first
  double mean() const { return predictions ? total_nll / double(predictions) : 0.0; }
  double perplexity() const { return std::exp(mean()); }
  // The same total in bits, per byte of the text: comparable across tokenizers (a character model and
  // GPT-2's BPE predict different units of the same bytes).
  double bits_per_byte(int64_t bytes) const { return total_nll / std::log(2.0) / double(bytes); }
};

// Scores ids[1..n) given the ids before each. Windows of at most `context` ids start every `stride` ids
// (1 <= stride <= context); each window scores only the tokens no earlier window scored, so every token is
// counted once, with at least context − stride ids before it (all of them near the start).
// `logits_of` maps ids [1, t] to logits [1, t, vocab]. Throws std::invalid_argument on bad arguments.
TextLoss sliding_window_loss(const std::function<autograd::Tensor(const autograd::Tensor&)>& logits_of,
                             const std::vector<int64_t>& ids, int64_t context, int64_t stride);

}  // namespace nn
