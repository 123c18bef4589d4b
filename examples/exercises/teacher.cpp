// teacher.cpp — fixtures, comparisons and the diagnosis of wrong gradients (see teacher.h).
#include "teacher.h"

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#ifndef SCRATCHGRAD_SOURCE_DIR
#define SCRATCHGRAD_SOURCE_DIR "."
#endif

namespace teacher {

void fail(const std::string& report) { throw Failure(report); }

void passed(const std::string& what) { std::printf("  ok  %s\n", what.c_str()); }

static std::string with_hint(const std::string& hint) { return hint.empty() ? "" : "\n  hint: " + hint; }

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
  if (!actual.defined()) fail(fmt::format("{}: got an undefined tensor{}", what, with_hint(hint)));
  if (actual.shape() != expected.shape())
    fail(fmt::format("{}: shape {}, expected {}{}", what, actual.shape_str(), expected.shape_str(), with_hint(hint)));
  std::vector<double> a = actual.to_vector<double>(), e = expected.to_vector<double>();
  int64_t first = -1, count = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (!agrees(a[i], e[i], rtol, atol) && count++ == 0) first = int64_t(i);
  if (count == 0) return;
  fail(fmt::format("{}: element {} is {:.10g}, expected {:.10g} ({} of {} elements differ){}", what,
                   index_string(expected.shape(), first), a[size_t(first)], e[size_t(first)], count, a.size(),
                   with_hint(hint)));
}

void expect_same_bits(const std::string& what, const Tensor& actual, const Tensor& expected, const std::string& hint) {
  if (actual.shape() != expected.shape())
    fail(fmt::format("{}: shape {}, expected {}{}", what, actual.shape_str(), expected.shape_str(), with_hint(hint)));
  std::vector<float> a = actual.to(DType::Float32).to_vector<float>(), e = expected.to(DType::Float32).to_vector<float>();
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == e[i] && !std::isnan(e[i])) continue;  // +0 == −0
    if (std::isnan(a[i]) && std::isnan(e[i])) continue;
    fail(fmt::format("{}: element {} is {} ({:a}), PyTorch's is {} ({:a}): not the same bits{}", what,
                     index_string(expected.shape(), int64_t(i)), a[i], double(a[i]), e[i], double(e[i]),
                     with_hint(hint)));
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

// Says what is wrong with `mine`, the learner's gradient for input j, when it is not `truth`.
static void diagnose(const OpUnderTest& op, const std::string& where, size_t j, const std::vector<Tensor>& inputs,
                     const Tensor& g, const Tensor& mine, const Tensor& truth) {
  const std::string name = j < op.inputs.size() ? op.inputs[j] : fmt::format("input {}", j);
  const Tensor& x = inputs[j];
  const std::string what = fmt::format("{}: the gradient for {} (shape {})", where, name, x.shape_str());
  const std::string hint = with_hint(op.hint);
  if (!mine.defined())
    fail(fmt::format("{} is missing: the closure returned an empty Tensor in its place{}", what, hint));
  if (mine.shape() != x.shape()) {
    if (mine.numel() > x.numel() && broadcasts_to(x.shape(), mine.shape()) && close(mine.sum_to(x.shape()), truth))
      fail(fmt::format("{} has shape {}, the output's: a missing sum_to. {} was broadcast from {} to {} in the forward, "
                       "so each of its elements was used several times and gets the sum of all those uses' "
                       "gradients: end with .sum_to({}.shape()){}",
                       what, mine.shape_str(), name, x.shape_str(), mine.shape_str(), name, hint));
    if (mine.dim() >= 2 && mine.mT().shape() == x.shape() && close(mine.mT().contiguous(), truth))
      fail(fmt::format("{} has shape {}: a missing transpose (its transpose is right){}", what, mine.shape_str(), hint));
    fail(fmt::format("{} has shape {}; a gradient always has its input's shape{}", what, mine.shape_str(), hint));
  }
  if (close(mine, truth, op.rtol, op.atol)) return;
  for (const KnownMistake& m : op.mistakes)
    if (m.input == j && close(mine, m.gradient(inputs, g), 1e-6, 1e-9)) fail(fmt::format("{}: {}{}", what, m.message, hint));
  if (close(mine, -truth, 1e-6, 1e-9))
    fail(fmt::format("{} has the wrong sign: it is exactly minus the true gradient. Check each term's sign (the "
                     "derivative of 1 − u is −u', of a/b with respect to b is −a/b²){}",
                     what, hint));
  if (close(mine, truth * 2.0, 1e-6, 1e-9))
    fail(fmt::format("{} is twice the true one: a factor of 2 too many (a ½ dropped, or one gradient added twice){}",
                     what, hint));
  if (close(mine, truth * 0.5, 1e-6, 1e-9))
    fail(fmt::format("{} is half the true one: a factor of 2 missing{}", what, hint));
  if (x.dim() >= 2 && x.size(-1) == x.size(-2) && close(mine.mT().contiguous(), truth, 1e-6, 1e-9))
    fail(fmt::format("{} is the transpose of the true one: a missing transpose (for c = a b, da = g bᵀ and "
                     "db = aᵀ g){}",
                     what, hint));
  const double dot = (mine * truth).sum().item(), norm2 = (truth * truth).sum().item();
  if (norm2 > 0 && std::isfinite(dot) && dot != 0) {
    const double factor = dot / norm2;
    if (close(mine, truth * factor, 1e-6, 1e-9))
      fail(fmt::format("{} is {:.6g} times the true one: a constant factor is off (a 1/n of a mean, a scale such as "
                       "1/√d?){}",
                       what, factor, hint));
  }
  expect_close(what, mine, truth, op.rtol, op.atol, op.hint);
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
    fail(fmt::format("{}: your code threw: {}{}", where, e.what(), with_hint(hint)));
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
                     "under NoGradGuard){}",
                     where, with_hint(op.hint)));
  const Tensor g = expected.g.defined() ? expected.g : random_tensor(out.shape(), 1234).to(out.dtype());
  std::vector<Tensor> mine =
      learner_code(where + ", backward", op.hint, [&] { return gradients_of(out, inputs, g); });
  std::vector<Tensor> truth = expected.grads.empty() ? reference_gradients(op, inputs, g) : expected.grads;
  for (size_t j = 0; j < inputs.size(); ++j)
    if (inputs[j].defined() && inputs[j].requires_grad()) diagnose(op, where, j, inputs, g, mine[j], truth[j]);
  if (op.gradcheck) {
    GradcheckResult r = learner_code(where + ", gradcheck", op.hint, [&] { return gradcheck(op.mine, inputs); });
    if (!r) fail(fmt::format("{}: {}{}", where, r.message, with_hint(op.hint)));
  }
  passed(where + (op.gradcheck ? ": forward, gradients, gradcheck" : ": forward, gradients"));
}

}  // namespace teacher
