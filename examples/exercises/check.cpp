// check.cpp — the exercises' checker: `exercise_check N` checks rung N, `exercise_check` (or `all`) the
// whole ladder as a table; `--hint` adds to a failure's report how to write it. Rungs 1 to 13 are here,
// 14 and 15, the models trained on the learner's pieces, in check_char_model.cpp and check_gpt_block.cpp.
// Linked three ways: against the learner's files (examples/exercises/, build/bin/exercise_check), the
// reference solutions and the deliberate mistakes (examples/exercises/CMakeLists.txt); the tests in
// tests/exercises/ run the last two.
//
// Each rung's checks: the values against PyTorch's (committed fixtures, tests/reference/
// make_exercise_fixtures.py), each gradient against the true one with the usual mistakes named, and
// gradcheck against finite differences in float64, on random, broadcast and non-contiguous inputs.
#include <cmath>
#include <functional>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "checks.h"
#include "exercises.h"
#include "optim/optimizer.h"
#include "teacher.h"

using namespace autograd;
using namespace exercises;
using namespace teacher;

namespace {

const double kInf = std::numeric_limits<double>::infinity();

// One case of a fixture: its inputs (leaves where `needs_grad`) and PyTorch's values.
struct Case {
  std::vector<Tensor> inputs;
  Expected expected;
};

Case fixture_case(const Fixture& f, const std::string& name, const std::vector<std::string>& inputs,
                  const std::vector<bool>& needs_grad = {}) {
  Case c;
  for (size_t j = 0; j < inputs.size(); ++j) {
    const bool grad = needs_grad.empty() || needs_grad[j];
    Tensor x = f[name + "." + inputs[j]];
    c.inputs.push_back(grad ? leaf(x) : x);
    c.expected.grads.push_back(grad ? f[name + ".grad." + inputs[j]] : Tensor());
  }
  c.expected.out = f[name + ".out"];
  c.expected.g = f[name + ".g"];
  return c;
}

void check_fixture_case(const OpUnderTest& op, const Fixture& f, const std::string& name,
                        const std::vector<bool>& needs_grad = {}) {
  Case c = fixture_case(f, name, op.inputs, needs_grad);
  check_op(op, name + ", PyTorch's numbers", c.inputs, c.expected);
}

// A gradient formula evaluated where the shapes allow it (else an undefined tensor, which matches nothing).
template <typename F> Tensor where_shapes_fit(F&& formula) {
  try {
    NoGradGuard no_grad;
    return formula();
  } catch (const std::exception&) {
    return Tensor();
  }
}

// ---------------------------------------------------------------- 1. mul with broadcasting

void rung_1() {
  OpUnderTest op{"my_mul", {"a", "b"},
                 [](const std::vector<Tensor>& in) { return my_mul(in[0], in[1]); },
                 [](const std::vector<Tensor>& in) { return mul(in[0], in[1]); }};
  op.hint = "d(a·b)/da = b and d(a·b)/db = a, each times g; then .sum_to(a.shape()) and .sum_to(b.shape())";
  Fixture f("01_mul");
  for (const char* name : {"same_shape", "broadcast_b", "broadcast_both"}) check_fixture_case(op, f, name);
  check_op(op, "non-contiguous", {transposed_leaf({3, 4}, 11), strided_leaf({3, 4}, 12)});
  check_op(op, "a 0-d a", {leaf(random_tensor({}, 13)), leaf(random_tensor({2, 3}, 14))});
}

// ---------------------------------------------------------------- 2. sum and mean along a dim

void rung_2() {
  auto make = [](const std::string& fn, int64_t dim, bool keepdim) {
    const bool is_sum = fn == "sum";
    OpUnderTest op{fmt::format("my_{}(x, dim={}, keepdim={})", fn, dim, keepdim), {"x"},
                   [=](const std::vector<Tensor>& in) {
                     return is_sum ? my_sum(in[0], dim, keepdim) : my_mean(in[0], dim, keepdim);
                   },
                   [=](const std::vector<Tensor>& in) {
                     return is_sum ? sum(in[0], dim, keepdim) : mean(in[0], dim, keepdim);
                   }};
    op.hint = "every x along `dim` fed the one output value, so each gets g back: put the summed dim back "
              "(g.unsqueeze(dim) when keepdim is false), .expand(x.shape()); a mean also divides by n";
    return op;
  };
  Fixture f("02_sum_mean");
  check_fixture_case(make("sum", 0, false), f, "sum_dim0");
  check_fixture_case(make("sum", 1, true), f, "sum_dim1_keepdim");
  check_fixture_case(make("sum", 1, false), f, "sum_3d_dim1");
  check_fixture_case(make("mean", -1, false), f, "mean_last_dim");
  check_fixture_case(make("mean", 0, true), f, "mean_dim0_keepdim");
  check_op(make("sum", 1, false), "non-contiguous", {transposed_leaf({3, 5}, 21)});
  check_op(make("mean", 0, false), "non-contiguous", {strided_leaf({4, 3}, 22)});
}

// ---------------------------------------------------------------- 3. exp, log, tanh

// Once its last handle is dropped, an op's output must be freed, and its node with it. A closure that keeps
// `out` itself (not out.detach()) closes a cycle: out holds its node, the node its closure, the closure out.
// The gradients are right, and every graph built with the op stays in memory for good.
void check_output_is_freed(const char* name, Tensor (*mine)(const Tensor&), const char* hint) {
  const Tensor x = leaf(random_tensor({3}, 39, 0.2, 2));
  std::weak_ptr<TensorImpl> output;
  std::weak_ptr<Node> node;
  {
    Tensor out = mine(x);
    output = out.impl_ptr();
    node = out.grad_fn();
  }
  if (output.expired()) return passed(fmt::format("{}: the output and its node are freed with the last handle", name));
  if (std::shared_ptr<Node> cycle = node.lock()) cycle->backward = nullptr;  // so that the checker frees it
  fail(fmt::format("{}: the output outlives its last handle. Your closure keeps `out` itself, and out keeps its node, "
                   "which keeps the closure: a cycle, never freed, so every graph made with {} would stay in memory. "
                   "What the closure keeps must not own the node",
                   name, name),
       hint);
}

void rung_3() {
  struct Unary {
    const char* name;
    Tensor (*mine)(const Tensor&);
    Tensor (*reference)(const Tensor&);
    const char* hint;
    double lo, hi;
  };
  const Unary ops[] = {
      {"my_exp", my_exp, exp, "(eˣ)' = eˣ, the output itself: save y = out.detach() (the same numbers, no node) "
                              "in `saved` and capture y", -2, 2},
      {"my_log", my_log, log, "(ln x)' = 1/x: save and capture x", 0.2, 3},
      {"my_tanh", my_tanh, tanh, "(tanh x)' = 1 − tanh² x = 1 − y²: save y = out.detach() and capture y", -2, 2},
  };
  Fixture f("03_exp_log_tanh");
  uint64_t seed = 31;
  for (const Unary& u : ops) {
    OpUnderTest op{u.name, {"x"},
                   [&u](const std::vector<Tensor>& in) { return u.mine(in[0]); },
                   [&u](const std::vector<Tensor>& in) { return u.reference(in[0]); },
                   u.hint};
    check_fixture_case(op, f, std::string(u.name).substr(3));
    check_op(op, "non-contiguous", {transposed_leaf({3, 4}, seed++, u.lo, u.hi)});
    check_output_is_freed(u.name, u.mine, u.hint);
  }
}

// ---------------------------------------------------------------- 4. matmul's two gradients

void rung_4() {
  OpUnderTest op{"my_matmul", {"a", "b"},
                 [](const std::vector<Tensor>& in) { return my_matmul(in[0], in[1]); },
                 [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); }};
  op.hint = "out = a b: da = g bᵀ and db = aᵀ g (.mT() transposes the last two dims); when a batch dim of a "
            "or b was broadcast, .sum_to the input's shape. The shapes tell where the transposes go: "
            "g is [n, m], a [n, k], b [k, m]";
  op.mistakes = {
      {0, "a missing transpose: you computed g b, the gradient is g bᵀ",
       [](const std::vector<Tensor>& in, const Tensor& g) { return where_shapes_fit([&] { return matmul(g, in[1]).sum_to(in[0].shape()); }); }},
      {1, "a missing transpose: you computed a g, the gradient is aᵀ g",
       [](const std::vector<Tensor>& in, const Tensor& g) { return where_shapes_fit([&] { return matmul(in[0], g).sum_to(in[1].shape()); }); }},
      {1, "a missing transpose: you computed gᵀ a, the gradient is aᵀ g",
       [](const std::vector<Tensor>& in, const Tensor& g) { return where_shapes_fit([&] { return matmul(g.mT(), in[0]).sum_to(in[1].shape()); }); }},
  };
  Fixture f("04_matmul");
  for (const char* name : {"square", "rectangular", "batched", "batch_broadcast"}) check_fixture_case(op, f, name);
  check_op(op, "non-contiguous", {transposed_leaf({4, 3}, 41), strided_leaf({3, 2}, 42)});
}

