// train.cpp — `scratchgrad train`: the workshop's one-layer model or a GPT (new, or fine-tuned from --init),
// on one process or over the ranks of mpirun, with progress lines, checkpoints and pictures.
#include "commands.h"

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <cmath>
#include <ostream>

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
#include "nn/lora.h"
#include "nn/safetensors.h"
#include "optim/optim.h"
#include "classify.h"
#include "corpus.h"
#include "finetune.h"
#include "folders.h"
#include "guards.h"
#include "instruct.h"
#include "model_files.h"
#include "ranks.h"
#include "run_state.h"
#include "sampling.h"
#include "train_tokenizer.h"

namespace cli {

using namespace autograd;

namespace {

// The picture `dot` draws of a --graph file: step.dot gives step.svg (never the DOT file's own name).
std::string drawing_of(const std::string& graph) {
  std::string svg = std::filesystem::path(graph).replace_extension(".svg").string();
  return svg == graph ? graph + ".svg" : svg;
}

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
  // A pipe's bytes go to whichever rank reads them first: each rank would train on a part of the text.
  require(o.text_file.empty() || !is_pipe(o.text_file),
          fmt::format("--text {} is a pipe: with {} ranks each would read a part of it; pass a file", o.text_file, n));
}

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
  std::vector<int64_t> ids = continue_text(model, T, corpus.head_ids(T), greedy(o.sample_tokens), unused, device);
  out << "generated: " << corpus.decode(ids) << "\n";
  if (save) {
    save();
    out << "saved " << o.save << "\n";
  }
  if (!o.graph.empty())
    out << fmt::format("wrote the graph of step 0 to {} (draw it with `dot -Tsvg {} -o {}`; Graphviz: apt-get install "
                       "graphviz)\n",
                       o.graph, o.graph, drawing_of(o.graph));
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

// AdamW with decay on the Linear weights only: biases, LayerNorm's (RMSNorm's) scale and shift and the
// embeddings are a second param group without it (nanoGPT's rule; nn::weight_decay_groups finds them by module).
optim::AdamW decoder_optimizer(const nn::Module& model, const TrainOptions& o) {
  auto [decay, no_decay] = nn::weight_decay_groups(model);
  optim::AdamW opt(nn::tensors_of(decay), {.lr = o.lr, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = o.weight_decay});
  if (!no_decay.empty()) opt.add_param_group(nn::tensors_of(no_decay), {{"weight_decay", 0.0}});
  return opt;
}

// The model a GPT run trains, and what of it trains: all of a new model or a full fine-tune's, or a LoRA
// fine-tune's adapters alone (the rest frozen, with no gradients and no optimizer state).
struct RunModel {
  std::unique_ptr<nn::LanguageModel> model;  // a GPT or a Llama
  std::string base;                       // a fine-tune: the absolute path of the weights it started from
  nn::FileFingerprint base_file;          // a LoRA fine-tune: the base's size and hash, which its --save records
  std::optional<nn::LoraConfig> lora;     // a LoRA fine-tune's adapters
  std::unique_ptr<nn::LoraAdapters> adapters;
  std::optional<RunTokenizer> base_tokenizer;  // a fine-tune of a checkpoint of ours: its tokenizer,
  std::u32string base_vocab;                   // and (char) its characters
  bool finetune() const { return !base.empty(); }
  nn::GPTModel* gpt() const { return dynamic_cast<nn::GPTModel*>(model.get()); }
  nn::LlamaModel* llama() const { return dynamic_cast<nn::LlamaModel*>(model.get()); }
  nn::Module& trained() const { return adapters ? static_cast<nn::Module&>(*adapters) : *model; }
};

optim::AdamW run_optimizer(const RunModel& run, const TrainOptions& o) {
  if (!run.adapters) return decoder_optimizer(*run.model, o);
  return optim::AdamW(run.adapters->parameters(),
                      {.lr = o.lr, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = o.weight_decay});
}

// "3 blocks D 96 T 64 B 16 heads 4" (a Llama's: "... heads 4 kv-heads 2 ffn 256").
std::string model_shape(const RunModel& run, const TrainOptions& o, int64_t T) {
  const std::string batch = fmt::format("B {}{}", o.batch, o.accumulate > 1 ? fmt::format("×{}", o.accumulate) : "");
  if (const nn::LlamaModel* llama = run.llama()) {
    const nn::LlamaConfig& c = llama->cfg;
    return fmt::format("{} blocks D {} T {} {} heads {} kv-heads {} ffn {}", c.num_hidden_layers, c.hidden_size, T, batch,
                       c.num_attention_heads, c.num_key_value_heads, c.intermediate_size);
  }
  const nn::GPTConfig& c = run.gpt()->cfg;
  return fmt::format("{} blocks D {} T {} {} heads {}", c.n_layers, c.emb_dim, T, batch, c.n_heads);
}

std::string run_description(const RunModel& run, const TrainOptions& o, int64_t T) {
  const std::string shape = model_shape(run, o, T);
  if (!run.finetune()) return fmt::format("{} parameters, {}", run.model->num_parameters(), shape);
  const int64_t trained = run.trained().num_parameters();
  const std::string what = run.lora ? fmt::format("LoRA rank {} alpha {} on {}, {} of {} parameters trained", run.lora->rank,
                                                  run.lora->alpha, fmt::join(run.lora->targets, ","), trained,
                                                  run.model->num_parameters())
                                    : fmt::format("all {} parameters trained", trained);
  return fmt::format("fine-tuning {} ({}), {}", run.base, what, shape);
}

// A new model of the run's shape, its initial values drawn from the generator (seeded by the caller).
std::unique_ptr<nn::LanguageModel> new_model(const TrainOptions& o, int64_t vocab) {
  if (o.model == "llama") {
    nn::LlamaConfig c;
    c.vocab_size = vocab, c.hidden_size = o.dim, c.intermediate_size = o.ffn_dim, c.num_hidden_layers = o.layers;
    c.num_attention_heads = o.heads, c.num_key_value_heads = o.kv_heads, c.max_position_embeddings = o.context;
    c.rope_theta = 10000.0, c.tie_word_embeddings = true;  // Llama 2's θ; the head tied, as SmolLM2's
    return std::make_unique<nn::LlamaModel>(c);
  }
  return std::make_unique<nn::GPTModel>(nn::GPTConfig{.vocab_size = vocab, .context_length = o.context, .emb_dim = o.dim,
                                                      .n_heads = o.heads, .n_layers = o.layers, .drop_rate = o.dropout,
                                                      .qkv_bias = false});
}

// Model FLOPs a token of a training step (nn/flops.h), for the progress line's MFU.
double flops_per_token(const RunModel& run, int64_t T) {
  if (const nn::LlamaModel* llama = run.llama()) return nn::llama_training_flops_per_token(*llama, T);
  return nn::gpt_training_flops_per_token(*run.gpt(), T);
}

// A GPT run or a Llama run: one loop for both (the model is a LanguageModel; only its shape's words and
// its checkpoint's metadata differ).
int train_decoder(const TrainOptions& o, const Corpus& corpus, Device device, Ranks& ranks, std::ostream& out, RunModel run) {
  manual_seed(o.seed);
  if (!run.model) run.model = new_model(o, corpus.vocab_size());
  nn::LanguageModel& model = *run.model;
  nn::Module& trained = run.trained();
  const std::string family = run.llama() ? "Llama" : "GPT";
  model.to(device);
  model.train();
  optim::AdamW opt = run_optimizer(run, o);
  optim::LambdaLR schedule(opt, optim::warmup_cosine(o.warmup, o.steps, 0.1));
  const int64_t V = model.vocab_size(), T = o.context;

  const std::string text_size = corpus.tokenizer.is_char()
                                    ? fmt::format("{} characters ({} distinct", corpus.characters(), V)
                                    : fmt::format("{} tokens ({} tokenizer, vocabulary {}", corpus.characters(),
                                                  corpus.tokenizer.kind, V);
  out << fmt::format("training a {} on {}{}), {}, {} steps on {}\n", family, text_size,
                     corpus.has_val() ? fmt::format(", {} held out", corpus.val().size()) : "",
                     run_description(run, o, T), o.steps, device.str());
  Progress progress{o, out, o.batch * o.accumulate * T, &out == &std::cout && isatty(STDOUT_FILENO)};
  progress.bits_per_byte_factor = corpus.bits_per_byte_factor();
  if (device.is_cpu()) {
    progress.flops_per_token = flops_per_token(run, T);
    // a bf16 run's products are bounded by the bfloat16 path's peak (docs/precision.md)
    const double core_peak = autocast_dtype() == DType::BFloat16 ? cpu::bfloat16_core_peak_flops() : cpu::core_peak_flops();
    progress.peak_flops = core_peak * get_num_threads() * ranks.size();
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
    auto metadata = decoder_metadata(model, corpus, T, steps_done);
    metadata.merge(run_metadata(o, corpus, steps_done, schedule.last_epoch()));
    if (run.finetune()) metadata["run.init"] = run.base;
    return metadata;
  };
  // a LoRA run writes its adapters and a reference to the base file; any other run, the whole model
  auto save = [&](int64_t steps_done) {
    nn::NamedTensors optimizer_state;
    for (auto& [name, t] : opt.state_dict()) optimizer_state.emplace_back(kOptimizerPrefix + name, t);
    if (run.lora)
      return nn::save_lora(o.save, model, *run.lora, {run.base, run.base_file}, metadata_at(steps_done), optimizer_state);
    nn::NamedTensors tensors = decoder_state(model);
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
          write_step_graph(o, loss, model, fmt::format("{}, {}", family, model_shape(run, o, T)));
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
           fmt::format("loss, {} {}, {} steps, lr {}", family, model_shape(run, o, T), o.steps, o.lr));
  ranks.barrier();  // the others wait for rank 0's checkpoint
  return 0;
}


// What a model of these sizes needs at the least: its parameters with their gradients and both Adam
// moments (16 bytes a parameter), and one batch's logits and attention scores, in float32.
double training_bytes(const TrainOptions& o, int64_t vocab) {
  const double D = double(o.dim), T = double(o.context), B = double(o.batch), V = double(vocab), L = double(o.layers);
  const double H = double(o.heads);
  const double F = double(o.ffn_dim);  // a Llama's: q and o D², k and v (kv-heads/heads)·D² each, 3·D·F
  const double llama_block = 2 * D * D + 2 * D * D * double(o.kv_heads) / std::max(H, 1.0) + 3 * D * F;
  const double parameters = o.model == "gpt"     ? V * D + T * D + L * 12 * D * D + V * D
                            : o.model == "llama" ? V * D + L * llama_block
                                                 : V * D + T * D + 3 * D * D + V * D;
  const double activations = B * T * ((o.model == "mini" ? 1 : L) * (8 * D + H * T + 3 * F) + 2 * V);
  return 16 * parameters + 4 * activations;
}

// The weights --init names, and what they decide: GPT-2's (which read GPT-2's tokens), a Hugging Face folder
// (which reads its tokenizer.json, as a tokenizer from a file: --tokenizer gpt2) or a checkpoint of our own
// GPT or Llama (which reads its own tokenizer's); --tokenizer, if given, must agree.
std::unique_ptr<nn::LanguageModel> load_base(const std::string& path, TrainOptions& o, RunModel& run) {
  auto tokenizer_must_be = [&](const std::string& kind, const std::string& why) {
    if (o.tokenizer.empty()) o.tokenizer = kind;
    require(o.tokenizer == kind, fmt::format("--tokenizer {} does not fit {}: {} (leave --tokenizer out, or give "
                                             "--tokenizer {})",
                                             o.tokenizer, path, why, kind));
  };
  if (nn::is_hf_folder(path)) {
    FolderModel folder = open_folder(path, "train --init", o.resume.empty() && o.given.count("--heads") > 0);
    tokenizer_must_be("gpt2", folder.folder.is_gpt2() ? "GPT-2's weights read GPT-2's tokens (with --tokenizer-file DIR)"
                                                      : "the folder's model reads its tokenizer.json's tokens");
    if (o.tokenizer_file.empty()) o.tokenizer_file = folder_tokenizer_file(path);
    require(!o.tokenizer_file.empty(),
            fmt::format("--init {}: the folder has no tokenizer.json to read --text with: give --tokenizer-file (the "
                        "model's tokenizer.json)",
                        path));
    return std::move(folder.model);
  }
  if (std::unique_ptr<nn::GPTModel> gpt2 = load_gpt2_weights(path, o.init_heads)) {
    tokenizer_must_be("gpt2", "GPT-2's weights read GPT-2's tokens (with --tokenizer-file DIR)");
    return gpt2;
  }
  LoadedModel ours = load_model(path, o.tokenizer_file);
  if (!ours.decoder())
    throw UsageError(fmt::format("--init {}: a checkpoint of the workshop's one-layer model; --init fine-tunes a GPT "
                                 "or a Llama (GPT-2's weights, a Hugging Face folder, or a checkpoint of train --model "
                                 "gpt or llama)",
                                 path));
  if (ours.gpt) check_heads_agree(o.init_heads, *ours.gpt, path);
  tokenizer_must_be(ours.tokenizer.kind, fmt::format("the checkpoint reads its own {} tokenizer", ours.tokenizer.kind));
  std::unique_ptr<nn::LanguageModel> model;
  if (ours.gpt) model = std::move(ours.gpt);
  else model = std::move(ours.llama);
  if (!nn::lora_parameters(*model).empty()) nn::merge_lora(*model);  // a LoRA run goes on from its merged weights
  run.base_tokenizer = ours.tokenizer;
  run.base_vocab = ours.vocab.chars();
  return model;
}

// The run's shape options as the fine-tuned model has them (what its checkpoint and progress line record).
void take_shape_of(const nn::LanguageModel& model, TrainOptions& o) {
  if (const auto* llama = dynamic_cast<const nn::LlamaModel*>(&model)) {
    const nn::LlamaConfig& c = llama->cfg;
    o.model = "llama";
    o.layers = c.num_hidden_layers, o.dim = c.hidden_size, o.heads = c.num_attention_heads;
    o.kv_heads = c.num_key_value_heads, o.ffn_dim = c.intermediate_size;
    return;
  }
  const nn::GPTConfig& c = dynamic_cast<const nn::GPTModel&>(model).cfg;
  o.layers = c.n_layers, o.dim = c.emb_dim, o.heads = c.n_heads;
}

// A fine-tune's model (o.init set): the base's weights; on --resume, a full fine-tune's checkpoint or a
// LoRA run's base with its saved adapters. Sets what the model decides: its shape, the training window.
RunModel finetune_model(TrainOptions& o) {
  RunModel run;
  const bool resumed = !o.resume.empty();
  if (!resumed) o.init = absolute_path(o.init);  // what a checkpoint records
  else o.init_heads = o.heads;                   // the run's heads (a base file that does not give them needs them)
  run.base = o.init;
  // a LoRA run's base is fingerprinted as it is read (its --save records it); a resumed one's adapters are
  // read first, and their base checked to be the file they were trained on
  std::optional<nn::LoraCheckpoint> saved_adapters;
  if (resumed && o.lora_rank > 0) saved_adapters = nn::load_lora(o.resume);
  if (o.lora_rank > 0)
    run.base_file = saved_adapters && saved_adapters->base_file ? *saved_adapters->base_file : nn::fingerprint_file(o.init);
  if (resumed && o.lora_rank == 0) {  // a full fine-tune: all the weights are in the checkpoint
    LoadedModel saved = load_model(o.resume, o.tokenizer_file);
    if (saved.gpt) run.model = std::move(saved.gpt);
    else run.model = std::move(saved.llama);
  } else {
    run.model = load_base(o.init, o, run);
  }
  nn::LanguageModel& model = *run.model;
  if (!resumed) o.context = finetune_context(o, model, o.init);
  take_shape_of(model, o);
  set_dropout(model, o.dropout);
  if (o.lora_rank > 0) {
    run.lora = lora_config(o, model);
    if (resumed) {
      try {
        nn::apply_lora(model, *saved_adapters, o.resume);
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

}  // namespace

int run_train(const TrainOptions& given, std::ostream& given_out) {
  if (given.task == "classify") return train_classifier(given, given_out);  // classify.cpp
  if (given.task == "instruct") return run_train_instruct(given, given_out);  // instruct.h
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
  use_precision(o.precision, o.numerics);
  RunModel run;
  if (!o.init.empty()) run = finetune_model(o);
  Corpus corpus = load_corpus(o, run.base_tokenizer);
  require(o.resume.empty() || o.model != "mini", "--resume continues a GPT or Llama run");
  if (!o.resume.empty()) check_resumed_text(o, corpus);
  else if (run.base_tokenizer && corpus.tokenizer.is_char()) use_vocabulary(corpus, run.base_vocab);
  if (run.model) {
    check_same_vocabulary(*run.model, run.base, corpus.vocab_size(), corpus.tokenizer.kind);
    check_fits_in_memory(finetune_bytes(*run.model, run.trained().num_parameters(), o),
                         fmt::format("a fine-tune of {} at --context {} --batch {}", run.base, o.context, o.batch));
  } else {
    check_fits_in_memory(training_bytes(o, corpus.vocab_size()),
                         fmt::format("{}--dim {} --context {} --batch {} on a vocabulary of {}",
                                     o.model == "gpt"     ? fmt::format("a GPT of --layers {} ", o.layers)
                                     : o.model == "llama" ? fmt::format("a Llama of --layers {} ", o.layers)
                                                          : "a model of ",
                                     o.dim, o.context, o.batch, corpus.vocab_size()));
  }
  if (ranks.size() > 1)
    out << fmt::format("data parallel: {} ranks, each {} of the {} windows of every batch{}\n", ranks.size(),
                       o.batch / ranks.size(), o.batch, o.deterministic_reduce ? ", deterministic reduce" : "");
  return o.model == "mini" ? train_mini(o, corpus, device, ranks, out) : train_decoder(o, corpus, device, ranks, out, std::move(run));
}

}  // namespace cli
