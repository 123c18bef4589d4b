// teacher.cpp — fixtures, comparisons and the diagnosis of wrong gradients (see teacher.h).
#include "teacher.h"

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <fmt/format.h>

#ifndef SCRATCHGRAD_SOURCE_DIR
#define SCRATCHGRAD_SOURCE_DIR "."
#endif

namespace teacher {

using namespace exercises;

void fail(const std::string& diagnosis, const std::string& hint) { throw Failure(diagnosis, hint); }

void passed(const std::string& what) { std::printf("  ok  %s\n", what.c_str()); }

// ---------------------------------------------------------------- fixtures

Fixture::Fixture(const std::string& name)
    : path_(std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/reference/fixtures/exercises/" + name + ".txt") {
  std::ifstream file(path_);
  if (!file) throw std::runtime_error("cannot read the fixture " + path_ + " (run the checker from a built checkout)");
  for (std::string line; std::getline(file, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string kind, key;
    int64_t ndim = 0;
    words >> kind >> key >> ndim;
    Shape shape;
    shape.resize(size_t(ndim));
    for (int64_t& d : shape) words >> d;
    std::vector<double> values;
    for (std::string v; words >> v;) values.push_back(std::strtod(v.c_str(), nullptr));  // hex floats, inf, nan
    if (int64_t(values.size()) != shape_numel(shape)) throw std::runtime_error("bad line in " + path_ + ": " + key);
    if (kind == "f64") tensors_[key] = from_vector(values, shape, DType::Float64);
    else if (kind == "f32") tensors_[key] = from_vector(values, shape, DType::Float32);
    else if (kind == "i64") tensors_[key] = from_vector(std::vector<int64_t>(values.begin(), values.end()), shape);
    else if (kind == "bool") tensors_[key] = from_vector(values, shape, DType::Float64).to(DType::Bool);
    else throw std::runtime_error("bad line in " + path_ + ": kind " + kind);
  }
}

Tensor Fixture::operator[](const std::string& key) const {
  auto it = tensors_.find(key);
  if (it == tensors_.end()) throw std::runtime_error(path_ + " has no tensor " + key);
  return it->second.clone();
}

// ---------------------------------------------------------------- inputs

Tensor random_tensor(const Shape& shape, uint64_t seed, double lo, double hi) {
  Generator gen(seed);
  return rand(shape, DType::Float64, &gen) * (hi - lo) + lo;
}

Tensor leaf(const Tensor& t) { return t.detach().requires_grad_(); }

Tensor transposed_leaf(const Shape& shape, uint64_t seed, double lo, double hi) {
  Shape swapped = shape;
  std::swap(swapped[swapped.size() - 1], swapped[swapped.size() - 2]);
  return leaf(random_tensor(swapped, seed, lo, hi).transpose(-1, -2));
}

Tensor strided_leaf(const Shape& shape, uint64_t seed, double lo, double hi) {
  Shape wide = shape;
  wide.back() *= 2;
  return leaf(random_tensor(wide, seed, lo, hi).slice(-1, 0, std::nullopt, 2));
}

// ---------------------------------------------------------------- comparisons

std::string index_string(const Shape& shape, int64_t flat) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return fmt::format("[{}]", fmt::join(index, ", "));
}

static bool agrees(double actual, double expected, double rtol, double atol) {
  if (std::isnan(expected)) return std::isnan(actual);
  if (std::isinf(expected)) return actual == expected;
  return !std::isnan(actual) && std::abs(actual - expected) <= atol + rtol * std::abs(expected);
}

bool close(const Tensor& actual, const Tensor& expected, double rtol, double atol) {
  if (!actual.defined() || actual.shape() != expected.shape()) return false;
  std::vector<double> a = actual.to_vector<double>(), e = expected.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i)
    if (!agrees(a[i], e[i], rtol, atol)) return false;
  return true;
}

void expect_close(const std::string& what, const Tensor& actual, const Tensor& expected, double rtol, double atol,
                  const std::string& hint) {
  if (!actual.defined()) fail(fmt::format("{}: got an undefined tensor", what), hint);
  if (actual.shape() != expected.shape())
    fail(fmt::format("{}: shape {}, expected {}", what, actual.shape_str(), expected.shape_str()), hint);
  std::vector<double> a = actual.to_vector<double>(), e = expected.to_vector<double>();
  int64_t first = -1, count = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (!agrees(a[i], e[i], rtol, atol) && count++ == 0) first = int64_t(i);
  if (count == 0) return;
  fail(fmt::format("{}: element {} is {:.10g}, expected {:.10g} ({} of {} elements differ)", what,
                   index_string(expected.shape(), first), a[size_t(first)], e[size_t(first)], count, a.size()),
       hint);
}