// ---------------------------------------------------------------- 5. the engine

struct SmallGraph {
  Tensor a, b, c, loss;
};

// y = a·b is used three times, a twice, c broadcast: the gradients must add up along every path.
Tensor small_graph_loss(const Tensor& a, const Tensor& b, const Tensor& c) {
  Tensor y = a * b;
  Tensor z = exp(y) + y * a;
  return (z * y).sum() + (y * c).sum();
}

SmallGraph small_graph() {
  SmallGraph s{leaf(random_tensor({3}, 51)), leaf(random_tensor({3}, 52)), leaf(random_tensor({}, 53)), {}};
  s.loss = small_graph_loss(s.a, s.b, s.c);
  return s;
}

std::vector<Node*> reachable_nodes(const Tensor& root) {
  std::vector<Node*> found, stack{root.grad_fn().get()};
  std::unordered_set<Node*> seen{stack[0]};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    found.push_back(n);
    for (const Edge& e : n->inputs)
      if (e.node && seen.insert(e.node.get()).second) stack.push_back(e.node.get());
  }
  return found;
}

void check_topological_order(const Tensor& root, const std::string& graph) {
  std::vector<Node*> order = topological_order(root);
  const std::vector<Node*> all = reachable_nodes(root);
  const std::string hint = "a depth-first walk from root.grad_fn() through node->inputs[i].node, writing a node "
                           "down after all its inputs' nodes (post-order), then reversed; a set of visited nodes "
                           "keeps each node once";
  std::unordered_map<Node*, size_t> position;
  for (size_t i = 0; i < order.size(); ++i) {
    if (!order[i]) fail(fmt::format("topological_order ({}): entry {} is a null node", graph, i), hint);
    if (!position.emplace(order[i], i).second)
      fail(fmt::format("topological_order ({}): {} appears twice (entries {} and {}); each node must run once, "
                       "after all its gradient has arrived",
                       graph, order[i]->name, position[order[i]], i),
           hint);
  }
  for (Node* n : all)
    if (!position.count(n))
      fail(fmt::format("topological_order ({}): {} is reachable from the root but missing ({} of {} nodes listed)",
                       graph, n->name, order.size(), all.size()),
           hint);
  if (order.size() != all.size())
    fail(fmt::format("topological_order ({}): {} nodes listed, but only {} are reachable from the root", graph,
                     order.size(), all.size()));
  for (Node* n : order)
    for (const Edge& e : n->inputs)
      if (e.node && position[e.node.get()] < position[n])
        fail(fmt::format("topological_order ({}): {} (entry {}) comes before {} (entry {}), which sends it "
                         "gradients: it would run before its gradient is complete",
                         graph, e.node->name, position[e.node.get()], n->name, position[n]),
             hint);
  passed(fmt::format("topological_order ({}): {} nodes, each once, each before its inputs", graph, order.size()));
}

