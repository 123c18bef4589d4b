// trainer.cpp — training the character model on a text, sampling from a checkpoint, describing one.
#include "trainer.h"

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <iostream>
#include <cmath>
#include <limits>
#include <ostream>
#include <span>
#include <type_traits>

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include "autograd/backend.h"
#include "autograd/cpu/runtime/buffer_cache.h"
#include "autograd/cpu/runtime/core_peak.h"
#include "autograd/inspect/dot.h"
#include "plot/svg.h"
#include "nn/flops.h"
#include "nn/nn.h"
#include "nn/generation.h"
#include "nn/gpt2.h"
#include "nn/lora.h"
#include "nn/perplexity.h"
#include "nn/safetensors.h"
#include "optim/optim.h"
#include "finetune.h"
#include "guards.h"
#include "ranks.h"
#include "token_text.h"
#include "train_tokenizer.h"

namespace cli {

using namespace autograd;

namespace {

// ---------------------------------------------------------------- checks on user input

void require(bool ok, const std::string& message) {
  if (!ok) throw UsageError(message);
}

}  // namespace

void check_train_options(const TrainOptions& o) {
  require(o.steps >= 1, fmt::format("--steps must be at least 1, got {}", o.steps));
  require(o.batch >= 1, fmt::format("--batch must be at least 1, got {}", o.batch));
  require(o.context >= 1, fmt::format("--context must be at least 1, got {}", o.context));
  require(o.dim >= 1, fmt::format("--dim must be at least 1, got {}", o.dim));
  require(o.heads >= 1 && o.dim % o.heads == 0,
          fmt::format("--heads must be at least 1 and divide --dim {}, got {}", o.dim, o.heads));
  require(std::isfinite(o.lr) && o.lr > 0, fmt::format("--lr must be a positive number, got {}", o.lr));
  require(o.threads >= 1, fmt::format("--threads must be at least 1, got {}", o.threads));
  require(o.eval_every >= 1, fmt::format("--eval-every must be at least 1, got {}", o.eval_every));
  require(o.sample_tokens >= 0, fmt::format("--sample must be non-negative, got {}", o.sample_tokens));
  require(o.model == "mini" || o.model == "gpt", fmt::format("--model must be mini or gpt, got '{}'", o.model));
  require(o.layers >= 1, fmt::format("--layers must be at least 1, got {}", o.layers));
  require(std::isfinite(o.dropout) && o.dropout >= 0 && o.dropout < 1,
          fmt::format("--dropout must be in [0, 1), got {}", o.dropout));
  require(o.warmup >= 0, fmt::format("--warmup must be non-negative, got {}", o.warmup));
  require(std::isfinite(o.weight_decay) && o.weight_decay >= 0,
          fmt::format("--weight-decay must be non-negative, got {}", o.weight_decay));
  require(std::isfinite(o.clip) && o.clip >= 0, fmt::format("--clip must be non-negative (0: none), got {}", o.clip));
  require(o.accumulate >= 1, fmt::format("--accumulate must be at least 1, got {}", o.accumulate));
  require(o.save_every >= 0, fmt::format("--save-every must be non-negative, got {}", o.save_every));
  require(o.save_every == 0 || !o.save.empty(), "--save-every needs --save PATH");
  require(o.reduce_shards >= 0, fmt::format("--reduce-shards must be non-negative, got {}", o.reduce_shards));
  require(o.reduce_shards == 0 || o.deterministic_reduce, "--reduce-shards needs --deterministic-reduce");
  require(o.reduce_shards == 0 || o.batch % o.reduce_shards == 0,
          fmt::format("--reduce-shards {} must divide --batch {}", o.reduce_shards, o.batch));
  require(o.check_every >= 1, fmt::format("--check-every must be at least 1, got {}", o.check_every));
  require(o.tokenizer == "char" || o.tokenizer == "bpe" || o.tokenizer == "gpt2" || (o.tokenizer.empty() && !o.init.empty()),
          fmt::format("--tokenizer must be char, bpe or gpt2, got '{}'", o.tokenizer));
  require(o.tokenizer == "char" || o.model == "gpt",
          fmt::format("--tokenizer {} trains --model gpt (the workshop's model reads characters)", o.tokenizer));
  require(o.tokenizer == "gpt2" || o.tokenizer_file.empty() || !o.resume.empty() || !o.init.empty(),
          "--tokenizer-file is for --tokenizer gpt2 (GPT-2's files)");
  require(o.model != "gpt" || o.warmup < o.steps,
          fmt::format("--warmup {} must be below --steps {} (the cosine decay needs steps after it)", o.warmup, o.steps));
}

namespace {

// What only the number of ranks decides: equal shards of every batch, no dropout shared between ranks.
// Every rank checks the same options against the same count, so every rank refuses alike.
void check_options_for_ranks(const TrainOptions& o, const Ranks& ranks) {
  const int n = ranks.size();
  if (n == 1) return;
  auto require = [](bool ok, const std::string& message) {
    if (!ok) throw UsageErrorOnEveryRank(message);
  };
  require(o.batch % n == 0, fmt::format("--batch {} does not split into {} equal shards (one per rank)", o.batch, n));
  const int64_t shards = o.reduce_shards ? o.reduce_shards : o.batch;
  require(!o.deterministic_reduce || shards % n == 0,
          fmt::format("--deterministic-reduce: {} micro-shards do not split over {} ranks", shards, n));
  // Every rank draws from the same random stream, so their dropout masks would be the same: refuse.
  require(o.dropout == 0, fmt::format("--dropout {} with {} ranks: dropout is not supported across ranks yet", o.dropout, n));
  require(o.device == "cpu", fmt::format("--device {} with {} ranks: the ranks exchange CPU tensors", o.device, n));
}

Device checked_device(const std::string& name) {
  Device d;
  try {
    d = parse_device(name);
  } catch (const std::invalid_argument&) {
    throw UsageError(fmt::format("--device must be cpu or cuda, got '{}'", name));
  }
  try {
    (void)backend(d);  // a build without CUDA, or no usable GPU: the reason, and exit status 2
  } catch (const std::runtime_error& e) {
    throw UsageError(fmt::format("--device {}: {}", name, e.what()));
  }
  return d;
}

// ---------------------------------------------------------------- the data

// How many bytes the characters `ids` take in UTF-8.
int64_t utf8_bytes(std::span<const uint16_t> ids, const Vocabulary& vocab) {
  int64_t bytes = 0;
  for (uint16_t id : ids) {
    const char32_t c = vocab.chars()[id];
    bytes += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
  }
  return bytes;
}

// The text in token form (one 2-byte id per character), its first tenth kept back for held-out losses
// when that is long enough to hold a window.
struct Corpus {
  TokenizedText text;
  int64_t train_size = 0;  // ids [0, train_size) are trained on, the rest is held out
  std::string source;      // the text file's absolute path; empty: the built-in text
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

// --tokenizer bpe or gpt2: the text's bytes as that tokenizer's ids (a bpe learned from the training part
// only); a resumed run reads its text with the tokenizer its checkpoint carries.
Corpus load_token_corpus(const TrainOptions& o, const std::optional<RunTokenizer>& base_tokenizer) {
  require(o.model == "gpt", fmt::format("--tokenizer {} trains --model gpt (the workshop's model reads characters)", o.tokenizer));
  Corpus c;
  const std::string text = o.text_file.empty() ? std::string(kWorkshopText) : read_text_file(o.text_file);
  const std::string where = o.text_file.empty() ? "the built-in text" : o.text_file;
  require(!text.empty(), fmt::format("{} is empty", where));
  c.text = tokenize_text(text, where);  // its size and hash, which a resume compares
  if (!o.text_file.empty()) c.source = absolute_path(o.text_file);
  std::optional<RunTokenizer> known;
  if (!o.resume.empty()) known = tokenizer_of_checkpoint(nn::load_safetensors(o.resume).metadata, o.resume, o.tokenizer_file);
  else if (base_tokenizer) known = base_tokenizer;  // a fine-tune of our own GPT reads as it did
  TokenText tokens = tokenize_for_run(text, o.tokenizer, o.vocab_size, o.tokenizer_file, known, o.context + 2);
  require(int64_t(tokens.ids.size()) >= o.context + 2,
          fmt::format("{} is {} tokens; --context {} needs at least {}", where, tokens.ids.size(), o.context, o.context + 2));
  c.text.ids = std::move(tokens.ids);
  c.text.vocab = Vocabulary(std::u32string());
  c.train_size = tokens.train_tokens;
  c.held_out_bytes = tokens.held_out_bytes;
  c.tokenizer = std::move(tokens.tokenizer);
  return c;
}

// `base_tokenizer`: a fine-tune of a checkpoint of ours, whose tokenizer the text is read with.
Corpus load_corpus(const TrainOptions& o, const std::optional<RunTokenizer>& base_tokenizer = std::nullopt) {
  if (o.tokenizer != "char") return load_token_corpus(o, base_tokenizer);
  Corpus c;
  if (o.text_file.empty()) {
    c.text = tokenize_text(kWorkshopText, "the built-in text");
  } else {
    c.text = read_tokenized_text(o.text_file);
    c.source = absolute_path(o.text_file);
  }
  const std::string where = o.text_file.empty() ? "the built-in text" : o.text_file;
  require(c.characters() > 0, fmt::format("{} is empty", where));
  // a training window needs T inputs plus the next character, and randint needs a non-empty range
  require(c.characters() >= o.context + 2,
          fmt::format("{} has {} characters; --context {} needs at least {}", where, c.characters(), o.context,
                      o.context + 2));
  const int64_t held_out = c.characters() / 10;
  c.train_size = held_out >= o.context + 2 ? c.characters() - held_out : c.characters();  // one held-out window at least
  c.held_out_bytes = utf8_bytes(c.val(), c.vocab());
  return c;
}

// The workshop's batch() over token ids: the draw of nn::random_windows (randint(len(data) - T - 1, (B,))),
// gathered straight from the 2-byte ids into int64 rows.
std::pair<Tensor, Tensor> random_windows(std::span<const uint16_t> data, int64_t batch, int64_t T) {
  const std::vector<int64_t> starts = randint(0, int64_t(data.size()) - T - 1, {batch}).to_vector<int64_t>();
  std::vector<int64_t> x(size_t(batch * T)), y(size_t(batch * T));
  for (size_t b = 0; b < starts.size(); ++b)
    for (size_t t = 0; t < size_t(T); ++t) {
      x[b * size_t(T) + t] = data[size_t(starts[b]) + t];
      y[b * size_t(T) + t] = data[size_t(starts[b]) + t + 1];
    }
  return {from_vector(x, {batch, T}), from_vector(y, {batch, T})};
}

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

std::string format_duration(double seconds) {
  if (seconds < 60) return fmt::format("{:.1f}s", seconds);
  return fmt::format("{}m{:02d}s", int(seconds) / 60, int(seconds) % 60);
}

// ---------------------------------------------------------------- checkpoints

std::map<std::string, std::string> model_metadata(const nn::CharModelConfig& c, const Vocabulary& vocab,
                                                  const std::u32string& sample_prompt, int64_t steps) {
  return {{"format", "scratchgrad-char-model"},
          {"vocab", encode_utf8(vocab.chars())},
          {"dim", std::to_string(c.dim)},
          {"context", std::to_string(c.context)},
          {"heads", std::to_string(c.heads)},
          {"steps", std::to_string(steps)},
          {"sample_prompt", encode_utf8(sample_prompt)}};
}

int64_t metadata_int(const nn::Checkpoint& ck, const std::string& path, const std::string& key) {
  auto it = ck.metadata.find(key);
  if (it == ck.metadata.end()) throw nn::CheckpointError(fmt::format("{}: metadata has no '{}'", path, key));
  try {
    size_t used = 0;
    int64_t v = std::stoll(it->second, &used);
    if (used == it->second.size() && v > 0) return v;
  } catch (const std::exception&) {
  }
  throw nn::CheckpointError(fmt::format("{}: metadata '{}' is not a positive integer: '{}'", path, key, it->second));
}

// A GPT's output head is tied to its token embedding (GPT-2's is): one matrix, saved once.
bool head_is_tied(const nn::GPTModel& model) { return &model.out_head->weight.impl() == &model.tok_emb->weight.impl(); }

// The model's tensors for a checkpoint: a tied head is written once, as tok_emb.weight ("tied_head" = 1).
nn::NamedTensors gpt_state(const nn::GPTModel& model) {
  nn::NamedTensors out = model.state_dict();
  if (head_is_tied(model)) std::erase_if(out, [](const auto& entry) { return entry.first == "out_head.weight"; });
  return out;
}

std::map<std::string, std::string> gpt_metadata(const nn::GPTConfig& c, const Vocabulary& vocab,
                                                const std::u32string& sample_prompt, int64_t steps,
                                                bool tied_head = false) {
  std::map<std::string, std::string> m{{"format", "scratchgrad-gpt"},
                                       {"vocab", encode_utf8(vocab.chars())},
                                       {"layers", std::to_string(c.n_layers)},
                                       {"dim", std::to_string(c.emb_dim)},
                                       {"context", std::to_string(c.context_length)},
                                       {"heads", std::to_string(c.n_heads)},
                                       {"qkv_bias", c.qkv_bias ? "1" : "0"},
                                       {"steps", std::to_string(steps)},
                                       {"sample_prompt", encode_utf8(sample_prompt)}};
  if (tied_head) m["tied_head"] = "1";
  return m;
}

// A GPT run's metadata: a char run's as before; a bpe or gpt2 run's carries its tokenizer and the sample's
// prompt as ids.
std::map<std::string, std::string> gpt_metadata(const nn::GPTModel& model, const Corpus& corpus, int64_t T, int64_t steps) {
  const nn::GPTConfig& c = model.cfg;
  if (corpus.tokenizer.is_char()) return gpt_metadata(c, corpus.vocab(), corpus.head(T), steps, head_is_tied(model));
  auto m = gpt_metadata(c, Vocabulary(std::u32string()), std::u32string(), steps, head_is_tied(model));
  m.merge(corpus.tokenizer.metadata());
  const std::vector<int64_t> head = corpus.head_ids(T);
  m["sample_ids"] = fmt::format("{}", fmt::join(head, " "));
  return m;
}

// ---- a run's state, for --save-every and --resume: the model's tensors, the optimizer's ("optimizer."
// + its state_dict), and in the metadata the step reached, the schedule's position, the generator's state
// and every training option, so that a resumed run draws the same batches and ends as the uninterrupted one.
constexpr const char* kOptimizerPrefix = "optimizer.";

std::string hex_of(const std::vector<uint8_t>& bytes) {
  std::string out;
  for (uint8_t b : bytes) out += fmt::format("{:02x}", b);
  return out;
}
std::vector<uint8_t> bytes_of(const std::string& hex, const std::string& path) {
  if (hex.size() % 2) throw nn::CheckpointError(fmt::format("{}: generator state is malformed", path));
  std::vector<uint8_t> out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    try {
      out.push_back(uint8_t(std::stoul(hex.substr(i, 2), nullptr, 16)));
    } catch (const std::exception&) {
      throw nn::CheckpointError(fmt::format("{}: generator state is malformed", path));
    }
  }
  return out;
}

std::map<std::string, std::string> run_metadata(const TrainOptions& o, const Corpus& corpus, int64_t steps_done,
                                                int64_t schedule_epoch) {
  return {{"run.text", corpus.source},          {"run.steps", std::to_string(o.steps)},
          {"run.context", std::to_string(o.context)},
          {"run.text_hash", corpus.text.hash},  {"run.text_bytes", std::to_string(corpus.text.bytes)},
          {"run.batch", std::to_string(o.batch)}, {"run.lr", fmt::format("{:.17g}", o.lr)},
          {"run.seed", std::to_string(o.seed)}, {"run.eval_every", std::to_string(o.eval_every)},
          {"run.dropout", fmt::format("{:.17g}", o.dropout)}, {"run.warmup", std::to_string(o.warmup)},
          {"run.weight_decay", fmt::format("{:.17g}", o.weight_decay)}, {"run.clip", fmt::format("{:.17g}", o.clip)},
          {"run.accumulate", std::to_string(o.accumulate)}, {"run.sample", std::to_string(o.sample_tokens)},
          {"run.steps_done", std::to_string(steps_done)}, {"run.schedule_epoch", std::to_string(schedule_epoch)},
          {"run.generator", hex_of(default_generator().get_state())},
          {"run.deterministic_reduce", o.deterministic_reduce ? "1" : "0"},
          {"run.reduce_shards", std::to_string(o.reduce_shards)}, {"run.check_every", std::to_string(o.check_every)},
          {"run.numerics", numerics_name(numerics())}};
}

nn::NamedTensors without_optimizer(const nn::NamedTensors& tensors) {
  nn::NamedTensors out;
  for (const auto& [name, t] : tensors)
    if (!name.starts_with(kOptimizerPrefix)) out.emplace_back(name, t);
  return out;
}

struct LoadedModel {
  std::unique_ptr<nn::MiniSelfAttention> model;  // one of the two
  std::unique_ptr<nn::GPTModel> gpt;
  Vocabulary vocab{std::u32string()};
  std::u32string sample_prompt;
  nn::Checkpoint checkpoint;
  RunTokenizer tokenizer;             // bpe, gpt2: what the model reads and writes
  std::vector<int64_t> sample_ids;    // bpe, gpt2: the sample's prompt
  int64_t vocab_size() const { return tokenizer.is_char() ? vocab.size() : tokenizer.bpe->vocab_size(); }
};

// The prompt of the sample a run printed: its characters, or (bpe, gpt2) its ids.
void read_sample_prompt(LoadedModel& m, nn::Checkpoint& ck) {
  try {
    m.sample_prompt = decode_utf8(ck.metadata.count("sample_prompt") ? ck.metadata["sample_prompt"] : "");
  } catch (const UsageError&) {
  }
  if (!m.tokenizer.is_char()) {
    try {
      m.sample_ids = parse_token_ids(ck.metadata.count("sample_ids") ? ck.metadata["sample_ids"] : "", "sample_ids");
    } catch (const UsageError&) {  // no sample prompt: generate then needs --prompt
    }
    for (int64_t id : m.sample_ids)
      if (id >= m.vocab_size()) m.sample_ids.clear();
  }
}

LoadedModel load_lora_run(const std::string& path, nn::Checkpoint&& ck, const std::string& gpt2_tokenizer_file);

// A checkpoint of `train` (either model), or of a LoRA fine-tune (its base with its adapters on).
LoadedModel load_model(const std::string& path, const std::string& gpt2_tokenizer_file = "") {
  nn::Checkpoint ck = nn::load_safetensors(path);
  auto format = ck.metadata.find("format");
  if (format != ck.metadata.end() && format->second == "scratchgrad-lora")
    return load_lora_run(path, std::move(ck), gpt2_tokenizer_file);
  const bool gpt = format != ck.metadata.end() && format->second == "scratchgrad-gpt";
  if (format == ck.metadata.end() || (format->second != "scratchgrad-char-model" && !gpt))
    throw nn::CheckpointError(fmt::format("{}: not a scratchgrad checkpoint (metadata 'format' missing)", path));
  const RunTokenizer tok = gpt ? tokenizer_of_checkpoint(ck.metadata, path, gpt2_tokenizer_file) : RunTokenizer();
  std::u32string chars;
  if (tok.is_char()) {
    try {
      chars = decode_utf8(ck.metadata.count("vocab") ? ck.metadata["vocab"] : "");
    } catch (const UsageError&) {
      throw nn::CheckpointError(fmt::format("{}: vocabulary is not valid UTF-8", path));
    }
    if (chars.empty()) throw nn::CheckpointError(fmt::format("{}: metadata has an empty vocabulary", path));
    check_distinct_characters(chars, path);
  }
  check_finite_parameters(without_optimizer(ck.tensors), path);
  const int64_t dim = metadata_int(ck, path, "dim"), context = metadata_int(ck, path, "context"),
                heads = metadata_int(ck, path, "heads");
  if (dim % heads != 0)
    throw nn::CheckpointError(fmt::format("{}: dim {} is not divisible by heads {}", path, dim, heads));
  // The sizes the metadata gives must be those of tensors the file holds, before a model that big is built
  // (a lying "dim" would otherwise ask the allocator for terabytes: found by tests/fuzz/fuzz_checkpoint.cpp).
  const int64_t vocab = tok.is_char() ? int64_t(chars.size()) : tok.bpe->vocab_size();
  const int64_t layers = gpt ? metadata_int(ck, path, "layers") : 0;
  auto expect_shape = [&](const std::string& name, const Shape& want) {
    for (const auto& [n, t] : ck.tensors)
      if (n == name) {
        if (t.shape() != want)
          throw nn::CheckpointError(fmt::format("{}: size mismatch for {}: the metadata (vocab {}, dim {}, context {}{}) "
                                                "needs shape {}, the file's is {}",
                                                path, name, vocab, dim, context,
                                                gpt ? fmt::format(", layers {}", layers) : "", shape_to_string(want),
                                                t.shape_str()));
        return;
      }
    throw nn::CheckpointError(fmt::format("{}: the metadata's model needs a tensor {}, which the file lacks", path, name));
  };
  if (gpt) {
    expect_shape("tok_emb.weight", {vocab, dim});
    expect_shape("pos_emb.weight", {context, dim});
    expect_shape(fmt::format("trf_blocks.{}.att.W_key.weight", layers - 1), {dim, dim});
  } else {
    expect_shape("head.weight", {vocab, dim});
    expect_shape("pos.weight", {context, dim});
    expect_shape("k.weight", {dim, dim});
  }
  LoadedModel m;
  try {
    if (gpt) {
      nn::GPTConfig config{.vocab_size = vocab, .context_length = context, .emb_dim = dim,
                           .n_heads = heads, .n_layers = layers, .drop_rate = 0.0,
                           .qkv_bias = ck.metadata["qkv_bias"] == "1"};
      m.gpt = std::make_unique<nn::GPTModel>(config);
      nn::NamedTensors state = without_optimizer(ck.tensors);
      if (ck.metadata["tied_head"] == "1") {  // the head is the embedding: one tensor, saved once
        m.gpt->tie_weights();
        for (const auto& [name, t] : ck.tensors)
          if (name == "tok_emb.weight") state.emplace_back("out_head.weight", t);
      }
      m.gpt->load_state_dict(state);
      m.gpt->eval();
    } else {
      m.model = std::make_unique<nn::MiniSelfAttention>(nn::CharModelConfig{int64_t(chars.size()), dim, context, heads});
      m.model->load_state_dict(without_optimizer(ck.tensors));
      m.model->eval();
    }
  } catch (const std::invalid_argument& e) {
    throw nn::CheckpointError(fmt::format("{}: {}", path, e.what()));
  }
  m.vocab = Vocabulary(chars);
  m.tokenizer = tok;
  read_sample_prompt(m, ck);
  m.checkpoint = std::move(ck);
  return m;
}

// A LoRA fine-tune's checkpoint: the base file it names, loaded, with its adapters on; the run's tokenizer
// and sample prompt as its metadata records them.
LoadedModel load_lora_run(const std::string& path, nn::Checkpoint&& ck, const std::string& gpt2_tokenizer_file) {
  const nn::LoraCheckpoint adapters = nn::load_lora(path);
  std::unique_ptr<nn::GPTModel> model = load_gpt2_weights(adapters.base_path);
  if (!model) model = std::move(load_model(adapters.base_path, gpt2_tokenizer_file).gpt);
  if (!model) throw nn::CheckpointError(fmt::format("{}: its base {} is not a GPT", path, adapters.base_path));
  nn::apply_lora(*model, adapters, path);
  model->eval();
  LoadedModel m;
  m.tokenizer = tokenizer_of_checkpoint(ck.metadata, path, gpt2_tokenizer_file);
  if (m.tokenizer.is_char()) {
    try {
      m.vocab = Vocabulary(decode_utf8(ck.metadata.count("vocab") ? ck.metadata["vocab"] : ""));
    } catch (const UsageError&) {
      throw nn::CheckpointError(fmt::format("{}: vocabulary is not valid UTF-8", path));
    }
  }
  if (m.vocab_size() != model->cfg.vocab_size)
    throw nn::CheckpointError(fmt::format("{}: the run's tokenizer has {} tokens, its base {} a vocabulary of {}", path,
                                          m.vocab_size(), adapters.base_path, model->cfg.vocab_size));
  m.gpt = std::move(model);
  read_sample_prompt(m, ck);
  m.checkpoint = std::move(ck);
  return m;
}

}  // namespace

// ---------------------------------------------------------------- train

namespace {

// ---------------------------------------------------------------- one step's gradients, over the ranks

// The parameters' gradients side by side in one 1-D tensor, and back.
Tensor flat_gradients(const nn::Module& model) {
  std::vector<Tensor> pieces;
  for (const Tensor& p : model.parameters())
    pieces.push_back(p.grad().defined() ? p.grad().reshape({-1}) : zeros({p.numel()}, p.dtype()));
  return cat(pieces, 0);
}

void set_flat_gradients(const nn::Module& model, const Tensor& flat) {
  int64_t offset = 0;
  for (const Tensor& p : model.parameters()) {
    p.set_grad(flat.slice(0, offset, offset + p.numel()).view(p.shape()).clone());
    offset += p.numel();
  }
}

using LossOf = std::function<Tensor(const Tensor& x, const Tensor& y)>;

// Every rank draws the same global batch from the shared random stream, and rank r of N trains on its
// rows [r·B/N, (r+1)·B/N). The ranks' gradients are combined in one of two ways:
//   default: each rank's gradient of the mean loss over its shard, averaged over the ranks by
//     DistributedDataParallel's bucketed allreduce: the global batch's gradient, up to the rounding of a
//     different order of additions;
//   --deterministic-reduce: the batch cut into S micro-shards (S fixed by the options, not by N); each
//     micro-shard's gradient computed on its own, and the S gradients added one after another in shard
//     order (dist::sum_in_rank_order): the same bits for every N that divides S.
class ShardedGradients {
 public:
  ShardedGradients(Ranks& ranks, nn::Module& model, const TrainOptions& o)
      : ranks_(ranks), model_(model), o_(o), shards_(o.reduce_shards ? o.reduce_shards : o.batch) {
    if (o.deterministic_reduce) ranks_.set_require_sync(false);  // no bucketed averaging in this mode
  }

