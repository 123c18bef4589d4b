// trainer.cpp — training the character model on a text, sampling from a checkpoint, describing one.
#include "trainer.h"

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <iostream>
#include <cmath>
#include <limits>
#include <ostream>

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "autograd/backend.h"
#include "autograd/inspect/dot.h"
#include "plot/svg.h"
#include "nn/nn.h"
#include "nn/safetensors.h"
#include "optim/optim.h"
#include "ranks.h"

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
  require(o.model != "gpt" || o.warmup < o.steps,
          fmt::format("--warmup {} must be below --steps {} (the cosine decay needs steps after it)", o.warmup, o.steps));
}

namespace {

// What only the number of ranks decides: equal shards of every batch, no dropout shared between ranks.
void check_options_for_ranks(const TrainOptions& o, const Ranks& ranks) {
  const int n = ranks.size();
  if (n == 1) return;
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

struct Corpus {
  std::u32string text;
  Vocabulary vocab;
  Tensor train, val;  // int64 token ids; val undefined when the text is too short to hold some out
};

Corpus load_corpus(const TrainOptions& o) {
  std::string raw = o.text_file.empty() ? std::string(kWorkshopText) : read_text_file(o.text_file);
  std::string where = o.text_file.empty() ? "the built-in text" : o.text_file;
  require(!raw.empty(), fmt::format("{} is empty", where));
  std::u32string text = decode_utf8(raw);
  // a training window needs T inputs plus the next character, and randint needs a non-empty range
  require(int64_t(text.size()) >= o.context + 2,
          fmt::format("{} has {} characters; --context {} needs at least {}", where, text.size(), o.context,
                      o.context + 2));
  Vocabulary vocab = Vocabulary::from_text(text);
  std::vector<int64_t> ids = vocab.encode(text);
  const int64_t n = int64_t(ids.size());
  const int64_t held_out = n / 10;
  Corpus c{text, vocab, {}, {}};
  if (held_out >= o.context + 2) {  // enough for at least one held-out window
    c.train = from_vector(std::vector<int64_t>(ids.begin(), ids.end() - held_out), {n - held_out});
    c.val = from_vector(std::vector<int64_t>(ids.end() - held_out, ids.end()), {held_out});
  } else {
    c.train = from_vector(ids, {n});
  }
  return c;
}

// Mean loss over up to 64 evenly spaced held-out windows; draws no random numbers, so evaluating does
// not change the training run.
template <typename Model>
double held_out_loss(const Model& model, const Tensor& val, int64_t T, int64_t V, Device device) {
  NoGradGuard no_grad;
  const int64_t windows = std::min<int64_t>(64, val.size(0) - T);
  std::vector<Tensor> xs, ys;
  for (int64_t w = 0; w < windows; ++w) {
    int64_t j = w * (val.size(0) - T - 1) / std::max<int64_t>(windows - 1, 1);
    xs.push_back(val.slice(0, j, j + T));
    ys.push_back(val.slice(0, j + 1, j + T + 1));
  }
  Tensor logits = model(stack(xs).to(device));
  return cross_entropy(logits.view({-1, V}), stack(ys).to(device).view({-1})).item();
}

// Greedy (temperature 0) or sampled continuation of `ids`, feeding at most T characters at a time.
template <typename Model>
std::vector<int64_t> continue_text(const Model& model, int64_t T, std::vector<int64_t> ids, int64_t count,
                                   double temperature, int64_t top_k, Generator& gen, Device device) {
  NoGradGuard no_grad;
  for (int64_t n = 0; n < count; ++n) {
    int64_t start = std::max<int64_t>(0, int64_t(ids.size()) - T);
    std::vector<int64_t> window(ids.begin() + start, ids.end());
    Tensor logits = model(from_vector(window, {1, int64_t(window.size())}).to(device)).select(1, -1)[0].cpu();
    if (temperature == 0.0) {
      ids.push_back(int64_t(logits.argmax().item()));
      continue;
    }
    std::vector<double> scores = (logits / temperature).to_vector<double>();
    if (top_k > 0 && top_k < int64_t(scores.size())) {
      std::vector<double> sorted = scores;
      std::nth_element(sorted.begin(), sorted.begin() + (top_k - 1), sorted.end(), std::greater<>());
      const double cutoff = sorted[size_t(top_k - 1)];
      for (double& s : scores)
        if (s < cutoff) s = -std::numeric_limits<double>::infinity();
    }
    std::vector<double> probs = from_vector(scores, {int64_t(scores.size())}).softmax(0).to_vector<double>();
    double u = 0;
    random::uniform(gen, &u, 1, 0.0, 1.0);
    int64_t pick = int64_t(probs.size()) - 1;
    for (size_t i = 0; i < probs.size(); ++i) {
      if (u < probs[i]) {
        pick = int64_t(i);
        break;
      }
      u -= probs[i];
    }
    ids.push_back(pick);
  }
  return ids;
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

std::map<std::string, std::string> gpt_metadata(const nn::GPTConfig& c, const Vocabulary& vocab,
                                                const std::u32string& sample_prompt, int64_t steps) {
  return {{"format", "scratchgrad-gpt"},
          {"vocab", encode_utf8(vocab.chars())},
          {"layers", std::to_string(c.n_layers)},
          {"dim", std::to_string(c.emb_dim)},
          {"context", std::to_string(c.context_length)},
          {"heads", std::to_string(c.n_heads)},
          {"qkv_bias", c.qkv_bias ? "1" : "0"},
          {"steps", std::to_string(steps)},
          {"sample_prompt", encode_utf8(sample_prompt)}};
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

std::map<std::string, std::string> run_metadata(const TrainOptions& o, int64_t steps_done, int64_t schedule_epoch) {
  return {{"run.text", o.text_file},          {"run.steps", std::to_string(o.steps)},
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
};

LoadedModel load_model(const std::string& path) {
  nn::Checkpoint ck = nn::load_safetensors(path);
  auto format = ck.metadata.find("format");
  const bool gpt = format != ck.metadata.end() && format->second == "scratchgrad-gpt";
  if (format == ck.metadata.end() || (format->second != "scratchgrad-char-model" && !gpt))
    throw nn::CheckpointError(fmt::format("{}: not a scratchgrad checkpoint (metadata 'format' missing)", path));
  std::u32string chars;
  try {
    chars = decode_utf8(ck.metadata.count("vocab") ? ck.metadata["vocab"] : "");
  } catch (const UsageError&) {
    throw nn::CheckpointError(fmt::format("{}: vocabulary is not valid UTF-8", path));
  }
  if (chars.empty()) throw nn::CheckpointError(fmt::format("{}: metadata has an empty vocabulary", path));
  const int64_t dim = metadata_int(ck, path, "dim"), context = metadata_int(ck, path, "context"),
                heads = metadata_int(ck, path, "heads");
  if (dim % heads != 0)
    throw nn::CheckpointError(fmt::format("{}: dim {} is not divisible by heads {}", path, dim, heads));
  // The sizes the metadata gives must be those of tensors the file holds, before a model that big is built
  // (a lying "dim" would otherwise ask the allocator for terabytes: found by tests/fuzz/fuzz_checkpoint.cpp).
  const int64_t vocab = int64_t(chars.size());
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
      nn::GPTConfig config{.vocab_size = int64_t(chars.size()), .context_length = context, .emb_dim = dim,
                           .n_heads = heads, .n_layers = layers, .drop_rate = 0.0,
                           .qkv_bias = ck.metadata["qkv_bias"] == "1"};
      m.gpt = std::make_unique<nn::GPTModel>(config);
      m.gpt->load_state_dict(without_optimizer(ck.tensors));
      m.gpt->eval();
    } else {
      m.model = std::make_unique<nn::MiniSelfAttention>(nn::CharModelConfig{int64_t(chars.size()), dim, context, heads});
      m.model->load_state_dict(without_optimizer(ck.tensors));
      m.model->eval();
    }
  } catch (const std::invalid_argument& e) {
    throw nn::CheckpointError(fmt::format("{}: {}", path, e.what()));
  }
  try {
    m.sample_prompt = decode_utf8(ck.metadata.count("sample_prompt") ? ck.metadata["sample_prompt"] : "");
  } catch (const UsageError&) {
  }
  m.vocab = Vocabulary(chars);
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


// What a run shows and writes as it goes, for either model: one line per report (loss, held-out loss,
// tokens/s, elapsed and remaining time), the loss curve for --plot.
struct Progress {
  const TrainOptions& o;
  std::ostream& out;
  int64_t tokens_per_step;
  bool live = false;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::vector<double> curve, val_steps, val_curve;

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
    line += fmt::format(" | {:.0f} tok/s | {} elapsed | {} left", tokens_per_s, format_duration(elapsed),
                        format_duration(remaining));
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

// The end of a run, for either model: final losses, a greedy sample, the checkpoint, the pictures.
template <typename Model>
void finish(const Model& model, const Corpus& corpus, int64_t T, int64_t V, Device device, Progress& progress,
            double last_loss, const std::map<std::string, std::string>& metadata, const std::string& plot_title) {
  const TrainOptions& o = progress.o;
  std::ostream& out = progress.out;
  out << fmt::format("final loss {:.3f}", last_loss)
      << (corpus.val.defined() ? fmt::format(", held-out {:.3f}", held_out_loss(model, corpus.val, T, V, device)) : "")
      << "\n";
  Generator unused;
  const std::u32string prompt = corpus.text.substr(0, size_t(T));
  std::vector<int64_t> ids = continue_text(model, T, corpus.vocab.encode(prompt), o.sample_tokens, 0.0, 0, unused, device);
  out << "generated: " << encode_utf8(corpus.vocab.decode(ids)) << "\n";
  if (!o.save.empty()) {
    nn::save_safetensors(o.save, model.state_dict(), metadata);
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
  nn::CharModelConfig config{corpus.vocab.size(), o.dim, o.context, o.heads};
  nn::MiniSelfAttention model(config);
  model.to(device);
  ranks.share_parameters(model, o.overlap);
  optim::Adam opt(model.parameters(), {.lr = o.lr});
  const int64_t V = config.vocab, T = o.context;

  out << fmt::format("training on {} characters ({} distinct{}), {} parameters, D {} T {} B {} heads {}, {} steps on {}\n",
                     corpus.text.size(), V, corpus.val.defined() ? fmt::format(", {} held out", corpus.val.size(0)) : "",
                     model.num_parameters(), o.dim, T, o.batch, o.heads, o.steps, device.str());
  Progress progress{o, out, o.batch * T, &out == &std::cout && isatty(STDOUT_FILENO)};
  std::function<double()> held_out;
  if (corpus.val.defined()) held_out = [&] { return held_out_loss(model, corpus.val, T, V, device); };
  ShardedGradients gradients(ranks, model, o);
  double last_loss = 0, step_seconds = 0;
  for (int64_t step = 0; step < o.steps; ++step) {
    const auto started = std::chrono::steady_clock::now();
    auto [xb, yb] = nn::random_windows(corpus.train, o.batch, T);  // the global batch: the same on every rank
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
    opt.step();
    if (step > 0) step_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (ranks.is_root()) progress.report(step, last_loss, held_out);
    if ((step + 1) % o.check_every == 0) ranks.check_same_parameters(model, step + 1);
  }
  ranks.check_same_parameters(model, o.steps);
  report_data_parallel(ranks, o, step_seconds, o.steps - 1, out);
  const std::u32string prompt = corpus.text.substr(0, size_t(T));
  if (ranks.is_root())
    finish(model, corpus, T, V, device, progress, last_loss, model_metadata(config, corpus.vocab, prompt, o.steps),
           fmt::format("loss, {} steps, D {} T {} B {} heads {}, lr {}", o.steps, o.dim, T, o.batch, o.heads, o.lr));
  ranks.barrier();  // the others wait for rank 0's checkpoint
  return 0;
}

// AdamW with decay on the Linear weights only: biases, LayerNorm's scale and shift and the embeddings
// are a second param group without it (nanoGPT's rule; nn::weight_decay_groups finds them by module).
optim::AdamW gpt_optimizer(const nn::GPTModel& model, const TrainOptions& o) {
  auto [decay, no_decay] = nn::weight_decay_groups(model);
  auto tensors = [](const nn::NamedTensors& named) {
    std::vector<Tensor> out;
    for (const auto& [name, t] : named) out.push_back(t);
    return out;
  };
  optim::AdamW opt(tensors(decay), {.lr = o.lr, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = o.weight_decay});
  if (!no_decay.empty()) opt.add_param_group(tensors(no_decay), {{"weight_decay", 0.0}});
  return opt;
}

int train_gpt(const TrainOptions& o, const Corpus& corpus, Device device, Ranks& ranks, std::ostream& out) {
  manual_seed(o.seed);
  nn::GPTConfig config{.vocab_size = corpus.vocab.size(), .context_length = o.context, .emb_dim = o.dim,
                       .n_heads = o.heads, .n_layers = o.layers, .drop_rate = o.dropout, .qkv_bias = false};
  nn::GPTModel model(config);
  model.to(device);
  optim::AdamW opt = gpt_optimizer(model, o);
  optim::LambdaLR schedule(opt, optim::warmup_cosine(o.warmup, o.steps, 0.1));
  const int64_t V = config.vocab_size, T = o.context;

  out << fmt::format("training a GPT on {} characters ({} distinct{}), {} parameters, {} blocks D {} T {} B {}{} heads {}, "
                     "{} steps on {}\n",
                     corpus.text.size(), V, corpus.val.defined() ? fmt::format(", {} held out", corpus.val.size(0)) : "",
                     model.num_parameters(), o.layers, o.dim, T, o.batch,
                     o.accumulate > 1 ? fmt::format("×{}", o.accumulate) : "", o.heads, o.steps, device.str());
  Progress progress{o, out, o.batch * o.accumulate * T, &out == &std::cout && isatty(STDOUT_FILENO)};
  std::function<double()> held_out;
  if (corpus.val.defined())
    held_out = [&] {
      model.eval();  // no dropout while measuring
      const double loss = held_out_loss(model, corpus.val, T, V, device);
      model.train();
      return loss;
    };
  int64_t first_step = 0;
  if (!o.resume.empty()) {  // the saved run's parameters, moments, schedule and random stream
    nn::Checkpoint ck = nn::load_safetensors(o.resume);
    nn::NamedTensors optimizer_state;
    for (const auto& [name, t] : ck.tensors)
      if (name.starts_with(kOptimizerPrefix)) optimizer_state.emplace_back(name.substr(std::strlen(kOptimizerPrefix)), t);
    try {
      model.load_state_dict(without_optimizer(ck.tensors));
      opt.load_state_dict(optimizer_state);
    } catch (const std::exception& e) {
      throw nn::CheckpointError(fmt::format("{}: cannot resume from it: {}", o.resume, e.what()));
    }
    for (int64_t k = 0, n = metadata_int(ck, o.resume, "run.schedule_epoch"); k < n; ++k) schedule.step();
    default_generator().set_state(bytes_of(ck.metadata["run.generator"], o.resume));
    first_step = std::stoll(ck.metadata["run.steps_done"]);
    out << fmt::format("resuming {} at step {}\n", o.resume, first_step);
  }
  auto save = [&](int64_t steps_done) {
    nn::NamedTensors tensors = model.state_dict();
    for (auto& [name, t] : opt.state_dict()) tensors.emplace_back(kOptimizerPrefix + name, t);
    auto metadata = gpt_metadata(config, corpus.vocab, corpus.text.substr(0, size_t(T)), steps_done);
    metadata.merge(run_metadata(o, steps_done, schedule.last_epoch()));
    nn::save_safetensors(o.save, tensors, metadata);  // a temporary file renamed into place
  };
  ranks.share_parameters(model, o.overlap);  // after a resume too: rank 0's parameters win
  ShardedGradients gradients(ranks, model, o);
  double last_loss = 0, step_seconds = 0;
  for (int64_t step = first_step; step < o.steps; ++step) {
    const auto started = std::chrono::steady_clock::now();
    gradients.begin_step();
    for (int64_t micro = 0; micro < o.accumulate; ++micro) {  // gradients add up over the micro-batches
      auto [xb, yb] = nn::random_windows(corpus.train, o.batch, T);  // the global batch: the same on every rank
      gradients.add(xb, yb, micro + 1 == o.accumulate, [&](const Tensor& x, const Tensor& y) {
        Tensor logits = model(x.to(device));
        CallSite label("loss = cross_entropy(logits.flatten(0, 1), targets.flatten())");
        Tensor loss = cross_entropy(logits.view({-1, V}), y.to(device).view({-1}));
        if (step == 0 && micro == 0 && !o.graph.empty() && ranks.is_root())
          write_step_graph(o, loss, model, fmt::format("GPT, {} blocks D {} T {} B {} heads {}", o.layers, o.dim, T, o.batch, o.heads));
        return loss;
      });
    }
    last_loss = gradients.finish_step();
    if (o.clip > 0) optim::clip_grad_norm_(model.parameters(), o.clip);
    opt.step();
    schedule.step();
    if (step > first_step)  // the first step warms caches and pools up: not timed
      step_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (ranks.is_root()) progress.report(step, last_loss, held_out);
    if ((step + 1) % o.check_every == 0) ranks.check_same_parameters(model, step + 1);
    if (o.save_every > 0 && (step + 1) % o.save_every == 0 && step + 1 < o.steps) {
      if (ranks.is_root()) save(step + 1);
      ranks.barrier();  // the others wait until the checkpoint is in place
      ranks.note_checkpoint(o.save, step + 1);
    }
  }
  ranks.check_same_parameters(model, o.steps);
  report_data_parallel(ranks, o, step_seconds, o.steps - first_step - 1, out);
  model.eval();
  const std::u32string prompt = corpus.text.substr(0, size_t(T));
  auto metadata = gpt_metadata(config, corpus.vocab, prompt, o.steps);
  metadata.merge(run_metadata(o, o.steps, schedule.last_epoch()));
  if (ranks.is_root())
    finish(model, corpus, T, V, device, progress, last_loss, metadata,
           fmt::format("loss, GPT {} blocks, {} steps, D {} T {} B {} heads {}, lr {}", o.layers, o.steps, o.dim, T,
                       o.batch, o.heads, o.lr));
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

// --resume: the saved run's options (the command line gives only --resume, and may add --save, --save-every,
// --threads, --plot, --device). Its text is read again from the same path unless --text names another.
TrainOptions resumed_options(TrainOptions o) {
  nn::Checkpoint ck = nn::load_safetensors(o.resume);
  if (ck.metadata["format"] != "scratchgrad-gpt" || !ck.metadata.count("run.steps_done"))
    throw nn::CheckpointError(fmt::format("{}: not a checkpoint of a GPT training run (train --model gpt --save)", o.resume));
  auto num = [&](const char* key) {
    try {
      return std::stod(ck.metadata.at(key));
    } catch (const std::exception&) {
      throw nn::CheckpointError(fmt::format("{}: metadata '{}' is missing or not a number", o.resume, key));
    }
  };
  o.model = "gpt";
  if (o.text_file.empty()) o.text_file = ck.metadata["run.text"];
  o.layers = int64_t(num("layers")), o.dim = int64_t(num("dim")), o.heads = int64_t(num("heads"));
  o.context = int64_t(num("context")), o.steps = int64_t(num("run.steps")), o.batch = int64_t(num("run.batch"));
  o.lr = num("run.lr"), o.seed = uint64_t(num("run.seed")), o.eval_every = int64_t(num("run.eval_every"));
  o.dropout = num("run.dropout"), o.warmup = int64_t(num("run.warmup")), o.weight_decay = num("run.weight_decay");
  o.clip = num("run.clip"), o.accumulate = int64_t(num("run.accumulate")), o.sample_tokens = int64_t(num("run.sample"));
  if (ck.metadata.count("run.deterministic_reduce")) {  // checkpoints older than data parallelism lack these
    o.deterministic_reduce = ck.metadata["run.deterministic_reduce"] == "1";
    o.reduce_shards = int64_t(num("run.reduce_shards")), o.check_every = int64_t(num("run.check_every"));
  }
  // the run goes on in the numerics it started in, unless asked otherwise (older checkpoints: the default)
  if (o.numerics.empty() && ck.metadata.count("run.numerics")) o.numerics = ck.metadata["run.numerics"];
  return o;
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

int run_train(const TrainOptions& given, std::ostream& given_out) {
  use_kernels(given.kernels);  // first: any tensor made before would read SCRATCHGRAD_KERNELS on its own
  const TrainOptions o = given.resume.empty() ? given : resumed_options(given);
  check_train_options(o);
  Ranks ranks;  // under mpirun: this process is one of N
  check_options_for_ranks(o, ranks);
  std::ostream quiet(nullptr);  // only rank 0 prints
  std::ostream& out = ranks.is_root() ? given_out : quiet;
  const Device device = checked_device(o.device);
  for (const std::string& path : {o.save, o.graph, o.plot})
    if (!path.empty() && ranks.is_root()) nn::check_writable(path);  // fail now, not after the whole run
  if (!o.resume.empty() && ranks.is_root()) nn::remove_stale_temp_files(o.resume);  // what a killed save of it left
  set_num_threads(o.threads);
  use_numerics_for(o.model, o.numerics);
  Corpus corpus = load_corpus(o);
  require(o.resume.empty() || o.model == "gpt", "--resume continues a GPT run");
  if (ranks.size() > 1)
    out << fmt::format("data parallel: {} ranks, each {} of the {} windows of every batch{}\n", ranks.size(),
                       o.batch / ranks.size(), o.batch, o.deterministic_reduce ? ", deterministic reduce" : "");
  return o.model == "gpt" ? train_gpt(o, corpus, device, ranks, out) : train_mini(o, corpus, device, ranks, out);
}

// ---------------------------------------------------------------- generate and info

int run_generate(const GenerateOptions& o, std::ostream& out) {
  use_kernels(o.kernels);  // first, as in run_train
  require(o.tokens >= 0, fmt::format("--tokens must be non-negative, got {}", o.tokens));
  require(std::isfinite(o.temperature) && o.temperature >= 0,
          fmt::format("--temperature must be 0 (greedy) or positive, got {}", o.temperature));
  require(o.top_k >= 0, fmt::format("--top-k must be non-negative, got {}", o.top_k));
  LoadedModel m = load_model(o.checkpoint);
  use_numerics_for(m.gpt ? "gpt" : "mini", o.numerics);
  std::u32string prompt = o.prompt ? decode_utf8(*o.prompt) : m.sample_prompt;
  require(!prompt.empty(), "the prompt is empty (pass --prompt TEXT)");
  std::vector<int64_t> ids = m.vocab.encode(prompt);
  Generator gen(o.seed);
  ids = m.gpt ? continue_text(*m.gpt, m.gpt->cfg.context_length, ids, o.tokens, o.temperature, o.top_k, gen, Device::cpu())
              : continue_text(*m.model, m.model->config.context, ids, o.tokens, o.temperature, o.top_k, gen, Device::cpu());
  out << encode_utf8(m.vocab.decode(ids)) << "\n";
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
  std::string shown;
  for (char32_t ch : m.vocab.chars()) shown += (shown.empty() ? "" : " ") + printable(ch);
  out << "vocabulary: " << shown << "\n";
  out << fmt::format("parameters: {}\n", m.gpt ? m.gpt->num_parameters() : m.model->num_parameters());
  for (const auto& [name, t] : m.checkpoint.tensors)
    out << fmt::format("  {:<16} {:<10} {}\n", name, shape_to_string(t.shape()), dtype_name(t.dtype()));
  return 0;
}

}  // namespace cli