void rung_5() {
  const std::string hint = "every node's incoming gradient is the sum over all its uses (y = a·b is used three "
                           "times here): add, never overwrite; a leaf's .grad too adds up, across calls as well";
  {
    SmallGraph s = small_graph();
    check_topological_order(s.loss, "a small graph");
  }
  {  // a long chain: a recursive walk would need one stack frame per node
    Tensor x = leaf(random_tensor({2}, 54));
    Tensor y = x;
    for (int i = 0; i < 20000; ++i) y = y * 1.0001;
    check_topological_order(y.sum(), "a chain of 20001 nodes");
  }
  SmallGraph mine = small_graph(), truth = small_graph();
  run_backward(mine.loss);
  truth.loss.backward();
  const char* names[] = {"a", "b", "c"};
  const Tensor* got[] = {&mine.a, &mine.b, &mine.c};
  const Tensor* want[] = {&truth.a, &truth.b, &truth.c};
  for (int i = 0; i < 3; ++i) {
    if (!got[i]->grad().defined())
      fail(fmt::format("run_backward: leaf {} has no .grad: a gradient that reaches an edge to a leaf (edge.leaf) "
                       "belongs in that leaf's .grad",
                       names[i]),
           hint);
    const std::string what = fmt::format("run_backward: the gradient in {}.grad", names[i]);
    if (!close(got[i]->grad(), want[i]->grad()))
      fail(fmt::format("{} is not the true one: element 0 is {:.10g}, expected {:.10g}. A node whose output is used "
                       "more than once must receive the sum of the gradients of all its uses before it runs",
                       what, got[i]->grad().to_vector<double>()[0], want[i]->grad().to_vector<double>()[0]),
           hint);
  }
  passed("run_backward: a, b, c get the engine's gradients on a graph where y is used three times");
  // A second backward adds into .grad, as PyTorch's does (that is why optimizers zero them).
  run_backward(small_graph_loss(mine.a, mine.b, mine.c));
  expect_close("run_backward, called twice: a.grad (a second pass adds into the .grad the first one left)",
               mine.a.grad(), truth.a.grad() * 2.0, 1e-7, 1e-10, hint);
  passed("run_backward: a second pass adds into .grad");
}

// ---------------------------------------------------------------- 6. softmax's backward