  void begin_step() {
    model_.zero_grad();
    ordered_total_ = Tensor();
    loss_ = 0;
  }

  // Adds the gradients of one (micro-)batch of the global stream; `last` is the step's last one.
  void add(const Tensor& xb, const Tensor& yb, bool last, const LossOf& loss_of) {
    if (o_.deterministic_reduce) return add_in_shard_order(xb, yb, loss_of);
    const int64_t n = ranks_.size(), rows = xb.size(0) / n, first = ranks_.rank() * rows;
    const Tensor x = n > 1 ? xb.slice(0, first, first + rows) : xb, y = n > 1 ? yb.slice(0, first, first + rows) : yb;
    ranks_.set_require_sync(last);  // earlier micro-batches only accumulate locally
    Tensor loss = loss_of(x, y);
    (o_.accumulate > 1 ? loss / double(o_.accumulate) : loss).backward();
    loss_ += loss.item() / double(o_.accumulate);
  }

  // Leaves in every .grad the gradient of the mean loss over the step's global batch; returns that loss.
  double finish_step() {
    if (!o_.deterministic_reduce) {
      ranks_.finish_gradient_sync();
      return ranks_.size() > 1 ? ranks_.sum(loss_) / double(ranks_.size()) : loss_;
    }
    ordered_total_.mul_(1.0 / double(shards_ * o_.accumulate));
    set_flat_gradients(model_, ordered_total_);
    return ranks_.sum(loss_);
  }

