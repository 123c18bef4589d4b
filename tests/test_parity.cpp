// test_parity.cpp — the workshop's character model (examples/mini_self_attention.cpp) against PyTorch
// 1.13's portable CPU kernels (ATEN_CPU_CAPABILITY=default), bit for bit.
//
// tests/reference/make_parity_fixtures.py runs mini_self_attention.py and records, as float32 bits:
// the initial parameters, the first batch, every intermediate of the step-0 forward, the gradient of
// each of them, the parameters after the first three Adam steps, and the loss of all 301 steps. Each
// test below rebuilds the same thing here and names the *first* tensor whose bits differ, so a
// mismatch points at one op (docs/parity.md says which PyTorch algorithm each op reproduces). Every
// step test starts from our own initialisation after manual_seed(7), as the program does (the init
// tests check it is PyTorch's, bit for bit), and the ParityKernels tests check single ops on the other
// shapes recorded in kernels.txt.
//
// "Bit for bit" means equal float32 bit patterns, except that +0 and -0 count as equal: PyTorch 1.13's
// zero_grad() zeroes gradients in place and the next backward adds into them (0 + -0 = +0), while
// ours starts from no gradient, so a gradient that is exactly -0 there can be +0 here. No result of
// training depends on the sign of a zero gradient.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autograd/autograd.h"
#include "nn/nn.h"
#include "optim/optim.h"

#ifndef SCRATCHGRAD_SOURCE_DIR
#define SCRATCHGRAD_SOURCE_DIR "/work/main"
#endif

namespace {

using namespace autograd;

// ---------------------------------------------------------------- the fixture file

struct Recorded {
  Shape shape;
  std::vector<float> floats;  // `tensor` lines
  std::vector<int64_t> ints;  // `itensor` lines
};

// Lines are `tensor NAME NDIM D0 .. V0 ..` (float.hex values) or `itensor NAME NDIM D0 .. V0 ..`.
std::map<std::string, Recorded> load_fixture(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path + " (run tests/reference/make_parity_fixtures.py)");
  std::map<std::string, Recorded> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string kind, name, word;
    int64_t ndim = 0;
    words >> kind >> name >> ndim;
    Recorded r;
    for (int64_t d = 0; d < ndim; ++d) {
      int64_t size = 0;
      words >> size;
      r.shape.push_back(size);
    }
    while (words >> word) {
      // strtod reads C99 hex floats ("-0x1.8p-3") and "inf"/"-inf"; every value is a float32 exactly
      if (kind == "tensor") r.floats.push_back(float(std::strtod(word.c_str(), nullptr)));
      else r.ints.push_back(std::stoll(word));
    }
    out[name] = std::move(r);
  }
  return out;
}

// Both fixture files, in one map: the model's tensors (init.*, fwd.*, grad.*, ...) and the single-op
// probes of kernels.txt (<probe>.<input>, <probe>.out); the names do not overlap.
const std::map<std::string, Recorded>& fixture() {
  static const auto f = [] {
    const std::string dir = SCRATCHGRAD_SOURCE_DIR "/tests/reference/fixtures/parity/";
    auto all = load_fixture(dir + "mini_self_attention.txt");
    all.merge(load_fixture(dir + "kernels.txt"));
    return all;
  }();
  return f;
}

const Recorded& recorded(const std::string& name) {
  auto it = fixture().find(name);
  if (it == fixture().end()) throw std::runtime_error("parity fixture has no tensor " + name);
  return it->second;
}

bool same_bits(float a, float b) {
  if (a == 0.0f && b == 0.0f) return true;  // ±0, see the note at the top
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

std::string index_string(int64_t flat, const Shape& shape) {
  std::vector<int64_t> at(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    at[d] = flat % shape[d];
    flat /= shape[d];
  }
  return fmt::format("[{}]", fmt::join(at, ", "));
}

// "" when `t` has the recorded shape and bits; otherwise where and by how much it differs.
std::string mismatch(const std::string& name, const Tensor& t) {
  const Recorded& r = recorded(name);
  if (t.shape() != r.shape)
    return fmt::format("{}: shape {} but PyTorch's is {}", name, t.shape_str(), shape_to_string(r.shape));
  std::vector<float> got = t.to_vector<float>();
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < got.size(); ++i)
    if (!same_bits(got[i], r.floats[i])) {
      if (first < 0) first = int64_t(i);
      ++bad;
    }
  if (bad == 0) return "";
  const float g = got[size_t(first)], e = r.floats[size_t(first)];
  return fmt::format("{}: {} of {} elements differ; first at {}: ours {:a} ({:.9g}), PyTorch's {:a} ({:.9g})", name,
                     bad, got.size(), index_string(first, r.shape), double(g), double(g), double(e), double(e));
}

