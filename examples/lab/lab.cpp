// lab.cpp — what the lab page computes (see lab.h): the page's lab on "Your journey starts with one step",
// the backward panel, the train panel and the checks the tests run. Plain engine code: the same file is
// compiled to WebAssembly for the page and natively for lab_json.
#include "examples/lab/lab.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <numbers>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "autograd/inspect/call_site.h"
#include "autograd/inspect/gradcheck.h"
#include "autograd/inspect/trace.h"
#include "autograd/random/float_sincos.h"
#include "examples/cli/text.h"
#include "examples/cli/options.h"
#include "nn/nn.h"
#include "optim/optim.h"

int attention_from_scratch_main();  // acts.cpp: examples/attention_from_scratch.cpp's main()

namespace lab {

using namespace autograd;
using json = nlohmann::json;

namespace {

const double kInf = std::numeric_limits<double>::infinity();

// ---------------------------------------------------------------- JSON helpers

json values_of(const Tensor& t) {
  std::vector<double> v = t.detach().to_vector<double>();
  if (t.dim() <= 1) return v;
  const size_t cols = size_t(t.size(-1));
  json rows = json::array();
  for (size_t r = 0; r < v.size(); r += cols) rows.push_back(std::vector<double>(v.begin() + r, v.begin() + r + cols));
  return rows;
}

// A request field with a default, or an error naming the function and the field.
template <typename T> T field(const json& request, const char* function, const char* name, T fallback) {
  if (!request.contains(name)) return fallback;
  try {
    return request.at(name).get<T>();
  } catch (const json::exception&) {
    throw std::invalid_argument(fmt::format("{}: '{}' has the wrong type: {}", function, name, request.at(name).dump()));
  }
}

// ---------------------------------------------------------------- the page's six tokens

const std::vector<std::string> kTokens = {"Your", "journey", "starts", "with", "one", "step"};

Tensor sentence() {
  return tensor({{0.43, 0.15, 0.89},    // Your     (x^1)
                 {0.55, 0.87, 0.66},    // journey  (x^2)
                 {0.57, 0.85, 0.64},    // starts   (x^3)
                 {0.22, 0.58, 0.33},    // with     (x^4)
                 {0.77, 0.25, 0.10},    // one      (x^5)
                 {0.05, 0.80, 0.55}});  // step     (x^6)
}

// The matrix the lab drives: act 1's plain dot products (no weights, no scaling) or act 2's
// SelfAttention_v2 queries · keys (torch.manual_seed(789)), scaled by 1/√d_k.
struct Scores {
  Tensor queries, keys, scores;
  double scale = 1;  // what the scores are divided by before the temperature: 1 or √d_k
  json d_k;          // null for act 1
  std::string code;
};

Scores lab_scores(const std::string& source) {
  NoGradGuard no_grad;
  Tensor inputs = sentence();
  if (source == "act1") return {inputs, inputs, inputs.matmul(inputs.t()), 1.0, nullptr, "attn_scores = inputs @ inputs.T"};
  if (source != "act2")
    throw std::invalid_argument(fmt::format("attention: source must be \"act1\" or \"act2\", got \"{}\"", source));
  manual_seed(789);
  nn::SelfAttention_v2 sa_v2(3, 2);
  Tensor queries = (*sa_v2.W_query)(inputs), keys = (*sa_v2.W_key)(inputs);
  const int64_t d_k = keys.size(-1);
  return {queries, keys, queries.matmul(keys.t()), std::pow(double(d_k), 0.5), d_k,
          "attn_scores = queries @ keys.T  # SelfAttention_v2, torch.manual_seed(789)"};
}

double checked_temperature(const json& request) {
  const double t = field<double>(request, "attention", "temperature", 1.0);
  if (!(t > 0) || !std::isfinite(t))
    throw std::invalid_argument(fmt::format(
        "softmax(scores / T): the temperature T must be a positive number, got {} (as T falls to 0 the softmax "
        "becomes a hard argmax, and at 0 it would divide by zero)",
        t));
  return t;
}

// weights = softmax(masked_scores / (scale · T)); at T = 1 that is act 1's and act 3's computation exactly.
struct Attention {
  Scores s;
  double temperature;
  bool mask;
  Tensor masked, weights;
};

Attention attention_of(const json& request) {
  Attention a{lab_scores(field<std::string>(request, "attention", "source", "act1")), checked_temperature(request),
              field<bool>(request, "attention", "mask", false), {}, {}};
  NoGradGuard no_grad;
  const int64_t n = a.s.scores.size(0);
  a.masked = a.mask ? a.s.scores.masked_fill(triu(ones({n, n}), 1).to_bool(), -kInf) : a.s.scores;
  a.weights = softmax(a.masked / (a.s.scale * a.temperature), -1);  // ÷ 1 is exact: act 1's weights at T = 1
  return a;
}

json attention(const json& request) {
  Attention a = attention_of(request);
  return {{"tokens", kTokens},
          {"code", a.s.code},
          {"d_k", a.s.d_k},
          {"scale", a.s.scale},
          {"temperature", a.temperature},
          {"mask", a.mask},
          {"scores", values_of(a.s.scores)},
          {"weights", values_of(a.weights)},
          {"printed", {{"scores", to_string(a.masked)}, {"weights", to_string(a.weights)}}}};
}

// One query meets one key: q_i · k_j (the products, their sum), ÷ √d_k, ÷ T, then row i's softmax.
json cell(const json& request) {
  Attention a = attention_of(request);
  const int64_t n = int64_t(kTokens.size());
  const int64_t i = field<int64_t>(request, "cell", "query", 1), j = field<int64_t>(request, "cell", "key", 2);
  for (auto [name, v] : {std::pair{"query", i}, std::pair{"key", j}})
    if (v < 0 || v >= n)
      throw std::invalid_argument(fmt::format("cell: {} {} is out of range for {} tokens (0 to {})", name, v, n, n - 1));
  NoGradGuard no_grad;
  Tensor q = a.s.queries[i], k = a.s.keys[j], products = q * k;
  const double score = products.sum().item(), weight = a.weights[i][j].item();
  const bool masked = a.mask && j > i;
  return {{"query", i},
          {"key", j},
          {"query_token", kTokens[size_t(i)]},
          {"key_token", kTokens[size_t(j)]},
          {"q", values_of(q)},
          {"k", values_of(k)},
          {"products", values_of(products)},
          {"score", score},
          {"scale", a.s.scale},
          {"d_k", a.s.d_k},
          {"temperature", a.temperature},
          {"scaled", masked ? -kInf : score / (a.s.scale * a.temperature)},
          {"masked", masked},
          {"row", values_of(a.weights[i])},
          {"weight", weight},
          {"printed",
           {{"query", to_string(q)}, {"key", to_string(k)}, {"products", to_string(products)},
            {"row", to_string(a.weights[i])}}},
          {"line", fmt::format("score = {:.4f}, weight = {:.4f}", score, weight)}};
}

// "[0.1234, ...]", as attention_from_scratch.cpp prints the d_k rows.
std::string row4(const Tensor& t) {
  std::string s = "[";
  for (double v : t.to_vector<double>()) s += (s.size() > 1 ? ", " : "") + fmt::format("{:.4f}", v);
  return s + "]";
}

// The d_k slider: the scores of a random query against six random keys grow like √d_k; unscaled, the
// softmax collapses into a spike, scaled by 1/√d_k it stays soft. Draws exactly as the program does.
json key_dimension(const json& request) {
  constexpr int64_t kMaxKeyDimension = 4096;
  const double asked = field<double>(request, "key_dimension", "d_k", 32);
  if (!(asked >= 1 && asked <= double(kMaxKeyDimension)) || asked != std::floor(asked))
    throw std::invalid_argument(fmt::format(
        "the d_k slider: d_k must be a whole number from 1 to {}, got {} (a key needs at least one dimension)",
        kMaxKeyDimension, asked));
  const int64_t d_k = int64_t(asked);
  NoGradGuard no_grad;
  manual_seed(0);
  Tensor q = randn({d_k});
  Tensor K = randn({6, d_k});
  Tensor scores = K.matmul(q);
  Tensor unscaled = softmax(scores, -1);
  Tensor scaled = softmax(scores / std::pow(double(d_k), 0.5), -1);
  const double unscaled_max = unscaled.max().item(), scaled_max = scaled.max().item();
  std::string note;
  if (d_k == 1) note = "d_k = 1: √d_k = 1, so scaling changes nothing and the two rows are the same.";
  else if (unscaled_max >= 0.99)
    note = fmt::format("d_k = {}: the unscaled softmax has collapsed into a spike (max weight {:.4f}): one key takes "
                       "almost everything and the gradient through the others vanishes. Scaled by 1/√d_k it stays "
                       "soft (max weight {:.4f}).",
                       d_k, unscaled_max, scaled_max);
  if (d_k == kMaxKeyDimension)
    note = fmt::format("d_k = {} is as far as the slider goes. ", d_k) + note;
  return {{"d_k", d_k},
          {"scores", values_of(scores)},
          {"unscaled", values_of(unscaled)},
          {"scaled", values_of(scaled)},
          {"unscaled_max", unscaled_max},
          {"scaled_max", scaled_max},
          {"note", note},
          {"lines",
           {fmt::format("d_k = {}", d_k), "  unscaled: " + row4(unscaled), "  scaled:   " + row4(scaled),
            fmt::format("  max weight: unscaled {:.4f}, scaled {:.4f}", unscaled_max, scaled_max)}}};
}

// ---------------------------------------------------------------- backward

// Installs an observer for one backward pass and puts the previous one back, even on an exception.
class ObserverScope {
 public:
  explicit ObserverScope(BackwardObserver observer) : previous_(set_backward_observer(std::move(observer))) {}
  ~ObserverScope() { set_backward_observer(previous_); }
  ObserverScope(const ObserverScope&) = delete;
  ObserverScope& operator=(const ObserverScope&) = delete;