void rung_6() {
  auto make = [](int64_t dim) {
    OpUnderTest op{fmt::format("my_softmax(x, dim={})", dim), {"x"},
                   [dim](const std::vector<Tensor>& in) { return my_softmax(in[0], dim); },
                   [dim](const std::vector<Tensor>& in) { return softmax(in[0], dim); }};
    op.hint = "∂y_j/∂x_i = y_j (δ_ij − y_i): dx = y ⊙ (g − Σ_j g_j y_j), the sum along dim with keepdim";
    op.mistakes = {
        {0, "you left out the −Σ_j g_j y_j term: every y_j depends on every x_i through the normalising sum",
         [dim](const std::vector<Tensor>& in, const Tensor& g) { return g * softmax(in[0].detach(), dim); }},
        {0, "only the diagonal of the Jacobian, y_i (1 − y_i): the off-diagonal entries −y_i y_j add up to "
            "−y_i Σ_j g_j y_j",
         [dim](const std::vector<Tensor>& in, const Tensor& g) {
           Tensor y = softmax(in[0].detach(), dim);
           return g * y * (1.0 - y);
         }},
    };
    return op;
  };
  Fixture f("06_softmax");
  check_fixture_case(make(-1), f, "rows");
  check_fixture_case(make(0), f, "columns");
  check_fixture_case(make(-1), f, "large");
  check_op(make(-1), "non-contiguous", {transposed_leaf({3, 5}, 61)});
}

// ---------------------------------------------------------------- 7. cross-entropy

void rung_7() {
  OpUnderTest op{"my_cross_entropy", {"logits", "targets"},
                 [](const std::vector<Tensor>& in) { return my_cross_entropy(in[0], in[1]); },
                 [](const std::vector<Tensor>& in) { return cross_entropy(in[0], in[1]); }};
  op.hint = "loss = mean_i(−log softmax(x_i)[t_i]); d loss/dx_i = (softmax(x_i) − onehot(t_i)) / N, times g";
  Fixture f("07_cross_entropy");
  check_fixture_case(op, f, "small", {true, false});
  {
    Case large = fixture_case(f, "large", op.inputs, {true, false});
    Tensor loss;
    try {
      loss = my_cross_entropy(large.inputs[0], large.inputs[1]);
    } catch (const NotImplemented&) {
      throw;
    } catch (const std::exception&) {
    }
    if (loss.defined() && !std::isfinite(loss.item()))
      fail(fmt::format("my_cross_entropy (large): logits such as 1000 and −1000 give a loss of {}, PyTorch's is "
                       "{:.10g}. Not stable: softmax rounds the small probabilities to 0, and log(0) = −inf. "
                       "Fuse the two: log softmax(x) = x − max − log Σ exp(x − max) (log_softmax), whose "
                       "values and gradient softmax − onehot stay finite",
                       loss.item(), large.expected.out.item()));
    check_op(op, "large, PyTorch's numbers", large.inputs, large.expected);
  }
  check_op(op, "non-contiguous", {strided_leaf({4, 3}, 71), from_vector(std::vector<int64_t>{2, 0, 1, 1}, {4})});
}

// ---------------------------------------------------------------- 8. masked_fill and the causal mask

void rung_8() {
  auto make = [](double value) {
    OpUnderTest op{fmt::format("my_masked_fill(x, mask, {})", value), {"x", "mask"},
                   [value](const std::vector<Tensor>& in) { return my_masked_fill(in[0], in[1], value); },
                   [value](const std::vector<Tensor>& in) { return masked_fill(in[0], in[1], value); }};
    op.hint = "forward: where(mask, value, x); backward: g where the mask is false, 0 where it is true";
    op.mistakes = {{0, "the filled positions got a gradient: they hold the constant value, which does not depend "
                       "on x, so x's gradient there is 0",
                    [](const std::vector<Tensor>&, const Tensor& g) { return g; }}};
    op.gradcheck = std::isfinite(value);  // finite differences of −inf are nan
    return op;
  };
  Fixture f("08_masked_fill");
  check_fixture_case(make(0.5), f, "full_mask", {true, false});
  check_fixture_case(make(2.0), f, "broadcast_mask", {true, false});
  check_fixture_case(make(-kInf), f, "causal", {true, false});
  check_op(make(0.5), "non-contiguous", {transposed_leaf({3, 4}, 81), f["full_mask.mask"]});
  for (int64_t T : {1, 4, 6}) {
    const std::string what = fmt::format("causal_mask({})", T);
    Tensor mask = causal_mask(T);
    if (mask.dtype() != DType::Bool)
      fail(fmt::format("{}: dtype {}, expected bool (a comparison such as gt(cols, rows) gives one)", what,
                       dtype_name(mask.dtype())));
    expect_close(what, mask.to(DType::Float64), f[fmt::format("causal_{}", T)].to(DType::Float64), 0, 0,
                 "row i is query i: it may see keys 0..i, so only the entries with j > i (above the diagonal) are true");
  }
  passed("causal_mask(1), (4), (6): true exactly above the diagonal");
}

// ---------------------------------------------------------------- 9. Linear