// Expects each (name, tensor) to match, in order, and reports only the first that does not: the ones
// after it are computed from its wrong bits and would only repeat the news.
void expect_all_match(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  for (const auto& [name, t] : tensors) {
    std::string why = mismatch(name, t);
    if (!why.empty()) {
      ADD_FAILURE() << "first mismatching tensor: " << why;
      return;
    }
  }
}

Tensor recorded_ints(const std::string& name) {
  const Recorded& r = recorded(name);
  return from_vector(r.ints, r.shape);
}

// A recorded tensor as a fresh tensor of its dtype (float32 or int64).
Tensor input(const std::string& name) {
  const Recorded& r = recorded(name);
  return r.floats.empty() && !r.ints.empty() ? from_vector(r.ints, r.shape) : from_vector(r.floats, r.shape);
}

// ---------------------------------------------------------------- the workshop program

// examples/mini_self_attention.cpp, one piece at a time.
struct Workshop {
  static constexpr int64_t D = 24, T = 8;
  Tensor data;
  int64_t V = 0;
  std::unique_ptr<nn::MiniSelfAttention> model;
  std::unique_ptr<optim::Adam> opt;

  Workshop() {
    manual_seed(7);
    const std::string text = "aditi likes warm dosa ";
    std::set<char> charset(text.begin(), text.end());
    std::string chars(charset.begin(), charset.end());
    std::vector<int64_t> ids;
    for (char c : text) ids.push_back(int64_t(chars.find(c)));
    data = from_vector(ids, {int64_t(ids.size())});
    V = int64_t(chars.size());
    model = std::make_unique<nn::MiniSelfAttention>(nn::CharModelConfig{.vocab = V, .dim = D, .context = T});
    opt = std::make_unique<optim::Adam>(model->parameters(), optim::Adam::Options{.lr = 0.01});
  }

  std::pair<Tensor, Tensor> batch() const {
    Tensor i = randint(0, data.size(0) - T - 1, {16});
    std::vector<Tensor> xs, ys;
    for (int64_t j : i.to_vector<int64_t>()) {
      xs.push_back(data.slice(0, j, j + T));
      ys.push_back(data.slice(0, j + 1, j + T + 1));
    }
    return {stack(xs), stack(ys)};
  }

  Tensor loss(const Tensor& xb, const Tensor& yb) const {
    return cross_entropy((*model)(xb).view({-1, V}), yb.view({-1}));
  }

  // One step of the training loop; returns the loss.
  Tensor train_step() {
    auto [xb, yb] = batch();
    Tensor l = loss(xb, yb);
    opt->zero_grad();
    l.backward();
    opt->step();
    return l;
  }

  // The step-0 forward with every intermediate named as the fixture names it: the same ops, in the same
  // order, as nn::MiniSelfAttention::forward (single head) followed by cross_entropy.
  std::vector<std::pair<std::string, Tensor>> instrumented_forward(const Tensor& idx, const Tensor& targets) const {
    const nn::MiniSelfAttention& m = *model;
    const int64_t t = idx.size(1);
    std::vector<std::pair<std::string, Tensor>> named;
    auto keep = [&](const char* name, Tensor x) {
      named.emplace_back(name, x);
      return x;
    };
    Tensor tok = keep("tok", (*m.tok)(idx));
    Tensor pos = keep("pos", (*m.pos)(arange(t)));
    Tensor x = keep("x", tok + pos);
    Tensor blocked = m.mask.slice(0, 0, t).slice(1, 0, t) == 0.0;
    Tensor q = keep("q", (*m.q)(x));
    Tensor k = keep("k", (*m.k)(x));
    Tensor scores = keep("scores", q.matmul(k.transpose(-2, -1)));
    Tensor scaled = keep("scaled", scores / std::pow(double(D), 0.5));
    Tensor masked = keep("masked", scaled.masked_fill(blocked, -std::numeric_limits<double>::infinity()));
    Tensor probs = keep("probs", softmax(masked, -1));
    Tensor v = keep("v", (*m.v)(x));
    Tensor ctx = keep("ctx", probs.matmul(v));
    Tensor logits = keep("logits", (*m.head)(ctx));
    Tensor log_probs = keep("log_probs", log_softmax(logits.view({-1, V}), 1));
    keep("loss", nll_loss(log_probs, targets.view({-1})));
    return named;
  }

