// teacher.h — the checker's tools: fixtures, comparisons that name the first differing element, and the
// diagnosis of a wrong gradient (the usual mistakes: a sign, a factor of 2, a missing transpose, a
// missing sum_to). check.cpp uses them rung by rung.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "exercises.h"

namespace teacher {

using namespace autograd;

// A check that failed. what() is the diagnosis: which check, expected against actual, and the usual
// mistake it looks like. `hint` says how to write it instead, and gives the answer away: the report
// prints it only when asked (`make exercise N=1 HINT=1`, `exercise_check --hint 1`).
struct Failure : std::runtime_error {
  Failure(const std::string& diagnosis, std::string hint_) : std::runtime_error(diagnosis), hint(std::move(hint_)) {}
  std::string hint;
};
[[noreturn]] void fail(const std::string& diagnosis, const std::string& hint = "");

// Prints "  ok  <what>" (a passed check), so the learner sees how far they got.
void passed(const std::string& what);

// ---- fixtures: tests/reference/fixtures/exercises/<name>.txt, written by make_exercise_fixtures.py
class Fixture {
 public:
  explicit Fixture(const std::string& name);
  Tensor operator[](const std::string& key) const;  // a copy, so a check may make it a leaf
  bool has(const std::string& key) const { return tensors_.count(key) > 0; }

 private:
  std::string path_;
  std::map<std::string, Tensor> tensors_;
};

// ---- inputs
Tensor random_tensor(const Shape& shape, uint64_t seed, double lo = -1.0, double hi = 1.0);  // float64
Tensor leaf(const Tensor& t);                                  // a leaf that requires grad, strides kept
Tensor transposed_leaf(const Shape& shape, uint64_t seed, double lo = -1.0, double hi = 1.0);  // not contiguous
Tensor strided_leaf(const Shape& shape, uint64_t seed, double lo = -1.0, double hi = 1.0);     // every other column

// ---- comparisons
std::string index_string(const Shape& shape, int64_t flat);  // flat 5 of [2, 3] → "[1, 2]"
// Fails with "<what>: element [i, j] is A, expected B" unless every element agrees within tolerance
// (infinities must match exactly, nan only where a nan is expected).
void expect_close(const std::string& what, const Tensor& actual, const Tensor& expected, double rtol = 1e-7,
                  double atol = 1e-10, const std::string& hint = "");
bool close(const Tensor& actual, const Tensor& expected, double rtol = 1e-7, double atol = 1e-10);
// The same bits (float32; +0 and −0 count as equal), reported as hex floats.
void expect_same_bits(const std::string& what, const Tensor& actual, const Tensor& expected, const std::string& hint = "");

// ---- a differentiable op under test
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// A wrong answer learners often give: its gradient for input `input`, and what to tell them.
struct KnownMistake {
  size_t input;
  std::string message;
  std::function<Tensor(const std::vector<Tensor>& inputs, const Tensor& g)> gradient;
};

struct OpUnderTest {
  OpUnderTest(std::string name_, std::vector<std::string> inputs_, Fn mine_, Fn reference_, std::string hint_ = "")
      : name(std::move(name_)), inputs(std::move(inputs_)), mine(std::move(mine_)), reference(std::move(reference_)),
        hint(std::move(hint_)) {}
  std::string name;                 // "my_mul"
  std::vector<std::string> inputs;  // names of the inputs, for the messages: {"a", "b"}
  Fn mine;                          // the learner's op
  Fn reference;                     // the engine's own op: the expected values and gradients
  std::vector<KnownMistake> mistakes;
  std::string hint;                 // how to write it: under any failure of this op, when hints are asked for
  double rtol = 1e-7, atol = 1e-10;
  bool gradcheck = true;            // also against finite differences
};

// Expected values of one case, from a PyTorch fixture (else computed by the reference op).
struct Expected {
  Tensor out, g;                 // g: the upstream gradient to send back (else a seeded random one)
  std::vector<Tensor> grads;     // one per input, undefined for those without a gradient
};

// Checks one case: the forward against the expected values, each input's gradient against the true one
// (diagnosing the usual mistakes), then gradcheck in float64. `label` says which case ("broadcast b").
void check_op(const OpUnderTest& op, const std::string& label, const std::vector<Tensor>& inputs,
              const Expected& expected = {});

// The gradient `out`'s node sends to each input for the upstream gradient g (undefined where none).
std::vector<Tensor> gradients_of(const Tensor& out, const std::vector<Tensor>& inputs, const Tensor& g);

// ---- the engine's compositions the later rungs are held to
// One causal attention head with the engine's ops, as the workshop's model writes them: matmul, division by
// √d, masked_fill, softmax, matmul (rung 10's reference; rungs 14 and 15 build on it).
Tensor attention_reference(const Tensor& q, const Tensor& k, const Tensor& v);
// Whether two tensors hold the same float32 bits (+0 and −0 count as equal, as do two NaNs).
bool same_bits(const Tensor& a, const Tensor& b);

// ---- the rungs that stand on others (14 and 15: models made of the learner's pieces)
// Reports an untouched stub of rung `rung` as one ("exercise 15: not implemented yet"), adding which of the
// rungs it stands on are stubs too; a written rung that stands on a stub throws that rung's NotImplemented,
// which the report turns into "exercise 15 needs exercise 9 first". `call_on_zeros` calls the rung's function
// on layers of zeros (MyLinear::Zeros), which runs none of rung 9's code.
void check_started(int rung, const std::vector<int>& stands_on, const std::function<void()>& call_on_zeros);

// The workshop's text, "aditi likes warm dosa ", as character ids (sorted(set(text)) is the vocabulary).
struct WorkshopText {
  WorkshopText();
  Tensor data;     // int64 [22]
  int64_t vocab;   // 13
  // The workshop's batch(): B windows of T characters from random starts (the global generator), and the
  // windows one character on: int64 [B, T] each.
  std::pair<Tensor, Tensor> batch(int64_t B, int64_t T) const;
};

}  // namespace teacher