void rung_9() {
  Fixture f("09_linear");
  const std::string init_hint = "torch.nn.Linear draws the weight first, then the bias: weight ~ U(−b, b) with "
                                "b = √3 · gain / √in, gain = √(2 / (1 + a²)), a = √5 (kaiming_uniform_, computed "
                                "in double in that order); bias ~ U(−1/√in, 1/√in); uniform_(t, from, to) draws "
                                "as torch's does";
  manual_seed(7);
  MyLinear lin(24, 13);
  std::vector<std::string> names;
  for (const auto& [name, p] : lin.named_parameters()) names.push_back(name);
  if (names != std::vector<std::string>{"weight", "bias"})
    fail(fmt::format("MyLinear(24, 13): parameters named [{}], expected [weight, bias]: register_parameter(\"weight\", "
                     "...) then (\"bias\", ...), so that state_dict keys are PyTorch's",
                     fmt::join(names, ", ")));
  if (!lin.weight.requires_grad() || lin.weight.shape() != Shape{13, 24} || !lin.bias.defined() ||
      lin.bias.shape() != Shape{13})
    fail(fmt::format("MyLinear(24, 13): weight {} and bias {}, expected [13, 24] and [13], requiring grad "
                     "(register_parameter returns the tensor marked so: keep it)",
                     lin.weight.shape_str(), lin.bias.defined() ? lin.bias.shape_str() : "undefined"));
  passed("MyLinear(24, 13): parameters weight [13, 24] and bias [13]");
  if (!close(lin.weight, f["seed7.weight"], 1e-5, 1e-6)) {
    manual_seed(7);  // the usual slip: the same draws, the bias's first
    Tensor bias_first = empty({13}), weight_second = empty({13, 24});
    uniform_(bias_first, -1.0 / std::sqrt(24.0), 1.0 / std::sqrt(24.0));
    const double bound = kaiming_uniform_bound(24, std::sqrt(5.0));
    uniform_(weight_second, -bound, bound);
    if (close(lin.weight, weight_second, 1e-5, 1e-6))
      fail("MyLinear(24, 13) after manual_seed(7): the weight holds the values PyTorch draws after the bias's: "
           "torch.nn.Linear draws the weight first, then the bias (each draw moves the generator on)");
    expect_close("MyLinear(24, 13) after manual_seed(7): weight", lin.weight, f["seed7.weight"], 1e-5, 1e-6, init_hint);
  }
  expect_same_bits("MyLinear(24, 13) after manual_seed(7): weight (close, but not the bits)", lin.weight,
                   f["seed7.weight"], "compute the bound as PyTorch does, in double, √3 · (gain / √in)");
  expect_same_bits("MyLinear(24, 13) after manual_seed(7): bias", lin.bias, f["seed7.bias"], init_hint);
  passed("after manual_seed(7): PyTorch's weight and bias, bit for bit");
  expect_close("MyLinear(24, 13) forward on x [2, 5, 24]", lin(f["seed7.x"]), f["seed7.out"], 1e-5, 1e-6,
               "y = x Wᵀ + b over the last dim: linear(x, weight, bias), or x.matmul(weight.t()) + bias");
  passed("forward: PyTorch's output");
  manual_seed(1);
  MyLinear plain(3, 2, /*bias=*/false);
  if (plain.bias.defined() || plain.parameters().size() != 1)
    fail("MyLinear(3, 2, bias=false): there must be no bias (bias undefined, one parameter)");
  expect_same_bits("MyLinear(3, 2, bias=false) after manual_seed(1): weight", plain.weight, f["nobias.weight"], init_hint);
  passed("MyLinear(3, 2, bias=false): PyTorch's weight, no bias");
  // gradients in float64, through the layer's own forward
  MyLinear probe(3, 4);
  OpUnderTest op{"MyLinear::forward", {"x", "weight", "bias"},
                 [&probe](const std::vector<Tensor>& in) {
                   probe.weight = in[1];
                   probe.bias = in[2];
                   return probe.forward(in[0]);
                 },
                 [](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); }};
  check_op(op, "float64", {leaf(random_tensor({5, 3}, 91)), leaf(random_tensor({4, 3}, 92)), leaf(random_tensor({4}, 93))});
  check_op(op, "a batch, non-contiguous", {strided_leaf({2, 5, 3}, 94), transposed_leaf({4, 3}, 95), leaf(random_tensor({4}, 96))});
}

// ---------------------------------------------------------------- 10. one attention head

// The gradient of the scores (after the 1/√d) for upstream g: what dq and dk are made of.
Tensor attention_scores_gradient(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g) {
  NoGradGuard no_grad;
  const int64_t T = q.size(-2);
  Tensor blocked = triu(ones({T, T}), 1) == 1.0;
  const double root_d = std::sqrt(double(q.size(-1)));
  Tensor p = softmax(masked_fill(matmul(q, k.mT()) / root_d, blocked, -kInf), -1);
  Tensor dp = matmul(g, v.mT());
  return p * (dp - (dp * p).sum(-1, true)) / root_d;
}