  std::vector<std::pair<std::string, Tensor>> parameters(const std::string& prefix) const {
    std::vector<std::pair<std::string, Tensor>> out;
    for (const auto& [name, p] : model->named_parameters()) out.emplace_back(prefix + "." + name, p);
    return out;
  }

  std::vector<std::pair<std::string, Tensor>> gradients(const std::string& prefix) const {
    std::vector<std::pair<std::string, Tensor>> out;
    for (const auto& [name, p] : model->named_parameters()) out.emplace_back(prefix + "." + name, p.grad());
    return out;
  }
};

// Runs backward from `loss` and returns the gradient that reached each named intermediate (the engine
// hands each node the full gradient of its output).
std::vector<std::pair<std::string, Tensor>> backward_recording(const std::vector<std::pair<std::string, Tensor>>& named) {
  std::map<const Node*, std::string> names;
  for (const auto& [name, t] : named) names[t.grad_fn().get()] = name;
  std::map<std::string, Tensor> grads;
  BackwardObserver previous = set_backward_observer([&](const BackwardEvent& e) {
    auto it = names.find(e.node);
    if (it != names.end()) grads[it->second] = e.grad_output->clone();
  });
  named.back().second.backward();
  set_backward_observer(previous);
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto it = named.rbegin(); it != named.rend(); ++it)  // in the order backward reaches them
    if (grads.count(it->first)) out.emplace_back("grad." + it->first, grads[it->first]);
  return out;
}

std::vector<std::pair<std::string, Tensor>> with_prefix(const std::string& prefix,
                                                        const std::vector<std::pair<std::string, Tensor>>& named) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, t] : named) out.emplace_back(prefix + name, t);
  return out;
}

// ---------------------------------------------------------------- the tests

TEST(Parity, FirstBatch) {
  Workshop w;
  auto [xb, yb] = w.batch();
  EXPECT_TRUE(equal(xb, recorded_ints("step0.xb")));
  EXPECT_TRUE(equal(yb, recorded_ints("step0.yb")));
}

TEST(Parity, EmbeddingInitBitForBit) {  // normal_
  Workshop w;
  expect_all_match({{"init.tok.weight", w.model->tok->weight}, {"init.pos.weight", w.model->pos->weight}});
}

// nn.Linear's weights and biases: uniform_ (kaiming bound for the weight, 1/sqrt(fan_in) for the bias),
// whose portable kernel rounds x·(to − from) and then the sum (autograd/random.cpp does the same).
TEST(Parity, LinearInitBitForBit) {
  Workshop w;
  std::vector<std::pair<std::string, Tensor>> linear;
  for (const auto& [name, p] : w.model->named_parameters())
    if (name.rfind("tok.", 0) != 0 && name.rfind("pos.", 0) != 0) linear.emplace_back("init." + name, p);
  ASSERT_EQ(linear.size(), 8u);  // q, k, v and head: weight and bias each (2125 values)
  expect_all_match(linear);
}

TEST(Parity, Step0ForwardEveryIntermediate) {
  Workshop w;
  auto [xb, yb] = w.batch();
  auto named = w.instrumented_forward(xb, yb);
  expect_all_match(with_prefix("fwd.", named));
  // the instrumented forward is the model's forward
  EXPECT_EQ(mismatch("fwd.loss", w.loss(xb, yb)), "");
}

TEST(Parity, Step0GradientsOfEveryIntermediateAndParameter) {
  Workshop w;
  auto [xb, yb] = w.batch();
  auto grads = backward_recording(w.instrumented_forward(xb, yb));
  expect_all_match(grads);
  expect_all_match(w.gradients("grad.param"));
}

TEST(Parity, ParametersAfterEachOfTheFirstThreeAdamSteps) {
  Workshop w;
  for (int step = 1; step <= 3; ++step) {
    w.train_step();
    SCOPED_TRACE(fmt::format("after step {}", step));
    expect_all_match(w.parameters(fmt::format("after_step{}", step)));
  }
}

