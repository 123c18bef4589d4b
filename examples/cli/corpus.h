// corpus.h — a training run's text in token form: the training part and the held-out part, the batches
// drawn from it, and the held-out loss.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "autograd/autograd.h"
#include "options.h"
#include "text.h"
#include "train_tokenizer.h"

namespace cli {

using autograd::cross_entropy;
using autograd::Device;
using autograd::from_vector;
using autograd::NoGradGuard;
using autograd::Tensor;

// The text in token form (one 2-byte id per character), its first tenth kept back for held-out losses
// when that is long enough to hold a window.
struct Corpus {
  TokenizedText text;
  int64_t train_size = 0;  // ids [0, train_size) are trained on, the rest is held out
  std::string source;      // the text file's absolute path; empty: the built-in text
  bool source_is_pipe = false;  // read from a pipe (`--text <(cat a b)`): a resume cannot read it again
  RunTokenizer tokenizer;  // char: text.vocab's characters; bpe, gpt2: text.ids are its tokens
  int64_t held_out_bytes = 0;  // the held-out part's size in UTF-8 bytes, for bits per byte
  const Vocabulary& vocab() const { return text.vocab; }
  int64_t vocab_size() const { return tokenizer.is_char() ? text.vocab.size() : tokenizer.bpe->vocab_size(); }
  std::vector<int64_t> head_ids(int64_t T) const {  // the sample's prompt
    if (tokenizer.is_char()) return text.vocab.encode(head(T));
    return {text.ids.begin(), text.ids.begin() + std::min<ptrdiff_t>(ptrdiff_t(text.ids.size()), ptrdiff_t(T))};
  }
  std::string decode(const std::vector<int64_t>& ids) const {
    return tokenizer.is_char() ? encode_utf8(text.vocab.decode(ids)) : tokenizer.decode(ids);
  }
  // Held-out nats per token (a character, for char) to bits per byte: the unit that compares tokenizers.
  double bits_per_byte_factor() const {
    if (!held_out_bytes) return 0;
    return double(val().size()) / double(held_out_bytes) / std::log(2.0);
  }
  int64_t characters() const { return int64_t(text.ids.size()); }
  std::span<const uint16_t> train() const { return {text.ids.data(), size_t(train_size)}; }
  std::span<const uint16_t> val() const { return std::span<const uint16_t>(text.ids).subspan(size_t(train_size)); }
  bool has_val() const { return !val().empty(); }
  std::u32string head(int64_t T) const {  // the first T characters: the sample's prompt
    std::u32string out;
    for (size_t i = 0; i < std::min(text.ids.size(), size_t(T)); ++i) out.push_back(text.vocab.chars()[text.ids[i]]);
    return out;
  }
};

// The run's text (--text, or the workshop's), read with its tokenizer (--tokenizer); `base_tokenizer`: a
// fine-tune of a checkpoint of ours, whose tokenizer the text is read with. UsageError for a text too short
// for --context.
Corpus load_corpus(const TrainOptions& o, const std::optional<RunTokenizer>& base_tokenizer = std::nullopt);

// The workshop's batch() over token ids: the draw of nn::random_windows (randint(len(data) - T - 1, (B,))),
// gathered straight from the 2-byte ids into int64 rows.
std::pair<Tensor, Tensor> random_windows(std::span<const uint16_t> data, int64_t batch, int64_t T);

// Mean loss over up to 64 evenly spaced held-out windows; draws no random numbers, so evaluating does
// not change the training run.
template <typename Model>
double held_out_loss(const Model& model, std::span<const uint16_t> val, int64_t T, int64_t V, Device device) {
  NoGradGuard no_grad;
  const int64_t n = int64_t(val.size()), windows = std::min<int64_t>(64, n - T);
  std::vector<int64_t> xs, ys;
  for (int64_t w = 0; w < windows; ++w) {
    int64_t j = w * (n - T - 1) / std::max<int64_t>(windows - 1, 1);
    xs.insert(xs.end(), val.begin() + j, val.begin() + j + T);
    ys.insert(ys.end(), val.begin() + j + 1, val.begin() + j + T + 1);
  }
  // GPT-2's 50,257-wide logits for 64 windows would take hundreds of MB: such a model is scored a few
  // windows at a time (a small model in one piece, as before)
  const int64_t per_piece = std::clamp<int64_t>((int64_t(1) << 22) / std::max<int64_t>(T * V, 1), 1, windows);
  if (per_piece == windows) {
    Tensor logits = model(from_vector(xs, {windows, T}).to(device));
    return cross_entropy(logits.view({-1, V}), from_vector(ys, {windows * T}).to(device)).item();
  }
  double total = 0;
  for (int64_t first = 0; first < windows; first += per_piece) {
    const int64_t n = std::min(per_piece, windows - first);
    const std::vector<int64_t> x(xs.begin() + first * T, xs.begin() + (first + n) * T);
    const std::vector<int64_t> y(ys.begin() + first * T, ys.begin() + (first + n) * T);
    Tensor logits = model(from_vector(x, {n, T}).to(device));
    total += cross_entropy(logits.view({-1, V}), from_vector(y, {n * T}).to(device)).item() * double(n);
  }
  return total / double(windows);
}

}  // namespace cli