void rung_10() {
  OpUnderTest op{"my_attention_head", {"q", "k", "v"},
                 [](const std::vector<Tensor>& in) { return my_attention_head(in[0], in[1], in[2]); },
                 [](const std::vector<Tensor>& in) { return attention_reference(in[0], in[1], in[2]); }};
  op.hint = "walk the forward backwards: out = p v (dv = pᵀ g, dp = g vᵀ); p = softmax(s) (rung 6); "
            "s = q kᵀ / √d (dq = ds k / √d, dk = dsᵀ q / √d); the masked entries have p = 0, so they pass nothing";
  op.mistakes = {
      {1, "a missing transpose: you computed ds q, the gradient is dsᵀ q (s = q kᵀ: k enters transposed)",
       [](const std::vector<Tensor>& in, const Tensor& g) {
         return where_shapes_fit([&] { return matmul(attention_scores_gradient(in[0], in[1], in[2], g), in[0]).sum_to(in[1].shape()); });
       }},
      {2, "a missing transpose: you computed p g, the gradient is pᵀ g",
       [](const std::vector<Tensor>& in, const Tensor& g) {
         return where_shapes_fit([&] {
           const int64_t T = in[0].size(-2);
           Tensor p = softmax(masked_fill(matmul(in[0], in[1].mT()) / std::sqrt(double(in[0].size(-1))),
                                          triu(ones({T, T}), 1) == 1.0, -kInf), -1);
           return matmul(p, g).sum_to(in[2].shape());
         });
       }},
  };
  Fixture f("10_attention_head");
  check_fixture_case(op, f, "batched");
  check_fixture_case(op, f, "single");
  check_op(op, "non-contiguous", {transposed_leaf({2, 4, 3}, 101), strided_leaf({2, 4, 3}, 102), leaf(random_tensor({4, 3}, 103))});
}

// ---------------------------------------------------------------- 11. LayerNorm

void rung_11() {
  OpUnderTest op{"my_layer_norm", {"x", "weight", "bias"},
                 [](const std::vector<Tensor>& in) { return my_layer_norm(in[0], in[1], in[2]); },
                 [](const std::vector<Tensor>& in) {
                   return layer_norm(in[0], {in[0].size(-1)}, in[1], in[2]);
                 }};
  op.hint = "x̂ = (x − μ)·rstd, y = x̂ w + b; with dx̂ = g w: dx = rstd (dx̂ − mean(dx̂) − x̂ mean(dx̂ x̂)) over the "
            "last dim; dw = Σ g x̂ and db = Σ g over every dim but the last (.sum_to(w.shape()))";
  op.mistakes = {{0, "you treated the mean and the variance as constants (dx = g w rstd): both depend on every x of "
                     "the row, which adds −mean(dx̂) − x̂ mean(dx̂ x̂)",
                  [](const std::vector<Tensor>& in, const Tensor& g) {
                    Tensor x = in[0].detach(), c = x - x.mean(-1, true);
                    return g * in[1].detach() / sqrt((c * c).mean(-1, true) + 1e-5);
                  }}};
  Fixture f("11_layer_norm");
  check_fixture_case(op, f, "rows");
  check_op(op, "non-contiguous", {transposed_leaf({4, 6}, 111), leaf(random_tensor({6}, 112)), leaf(random_tensor({6}, 113))});
}

// ---------------------------------------------------------------- 12. GELU

void rung_12() {
  OpUnderTest op{"my_gelu", {"x"},
                 [](const std::vector<Tensor>& in) { return my_gelu(in[0]); },
                 [](const std::vector<Tensor>& in) { return gelu(in[0], "tanh"); }};
  op.hint = "y = ½ x (1 + t) with t = tanh(u), u = √(2/π) (x + 0.044715 x³): product rule and chain rule, "
            "y' = ½ (1 + t) + ½ x (1 − t²) · √(2/π) (1 + 3 · 0.044715 x²)";
  op.mistakes = {{0, "only ½ (1 + t): the product rule's second term ½ x · d tanh(u)/dx = ½ x (1 − t²) u' is missing",
                  [](const std::vector<Tensor>& in, const Tensor& g) {
                    Tensor x = in[0].detach();
                    Tensor t = tanh((x + x * x * x * 0.044715) * std::sqrt(2.0 / M_PI));
                    return g * (1.0 + t) * 0.5;
                  }}};
  Fixture f("12_gelu");
  check_fixture_case(op, f, "line");
  check_op(op, "non-contiguous", {transposed_leaf({3, 4}, 121, -3, 3)});
}

// ---------------------------------------------------------------- 13. Adam