 private:
  void add_in_shard_order(const Tensor& xb, const Tensor& yb, const LossOf& loss_of) {
    const int64_t rows = xb.size(0) / shards_, mine = shards_ / ranks_.size(), first = ranks_.rank() * mine;
    std::vector<Tensor> parts;
    for (int64_t k = first; k < first + mine; ++k) {
      model_.zero_grad();
      Tensor loss = loss_of(xb.slice(0, k * rows, (k + 1) * rows), yb.slice(0, k * rows, (k + 1) * rows));
      loss.backward();
      loss_ += loss.item() / double(shards_ * o_.accumulate);
      parts.push_back(flat_gradients(model_));
    }
    Tensor total = ranks_.sum_in_rank_order(parts);
    if (ordered_total_.defined()) ordered_total_.add_(total);
    else ordered_total_ = total;
  }

  Ranks& ranks_;
  nn::Module& model_;
  const TrainOptions& o_;
  const int64_t shards_;
  Tensor ordered_total_;  // --deterministic-reduce: the step's micro-batches' ordered sums so far
  double loss_ = 0;       // this rank's share of the step's mean loss
};

// Under mpirun: how the step time splits (for bench/data_parallel.sh and docs/distributed.md), over the
// `steps` steps timed (all but the first).
void report_data_parallel(const Ranks& ranks, const TrainOptions& o, double step_seconds, int64_t steps, std::ostream& out) {
  if (!ranks.under_mpirun() || steps <= 0) return;
  const double sync_per_step = ranks.sync_seconds() / double(steps + 1);  // measured over every step
  out << fmt::format("data parallel: {} ranks x {} threads, {}, {} gradient buckets: {:.2f} ms per step, "
                     "{:.2f} ms of it waiting for gradients after backward\n",
                     ranks.size(), o.threads, o.deterministic_reduce ? "deterministic reduce" : (o.overlap ? "overlapped" : "not overlapped"),
                     ranks.bucket_sizes().size(), 1e3 * step_seconds / double(steps), 1e3 * sync_per_step);
}


// A run whose loss, gradient norm or parameters stop being finite numbers has diverged: it stops at
// once, before anything is saved, so the last checkpoint written (if any) stays as it was.
void stop_if_not_finite(double value, const char* what, int64_t step, const TrainOptions& o, int64_t saved_at) {
  if (std::isfinite(value)) return;
  const std::string kept = o.save.empty()      ? "nothing was saved"
                           : saved_at > 0     ? fmt::format("{} keeps the run as it was after {} steps", o.save, saved_at)
                                              : fmt::format("{} was not written", o.save);
  throw UsageError(fmt::format("step {}: the {} is {}: the run diverged, so it stops here ({}); try a smaller --lr "
                               "than {}",
                               step, what, value, kept, o.lr));
}

double parameters_sum(const nn::Module& model) {  // NaN or inf when any parameter is
  double total = 0;
  for (const Tensor& p : model.parameters()) total += p.detach().sum().cpu().item();
  return total;
}

// What a run shows and writes as it goes, for either model: one line per report (loss, held-out loss,
// tokens/s, elapsed and remaining time), the loss curve for --plot.
struct Progress {
  const TrainOptions& o;
  std::ostream& out;
  int64_t tokens_per_step;
  bool live = false;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::vector<double> curve, val_steps, val_curve;
  double bits_per_byte_factor = 0;  // bpe, gpt2 runs: the held-out loss in bits per byte too
  // GPT runs on the CPU: model FLOPs a token (nn/flops.h) over the peak of the cores in use (core_peak.h)
  double flops_per_token = 0, peak_flops = 0;