void expect_same_bits(const std::string& what, const Tensor& actual, const Tensor& expected, const std::string& hint) {
  if (actual.shape() != expected.shape())
    fail(fmt::format("{}: shape {}, expected {}", what, actual.shape_str(), expected.shape_str()), hint);
  std::vector<float> a = actual.to(DType::Float32).to_vector<float>(), e = expected.to(DType::Float32).to_vector<float>();
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == e[i] && !std::isnan(e[i])) continue;  // +0 == −0
    if (std::isnan(a[i]) && std::isnan(e[i])) continue;
    fail(fmt::format("{}: element {} is {} ({:a}), PyTorch's is {} ({:a}): not the same bits", what,
                     index_string(expected.shape(), int64_t(i)), a[i], double(a[i]), e[i], double(e[i])),
         hint);
  }
}

// ---------------------------------------------------------------- gradients

std::vector<Tensor> gradients_of(const Tensor& out, const std::vector<Tensor>& inputs, const Tensor& g) {
  std::vector<Tensor> grads(inputs.size());
  const std::shared_ptr<Node>& node = out.grad_fn();
  // The usual case, one node whose inputs are the leaves themselves: its closure is called directly, so a
  // gradient of the wrong shape reaches the diagnosis below rather than the engine's shape check.
  std::vector<int> input_of_edge(node->inputs.size(), -1);
  bool one_node = true;
  for (size_t e = 0; e < node->inputs.size(); ++e) {
    if (node->inputs[e].node) one_node = false;
    for (size_t j = 0; j < inputs.size(); ++j)
      if (node->inputs[e].leaf && inputs[j].defined() && node->inputs[e].leaf == inputs[j].impl_ptr())
        input_of_edge[e] = int(j);
  }
  if (one_node) {
    NoGradGuard no_grad;
    Grads got = node->backward(g);
    if (got.size() != node->inputs.size())
      fail(fmt::format("the backward closure returned {} gradients for the {} inputs given to record(...): one per "
                       "input, in the same order",
                       got.size(), node->inputs.size()));
    for (size_t e = 0; e < got.size(); ++e) {
      if (input_of_edge[e] < 0 || !got[e].defined()) continue;
      Tensor& slot = grads[size_t(input_of_edge[e])];  // an input given twice (my_mul(a, a)) gets both
      slot = slot.defined() ? slot + got[e] : got[e];
    }
    return grads;
  }
  for (const Tensor& x : inputs)
    if (x.defined() && x.requires_grad()) x.set_grad(Tensor());
  out.backward(g, /*retain_graph=*/true);
  for (size_t j = 0; j < inputs.size(); ++j)
    if (inputs[j].defined() && inputs[j].requires_grad()) {
      grads[j] = inputs[j].grad();
      inputs[j].set_grad(Tensor());
    }
  return grads;
}

Tensor attention_reference(const Tensor& q, const Tensor& k, const Tensor& v) {
  const int64_t T = q.size(-2);
  Tensor blocked = triu(ones({T, T}), 1) == 1.0;
  Tensor scores = matmul(q, k.mT()) / std::sqrt(double(q.size(-1)));
  return matmul(softmax(masked_fill(scores, blocked, -std::numeric_limits<double>::infinity()), -1), v);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined() || a.shape() != b.shape()) return false;
  std::vector<float> x = a.to(DType::Float32).to_vector<float>(), y = b.to(DType::Float32).to_vector<float>();
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i] != y[i] && !(std::isnan(x[i]) && std::isnan(y[i]))) return false;
  return true;
}

// ---------------------------------------------------------------- rungs that stand on others

// Rung n's smallest call, which throws NotImplemented(n) while its stub is untouched (the ones that record a
// node throw from their backward, hence the backward() here).
static void probe_rung(int n) {
  const Tensor targets = from_vector(std::vector<int64_t>{0, 2}, {2});
  switch (n) {
    case 5: run_backward((ones({2}).requires_grad_() * 2.0).sum()); break;
    case 7: my_cross_entropy(zeros({2, 3}).requires_grad_(), targets).backward(); break;
    case 9: MyLinear(2, 3)(zeros({1, 2})); break;
    case 10: {
      Tensor x = zeros({1, 2, 2}).requires_grad_();
      my_attention_head(x, x, x).sum().backward();
      break;
    }
    case 11: my_layer_norm(zeros({1, 2}).requires_grad_(), ones({2}), zeros({2})).sum().backward(); break;
    case 12: my_gelu(zeros({2}).requires_grad_()).sum().backward(); break;
    case 13: {
      Tensor p = zeros({2}), m = zeros({2}), v = zeros({2});
      my_adam_step(p, ones({2}), m, v, 1, AdamConfig{});
      break;
    }
    default: throw std::logic_error(fmt::format("the checker has no probe for rung {}", n));
  }
}