// The update in double, for the diagnosis only: which formula the learner's numbers come from.
Tensor adam_variant(const Tensor& p, const Tensor& grad, const Tensor& m, const Tensor& v, int64_t step,
                    const AdamConfig& c, bool bias_correction) {
  Tensor g = grad.to(DType::Float64), m2 = m.to(DType::Float64) * c.beta1 + g * (1 - c.beta1);
  Tensor v2 = v.to(DType::Float64) * c.beta2 + g * g * (1 - c.beta2);
  const double bc1 = bias_correction ? 1 - std::pow(c.beta1, double(step)) : 1.0;
  const double bc2 = bias_correction ? 1 - std::pow(c.beta2, double(step)) : 1.0;
  return p.to(DType::Float64) - m2 * (c.lr / bc1) / (sqrt(v2) / std::sqrt(bc2) + c.eps);
}

void check_adam_run(const Fixture& f, const std::string& name, const AdamConfig& c, int64_t steps) {
  const std::string hint = "PyTorch 1.13, op by op, each rounded to float: m.mul_(β1).add_(g, 1 − β1); "
                           "v.mul_(β2) then += ((1 − β2)·g)·g (addcmul_'s order); denom = v.sqrt() / √(1 − β2ᵗ) + ε; "
                           "param += (m · −lr/(1 − β1ᵗ)) / denom (addcdiv_'s order). Scalars are computed in double";
  Tensor p = f[name + ".p0"], m = zeros_like(p), v = zeros_like(p);
  for (int64_t t = 1; t <= steps; ++t) {
    Tensor grad = f[fmt::format("{}.g{}", name, t)], before = p.clone(), m_before = m.clone(), v_before = v.clone();
    my_adam_step(p, grad, m, v, t, c);
    Tensor want = f[fmt::format("{}.p{}", name, t)];
    const std::string what = fmt::format("my_adam_step ({}, step {}): the parameter", name, t);
    if (!close(p, want, 1e-5, 1e-7)) {
      Tensor moved = p.to(DType::Float64) - before.to(DType::Float64), should = want.to(DType::Float64) - before.to(DType::Float64);
      if (close(moved, -should, 1e-3, 1e-9))
        fail(fmt::format("{} moved the wrong way (the sign): Adam steps against the gradient", what), hint);
      if (close(p, adam_variant(before, grad, m_before, v_before, t, c, false), 1e-5, 1e-7))
        fail(fmt::format("{} is the update without bias correction: m and v start at 0, so early on they are too "
                         "small by (1 − β1ᵗ) and (1 − β2ᵗ)",
                         what),
             "divide the step by 1 − β1ᵗ and √v by √(1 − β2ᵗ); " + hint);
      expect_close(what, p, want, 1e-5, 1e-7, hint);
    }
    expect_same_bits(what + " (right to float rounding)", p, want, hint);
    expect_same_bits(fmt::format("my_adam_step ({}, step {}): exp_avg", name, t), m, f[fmt::format("{}.m{}", name, t)], hint);
    expect_same_bits(fmt::format("my_adam_step ({}, step {}): exp_avg_sq", name, t), v, f[fmt::format("{}.v{}", name, t)], hint);
  }
  passed(fmt::format("my_adam_step ({}): {} steps, PyTorch's parameters and moments bit for bit", name, steps));
}

void rung_13() {
  Fixture f("13_adam");
  check_adam_run(f, "default", AdamConfig{.lr = 0.01}, 5);
  check_adam_run(f, "betas_eps", AdamConfig{.lr = 0.05, .beta1 = 0.8, .beta2 = 0.9, .eps = 1e-6}, 3);
  // and optim::Adam's, on a matrix, for longer
  manual_seed(3);
  Tensor mine = randn({3, 4}), theirs = mine.clone().requires_grad_(), m = zeros_like(mine), v = zeros_like(mine);
  optim::Adam adam({theirs}, {.lr = 0.01});
  for (int64_t t = 1; t <= 20; ++t) {
    Tensor grad = randn({3, 4});
    theirs.set_grad(grad.clone());
    adam.step();
    my_adam_step(mine, grad, m, v, t, AdamConfig{.lr = 0.01});
    expect_same_bits(fmt::format("my_adam_step against optim::Adam, step {}", t), mine, theirs.detach());
  }
  passed("my_adam_step: 20 steps, optim::Adam's parameters bit for bit");
}

// ---------------------------------------------------------------- the ladder

struct Rung {
  const char* file;
  const char* title;
  void (*check)();
};

const Rung kRungs[] = {
    {"01_mul.cpp", "mul with broadcasting (why sum_to)", rung_1},
    {"02_sum_mean.cpp", "sum and mean along a dim", rung_2},
    {"03_exp_log_tanh.cpp", "exp, log and tanh", rung_3},
    {"04_matmul.cpp", "matmul's two gradients", rung_4},
    {"05_engine.cpp", "the engine: topological order, accumulation", rung_5},
    {"06_softmax.cpp", "softmax's backward", rung_6},
    {"07_cross_entropy.cpp", "log_softmax + nll_loss, fused", rung_7},
    {"08_masked_fill.cpp", "masked_fill and the causal mask", rung_8},
    {"09_linear.cpp", "a Linear layer and PyTorch's initialisation", rung_9},
    {"10_attention_head.cpp", "one attention head, forward and backward", rung_10},
    {"11_layer_norm.cpp", "LayerNorm's backward", rung_11},
    {"12_gelu.cpp", "GELU's backward", rung_12},
    {"13_adam.cpp", "an Adam step, bit for bit", rung_13},
    {"14_char_model.cpp", "train the workshop's model on your ops", checks::rung_14},
    {"15_gpt_block.cpp", "one GPT block of your pieces, trained", checks::rung_15},
};
constexpr int kCount = int(sizeof(kRungs) / sizeof(kRungs[0]));