  void report(int64_t step, double loss, const std::function<double()>& held_out) {
    curve.push_back(loss);
    const bool due = step % o.eval_every == 0 || step == o.steps - 1;
    if (!due && !live) return;
    double val = std::nan("");
    if (due && held_out) {
      val = held_out();
      val_steps.push_back(double(step));
      val_curve.push_back(val);
    } else if (!val_curve.empty()) {
      val = val_curve.back();
    }
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double tokens_per_s = double((step + 1) * tokens_per_step) / std::max(elapsed, 1e-9);
    const double remaining = elapsed / double(step + 1) * double(o.steps - step - 1);
    std::string line = fmt::format("step {:>3} | loss {:.3f}", step, loss);
    if (held_out) line += fmt::format(" | held-out {:.3f}", val);
    if (held_out && bits_per_byte_factor) line += fmt::format(" ({:.3f} bits/byte)", val * bits_per_byte_factor);
    line += fmt::format(" | {:.0f} tok/s", tokens_per_s);
    if (flops_per_token > 0 && peak_flops > 0) line += fmt::format(" | mfu {:.0f}%", 100 * tokens_per_s * flops_per_token / peak_flops);
    line += fmt::format(" | {} elapsed | {} left", format_duration(elapsed), format_duration(remaining));
    if (live) out << "\r\033[K" << line << (due ? "\n" : "") << std::flush;
    else out << line << "\n";
  }