 private:
  BackwardObserver previous_;
};

// The loss the panel offers on the context vectors [6, 2], and its Python line.
std::pair<Tensor, std::string> loss_on(const Tensor& context_vecs, const std::string& kind, int64_t token) {
  if (kind == "sum") return {context_vecs.sum(), "loss = context_vecs.sum()"};
  if (kind == "mean_squares") return {(context_vecs * context_vecs).mean(), "loss = (context_vecs ** 2).mean()"};
  if (kind == "norm") return {vector_norm(context_vecs), "loss = torch.linalg.vector_norm(context_vecs)"};
  if (kind == "row") {
    if (token < 0 || token >= context_vecs.size(0))
      throw std::invalid_argument(fmt::format("backward: token {} is out of range for {} tokens", token, context_vecs.size(0)));
    return {context_vecs[token].sum(), fmt::format("loss = context_vecs[{}].sum()  # \"{}\"", token, kTokens[size_t(token)])};
  }
  throw std::invalid_argument(
      fmt::format("backward: loss must be \"sum\", \"mean_squares\", \"norm\" or \"row\", got \"{}\"", kind));
}

// SelfAttention_v2.forward (torch.manual_seed(789)) line by line, each line labelled for the trace, with
// the causal mask when asked; then loss.backward() with the trace on.
json backward_panel(const json& request) {
  const std::string kind = field<std::string>(request, "backward", "loss", "sum");
  const int64_t token = field<int64_t>(request, "backward", "token", 1);
  const bool mask = field<bool>(request, "backward", "mask", false);
  manual_seed(789);
  nn::SelfAttention_v2 sa_v2(3, 2);
  const nn::NamedTensors params = sa_v2.named_parameters();
  Tensor x = sentence();

  CallSite line("keys = self.W_key(x)");
  Tensor keys = (*sa_v2.W_key)(x);
  line.set("queries = self.W_query(x)");
  Tensor queries = (*sa_v2.W_query)(x);
  line.set("values = self.W_value(x)");
  Tensor values = (*sa_v2.W_value)(x);
  line.set("attn_scores = queries @ keys.T");
  Tensor attn_scores = queries.matmul(keys.t());
  if (mask) {
    line.set("masked = attn_scores.masked_fill(mask.bool(), -torch.inf)");
    attn_scores = attn_scores.masked_fill(triu(ones({6, 6}), 1).to_bool(), -kInf);
  }
  line.set("attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)");
  Tensor attn_weights = softmax(attn_scores / std::pow(double(keys.size(-1)), 0.5), -1);
  line.set("context_vecs = attn_weights @ values");
  Tensor context_vecs = attn_weights.matmul(values);
  auto [loss, loss_line] = loss_on(context_vecs, kind, token);
  line.set(loss_line);  // labels the loss's own nodes

  std::ostringstream text;
  BackwardObserver trace = inspect::make_trace_observer({.out = &text, .names = params});
  std::string header;
  json nodes = json::array();
  {
    ObserverScope scope([&](const BackwardEvent& e) {
      trace(e);
      std::string block = text.str();
      text.str("");
      if (e.position == 0) {  // the pass's header line comes first
        header = block.substr(0, block.find('\n'));
        block = block.substr(block.find('\n') + 1);
      }
      nodes.push_back({{"name", e.node->name}, {"call_site", std::string(e.node->call_site)},
                       {"recorded_at", inspect::recorded_at(*e.node)}, {"text", block}});
    });
    loss.backward();
  }
  json grads = json::array();
  for (const auto& [name, p] : params)
    grads.push_back({{"name", name}, {"shape", shape_to_string(p.shape())}, {"values", values_of(p.grad())},
                     {"printed", to_string(p.grad())}});
  return {{"loss_line", loss_line}, {"loss", to_string(loss)}, {"context_vecs", to_string(context_vecs)},
          {"header", header},       {"nodes", nodes},          {"grads", grads}};
}

// ---------------------------------------------------------------- train

// The workshop's run, as `scratchgrad train` does it with its defaults (examples/cli/train.cpp):
// manual_seed, the model, Adam, then per step random windows, cross entropy, zero_grad, backward, step.
struct TrainingRun {
  cli::TrainOptions options;
  cli::Vocabulary vocab{std::u32string()};
  std::u32string text;
  Tensor data;
  std::unique_ptr<nn::MiniSelfAttention> model;
  std::unique_ptr<optim::Adam> opt;
  int64_t step = 0;
};

std::unique_ptr<TrainingRun> run;

TrainingRun& current_run(const char* function) {
  if (!run) throw std::invalid_argument(fmt::format("{}: no training run; call train_start first", function));
  return *run;
}

json train_start(const json& request) {
  auto r = std::make_unique<TrainingRun>();
  cli::TrainOptions& o = r->options;
  const std::string text = field<std::string>(request, "train_start", "text", cli::kWorkshopText);
  o.steps = field<int64_t>(request, "train_start", "steps", o.steps);
  o.lr = field<double>(request, "train_start", "lr", o.lr);
  o.seed = field<uint64_t>(request, "train_start", "seed", o.seed);
  if (o.steps < 1 || o.steps > 100000)
    throw std::invalid_argument(fmt::format("train_start: steps must be from 1 to 100000, got {}", o.steps));
  if (!(o.lr > 0) || !std::isfinite(o.lr))
    throw std::invalid_argument(fmt::format("train_start: the learning rate must be a positive number, got {}", o.lr));
  r->text = cli::decode_utf8(text);
  if (int64_t(r->text.size()) < o.context + 2)
    throw std::invalid_argument(fmt::format("train_start: the text has {} characters; context {} needs at least {}",
                                            r->text.size(), o.context, o.context + 2));
  r->vocab = cli::Vocabulary::from_text(r->text);
  r->data = from_vector(r->vocab.encode(r->text), {int64_t(r->text.size())});
  manual_seed(o.seed);  // then the model, then the optimizer: the workshop's order of random draws
  r->model = std::make_unique<nn::MiniSelfAttention>(nn::CharModelConfig{r->vocab.size(), o.dim, o.context, o.heads});
  r->opt = std::make_unique<optim::Adam>(r->model->parameters(), optim::Adam::Options{.lr = o.lr});
  json answer = {{"characters", r->text.size()}, {"vocab", r->vocab.size()}, {"parameters", r->model->num_parameters()},
                 {"steps", o.steps},
                 {"line", fmt::format("training on {} characters ({} distinct), {} parameters, D {} T {} B {} heads {}, "
                                      "{} steps",
                                      r->text.size(), r->vocab.size(), r->model->num_parameters(), o.dim, o.context,
                                      o.batch, o.heads, o.steps)}};
  run = std::move(r);
  return answer;
}

json train_steps(const json& request) {
  TrainingRun& r = current_run("train_steps");
  const cli::TrainOptions& o = r.options;
  const int64_t count = field<int64_t>(request, "train_steps", "count", 1);
  if (count < 1) throw std::invalid_argument(fmt::format("train_steps: count must be at least 1, got {}", count));
  json losses = json::array(), lines = json::array();
  const int64_t V = r.vocab.size();
  for (int64_t n = 0; n < count && r.step < o.steps; ++n, ++r.step) {
    auto [xb, yb] = nn::random_windows(r.data, o.batch, o.context);
    Tensor logits = (*r.model)(xb);
    Tensor loss = cross_entropy(logits.view({-1, V}), yb.view({-1}));
    r.opt->zero_grad();
    loss.backward();
    r.opt->step();
    const double value = loss.item();
    losses.push_back(value);
    if (r.step % o.eval_every == 0 || r.step == o.steps - 1)
      lines.push_back(fmt::format("step {:>3} | loss {:.3f}", r.step, value));
  }
  return {{"step", r.step}, {"steps", o.steps}, {"done", r.step == o.steps}, {"losses", losses}, {"lines", lines}};
}

// Greedy continuation of the text's first T characters, as the trainer prints at the end of a run.
json train_sample(const json&) {
  TrainingRun& r = current_run("train_sample");
  const cli::TrainOptions& o = r.options;
  NoGradGuard no_grad;
  std::vector<int64_t> ids = r.vocab.encode(r.text.substr(0, size_t(o.context)));
  for (int64_t n = 0; n < o.sample_tokens; ++n) {
    const int64_t start = std::max<int64_t>(0, int64_t(ids.size()) - o.context);
    std::vector<int64_t> window(ids.begin() + start, ids.end());
    Tensor logits = (*r.model)(from_vector(window, {1, int64_t(window.size())})).select(1, -1)[0];
    ids.push_back(int64_t(logits.argmax().item()));
  }
  const std::string generated = cli::encode_utf8(r.vocab.decode(ids));
  return {{"generated", generated}, {"line", "generated: " + generated}, {"after_steps", r.step}};
}

// The whole run in one call, in slices of `slice` steps as the page runs it.
json train(const json& request) {
  json start = train_start(request);
  const int64_t slice = field<int64_t>(request, "train", "slice", 1000000);
  json losses = json::array(), lines = json::array();
  for (;;) {
    json part = train_steps({{"count", slice}});
    for (auto& v : part["losses"]) losses.push_back(v);
    for (auto& l : part["lines"]) lines.push_back(l);
    if (part["done"].get<bool>()) break;
  }
  return {{"start", start}, {"losses", losses}, {"lines", lines}, {"sample", train_sample({})}};
}

// ---------------------------------------------------------------- checks

// The ops the page runs, gradchecked in float64 on small inputs (autograd/inspect/gradcheck.h), and one
// backward that is wrong on purpose, which the checker must catch.
json gradcheck_ops(const json&) {
  using Inputs = std::vector<Tensor>;
  using Function = std::function<Tensor(const Inputs&)>;
  manual_seed(1234);
  auto leaf = [](const Shape& shape) { return randn(shape, DType::Float64).requires_grad_(); };
  Tensor causal = triu(ones({4, 4}), 1).to_bool();
  Tensor indices = tensor({{0, 2, 1}, {3, 3, 0}}), targets = tensor({1, 0, 3, 2, 2, 0});
  struct Check {
    std::string name;
    Function f;
    Inputs inputs;
  };
  std::vector<Check> checks = {
      {"matmul", [](const Inputs& x) { return x[0].matmul(x[1]); }, {leaf({4, 3}), leaf({3, 2})}},
      {"matmul of a transpose (q @ k.T)", [](const Inputs& x) { return x[0].matmul(x[1].t()); }, {leaf({4, 2}), leaf({4, 2})}},
      {"batched matmul", [](const Inputs& x) { return x[0].matmul(x[1].transpose(1, 2)); }, {leaf({2, 4, 3}), leaf({2, 4, 3})}},
      {"linear (nn.Linear)", [](const Inputs& x) { return linear(x[0], x[1], x[2]); }, {leaf({4, 3}), leaf({2, 3}), leaf({2})}},
      {"linear without bias", [](const Inputs& x) { return linear(x[0], x[1]); }, {leaf({4, 3}), leaf({2, 3})}},
      {"divide by a scalar (÷ √d_k)", [](const Inputs& x) { return x[0] / std::sqrt(2.0); }, {leaf({4, 4})}},
      {"softmax(dim=-1)", [](const Inputs& x) { return softmax(x[0], -1); }, {leaf({4, 4})}},
      {"softmax of masked scores (causal)", [causal](const Inputs& x) { return softmax(x[0].masked_fill(causal, -kInf), -1); },
       {leaf({4, 4})}},
      {"mul, sum, mean", [](const Inputs& x) { return (x[0] * x[1]).sum() + (x[0] * x[0]).mean(); }, {leaf({3, 2}), leaf({3, 2})}},
      {"select a row, then sum", [](const Inputs& x) { return x[0][1].sum(); }, {leaf({4, 2})}},
      {"vector_norm", [](const Inputs& x) { return vector_norm(x[0]); }, {leaf({3, 2})}},
      {"embedding + position", [indices](const Inputs& x) { return embedding(x[0], indices) + x[1]; }, {leaf({4, 3}), leaf({3, 3})}},
      {"cross_entropy", [targets](const Inputs& x) { return cross_entropy(x[0], targets); }, {leaf({6, 4})}},
      {"self-attention (SelfAttention_v2's forward)",
       [](const Inputs& x) {
         Tensor keys = linear(x[0], x[2]), queries = linear(x[0], x[1]), values = linear(x[0], x[3]);
         Tensor weights = softmax(queries.matmul(keys.t()) / std::sqrt(2.0), -1);
         return weights.matmul(values);
       },
       {leaf({6, 3}), leaf({2, 3}), leaf({2, 3}), leaf({2, 3})}},
  };
  json results = json::array();
  for (const Check& c : checks) {
    inspect::GradcheckResult r = inspect::gradcheck(c.f, c.inputs);
    results.push_back({{"name", c.name}, {"ok", r.ok}, {"message", r.message}});
  }
  // The checker must be able to fail: a doubling whose recorded backward multiplies by 4.
  auto wrong = [](const Inputs& x) {
    Tensor out = x[0].detach() * 2.0;
    return record("WrongBackward", out, {x[0]}, {}, [](const Tensor& g) { return Grads{g * 4.0}; });
  };
  inspect::GradcheckResult caught = inspect::gradcheck(wrong, {leaf({2, 2})});
  results.push_back({{"name", "self-test: a wrong backward is caught"}, {"ok", !caught.ok}, {"message", caught.message}});
  return {{"checks", results}};
}

// A fingerprint of many floats' exact bits (FNV-1a over their 32-bit patterns), so the tests can compare
// millions of values between the WebAssembly and the native build without megabytes of JSON.
class Fingerprint {
 public:
  void add(float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    hash_ = (hash_ ^ bits) * 0x100000001b3u;
  }
  std::string hex() const { return fmt::format("{:016x}", hash_); }