enum class Outcome { passed, not_implemented, failed };

// Whether a failure's report prints its hint (`--hint`, `make exercise N=1 HINT=1`). The diagnosis, what is
// wrong and why, is always printed; the hint, how to write it, gives the answer away, so it waits until asked.
bool show_hints = false;

void report_failure(int n, const std::string& diagnosis, const std::string& hint) {
  const Rung& r = kRungs[n - 1];
  std::printf("exercise %d: FAILED\n  %s\n", n, diagnosis.c_str());
  if (show_hints && !hint.empty()) std::printf("  hint: %s\n", hint.c_str());
  if (show_hints) std::printf("  more hints: the end of examples/exercises/%s\n", r.file);
  else if (!hint.empty()) std::printf("  a hint: make exercise N=%d HINT=1 (more at the end of examples/exercises/%s)\n", n, r.file);
  else std::printf("  hints: the end of examples/exercises/%s\n", r.file);
}

// Runs rung n's checks, printing the report; `summary` gets the outcome in one line, for the table.
Outcome run_rung(int n, std::string& summary) {
  const Rung& r = kRungs[n - 1];
  std::printf("exercise %d: %s (examples/exercises/%s)\n", n, r.title, r.file);
  std::fflush(stdout);
  try {
    r.check();
  } catch (const NotImplemented& e) {
    if (e.rung != n) {  // a rung below, which this one builds on
      summary = fmt::format("needs exercise {} first", e.rung);
      std::printf("exercise %d needs exercise %d first: %s\n  write it in examples/exercises/%s\n", n, e.rung, e.what(),
                  kRungs[e.rung - 1].file);
      return Outcome::not_implemented;
    }
    summary = e.what();
    std::printf("%s\n  write your code in examples/exercises/%s (the statement and hints are in that file)\n", e.what(), r.file);
    if (!e.note.empty()) std::printf("  %s\n", e.note.c_str());
    return Outcome::not_implemented;
  } catch (const Failure& e) {
    summary = std::string(e.what()).substr(0, std::string(e.what()).find('\n'));
    report_failure(n, e.what(), e.hint);
    return Outcome::failed;
  } catch (const std::exception& e) {
    summary = e.what();
    report_failure(n, fmt::format("stopped by an exception: {}", e.what()), "");
    return Outcome::failed;
  }
  summary = "passed";
  std::printf("exercise %d: passed\n", n);
  return Outcome::passed;
}

int usage(const char* program) {
  std::fprintf(stderr, "usage: %s [--hint] [N | all]   (N from 1 to %d; no argument: all, as a table; --hint: a "
               "failure's report adds how to write it)\n", program, kCount);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  set_numerics(Numerics::exact);  // PyTorch's bits: the fixtures are PyTorch's portable kernels
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args.front() == "--hint") {
    show_hints = true;
    args.erase(args.begin());
  }
  if (args.size() > 1) return usage(argv[0]);
  const std::string which = args.empty() ? "all" : args.front();
  if (which != "all") {
    char* end = nullptr;
    const long n = std::strtol(which.c_str(), &end, 10);
    if (which.empty() || *end != '\0' || n < 1 || n > kCount) return usage(argv[0]);
    std::string summary;
    return run_rung(int(n), summary) == Outcome::passed ? 0 : 1;
  }
  std::vector<std::pair<Outcome, std::string>> table;
  for (int n = 1; n <= kCount; ++n) {
    std::string summary;
    Outcome o = run_rung(n, summary);
    table.emplace_back(o, summary);
    std::printf("\n");
  }
  int done = 0;
  std::printf("the ladder:\n");
  for (int n = 1; n <= kCount; ++n) {
    const auto& [o, summary] = table[size_t(n - 1)];
    done += o == Outcome::passed;
    const char* mark = o == Outcome::passed ? "passed" : o == Outcome::not_implemented ? "to do " : "FAILED";
    std::string line = o == Outcome::passed || summary.find("not implemented") != std::string::npos ? "" : summary;
    if (line.size() > 90) line = line.substr(0, 87) + "...";
    std::printf("  %2d  %-46s %s  %s\n", n, kRungs[n - 1].title, mark, line.c_str());
  }
  std::printf("%d of %d passed\n", done, kCount);
  return done == kCount ? 0 : 1;
}