  void write_plot(const std::string& title) const {
    std::vector<double> steps(curve.size());
    for (size_t i = 0; i < steps.size(); ++i) steps[i] = double(i);
    std::vector<plot::svg::Series> lines{{.name = "train (batch loss)", .x = steps, .y = curve}};
    if (!val_curve.empty()) lines.push_back({.name = "held-out", .x = val_steps, .y = val_curve, .markers = true});
    write_text_file(o.plot, plot::svg::line_plot(lines, {.title = title}));
    out << "wrote the loss curve to " << o.plot << "\n";
  }
};

// The end of a run, for either model: final losses, a greedy sample, the checkpoint (`save`, if given),
// the pictures.
template <typename Model>
void finish(const Model& model, const Corpus& corpus, int64_t T, int64_t V, Device device, Progress& progress,
            double last_loss, const std::function<void()>& save, const std::string& plot_title) {
  const TrainOptions& o = progress.o;
  std::ostream& out = progress.out;
  out << fmt::format("final loss {:.3f}", last_loss);
  if (corpus.has_val()) {
    const double val = held_out_loss(model, corpus.val(), T, V, device);
    out << fmt::format(", held-out {:.3f}", val);
    if (const double factor = corpus.bits_per_byte_factor()) out << fmt::format(" ({:.3f} bits per byte)", val * factor);
  }
  out << "\n";
  Generator unused;
  std::vector<int64_t> ids = continue_text(model, T, corpus.head_ids(T), o.sample_tokens, 0.0, 0, unused, device);
  out << "generated: " << corpus.decode(ids) << "\n";
  if (save) {
    save();
    out << "saved " << o.save << "\n";
  }
  if (!o.graph.empty()) out << "wrote the graph of step 0 to " << o.graph << " (dot -Tsvg " << o.graph << " -o graph.svg)\n";
  if (!o.plot.empty()) progress.write_plot(plot_title);
}

void write_step_graph(const TrainOptions& o, const Tensor& loss, const nn::Module& model, const std::string& what) {
  write_text_file(o.graph, to_dot(loss, model.named_parameters(),
                                  {.title = fmt::format("scratchgrad train: the graph of step 0 ({})", what),
                                   .root_name = "loss"}));
}

int train_mini(const TrainOptions& o, const Corpus& corpus, Device device, Ranks& ranks, std::ostream& out) {
  manual_seed(o.seed);  // then the model, then the optimizer: the workshop's order of random draws
  nn::CharModelConfig config{corpus.vocab().size(), o.dim, o.context, o.heads};
  nn::MiniSelfAttention model(config);
  model.to(device);
  ranks.share_parameters(model, o.overlap);
  optim::Adam opt(model.parameters(), {.lr = o.lr});
  const int64_t V = config.vocab, T = o.context;

  out << fmt::format("training on {} characters ({} distinct{}), {} parameters, D {} T {} B {} heads {}, {} steps on {}\n",
                     corpus.characters(), V, corpus.has_val() ? fmt::format(", {} held out", corpus.val().size()) : "",
                     model.num_parameters(), o.dim, T, o.batch, o.heads, o.steps, device.str());
  Progress progress{o, out, o.batch * T, &out == &std::cout && isatty(STDOUT_FILENO)};
  std::function<double()> held_out;
  if (corpus.has_val()) held_out = [&] { return held_out_loss(model, corpus.val(), T, V, device); };
  ShardedGradients gradients(ranks, model, o);
  double last_loss = 0, step_seconds = 0;
  for (int64_t step = 0; step < o.steps; ++step) {
    const auto started = std::chrono::steady_clock::now();
    auto [xb, yb] = random_windows(corpus.train(), o.batch, T);  // the global batch: the same on every rank
    gradients.begin_step();
    gradients.add(xb, yb, true, [&](const Tensor& x, const Tensor& y) {
      Tensor logits = model(x.to(device));
      CallSite label("loss = cross_entropy(logits.view(-1, V), yb.view(-1))");  // for traces and graphs
      Tensor loss = cross_entropy(logits.view({-1, V}), y.to(device).view({-1}));
      if (step == 0 && !o.graph.empty() && ranks.is_root())
        write_step_graph(o, loss, model, fmt::format("D {} T {} B {} heads {}", o.dim, T, o.batch, o.heads));
      return loss;
    });
    last_loss = gradients.finish_step();
    stop_if_not_finite(last_loss, "loss", step, o, 0);
    opt.step();
    if (step > 0) step_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (ranks.is_root()) progress.report(step, last_loss, held_out);
    if ((step + 1) % o.check_every == 0) ranks.check_same_parameters(model, step + 1);
  }
  ranks.check_same_parameters(model, o.steps);
  report_data_parallel(ranks, o, step_seconds, o.steps - 1, out);
  stop_if_not_finite(parameters_sum(model), "sum of the parameters", o.steps, o, 0);
  const std::u32string prompt = corpus.head(T);
  if (ranks.is_root())
    finish(model, corpus, T, V, device, progress, last_loss,
           o.save.empty() ? std::function<void()>()
                          : [&] { nn::save_safetensors(o.save, model.state_dict(), model_metadata(config, corpus.vocab(), prompt, o.steps)); },
           fmt::format("loss, {} steps, D {} T {} B {} heads {}, lr {}", o.steps, o.dim, T, o.batch, o.heads, o.lr));
  ranks.barrier();  // the others wait for rank 0's checkpoint
  return 0;
}

// AdamW with decay on the Linear weights only: biases, LayerNorm's scale and shift and the embeddings
// are a second param group without it (nanoGPT's rule; nn::weight_decay_groups finds them by module).
optim::AdamW gpt_optimizer(const nn::GPTModel& model, const TrainOptions& o) {
  auto [decay, no_decay] = nn::weight_decay_groups(model);
  optim::AdamW opt(nn::tensors_of(decay), {.lr = o.lr, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = o.weight_decay});
  if (!no_decay.empty()) opt.add_param_group(nn::tensors_of(no_decay), {{"weight_decay", 0.0}});
  return opt;
}

// The model a GPT run trains, and what of it trains: all of a new model or a full fine-tune's, or a LoRA
// fine-tune's adapters alone (the rest frozen, with no gradients and no optimizer state).
struct RunModel {
  std::unique_ptr<nn::GPTModel> model;
  std::string base;                       // a fine-tune: the absolute path of the weights it started from
  std::optional<nn::LoraConfig> lora;     // a LoRA fine-tune's adapters
  std::unique_ptr<nn::LoraAdapters> adapters;
  std::optional<RunTokenizer> base_tokenizer;  // a fine-tune of a checkpoint of ours: its tokenizer,
  std::u32string base_vocab;                   // and (char) its characters
  bool finetune() const { return !base.empty(); }
  nn::Module& trained() const { return adapters ? static_cast<nn::Module&>(*adapters) : *model; }
};

optim::AdamW run_optimizer(const RunModel& run, const TrainOptions& o) {
  if (!run.adapters) return gpt_optimizer(*run.model, o);
  return optim::AdamW(run.adapters->parameters(),
                      {.lr = o.lr, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = o.weight_decay});
}

std::string run_description(const RunModel& run, const TrainOptions& o, int64_t T) {
  const nn::GPTConfig& c = run.model->cfg;
  const std::string shape = fmt::format("{} blocks D {} T {} B {}{} heads {}", c.n_layers, c.emb_dim, T, o.batch,
                                        o.accumulate > 1 ? fmt::format("×{}", o.accumulate) : "", c.n_heads);
  if (!run.finetune()) return fmt::format("{} parameters, {}", run.model->num_parameters(), shape);
  const int64_t trained = run.trained().num_parameters();
  const std::string what = run.lora ? fmt::format("LoRA rank {} alpha {} on {}, {} of {} parameters trained", run.lora->rank,
                                                  run.lora->alpha, fmt::join(run.lora->targets, ","), trained,
                                                  run.model->num_parameters())
                                    : fmt::format("all {} parameters trained", trained);
  return fmt::format("fine-tuning {} ({}), {}", run.base, what, shape);
}

int train_gpt(const TrainOptions& o, const Corpus& corpus, Device device, Ranks& ranks, std::ostream& out, RunModel run) {
  manual_seed(o.seed);
  if (!run.model)
    run.model = std::make_unique<nn::GPTModel>(nn::GPTConfig{.vocab_size = corpus.vocab_size(), .context_length = o.context,
                                                             .emb_dim = o.dim, .n_heads = o.heads, .n_layers = o.layers,
                                                             .drop_rate = o.dropout, .qkv_bias = false});
  nn::GPTModel& model = *run.model;
  nn::Module& trained = run.trained();
  const nn::GPTConfig& config = model.cfg;
  model.to(device);
  model.train();
  optim::AdamW opt = run_optimizer(run, o);
  optim::LambdaLR schedule(opt, optim::warmup_cosine(o.warmup, o.steps, 0.1));
  const int64_t V = config.vocab_size, T = o.context;

  const std::string text_size = corpus.tokenizer.is_char()
                                    ? fmt::format("{} characters ({} distinct", corpus.characters(), V)
                                    : fmt::format("{} tokens ({} tokenizer, vocabulary {}", corpus.characters(),
                                                  corpus.tokenizer.kind, V);
  out << fmt::format("training a GPT on {}{}), {}, {} steps on {}\n", text_size,
                     corpus.has_val() ? fmt::format(", {} held out", corpus.val().size()) : "",
                     run_description(run, o, T), o.steps, device.str());
  Progress progress{o, out, o.batch * o.accumulate * T, &out == &std::cout && isatty(STDOUT_FILENO)};
  progress.bits_per_byte_factor = corpus.bits_per_byte_factor();
  if (device.is_cpu()) {
    progress.flops_per_token = nn::gpt_training_flops_per_token(model, T);
    progress.peak_flops = cpu::core_peak_flops() * get_num_threads() * ranks.size();
    progress.start = std::chrono::steady_clock::now();  // the peak's measurement (about 100 ms) is not the run's
  }
  std::function<double()> held_out;
  if (corpus.has_val())
    held_out = [&] {
      model.eval();  // no dropout while measuring
      const double loss = held_out_loss(model, corpus.val(), T, V, device);
      model.train();
      return loss;
    };
  int64_t first_step = 0, saved_at = 0;  // saved_at: the step of the last checkpoint this run wrote
  if (!o.resume.empty()) {  // the saved run's parameters, moments, schedule and random stream
    nn::Checkpoint ck = nn::load_safetensors(o.resume);
    nn::NamedTensors optimizer_state;
    for (const auto& [name, t] : ck.tensors)
      if (name.starts_with(kOptimizerPrefix)) optimizer_state.emplace_back(name.substr(std::strlen(kOptimizerPrefix)), t);
    check_finite_parameters(ck.tensors, o.resume);
    check_optimizer_state(optimizer_state, trained.parameters().size(), o.resume);
    first_step = run_state_int(ck.metadata, o.resume, "run.steps_done", 0, o.steps);
    const int64_t epoch = run_state_int(ck.metadata, o.resume, "run.schedule_epoch", 0, first_step);
    try {
      if (!run.finetune()) model.load_state_dict(without_optimizer(ck.tensors));  // a fine-tune's came with it
      opt.load_state_dict(optimizer_state);
    } catch (const std::exception& e) {
      throw nn::CheckpointError(fmt::format("{}: cannot resume from it: {}", o.resume, e.what()));
    }
    for (int64_t k = 0; k < epoch; ++k) schedule.step();
    try {
      default_generator().set_state(bytes_of(ck.metadata["run.generator"], o.resume));
    } catch (const std::invalid_argument& e) {
      throw nn::CheckpointError(fmt::format("{}: run state 'run.generator' is damaged ({})", o.resume, e.what()));
    }
    out << fmt::format("resuming {} at step {}\n", o.resume, first_step);
  }
  auto metadata_at = [&](int64_t steps_done) {
    auto metadata = gpt_metadata(model, corpus, T, steps_done);
    metadata.merge(run_metadata(o, corpus, steps_done, schedule.last_epoch()));
    if (run.finetune()) metadata["run.init"] = run.base;
    return metadata;
  };
  // a LoRA run writes its adapters and a reference to the base file; any other run, the whole model
  auto save = [&](int64_t steps_done) {
    nn::NamedTensors optimizer_state;
    for (auto& [name, t] : opt.state_dict()) optimizer_state.emplace_back(kOptimizerPrefix + name, t);
    if (run.lora) return nn::save_lora(o.save, model, *run.lora, run.base, metadata_at(steps_done), optimizer_state);
    nn::NamedTensors tensors = gpt_state(model);
    tensors.insert(tensors.end(), optimizer_state.begin(), optimizer_state.end());
    nn::save_safetensors(o.save, tensors, metadata_at(steps_done));  // a temporary file renamed into place
  };
  ranks.share_parameters(trained, o.overlap);  // after a resume too: rank 0's parameters win
  ShardedGradients gradients(ranks, trained, o);
  double last_loss = 0, step_seconds = 0;
  for (int64_t step = first_step; step < o.steps; ++step) {
    const auto started = std::chrono::steady_clock::now();
    gradients.begin_step();
    for (int64_t micro = 0; micro < o.accumulate; ++micro) {  // gradients add up over the micro-batches
      auto [xb, yb] = random_windows(corpus.train(), o.batch, T);  // the global batch: the same on every rank
      gradients.add(xb, yb, micro + 1 == o.accumulate, [&](const Tensor& x, const Tensor& y) {
        Tensor logits = model(x.to(device));
        CallSite label("loss = cross_entropy(logits.flatten(0, 1), targets.flatten())");
        Tensor loss = cross_entropy(logits.view({-1, V}), y.to(device).view({-1}));
        if (step == 0 && micro == 0 && !o.graph.empty() && ranks.is_root())
          write_step_graph(o, loss, model, fmt::format("GPT, {} blocks D {} T {} B {} heads {}", config.n_layers,
                                                       config.emb_dim, T, o.batch, config.n_heads));
        return loss;
      });
    }
    last_loss = gradients.finish_step();
    stop_if_not_finite(last_loss, "loss", step, o, saved_at);
    // clip_grad_norm_ then step(), with the scaling done as AdamW reads each gradient
    optim::ClipCoefficient clip;  // no clipping: a coefficient of 1
    if (o.clip > 0) {
      clip = optim::clip_coefficient(trained.parameters(), o.clip);
      stop_if_not_finite(clip.total_norm.item(), "gradient norm", step, o, saved_at);
    }
    opt.step(clip.coefficient);
    schedule.step();
    if (step > first_step)  // the first step warms caches and pools up: not timed
      step_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (ranks.is_root()) progress.report(step, last_loss, held_out);
    if ((step + 1) % o.check_every == 0) ranks.check_same_parameters(trained, step + 1);
    if (o.save_every > 0 && (step + 1) % o.save_every == 0 && step + 1 < o.steps) {
      stop_if_not_finite(parameters_sum(trained), "sum of the parameters", step, o, saved_at);
      if (ranks.is_root()) save(step + 1);
      saved_at = step + 1;
      ranks.barrier();  // the others wait until the checkpoint is in place
      ranks.note_checkpoint(o.save, step + 1);
    }
  }
  ranks.check_same_parameters(trained, o.steps);
  report_data_parallel(ranks, o, step_seconds, o.steps - first_step - 1, out);
  stop_if_not_finite(parameters_sum(trained), "sum of the parameters", o.steps, o, saved_at);
  model.eval();
  if (ranks.is_root())
    finish(model, corpus, T, V, device, progress, last_loss, o.save.empty() ? std::function<void()>() : [&] { save(o.steps); },
           fmt::format("loss, GPT {} blocks, {} steps, D {} T {} B {} heads {}, lr {}", config.n_layers, o.steps,
                       config.emb_dim, T, o.batch, config.n_heads, o.lr));
  ranks.barrier();  // the others wait for rank 0's checkpoint
  return 0;
}

}  // namespace

void apply_gpt_preset(TrainOptions& o, const std::string& preset, const std::function<bool(const char*)>& is_set) {
  struct Preset {
    int64_t layers, dim, heads, context, batch, steps;
  };
  Preset p;
  if (preset == "tiny") p = {2, 48, 4, 32, 16, 1000};
  else if (preset == "small") p = {3, 96, 4, 64, 16, 3000};
  else throw UsageError(fmt::format("--preset must be tiny or small, got '{}'", preset));
  auto fill = [&](const char* flag, auto& field, auto value) {
    if (!is_set(flag)) field = value;
  };
  fill("--layers", o.layers, p.layers);
  fill("--dim", o.dim, p.dim);
  fill("--heads", o.heads, p.heads);
  fill("--context", o.context, p.context);
  fill("--batch", o.batch, p.batch);
  fill("--steps", o.steps, p.steps);
  fill("--lr", o.lr, 3e-3);
  fill("--eval-every", o.eval_every, p.steps / 10);
  fill("--sample", o.sample_tokens, int64_t(200));
}

// --resume: the saved run's options. The command line gives --resume, and may add --steps (to extend the
// run) and settings that leave the run's model, data and recipe alone (guards.h: flags_fixed_by_resume).
// Its text is read again from the absolute path recorded, unless --text names another.
TrainOptions resumed_options(TrainOptions o) {
  nn::Checkpoint ck = nn::load_safetensors(o.resume);
  const bool lora = ck.metadata["format"] == "scratchgrad-lora";  // a LoRA fine-tune's adapters
  if ((ck.metadata["format"] != "scratchgrad-gpt" && !lora) || !ck.metadata.count("run.steps_done"))
    throw nn::CheckpointError(fmt::format("{}: not a checkpoint of a GPT training run (train --model gpt --save)", o.resume));
  const auto& m = ck.metadata;
  const std::string& path = o.resume;
  constexpr int64_t kMax = INT64_MAX;
  auto whole = [&](const char* key, int64_t lo) { return run_state_int(m, path, key, lo, kMax); };
  auto number = [&](const char* key) { return run_state_number(m, path, key); };
  o.model = "gpt";
  if (o.text_file.empty()) o.text_file = m.count("run.text") ? m.at("run.text") : "";
  o.layers = whole("layers", 1), o.dim = whole("dim", 1), o.heads = whole("heads", 1);
  // the training window; a fine-tune's model has a context of its own ("context"), runs before fine-tuning
  // recorded only that one, the same
  o.context = m.count("run.context") ? whole("run.context", 1) : whole("context", 1);
  if (lora) {  // the base the adapters were trained on, loaded again
    o.init = m.count("base") ? m.at("base") : "";
    o.lora_rank = whole("rank", 1), o.lora_alpha = number("alpha");
    o.lora_targets = m.count("targets") ? m.at("targets") : "";
    if (o.init.empty()) throw nn::CheckpointError(fmt::format("{}: the LoRA run's base file is not named", path));
  } else if (m.count("run.init")) {
    o.init = m.at("run.init");
  }
  const int64_t saved_steps = whole("run.steps", 1), steps_done = whole("run.steps_done", 0);
  if (steps_done > saved_steps)
    throw nn::CheckpointError(fmt::format("{}: run state 'run.steps_done' {} is past the run's {} steps", path,
                                          steps_done, saved_steps));
  if (!o.steps_set) o.steps = saved_steps;
  else if (o.steps < steps_done)
    throw UsageError(fmt::format("--steps {} is below the {} steps {} has already done (--steps extends a resumed run)",
                                 o.steps, steps_done, path));
  o.batch = whole("run.batch", 1), o.eval_every = whole("run.eval_every", 1);
  o.lr = number("run.lr"), o.seed = uint64_t(whole("run.seed", 0)), o.dropout = number("run.dropout");
  o.warmup = whole("run.warmup", 0), o.weight_decay = number("run.weight_decay"), o.clip = number("run.clip");
  o.accumulate = whole("run.accumulate", 1), o.sample_tokens = whole("run.sample", 0);
  if (m.count("run.deterministic_reduce")) {  // checkpoints older than data parallelism lack these
    o.deterministic_reduce = m.at("run.deterministic_reduce") == "1";
    o.reduce_shards = whole("run.reduce_shards", 0);
    if (!o.check_every_set) o.check_every = whole("run.check_every", 1);
  }
  o.tokenizer = m.count("tokenizer") ? m.at("tokenizer") : "char";
  // the run goes on in the numerics it started in, unless asked otherwise (older checkpoints: the default)
  if (o.numerics.empty() && m.count("run.numerics")) o.numerics = m.at("run.numerics");
  return o;
}

// A resumed run must train on the text it started on (the embedding's rows are its characters): the text
// given must have the size and hash the checkpoint recorded, unless --allow-other-text; then its
// characters are numbered as the checkpoint's vocabulary numbers them, and one outside it is refused.
void use_vocabulary(Corpus& corpus, const std::u32string& saved);

void check_resumed_text(const TrainOptions& o, Corpus& corpus) {
  nn::Checkpoint ck = nn::load_safetensors(o.resume);
  const auto& m = ck.metadata;
  // (a checkpoint from before texts were recorded has no hash: only its vocabulary can be compared)
  const bool same = !m.count("run.text_hash") ||
                    (m.at("run.text_hash") == corpus.text.hash && m.count("run.text_bytes") &&
                     m.at("run.text_bytes") == std::to_string(corpus.text.bytes));
  const std::string where = o.text_file.empty() ? "the built-in text" : o.text_file;
  if (!same && !o.allow_other_text)
    throw UsageError(fmt::format("{} ({} bytes, {}) is not the text {} was trained on ({} bytes, {}{}); pass "
                                 "--allow-other-text to continue on it anyway",
                                 where, corpus.text.bytes, corpus.text.hash, o.resume,
                                 m.count("run.text_bytes") ? m.at("run.text_bytes") : "?", m.at("run.text_hash"),
                                 m.count("run.text") && !m.at("run.text").empty() ? ", " + m.at("run.text")
                                                                                   : ", the built-in text"));
  if (!corpus.tokenizer.is_char()) return;  // read with the checkpoint's own tokenizer: the same ids
  std::u32string saved;
  try {
    saved = decode_utf8(m.count("vocab") ? m.at("vocab") : "");
  } catch (const UsageError&) {
    throw nn::CheckpointError(fmt::format("{}: vocabulary is not valid UTF-8", o.resume));
  }
  use_vocabulary(corpus, saved);
}

// The text's characters numbered as `saved` (a checkpoint's vocabulary) numbers them; a character outside
// it is refused (UsageError).
void use_vocabulary(Corpus& corpus, const std::u32string& saved) {
  if (saved == corpus.text.vocab.chars()) return;
  const Vocabulary vocab(saved);
  std::vector<uint16_t> renumber(corpus.text.vocab.chars().size());
  for (size_t i = 0; i < renumber.size(); ++i) {
    const char32_t c = corpus.text.vocab.chars()[i];
    const std::vector<int64_t> id = vocab.encode(std::u32string(1, c));  // UsageError for a new character
    renumber[i] = uint16_t(id[0]);
  }
  for (uint16_t& id : corpus.text.ids) id = renumber[id];
  corpus.text.vocab = vocab;
}

// What a model of these sizes needs at the least: its parameters with their gradients and both Adam
// moments (16 bytes a parameter), and one batch's logits and attention scores, in float32.
double training_bytes(const TrainOptions& o, int64_t vocab) {
  const double D = double(o.dim), T = double(o.context), B = double(o.batch), V = double(vocab), L = double(o.layers);
  const double H = double(o.heads);
  const double parameters = o.model == "gpt" ? V * D + T * D + L * 12 * D * D + V * D : V * D + T * D + 3 * D * D + V * D;
  const double activations = B * T * ((o.model == "gpt" ? L : 1) * (8 * D + H * T) + 2 * V);
  return 16 * parameters + 4 * activations;
}

autograd::Numerics use_numerics_for(const std::string& model, const std::string& requested) {
  Numerics mode = model == "gpt" ? Numerics::fast : Numerics::exact;
  try {
    if (!requested.empty()) mode = parse_numerics(requested, "--numerics");
    else if (auto from_env = numerics_from_environment()) mode = *from_env;
    set_numerics(mode);  // (its first use also reads SCRATCHGRAD_NUMERICS, which may be bad)
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  return mode;
}

void use_kernels(const std::string& requested) {
  try {
    if (!requested.empty()) set_kernels(parse_kernels(requested, "--kernels"));
    else kernels_from_environment();  // a bad SCRATCHGRAD_KERNELS is the user's mistake, said as such
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
}

// The weights --init names, and what they decide: GPT-2's (which read GPT-2's tokens) or a checkpoint of
// our own GPT (which reads its own tokenizer's); --tokenizer, if given, must agree.
std::unique_ptr<nn::GPTModel> load_base(const std::string& path, TrainOptions& o, RunModel& run) {
  auto tokenizer_must_be = [&](const std::string& kind, const std::string& why) {
    if (o.tokenizer.empty()) o.tokenizer = kind;
    require(o.tokenizer == kind, fmt::format("--tokenizer {} does not fit {}: {} (leave --tokenizer out, or give "
                                             "--tokenizer {})",
                                             o.tokenizer, path, why, kind));
  };
  if (std::unique_ptr<nn::GPTModel> gpt2 = load_gpt2_weights(path)) {
    tokenizer_must_be("gpt2", "GPT-2's weights read GPT-2's tokens (with --tokenizer-file DIR)");
    return gpt2;
  }
  LoadedModel ours = load_model(path, o.tokenizer_file);
  if (!ours.gpt)
    throw UsageError(fmt::format("--init {}: a checkpoint of the workshop's one-layer model; --init fine-tunes a GPT "
                                 "(GPT-2's weights or a checkpoint of train --model gpt)",
                                 path));
  tokenizer_must_be(ours.tokenizer.kind, fmt::format("the checkpoint reads its own {} tokenizer", ours.tokenizer.kind));
  if (!nn::lora_parameters(*ours.gpt).empty()) nn::merge_lora(*ours.gpt);  // a LoRA run goes on from its merged weights
  run.base_tokenizer = ours.tokenizer;
  run.base_vocab = ours.vocab.chars();
  return std::move(ours.gpt);
}

// A fine-tune's model (o.init set): the base's weights; on --resume, a full fine-tune's checkpoint or a
// LoRA run's base with its saved adapters. Sets what the model decides: its shape, the training window.
RunModel finetune_model(TrainOptions& o) {
  RunModel run;
  const bool resumed = !o.resume.empty();
  if (!resumed) o.init = absolute_path(o.init);  // what a checkpoint records
  run.base = o.init;
  if (resumed && o.lora_rank == 0) {  // a full fine-tune: all the weights are in the checkpoint
    LoadedModel saved = load_model(o.resume, o.tokenizer_file);
    run.model = std::move(saved.gpt);
  } else {
    run.model = load_base(o.init, o, run);
  }
  nn::GPTModel& model = *run.model;
  if (!resumed) o.context = finetune_context(o, model, o.init);
  o.layers = model.cfg.n_layers, o.dim = model.cfg.emb_dim, o.heads = model.cfg.n_heads;
  set_dropout(model, o.dropout);
  if (o.lora_rank > 0) {
    run.lora = lora_config(o, model);
    if (resumed) {
      try {
        nn::apply_lora(model, nn::load_lora(o.resume), o.resume);
      } catch (const std::invalid_argument& e) {
        throw nn::CheckpointError(fmt::format("{}: {}", o.resume, e.what()));
      }
    } else {
      manual_seed(o.seed);  // the adapters' A, drawn as a Linear's weight
      nn::add_lora(model, *run.lora);
    }
    run.adapters = std::make_unique<nn::LoraAdapters>(model);
  } else {
    for (Tensor& p : model.parameters()) p.requires_grad_(true);  // (a base that was a LoRA run had them frozen)
  }
  // The file's tensors, freed as they were copied into the model, sit in the CPU buffer cache (which keeps
  // freed blocks for reuse): as much again as the weights, in sizes a training step does not ask for.
  autograd::cpu::release_cached_buffers();
  return run;
}

int run_train(const TrainOptions& given, std::ostream& given_out) {
  use_kernels(given.kernels);  // first: any tensor made before would read SCRATCHGRAD_KERNELS on its own
  TrainOptions o = given.resume.empty() ? given : resumed_options(given);
  check_train_options(o);
  Ranks ranks;  // under mpirun: this process is one of N
  check_options_for_ranks(o, ranks);
  std::ostream quiet(nullptr);  // only rank 0 prints
  std::ostream& out = ranks.is_root() ? given_out : quiet;
  const Device device = checked_device(o.device);
  // --resume may name the --save file (a run goes on in its own checkpoint); no other two may be one file
  check_distinct_files({{"--text", o.text_file}, {"--save", o.save}, {"--graph", o.graph}, {"--plot", o.plot}, {"--init", o.init}});
  check_distinct_files({{"--resume", o.resume}, {"--text", o.text_file}, {"--graph", o.graph}, {"--plot", o.plot}});
  if (!o.save.empty()) o.save = checkpoint_target("--save", o.save);
  for (const std::string& path : {o.save, o.graph, o.plot})
    if (!path.empty() && ranks.is_root()) nn::check_writable(path);  // fail now, not after the whole run
  if (!o.resume.empty() && ranks.is_root()) nn::remove_stale_temp_files(o.resume);  // what a killed save of it left
  std::string note;
  o.threads = usable_threads(o.threads, note);
  if (!note.empty()) out << note << "\n";
  set_num_threads(o.threads);
  use_numerics_for(o.model, o.numerics);
  RunModel run;
  if (!o.init.empty()) run = finetune_model(o);
  Corpus corpus = load_corpus(o, run.base_tokenizer);
  require(o.resume.empty() || o.model == "gpt", "--resume continues a GPT run");
  if (!o.resume.empty()) check_resumed_text(o, corpus);
  else if (run.base_tokenizer && corpus.tokenizer.is_char()) use_vocabulary(corpus, run.base_vocab);
  if (run.model) {
    check_same_vocabulary(*run.model, run.base, corpus.vocab_size(), corpus.tokenizer.kind);
    check_fits_in_memory(finetune_bytes(*run.model, run.trained().num_parameters(), o),
                         fmt::format("a fine-tune of {} at --context {} --batch {}", run.base, o.context, o.batch));
  } else {
    check_fits_in_memory(training_bytes(o, corpus.vocab_size()),
                         fmt::format("{}--dim {} --context {} --batch {} on a vocabulary of {}",
                                     o.model == "gpt" ? fmt::format("a GPT of --layers {} ", o.layers) : "a model of ",
                                     o.dim, o.context, o.batch, corpus.vocab_size()));
  }
  if (ranks.size() > 1)
    out << fmt::format("data parallel: {} ranks, each {} of the {} windows of every batch{}\n", ranks.size(),
                       o.batch / ranks.size(), o.batch, o.deterministic_reduce ? ", deterministic reduce" : "");
  return o.model == "gpt" ? train_gpt(o, corpus, device, ranks, out, std::move(run)) : train_mini(o, corpus, device, ranks, out);
}

// ---------------------------------------------------------------- generate and info

namespace {

// `generate` on a GPT trained with --tokenizer bpe or gpt2: the prompt encoded with the checkpoint's
// tokenizer, the continuation streamed as whole characters (token_text.h), or the ids with --ids.
int generate_with_tokenizer(const GenerateOptions& o, LoadedModel& m, std::ostream& out) {
  const tokenizer::Tokenizer& tok = *m.tokenizer.bpe;
  std::vector<int64_t> ids = o.prompt ? encode_for_model(tok, *o.prompt, m.vocab_size(), "generate: --prompt") : m.sample_ids;
  require(!ids.empty(), "the prompt is empty (pass --prompt TEXT)");
  Generator gen(o.seed);
  const int64_t T = m.gpt->cfg.context_length;
  DurationNotice notice(o.tokens);
  if (o.print_ids) {
    for (size_t i = 0; i < ids.size(); ++i) out << (i ? " " : "") << ids[i];
    out << std::flush;
    continue_for_generate(o, *m.gpt, T, ids, gen, [&](int64_t id) {
      out << " " << id << std::flush;
      notice.token_made();
    });
    out << "\n";
    return 0;
  }
  Utf8Stream text;
  out << text.push(m.tokenizer.decode(ids)) << std::flush;
  continue_for_generate(o, *m.gpt, T, ids, gen, [&](int64_t id) {
    out << text.push(tok.token_bytes(int32_t(id))) << std::flush;
    notice.token_made();
  });
  out << text.flush() << "\n";
  return 0;
}

}  // namespace

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

int run_generate(const GenerateOptions& o, std::ostream& out) {
  use_kernels(o.kernels);  // first, as in run_train
  require(o.tokens >= 0, fmt::format("--tokens must be non-negative, got {}", o.tokens));
  require(std::isfinite(o.temperature) && o.temperature >= 0,
          fmt::format("--temperature must be 0 (greedy) or positive, got {}", o.temperature));
  require(o.top_k >= 0, fmt::format("--top-k must be non-negative, got {}", o.top_k));
  if (nn::is_llmc_checkpoint(o.checkpoint) || nn::is_gpt2_file(o.checkpoint))
    return run_generate_gpt2(o, o.checkpoint, nn::Checkpoint(), out, std::cerr);
  LoadedModel m = load_model(o.checkpoint, o.tokenizer_file);
  use_numerics_for(m.gpt ? "gpt" : "mini", o.numerics);
  if (!m.tokenizer.is_char()) return generate_with_tokenizer(o, m, out);
  std::u32string prompt = o.prompt ? decode_utf8(*o.prompt) : m.sample_prompt;
  require(!prompt.empty(), "the prompt is empty (pass --prompt TEXT)");
  std::vector<int64_t> ids = m.vocab.encode(prompt);
  Generator gen(o.seed);
  DurationNotice notice(o.tokens);
  if (o.print_ids) {  // the ids, the prompt's included, space-separated (for scripts), each as it is made
    for (size_t i = 0; i < ids.size(); ++i) out << (i ? " " : "") << ids[i];
    out << std::flush;
    auto print_id = [&](int64_t id) {
      out << " " << id << std::flush;
      notice.token_made();
    };
    if (m.gpt) continue_for_generate(o, *m.gpt, m.gpt->cfg.context_length, ids, gen, print_id);
    else continue_for_generate(o, *m.model, m.model->config.context, ids, gen, print_id);
    out << "\n";
    return 0;
  }
  // each character is printed as soon as it is made: a long generation shows its progress
  out << encode_utf8(prompt) << std::flush;
  auto print = [&](int64_t id) {
    out << encode_utf8(m.vocab.chars()[size_t(id)]) << std::flush;
    notice.token_made();
  };
  if (m.gpt) continue_for_generate(o, *m.gpt, m.gpt->cfg.context_length, ids, gen, print);
  else continue_for_generate(o, *m.model, m.model->config.context, ids, gen, print);
  out << "\n";
  return 0;
}

int run_info(const std::string& path, std::ostream& out) {
  LoadedModel m = load_model(path);
  out << fmt::format("checkpoint: {}\n", path);
  if (m.gpt) {
    const nn::GPTConfig& c = m.gpt->cfg;
    out << fmt::format("model: GPT, {} blocks, vocab {} dim {} context {} heads {}, trained {} steps\n", c.n_layers,
                       c.vocab_size, c.emb_dim, c.context_length, c.n_heads, m.checkpoint.metadata["steps"]);
  } else {
    const nn::CharModelConfig& c = m.model->config;
    out << fmt::format("model: character self-attention, vocab {} dim {} context {} heads {}, trained {} steps\n",
                       c.vocab, c.dim, c.context, c.heads, m.checkpoint.metadata["steps"]);
  }
  if (m.tokenizer.is_char()) {
    std::string shown;
    for (char32_t ch : m.vocab.chars()) shown += (shown.empty() ? "" : " ") + printable(ch);
    out << "vocabulary: " << shown << "\n";
  } else {
    const tokenizer::Tokenizer& tok = *m.tokenizer.bpe;
    out << fmt::format("tokenizer: {}, {} tokens ({} merges{}{})\n", m.tokenizer.kind, tok.vocab_size(), tok.merges().size(),
                       tok.specials().empty() ? "" : fmt::format(", {} special", tok.specials().size()),
                       m.tokenizer.kind == "gpt2" ? ", from " + m.tokenizer.gpt2_path : "");
  }
  out << fmt::format("parameters: {}\n", m.gpt ? m.gpt->num_parameters() : m.model->num_parameters());
  for (const auto& [name, t] : m.checkpoint.tensors)
    out << fmt::format("  {:<16} {:<10} {}\n", name, shape_to_string(t.shape()), dtype_name(t.dtype()));
  return 0;
}

// ---------------------------------------------------------------- eval

int run_eval(const EvalOptions& o, std::ostream& out) {
  require(o.stride >= 0, fmt::format("--stride must be positive (or 0: half the context), got {}", o.stride));
  require(o.threads >= 1, fmt::format("--threads must be at least 1, got {}", o.threads));
  require(o.text_file.empty() != o.ids_file.empty(),
          "eval: give the text to score, --text FILE (character models) or --ids-file FILE (token ids)");
  set_num_threads(o.threads);
  const bool is_gpt2 = nn::is_gpt2_file(o.checkpoint);
  nn::Checkpoint ck = is_gpt2 ? nn::Checkpoint() : nn::load_safetensors(o.checkpoint);  // GPT-2: load_gpt2 below
  std::vector<int64_t> ids;
  int64_t context = 0, bytes = 0;
  std::function<Tensor(const Tensor&)> logits_of;
  std::unique_ptr<nn::GPTModel> gpt2;
  LoadedModel m;
  if (is_gpt2) {
    require(o.text_file.empty() || !o.tokenizer_file.empty(),
            "eval: a GPT-2 checkpoint reads --text with GPT-2's tokenizer: give --tokenizer-file (the folder of "
            "encoder.json and vocab.bpe), or the text as token ids with --ids-file");
    require(o.ids_file.empty() || o.tokenizer_file.empty(), "eval: --tokenizer-file reads --text; --ids-file is ids already");
    use_numerics_for("gpt", o.numerics);
    require(o.heads >= 0, fmt::format("--heads must be positive, got {}", o.heads));
    gpt2 = nn::load_gpt2(o.checkpoint, o.heads);
    if (!o.text_file.empty()) {
      const std::string text = read_text_file(o.text_file);
      bytes = int64_t(text.size());
      ids = encode_for_model(load_gpt2_tokenizer_for("eval", o.tokenizer_file), text, gpt2->cfg.vocab_size,
                             "eval: --text " + o.text_file);
    } else {
      ids = parse_token_ids(read_text_file(o.ids_file), "--ids-file");
    }
    for (size_t i = 0; i < ids.size(); ++i)
      require(ids[i] < gpt2->cfg.vocab_size, fmt::format("--ids-file: token {} at position {} is outside the vocabulary of {}",
                                                         ids[i], i, gpt2->cfg.vocab_size));
    context = gpt2->cfg.context_length;
    logits_of = [&](const Tensor& x) { return (*gpt2)(x); };
  } else {
    require(o.ids_file.empty(), "eval: --ids-file is for GPT-2 checkpoints; give a character model --text FILE");
    m = load_model(o.checkpoint, o.tokenizer_file);
    use_numerics_for(m.gpt ? "gpt" : "mini", o.numerics);
    const std::string text = read_text_file(o.text_file);
    bytes = int64_t(text.size());
    ids = m.tokenizer.is_char() ? m.vocab.encode(decode_utf8(text))
                                : encode_for_model(*m.tokenizer.bpe, text, m.vocab_size(), "eval: --text " + o.text_file);
    context = m.gpt ? m.gpt->cfg.context_length : m.model->config.context;
    logits_of = [&](const Tensor& x) { return m.gpt ? (*m.gpt)(x) : (*m.model)(x); };
  }
  require(ids.size() >= 2, fmt::format("eval: the text has {} token(s); scoring needs at least 2", ids.size()));
  const int64_t stride = o.stride ? o.stride : std::max<int64_t>(context / 2, 1);
  require(stride <= context, fmt::format("--stride {} is longer than the context of {}", stride, context));
  const nn::TextLoss loss = nn::sliding_window_loss(logits_of, ids, context, stride);
  out << fmt::format("eval: {} tokens{}, context {}, stride {}\n", ids.size(),
                     bytes ? fmt::format(" ({} bytes)", bytes) : "", context, stride);
  out << fmt::format("mean loss {:.4f} nats, perplexity {:.3f}", loss.mean(), loss.perplexity());
  if (bytes) out << fmt::format(", bits per byte {:.4f}", loss.bits_per_byte(bytes));
  out << "\n";
  return 0;
}

}  // namespace cli