TEST(Parity, LossOfAll301StepsFinalParametersAndGeneration) {
  Workshop w;
  const Recorded& losses = recorded("losses");
  ASSERT_EQ(losses.floats.size(), 301u);
  int first_bad = -1, bad = 0;
  for (int step = 0; step < 301; ++step) {
    float loss = w.train_step().item<float>();
    if (!same_bits(loss, losses.floats[size_t(step)])) {
      if (first_bad < 0) {
        first_bad = step;
        ADD_FAILURE() << fmt::format("step {}: loss {:a} ({:.9g}), PyTorch's {:a} ({:.9g})", step, double(loss),
                                     double(loss), double(losses.floats[size_t(step)]),
                                     double(losses.floats[size_t(step)]));
      }
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0) << "losses differ from step " << first_bad;
  expect_all_match(w.parameters("final"));

  // greedy generation from "aditi li", as the program ends
  NoGradGuard no_grad;
  Tensor idx = recorded_ints("generated").slice(0, 0, 8).unsqueeze(0);
  for (int n = 0; n < 14; ++n) {
    Tensor logits = (*w.model)(idx.slice(1, -Workshop::T, std::nullopt));
    idx = cat({idx, logits.select(1, -1).argmax(-1, /*keepdim=*/true)}, 1);
  }
  EXPECT_TRUE(equal(idx[0], recorded_ints("generated")));
}

// The same run on the reference kernels (autograd/reference/: plain loops, sums in index order) is not
// PyTorch's bits: each loss differs in the last digits. For the first 50 steps that is all (within 1e-5);
// then, as the model fits the phrase, the difference grows about tenfold every 15 steps (the minibatch
// losses jump by 0.1 from step to step there), and the two runs end on different minima of the same
// phrase: step 300's loss is 0.111 on the reference kernels and 0.131 in PyTorch (so the 1e-3 the issue
// asked of the final loss cannot hold for any kernels but PyTorch's own: see the next test). Both generate
// the same text.
TEST(Parity, TheReferenceKernelsTrainTheSeedModelToTheSameText) {
  KernelsGuard reference(Kernels::reference);
  Workshop w;
  const Recorded& losses = recorded("losses");
  for (int step = 0; step < 301; ++step) {
    const float loss = w.train_step().item<float>();
    if (step < 50) {
      EXPECT_NEAR(loss, losses.floats[size_t(step)], 1e-5) << "step " << step;
    }
  }

  NoGradGuard no_grad;
  Tensor idx = recorded_ints("generated").slice(0, 0, 8).unsqueeze(0);
  for (int n = 0; n < 14; ++n) {
    Tensor logits = (*w.model)(idx.slice(1, -Workshop::T, std::nullopt));
    idx = cat({idx, logits.select(1, -1).argmax(-1, /*keepdim=*/true)}, 1);
  }
  EXPECT_TRUE(equal(idx[0], recorded_ints("generated")));
}

// Why no kernels but PyTorch's own can end within 1e-3 of its final loss: the run is that sensitive to one
// rounding. The exact kernels (PyTorch's bits), started from weights that differ from PyTorch's in one
// element by one ulp (a single rounding's worth), end as far from 0.131 as the reference kernels do.
TEST(Parity, OneUlpInOneStartingWeightMovesTheFinalLossByMoreThan1e3) {
  const Recorded& losses = recorded("losses");
  const double pytorch_final = losses.floats[300];
  int moved = 0;
  std::string finals;
  for (int element = 0; element < 4; ++element) {
    Workshop w;
    {
      NoGradGuard no_grad;
      Tensor weight = w.model->parameters()[0];
      float* value = static_cast<float*>(weight.raw_data()) + element;
      *value = std::nextafter(*value, 1.0f);
    }
    float loss = 0;
    for (int step = 0; step < 301; ++step) loss = w.train_step().item<float>();
    finals += fmt::format(" {:.4f}", loss);
    if (std::abs(loss - pytorch_final) > 1e-3) ++moved;
  }
  std::cout << "final loss after a one-ulp change to one of the first 4 weights:" << finals << " (PyTorch "
            << pytorch_final << ")\n";
  EXPECT_GE(moved, 3) << finals;
}

// ---------------------------------------------------------------- single ops on other shapes

// The model's shapes exercise only some branches of PyTorch's algorithms; kernels.txt has one op per
// probe on shapes that reach the rest (see make_parity_fixtures.py).
void expect_probe(const std::string& probe, const Tensor& out, const char* what = "out") {
  EXPECT_EQ(mismatch(probe + "." + what, out), "");
}

// d(sum(g ⊙ f(x)))/dx, by our engine
Tensor gradient_of(const std::function<Tensor(const Tensor&)>& f, const std::string& probe) {
  Tensor x = input(probe + ".x").requires_grad_();
  f(x).backward(input(probe + ".g"));
  return x.grad();
}

TEST(ParityKernels, Matmul) {
  expect_probe("mm_k300", matmul(input("mm_k300.a"), input("mm_k300.b")));  // two 256-deep blocks
  expect_probe("mm_k300_at", matmul(input("mm_k300_at.at").t(), input("mm_k300_at.b")));
  expect_probe("bmm", matmul(input("bmm.a"), input("bmm.b")));
  expect_probe("bmm_small", matmul(input("bmm_small.a"), input("bmm_small.b")));
  expect_probe("linear", linear(input("linear.x"), input("linear.w"), input("linear.bias")));
  // K = 300: the bias is where the sum starts, (bias + chain₀) + chain₁, not added at the end
  expect_probe("linear_k300", linear(input("linear_k300.x"), input("linear_k300.w"), input("linear_k300.bias")));
  // one output row or column
  expect_probe("dot", matmul(input("dot.x"), input("dot.y")));
  expect_probe("mv", matmul(input("mv.a"), input("mv.v")));
  expect_probe("vm_bt", matmul(input("vm_bt.v"), input("vm_bt.bt").t()));
  expect_probe("bmm_row_bt", matmul(input("bmm_row_bt.a"), input("bmm_row_bt.bt").transpose(1, 2)));
  expect_probe("bmm_row_bt_small", matmul(input("bmm_row_bt_small.a"), input("bmm_row_bt_small.bt").transpose(1, 2)));
}

TEST(ParityKernels, Sums) {
  expect_probe("sum_all", input("sum_all.x").sum());
  expect_probe("sum_dim0", input("sum_dim0.x").sum(0));
  expect_probe("sum_dim1", input("sum_dim1.x").sum(1));
  expect_probe("sum_middle", input("sum_middle.x").sum(1));
  expect_probe("sum_01", sum(input("sum_01.x"), {0, 1}, false));
  expect_probe("sum_transposed", input("sum_transposed.x").t().sum(0));
  expect_probe("sum_short_rows", input("sum_short_rows.x").sum(1));
  expect_probe("mean_dim0", input("mean_dim0.x").mean(0));
}

TEST(ParityKernels, SoftmaxFamily) {
  expect_probe("softmax_last", softmax(input("softmax_last.x"), -1));
  expect_probe("log_softmax_last", log_softmax(input("log_softmax_last.x"), -1));
  expect_probe("softmax_short", softmax(input("softmax_short.x"), -1));
  expect_probe("softmax_dim0", softmax(input("softmax_dim0.x"), 0));
  expect_probe("log_softmax_dim0", log_softmax(input("log_softmax_dim0.x"), 0));
  expect_probe("softmax_last_backward", gradient_of([](const Tensor& x) { return softmax(x, -1); }, "softmax_last_backward"), "grad");
  expect_probe("log_softmax_last_backward",
               gradient_of([](const Tensor& x) { return log_softmax(x, -1); }, "log_softmax_last_backward"), "grad");
  expect_probe("softmax_dim0_backward", gradient_of([](const Tensor& x) { return softmax(x, 0); }, "softmax_dim0_backward"), "grad");
  expect_probe("log_softmax_dim0_backward",
               gradient_of([](const Tensor& x) { return log_softmax(x, 0); }, "log_softmax_dim0_backward"), "grad");
}

TEST(ParityKernels, Losses) {
  expect_probe("cross_entropy_300", cross_entropy(input("cross_entropy_300.x"), input("cross_entropy_300.t")));
  expect_probe("nll_ignore", nll_loss(log_softmax(input("nll_ignore.x"), 1), input("nll_ignore.t")));
}

TEST(ParityKernels, EmbeddingBackward) {
  const Recorded& grad = recorded("embedding_backward.grad");
  Tensor w = zeros(grad.shape).requires_grad_();
  embedding(w, input("embedding_backward.idx")).backward(input("embedding_backward.g"));
  expect_probe("embedding_backward", w.grad(), "grad");
}

}  // namespace