 private:
  uint64_t hash_ = 0xcbf29ce484222325u;
};

// torch.manual_seed(seed); torch.randn(n): the float Box-Muller block path for n >= 16 (what initialises the
// embeddings and draws the d_k slider's vectors). The fingerprint of all n values and the first eight.
json randn_fingerprint(const json& request) {
  const int64_t n = field<int64_t>(request, "randn_fingerprint", "n", 1 << 20);
  const uint64_t seed = field<uint64_t>(request, "randn_fingerprint", "seed", 0);
  if (n < 1 || n > (1 << 24)) throw std::invalid_argument(fmt::format("randn_fingerprint: n must be from 1 to 2^24, got {}", n));
  manual_seed(seed);
  const std::vector<float> values = randn({n}).to_vector<float>();
  Fingerprint f;
  for (float v : values) f.add(v);
  return {{"n", n}, {"seed", seed}, {"fingerprint", f.hex()},
          {"head", std::vector<double>(values.begin(), values.begin() + std::min<int64_t>(n, 8))}};
}

// Every argument the float Box-Muller block can hand to sin, cos and log: u = k · 2^-24 for each 24-bit k
// (a float uniform), θ = float(2π · u) and 1 - u. Fingerprints of random::float_sincos(θ) and of std::log
// (the C library's logf), to compare the two builds on all 2^24 of each.
json box_muller_fingerprint(const json&) {
  Fingerprint sincos, log;
  for (uint32_t k = 0; k < (1u << 24); ++k) {
    const float u = static_cast<float>(k) * (1.0f / 16777216.0f);
    const float theta = static_cast<float>(2.0 * std::numbers::pi * static_cast<double>(u));
    const random::SinCos sc = random::float_sincos(theta);
    sincos.add(sc.sin);
    sincos.add(sc.cos);
    log.add(std::log(1.0f - u));
  }
  return {{"arguments", 1 << 24}, {"sin_cos", sincos.hex()}, {"log", log.hex()}};
}

json float_repr(const json& request) {
  json out = json::array();
  for (const json& v : request.at("values")) out.push_back(print::python_float_repr(v.get<double>()));
  return {{"repr", out}};
}

// The four acts: examples/attention_from_scratch.cpp's own main(), its std::cout captured.
json acts(const json&) {
  std::ostringstream captured;
  std::streambuf* previous = std::cout.rdbuf(captured.rdbuf());
  try {
    attention_from_scratch_main();
  } catch (...) {
    std::cout.rdbuf(previous);
    throw;
  }
  std::cout.rdbuf(previous);
  reset_printoptions();  // the program sets 4 decimals; leave the process as it was
  return {{"text", captured.str()}};
}

const std::map<std::string, std::function<json(const json&)>>& functions() {
  static const std::map<std::string, std::function<json(const json&)>> table = {
      {"acts", acts},
      {"attention", attention},
      {"cell", cell},
      {"key_dimension", key_dimension},
      {"backward", backward_panel},
      {"train_start", train_start},
      {"train_steps", train_steps},
      {"train_sample", train_sample},
      {"train", train},
      {"gradcheck", gradcheck_ops},
      {"float_repr", float_repr},
      {"randn_fingerprint", randn_fingerprint},
      {"box_muller_fingerprint", box_muller_fingerprint},
  };
  return table;
}

}  // namespace

std::string call(const std::string& function, const std::string& request_json) {
  try {
    auto it = functions().find(function);
    if (it == functions().end()) throw std::invalid_argument(fmt::format("lab: no function named \"{}\"", function));
    const json request = request_json.empty() ? json::object() : json::parse(request_json);
    NumericsGuard exact(Numerics::exact);  // the page shows PyTorch's numbers, as the seed programs print them
    // "kernels": "reference" runs the call on the plain loops of autograd/reference/ (the page's switch)
    KernelsGuard kernels(parse_kernels(request.is_object() && request.contains("kernels")
                                           ? request["kernels"].get<std::string>()
                                           : std::string("cpu"),
                                       "lab: kernels"));
    set_printoptions(4);  // the page prints as the program does: 4 decimals
    json answer = it->second(request);
    reset_printoptions();
    return answer.dump();
  } catch (const std::exception& e) {
    reset_printoptions();
    return json{{"error", e.what()}}.dump();
  }
}

}  // namespace lab