// "7", "7 and 9", "7, 9 and 10"
static std::string list_of_rungs(const std::set<int>& rungs) {
  std::string text;
  size_t i = 0;
  for (int n : rungs) {
    text += (i == 0 ? "" : i + 1 == rungs.size() ? " and " : ", ") + std::to_string(n);
    ++i;
  }
  return text;
}

void check_started(int rung, const std::vector<int>& stands_on, const std::function<void()>& call_on_zeros) {
  std::set<int> stubs;
  for (int n : stands_on) {
    try {
      probe_rung(n);
    } catch (const exercises::NotImplemented& e) {
      stubs.insert(e.rung);
    } catch (const std::exception&) {  // written but wrong: that rung's own check says what is wrong
    }
  }
  try {
    call_on_zeros();
  } catch (const exercises::NotImplemented& e) {
    if (e.rung == rung) {
      exercises::NotImplemented untouched(rung);
      if (!stubs.empty())
        untouched.note = fmt::format("it stands on exercises {}; not done yet either: {}",
                                     list_of_rungs({stands_on.begin(), stands_on.end()}), list_of_rungs(stubs));
      throw untouched;
    }
    stubs.insert(e.rung);
  } catch (const std::exception&) {  // on layers of zeros any error is beside the point: the checks tell
  }
  if (!stubs.empty()) throw exercises::NotImplemented(*stubs.begin());
}

WorkshopText::WorkshopText() {
  const std::string text = "aditi likes warm dosa ";
  const std::set<char> charset(text.begin(), text.end());
  const std::string chars(charset.begin(), charset.end());  // sorted(set(text))
  std::vector<int64_t> ids;
  for (char ch : text) ids.push_back(int64_t(chars.find(ch)));
  data = from_vector(ids, {int64_t(ids.size())});
  vocab = int64_t(chars.size());
}

std::pair<Tensor, Tensor> WorkshopText::batch(int64_t B, int64_t T) const {
  Tensor starts = randint(0, data.size(0) - T - 1, {B});
  std::vector<Tensor> xs, ys;
  for (int64_t j : starts.to_vector<int64_t>()) {
    xs.push_back(data.slice(0, j, j + T));
    ys.push_back(data.slice(0, j + 1, j + T + 1));
  }
  return {stack(xs), stack(ys)};
}

static std::vector<Tensor> reference_gradients(const OpUnderTest& op, const std::vector<Tensor>& inputs, const Tensor& g) {
  std::vector<Tensor> copies;
  for (const Tensor& x : inputs) copies.push_back(x.defined() && x.requires_grad() ? leaf(x) : x);
  op.reference(copies).backward(g);
  std::vector<Tensor> grads;
  for (const Tensor& c : copies)
    grads.push_back(c.defined() && c.requires_grad() ? (c.grad().defined() ? c.grad() : zeros_like(c)) : Tensor());
  return grads;
}

static bool broadcasts_to(const Shape& from, const Shape& to) {
  try {
    return broadcast_shapes(from, to, "sum_to") == to;
  } catch (const std::invalid_argument&) {
    return false;
  }
}

