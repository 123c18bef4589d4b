// trainer.cpp — training the character model on a text, sampling from a checkpoint, describing one.
#include "trainer.h"

#include <unistd.h>

#include <chrono>
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

namespace cli {

using namespace autograd;

namespace {

// ---------------------------------------------------------------- checks on user input

void require(bool ok, const std::string& message) {
  if (!ok) throw UsageError(message);
}

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
double held_out_loss(const nn::MiniSelfAttention& model, const Tensor& val, int64_t T, Device device) {
  NoGradGuard no_grad;
  const int64_t windows = std::min<int64_t>(64, val.size(0) - T);
  std::vector<Tensor> xs, ys;
  for (int64_t w = 0; w < windows; ++w) {
    int64_t j = w * (val.size(0) - T - 1) / std::max<int64_t>(windows - 1, 1);
    xs.push_back(val.slice(0, j, j + T));
    ys.push_back(val.slice(0, j + 1, j + T + 1));
  }
  Tensor logits = model(stack(xs).to(device));
  return cross_entropy(logits.view({-1, model.config.vocab}), stack(ys).to(device).view({-1})).item();
}

// Greedy (temperature 0) or sampled continuation of `ids`, feeding at most T characters at a time.
std::vector<int64_t> continue_text(const nn::MiniSelfAttention& model, std::vector<int64_t> ids, int64_t count,
                                   double temperature, int64_t top_k, Generator& gen, Device device) {
  NoGradGuard no_grad;
  const int64_t T = model.config.context;
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

struct LoadedModel {
  std::unique_ptr<nn::MiniSelfAttention> model;
  Vocabulary vocab;
  std::u32string sample_prompt;
  nn::Checkpoint checkpoint;
};

LoadedModel load_model(const std::string& path) {
  nn::Checkpoint ck = nn::load_safetensors(path);
  auto format = ck.metadata.find("format");
  if (format == ck.metadata.end() || format->second != "scratchgrad-char-model")
    throw nn::CheckpointError(fmt::format("{}: not a scratchgrad character-model checkpoint (metadata 'format' missing)", path));
  std::u32string chars;
  try {
    chars = decode_utf8(ck.metadata.count("vocab") ? ck.metadata["vocab"] : "");
  } catch (const UsageError&) {
    throw nn::CheckpointError(fmt::format("{}: vocabulary is not valid UTF-8", path));
  }
  if (chars.empty()) throw nn::CheckpointError(fmt::format("{}: metadata has an empty vocabulary", path));
  nn::CharModelConfig config{int64_t(chars.size()), metadata_int(ck, path, "dim"), metadata_int(ck, path, "context"),
                             metadata_int(ck, path, "heads")};
  if (config.dim % config.heads != 0)
    throw nn::CheckpointError(fmt::format("{}: dim {} is not divisible by heads {}", path, config.dim, config.heads));
  auto model = std::make_unique<nn::MiniSelfAttention>(config);
  try {
    model->load_state_dict(ck.tensors);
  } catch (const std::invalid_argument& e) {
    throw nn::CheckpointError(fmt::format("{}: {}", path, e.what()));
  }
  model->eval();
  std::u32string prompt;
  try {
    prompt = decode_utf8(ck.metadata.count("sample_prompt") ? ck.metadata["sample_prompt"] : "");
  } catch (const UsageError&) {
  }
  return {std::move(model), Vocabulary(chars), prompt, std::move(ck)};
}

}  // namespace

// ---------------------------------------------------------------- train

int run_train(const TrainOptions& o, std::ostream& out) {
  check_train_options(o);
  const Device device = checked_device(o.device);
  for (const std::string& path : {o.save, o.graph, o.plot})
    if (!path.empty()) nn::check_writable(path);  // fail now, not after the whole run
  set_num_threads(o.threads);
  Corpus corpus = load_corpus(o);

  manual_seed(o.seed);  // then the model, then the optimizer: the workshop's order of random draws
  nn::CharModelConfig config{corpus.vocab.size(), o.dim, o.context, o.heads};
  nn::MiniSelfAttention model(config);
  model.to(device);
  optim::Adam opt(model.parameters(), {.lr = o.lr});
  const int64_t V = config.vocab, T = o.context;

  out << fmt::format("training on {} characters ({} distinct{}), {} parameters, D {} T {} B {} heads {}, {} steps on {}\n",
                     corpus.text.size(), V, corpus.val.defined() ? fmt::format(", {} held out", corpus.val.size(0)) : "",
                     model.num_parameters(), o.dim, T, o.batch, o.heads, o.steps, device.str());
  const bool live = &out == &std::cout && isatty(STDOUT_FILENO);
  const auto start = std::chrono::steady_clock::now();
  double last_loss = 0, last_val = std::nan("");
  std::vector<double> curve, val_steps, val_curve;  // for --plot
  for (int64_t step = 0; step < o.steps; ++step) {
    auto [xb, yb] = nn::random_windows(corpus.train, o.batch, T);
    Tensor logits = model(xb.to(device));
    CallSite label("loss = cross_entropy(logits.view(-1, V), yb.view(-1))");  // for traces and graphs
    Tensor loss = cross_entropy(logits.view({-1, V}), yb.to(device).view({-1}));
    if (step == 0 && !o.graph.empty())
      write_text_file(o.graph, to_dot(loss, model.named_parameters(),
                                      {.title = fmt::format("scratchgrad train: the graph of step 0 (D {} T {} B {} heads {})",
                                                            o.dim, T, o.batch, o.heads),
                                       .root_name = "loss"}));
    opt.zero_grad();
    loss.backward();
    opt.step();
    last_loss = loss.item();
    curve.push_back(last_loss);

    const bool report = step % o.eval_every == 0 || step == o.steps - 1;
    if (!report && !live) continue;
    if (report && corpus.val.defined()) {
      last_val = held_out_loss(model, corpus.val, T, device);
      val_steps.push_back(double(step));
      val_curve.push_back(last_val);
    }
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double tokens_per_s = double((step + 1) * o.batch * T) / std::max(elapsed, 1e-9);
    const double remaining = elapsed / double(step + 1) * double(o.steps - step - 1);
    std::string line = fmt::format("step {:>3} | loss {:.3f}", step, last_loss);
    if (corpus.val.defined()) line += fmt::format(" | held-out {:.3f}", last_val);
    line += fmt::format(" | {:.0f} tok/s | {} elapsed | {} left", tokens_per_s, format_duration(elapsed),
                        format_duration(remaining));
    if (live) out << "\r\033[K" << line << (report ? "\n" : "") << std::flush;
    else out << line << "\n";
  }

  out << fmt::format("final loss {:.3f}", last_loss)
      << (corpus.val.defined() ? fmt::format(", held-out {:.3f}", held_out_loss(model, corpus.val, T, device)) : "")
      << "\n";
  const std::u32string prompt = corpus.text.substr(0, size_t(T));
  Generator unused;
  std::vector<int64_t> ids =
      continue_text(model, corpus.vocab.encode(prompt), o.sample_tokens, 0.0, 0, unused, device);
  out << "generated: " << encode_utf8(corpus.vocab.decode(ids)) << "\n";

  if (!o.save.empty()) {
    nn::save_safetensors(o.save, model.state_dict(), model_metadata(config, corpus.vocab, prompt, o.steps));
    out << "saved " << o.save << "\n";
  }
  if (!o.graph.empty()) out << "wrote the graph of step 0 to " << o.graph << " (dot -Tsvg " << o.graph << " -o graph.svg)\n";
  if (!o.plot.empty()) {
    std::vector<double> steps(curve.size());
    for (size_t i = 0; i < steps.size(); ++i) steps[i] = double(i);
    std::vector<plot::svg::Series> lines{{.name = "train (batch loss)", .x = steps, .y = curve}};
    if (!val_curve.empty()) lines.push_back({.name = "held-out", .x = val_steps, .y = val_curve, .markers = true});
    write_text_file(o.plot, plot::svg::line_plot(lines, {.title = fmt::format("loss, {} steps, D {} T {} B {} heads {}, lr {}",
                                                                       o.steps, o.dim, T, o.batch, o.heads, o.lr)}));
    out << "wrote the loss curve to " << o.plot << "\n";
  }
  return 0;
}

// ---------------------------------------------------------------- generate and info

int run_generate(const GenerateOptions& o, std::ostream& out) {
  require(o.tokens >= 0, fmt::format("--tokens must be non-negative, got {}", o.tokens));
  require(std::isfinite(o.temperature) && o.temperature >= 0,
          fmt::format("--temperature must be 0 (greedy) or positive, got {}", o.temperature));
  require(o.top_k >= 0, fmt::format("--top-k must be non-negative, got {}", o.top_k));
  LoadedModel m = load_model(o.checkpoint);
  std::u32string prompt = o.prompt ? decode_utf8(*o.prompt) : m.sample_prompt;
  require(!prompt.empty(), "the prompt is empty (pass --prompt TEXT)");
  std::vector<int64_t> ids = m.vocab.encode(prompt);
  Generator gen(o.seed);
  ids = continue_text(*m.model, ids, o.tokens, o.temperature, o.top_k, gen, Device::cpu());
  out << encode_utf8(m.vocab.decode(ids)) << "\n";
  return 0;
}

int run_info(const std::string& path, std::ostream& out) {
  LoadedModel m = load_model(path);
  const nn::CharModelConfig& c = m.model->config;
  out << fmt::format("checkpoint: {}\n", path);
  out << fmt::format("model: character self-attention, vocab {} dim {} context {} heads {}, trained {} steps\n", c.vocab,
                     c.dim, c.context, c.heads, m.checkpoint.metadata["steps"]);
  std::string shown;
  for (char32_t ch : m.vocab.chars()) shown += (shown.empty() ? "" : " ") + printable(ch);
  out << "vocabulary: " << shown << "\n";
  out << fmt::format("parameters: {}\n", m.model->num_parameters());
  for (const auto& [name, t] : m.checkpoint.tensors)
    out << fmt::format("  {:<16} {:<10} {}\n", name, shape_to_string(t.shape()), dtype_name(t.dtype()));
  return 0;
}

}  // namespace cli