// Says what is wrong with `mine`, the learner's gradient for input j, when it is not `truth`: the usual
// mistake it looks like, by name. How to write it instead is op.hint's, printed only when asked.
static void diagnose(const OpUnderTest& op, const std::string& where, size_t j, const std::vector<Tensor>& inputs,
                     const Tensor& g, const Tensor& mine, const Tensor& truth) {
  const std::string name = j < op.inputs.size() ? op.inputs[j] : fmt::format("input {}", j);
  const Tensor& x = inputs[j];
  const std::string what = fmt::format("{}: the gradient for {} (shape {})", where, name, x.shape_str());
  const std::string& hint = op.hint;
  if (!mine.defined()) fail(fmt::format("{} is missing: the closure returned an empty Tensor in its place", what), hint);
  if (mine.shape() != x.shape()) {
    if (mine.numel() > x.numel() && broadcasts_to(x.shape(), mine.shape()) && close(mine.sum_to(x.shape()), truth))
      fail(fmt::format("{} has shape {}, the output's: a missing sum_to. {} was broadcast from {} to {} in the forward, "
                       "so each of its elements was used several times and gets the sum of all those uses' gradients",
                       what, mine.shape_str(), name, x.shape_str(), mine.shape_str()),
           hint);
    if (mine.dim() >= 2 && mine.mT().shape() == x.shape() && close(mine.mT().contiguous(), truth))
      fail(fmt::format("{} has shape {}: a missing transpose (its transpose is right)", what, mine.shape_str()), hint);
    fail(fmt::format("{} has shape {}; a gradient always has its input's shape", what, mine.shape_str()), hint);
  }
  if (close(mine, truth, op.rtol, op.atol)) return;
  for (const KnownMistake& m : op.mistakes)
    if (m.input == j && close(mine, m.gradient(inputs, g), 1e-6, 1e-9)) fail(fmt::format("{}: {}", what, m.message), hint);
  if (close(mine, -truth, 1e-6, 1e-9))
    fail(fmt::format("{} has the wrong sign: it is exactly minus the true gradient. Check each term's sign (the "
                     "derivative of 1 − u is −u', of a/b with respect to b is −a/b²)",
                     what),
         hint);
  if (close(mine, truth * 2.0, 1e-6, 1e-9))
    fail(fmt::format("{} is twice the true one: a factor of 2 too many (a ½ dropped, or one gradient added twice)", what),
         hint);
  if (close(mine, truth * 0.5, 1e-6, 1e-9)) fail(fmt::format("{} is half the true one: a factor of 2 missing", what), hint);
  if (x.dim() >= 2 && x.size(-1) == x.size(-2) && close(mine.mT().contiguous(), truth, 1e-6, 1e-9))
    fail(fmt::format("{} is the transpose of the true one: a missing transpose", what), hint);
  const double dot = (mine * truth).sum().item(), norm2 = (truth * truth).sum().item();
  if (norm2 > 0 && std::isfinite(dot) && dot != 0) {
    const double factor = dot / norm2;
    if (close(mine, truth * factor, 1e-6, 1e-9))
      fail(fmt::format("{} is {:.6g} times the true one: a constant factor is off (a 1/n of a mean, a scale such as "
                       "1/√d?)",
                       what, factor),
           hint);
  }
  expect_close(what, mine, truth, op.rtol, op.atol, hint);
}

// Runs a piece of the learner's code: a stub's NotImplemented and the checker's own Failure pass through;
// any other exception becomes a report saying where it came from.
template <typename F> static auto learner_code(const std::string& where, const std::string& hint, F&& code) {
  try {
    return code();
  } catch (const exercises::NotImplemented&) {
    throw;
  } catch (const Failure&) {
    throw;
  } catch (const std::exception& e) {
    fail(fmt::format("{}: your code threw: {}", where, e.what()), hint);
  }
}

void check_op(const OpUnderTest& op, const std::string& label, const std::vector<Tensor>& inputs,
              const Expected& expected) {
  const std::string where = fmt::format("{} ({})", op.name, label);
  Tensor out = learner_code(where + ", forward", op.hint, [&] { return op.mine(inputs); });
  Tensor want;
  if (expected.out.defined()) {
    want = expected.out;
  } else {
    NoGradGuard no_grad;
    want = op.reference(inputs);
  }
  expect_close(where + ": forward value", out, want, op.rtol, op.atol, op.hint);
  bool wants_grad = false;
  for (const Tensor& x : inputs) wants_grad = wants_grad || (x.defined() && x.requires_grad());
  if (!wants_grad) return passed(where + ": forward");
  if (!out.requires_grad() || !out.grad_fn())
    fail(fmt::format("{}: the output has no autograd node, so no gradient can flow back. End the op with "
                     "`return record(\"...\", out, {{inputs}}, {{saved}}, closure);` (and compute `out` itself "
                     "under NoGradGuard)",
                     where),
         op.hint);
  const Tensor g = expected.g.defined() ? expected.g : random_tensor(out.shape(), 1234).to(out.dtype());
  std::vector<Tensor> mine =
      learner_code(where + ", backward", op.hint, [&] { return gradients_of(out, inputs, g); });
  std::vector<Tensor> truth = expected.grads.empty() ? reference_gradients(op, inputs, g) : expected.grads;
  for (size_t j = 0; j < inputs.size(); ++j)
    if (inputs[j].defined() && inputs[j].requires_grad()) diagnose(op, where, j, inputs, g, mine[j], truth[j]);
  if (op.gradcheck) {
    GradcheckResult r = learner_code(where + ", gradcheck", op.hint, [&] { return gradcheck(op.mine, inputs); });
    if (!r) fail(fmt::format("{}: {}", where, r.message), op.hint);
  }
  passed(where + (op.gradcheck ? ": forward, gradients, gradcheck" : ": forward, gradients"));
}

}  // namespace teacher
