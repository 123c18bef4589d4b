// test_engine.cpp — the reverse-mode engine itself: hand-derived gradients, accumulation, no-grad mode,
// shared subexpressions, retain_graph, freed graphs, explicit seeds, in-place checks and storage sharing.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <memory>

#include "tests/test_helpers.h"

namespace {

using namespace autograd;
using testing_helpers::expect_values;
using testing_helpers::values;
const auto values_of = testing_helpers::values;

Tensor leaf64(const Nested& values) { return tensor(values, DType::Float64).requires_grad_(); }

// ---------------------------------------------------------------- gradients worked out by hand

TEST(Engine, HandDerivedGradient) {
  // f = Σ (x·y + x)  ⇒  ∂f/∂x = y + 1,  ∂f/∂y = x
  Tensor x = leaf64({1.0, 2.0, 3.0});
  Tensor y = leaf64({4.0, 5.0, 6.0});
  Tensor f = (x * y + x).sum();
  EXPECT_DOUBLE_EQ(f.item(), 1 * 4 + 1 + 2 * 5 + 2 + 3 * 6 + 3);
  EXPECT_TRUE(f.requires_grad());
  ASSERT_NE(f.grad_fn(), nullptr);
  EXPECT_STREQ(f.grad_fn()->name, "SumBackward0");
  f.backward();
  expect_values(x.grad(), {3}, {5, 6, 7});
  expect_values(y.grad(), {3}, {1, 2, 3});
}

// Each op's node carries PyTorch 1.13's grad_fn name, overload digit included (what
// tensor.grad_fn.name() prints there), and is the only node the op records.
TEST(Engine, NodeNamesArePyTorchsGradFnNames) {
  Tensor x = leaf64({{1.0, -2.0, 3.0}, {0.5, 4.0, -1.0}});
  Tensor blocked = tensor({{0, 1, 0}, {1, 0, 0}}).to_bool();
  auto node_of = [&](const Tensor& t) {
    EXPECT_EQ(t.grad_fn()->inputs.size(), 1u);
    return std::string(t.grad_fn()->name);
  };
  EXPECT_EQ(node_of(x.sum()), "SumBackward0");
  EXPECT_EQ(node_of(x.sum(0)), "SumBackward1");
  EXPECT_EQ(node_of(sum(x, {0, 1}, false)), "SumBackward1");
  EXPECT_EQ(node_of(x.mean()), "MeanBackward0");
  EXPECT_EQ(node_of(x.mean(1)), "MeanBackward1");
  EXPECT_EQ(node_of(x.max(1).first), "MaxBackward0");
  EXPECT_EQ(node_of(x.max(1, /*keepdim=*/true).first), "MaxBackward0");
  EXPECT_EQ(node_of(x.max()), "MaxBackward1");
  EXPECT_EQ(node_of(x.softmax(-1)), "SoftmaxBackward0");
  EXPECT_EQ(node_of(x.log_softmax(-1)), "LogSoftmaxBackward0");
  EXPECT_EQ(node_of(x.masked_fill(blocked, 0.0)), "MaskedFillBackward0");
  EXPECT_EQ(node_of(embedding(x, tensor({1, 0}))), "EmbeddingBackward0");
  EXPECT_EQ(node_of(nll_loss(x.log_softmax(1), tensor({0, 2}))), "NllLossBackward0");
  // the sole input of a single-node op is the leaf itself
  EXPECT_EQ(x.mean().grad_fn()->inputs[0].node, nullptr);
}

TEST(Engine, MeanAndMaxGradientsAreTorchs) {
  // mean: every element gets g / n
  Tensor x = leaf64({{1.0, 3.0, 3.0, 2.0}, {0.0, 5.0, -1.0, 5.0}});
  x.mean(1).sum().backward();
  expect_values(x.grad(), {2, 4}, {0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25});
  // max(): a tie shares the gradient evenly (torch's evenly_distribute_backward)
  Tensor y = leaf64({1.0, 3.0, 3.0, 2.0});
  (y.max() * 2.0).backward();
  expect_values(y.grad(), {4}, {0.0, 1.0, 1.0, 0.0});
  // max(dim): the gradient goes to the index max returned (the first of a tie)
  Tensor z = leaf64({{1.0, 3.0, 3.0, 2.0}, {0.0, 5.0, -1.0, 5.0}});
  z.max(1).first.sum().backward();
  expect_values(z.grad(), {2, 4}, {0, 1, 0, 0, 0, 1, 0, 0});
}

TEST(Engine, HandDerivedChainRule) {
  // g = Σ tanh(w·x)² over a 2×2 matrix-vector product; ∂g/∂w_ij = 2 tanh(h_i) (1 − tanh²(h_i)) x_j
  Tensor w = leaf64({{0.5, -1.0}, {0.25, 2.0}});
  Tensor x = tensor({1.0, 0.5}, DType::Float64);
  Tensor g = matmul(w, x).tanh().pow(2.0).sum();
  g.backward();
  double h0 = 0.5 * 1.0 - 1.0 * 0.5, h1 = 0.25 * 1.0 + 2.0 * 0.5;
  auto d = [](double h) { return 2 * std::tanh(h) * (1 - std::tanh(h) * std::tanh(h)); };
  expect_values(w.grad(), {2, 2}, {d(h0) * 1.0, d(h0) * 0.5, d(h1) * 1.0, d(h1) * 0.5});
  EXPECT_FALSE(x.grad().defined());  // x never asked for a gradient
}

TEST(Engine, GradientsOnlyReachLeavesThatRequireThem) {
  Tensor x = leaf64({1.0, 2.0});
  Tensor c = tensor({3.0, 4.0}, DType::Float64);
  Tensor unused = leaf64({9.0});
  (x * c).sum().backward();
  expect_values(x.grad(), {2}, {3, 4});
  EXPECT_FALSE(c.grad().defined());
  EXPECT_FALSE(unused.grad().defined());
  EXPECT_FALSE(x.grad().requires_grad());  // backward formulas are not recorded
  EXPECT_EQ(x.grad().grad_fn(), nullptr);
}

// ---------------------------------------------------------------- accumulation

TEST(Engine, GradientsAccumulateOverBackwardCalls) {
  Tensor x = leaf64({1.0, 2.0, 3.0});
  Tensor y = leaf64({4.0, 5.0, 6.0});
  (x * y + x).sum().backward();
  (x * y + x).sum().backward();  // a fresh graph; its gradient adds to the first
  expect_values(x.grad(), {3}, {10, 12, 14});
  expect_values(y.grad(), {3}, {2, 4, 6});

  x.set_grad(Tensor());  // zeroing the gradient, PyTorch's "set to None"
  EXPECT_FALSE(x.grad().defined());
  (x * y + x).sum().backward();
  expect_values(x.grad(), {3}, {5, 6, 7});
  expect_values(y.grad(), {3}, {3, 6, 9});  // y was not reset
}

TEST(Engine, AccumulatedGradientOwnsItsBuffer) {
  // sum's backward hands back an expanded (stride-0) view; the leaf must get a real buffer, or the
  // second accumulation would add into one shared element.
  Tensor x = leaf64({1.0, 2.0, 3.0});
  x.sum().backward();
  EXPECT_TRUE(x.grad().is_contiguous());
  x.sum().backward();
  expect_values(x.grad(), {3}, {2, 2, 2});
  // gradients of a broadcast input are summed back to its own shape
  Tensor b = leaf64({{1.0, 2.0, 3.0}});
  (b + zeros({4, 3}, DType::Float64)).sum().backward();
  expect_values(b.grad(), {1, 3}, {4, 4, 4});
}

TEST(Engine, AFreshGradientIsTakenOverOthersAreCopied) {
  // mul's backward makes a fresh tensor (g * y) that nothing else holds: .grad takes it over, and two
  // leaves never end up sharing one buffer — even when one backward hands the same tensor to both.
  Tensor x = leaf64({1.0, 2.0}), y = leaf64({3.0, 4.0});
  (x * y).sum().backward();
  expect_values(x.grad(), {2}, {3, 4});
  expect_values(y.grad(), {2}, {1, 2});
  EXPECT_NE(x.grad().raw_data(), y.grad().raw_data());
  Tensor a = leaf64({1.0, 2.0}), b = leaf64({5.0, 6.0});
  (a + b).sum().backward();  // add's backward returns the incoming gradient for both inputs
  EXPECT_NE(a.grad().raw_data(), b.grad().raw_data());
  a.grad().add_(ones({2}, DType::Float64));
  expect_values(b.grad(), {2}, {1, 1});  // b's gradient did not move with a's
}

TEST(Engine, BackwardOnALeaf) {
  Tensor x = leaf64(2.5);
  x.backward();
  expect_values(x.grad(), {}, {1.0});
}

// ---------------------------------------------------------------- no-grad mode

TEST(Engine, NoGradGuardRecordsNothing) {
  Tensor x = leaf64({1.0, 2.0});
  EXPECT_TRUE(is_grad_enabled());
  {
    NoGradGuard guard;
    EXPECT_FALSE(is_grad_enabled());
    Tensor y = (x * 2.0).exp().sum();
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(y.grad_fn(), nullptr);
    EXPECT_TRUE(y.is_leaf());
    EXPECT_DOUBLE_EQ(y.item(), std::exp(2.0) + std::exp(4.0));
    {
      NoGradGuard nested;
      EXPECT_FALSE(is_grad_enabled());
    }
    EXPECT_FALSE(is_grad_enabled());  // the inner guard restores the outer state, not "on"
    EXPECT_THROW(y.backward(), std::runtime_error);
  }
  EXPECT_TRUE(is_grad_enabled());
  Tensor z = x * 2.0;
  EXPECT_TRUE(z.requires_grad());
  EXPECT_NE(z.grad_fn(), nullptr);
}

TEST(Engine, OpsOnTensorsWithoutGradRecordNothing) {
  Tensor a = tensor({1.0, 2.0});
  Tensor b = a * a + 1.0;
  EXPECT_FALSE(b.requires_grad());
  EXPECT_EQ(b.grad_fn(), nullptr);
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  EXPECT_TRUE((a * x).requires_grad());
  EXPECT_FALSE((x > 1.0).requires_grad());  // comparisons give bool tensors without gradient
  EXPECT_FALSE(x.detach().requires_grad());
}

// ---------------------------------------------------------------- graph shapes

TEST(Engine, SharedSubexpressionGetsSummedGradient) {
  // a = 2x;  b = a² + a  ⇒  db/dx = (2a + 1)·2 = 8x + 2
  Tensor x = leaf64({1.0, -0.5, 3.0});
  Tensor a = x * 2.0;
  Tensor b = a * a + a;
  b.sum().backward();
  expect_values(x.grad(), {3}, {10, -2, 26});
}

TEST(Engine, DiamondAndReuseOfTheSameInput) {
  // x feeds four paths that meet again: f = Σ (x·x + exp(x) − x/2)
  Tensor x = leaf64({0.0, 1.0});
  (x * x + x.exp() - x / 2.0).sum().backward();
  expect_values(x.grad(), {2}, {0 + 1 - 0.5, 2 + std::exp(1.0) - 0.5});
}

TEST(Engine, DeepChainDoesNotRecurse) {
  // The topological sort is iterative; a long chain must neither overflow the stack nor lose gradient.
  Tensor x = leaf64({1.0});
  Tensor y = x;
  for (int i = 0; i < 20000; ++i) y = y + 0.5;
  y.sum().backward();
  expect_values(x.grad(), {1}, {1.0});
  EXPECT_DOUBLE_EQ(y.item(), 1.0 + 10000.0);
}

// ---------------------------------------------------------------- retain_graph and freed graphs

TEST(Engine, RetainGraphAllowsASecondBackward) {
  Tensor x = leaf64({1.0, 2.0});
  Tensor f = (x.exp() * x).sum();
  f.backward(Tensor(), /*retain_graph=*/true);
  f.backward();
  // d(x eˣ)/dx = eˣ (1 + x), twice
  expect_values(x.grad(), {2}, {2 * std::exp(1.0) * 2, 2 * std::exp(2.0) * 3});
}

TEST(Engine, SecondBackwardThroughAFreedGraphThrows) {
  Tensor x = leaf64({1.0, 2.0});
  Tensor f = (x * x).sum();
  f.backward();
  EXPECT_THROW_WITH(f.backward(), std::runtime_error, "SumBackward0", "already been freed", "retain_graph");

  // A graph freed through a shared intermediate: the error names the node that was freed.
  Tensor y = x.exp();
  Tensor first = y.sum();
  Tensor second = (y * 3.0).sum();
  first.backward();
  EXPECT_THROW_WITH(second.backward(), std::runtime_error, "ExpBackward", "already been freed");
}

// ---------------------------------------------------------------- seeds

TEST(Engine, NonScalarBackwardNeedsAGradient) {
  Tensor x = leaf64({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}});
  Tensor y = x * 2.0;
  EXPECT_THROW_WITH(y.backward(), std::runtime_error, "backward", "scalar", "[2, 3]");
  EXPECT_FALSE(x.grad().defined());  // nothing ran
}

TEST(Engine, ExplicitGradient) {
  Tensor x = leaf64({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}});
  Tensor y = x * x;
  y.backward(tensor({{1.0, 0.0, 2.0}, {0.5, 1.0, -1.0}}, DType::Float64));
  expect_values(x.grad(), {2, 3}, {2, 0, 12, 4, 10, -12});  // 2x·g
  // a gradient of the wrong shape is refused, naming both shapes
  Tensor z = x * 3.0;
  EXPECT_THROW_WITH(z.backward(ones({3, 2}, DType::Float64)), std::runtime_error, "[3, 2]", "[2, 3]");
  // a 1-element non-0-d output is accepted as a scalar
  Tensor w = x.sum().reshape({1, 1});
  x.set_grad(Tensor());
  w.backward();
  expect_values(x.grad(), {2, 3}, {1, 1, 1, 1, 1, 1});
}

TEST(Engine, BackwardOnATensorWithoutGradThrows) {
  Tensor c = tensor({1.0, 2.0}).sum();
  EXPECT_THROW_WITH(c.backward(), std::runtime_error, "does not require grad");
}

// ---------------------------------------------------------------- in-place operations

TEST(Engine, InPlaceChangeOfASavedOutputIsDetected) {
  Tensor x = leaf64({1.0, 2.0});
  Tensor y = x.exp();  // ExpBackward saves its output
  Tensor f = y.sum();
  {
    NoGradGuard guard;
    y.mul_(2.0);
  }
  EXPECT_THROW_WITH(f.backward(), std::runtime_error, "ExpBackward", "modified in place", "version");
}

TEST(Engine, InPlaceChangeOfASavedInputIsDetected) {
  Tensor a = leaf64({1.0, 2.0});
  Tensor b = leaf64({3.0, 4.0});
  Tensor f = (a * b).sum();  // MulBackward saves both inputs
  {
    NoGradGuard guard;
    b.add_(ones({2}, DType::Float64));  // e.g. an optimizer step before backward
  }
  EXPECT_THROW_WITH(f.backward(), std::runtime_error, "MulBackward", "modified in place");
}

TEST(Engine, InPlaceChangeThroughAViewIsDetected) {
  Tensor x = leaf64({1.0, 2.0, 3.0, 4.0});
  Tensor y = x.exp();
  Tensor f = y.sum();
  Tensor v = y.view({2, 2});
  {
    NoGradGuard guard;
    v.select(0, 1).fill_(0.0);  // a view of a view of the saved tensor
  }
  EXPECT_THROW_WITH(f.backward(), std::runtime_error, "ExpBackward", "modified in place");
}

TEST(Engine, InPlaceOnUnsavedTensorsIsFine) {
  // mul by a scalar saves nothing, so changing its input afterwards does not matter to backward
  Tensor x = leaf64({1.0, 2.0});
  Tensor y = x * 3.0;
  Tensor f = (y * 2.0).sum();
  {
    NoGradGuard guard;
    x.zero_();
  }
  f.backward();
  expect_values(x.grad(), {2}, {6, 6});
}

TEST(Engine, InPlaceOnALeafThatRequiresGradThrows) {
  Tensor x = leaf64({1.0, 2.0});
  Tensor mask = tensor({true, false}).to(DType::Bool);
  EXPECT_THROW_WITH(x.mul_(2.0), std::runtime_error, "mul_", "leaf", "[2]");
  EXPECT_THROW_WITH(x.add_(x), std::runtime_error, "add_", "leaf");
  EXPECT_THROW_WITH(x.fill_(1.0), std::runtime_error, "fill_", "leaf");
  EXPECT_THROW_WITH(x.zero_(), std::runtime_error, "fill_");
  EXPECT_THROW_WITH(x.copy_(ones({2}, DType::Float64)), std::runtime_error, "copy_", "leaf");
  EXPECT_THROW_WITH(x.masked_fill_(mask, 0.0), std::runtime_error, "masked_fill_", "leaf", "[2]");
  expect_values(x, {2}, {1, 2});  // untouched
  EXPECT_EQ(x.version(), 0u);
  // under NoGradGuard (an optimizer step) it is allowed and counted
  {
    NoGradGuard guard;
    x.mul_(2.0);
    x.add_(ones({2}, DType::Float64), 0.5);
  }
  expect_values(x, {2}, {2.5, 4.5});
  EXPECT_EQ(x.version(), 2u);
}

TEST(Engine, MaskedFillInPlaceOnANonLeafKeepsGradients) {
  Tensor mask = tensor({{true, false, false}, {false, false, true}}).to(DType::Bool);
  auto run = [&](bool in_place) {
    Tensor x = leaf64({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}});
    Tensor w = leaf64({{0.5, -1.0, 2.0}, {1.5, 0.0, -0.5}});
    Tensor y = x * w;
    if (in_place) {
      uint64_t before = y.version();
      Tensor& same = y.masked_fill_(mask, -std::numeric_limits<double>::infinity());
      EXPECT_TRUE(same.same(y));
      EXPECT_EQ(y.version(), before + 1);
      EXPECT_STREQ(y.grad_fn()->name, "MaskedFillBackward0");
    } else {
      y = y.masked_fill(mask, -std::numeric_limits<double>::infinity());
    }
    Tensor p = y.softmax(-1);
    (p * tensor({{1.0, 2.0, 3.0}, {-1.0, 0.5, 2.0}}, DType::Float64)).sum().backward();
    return std::make_tuple(values(p), values(x.grad()), values(w.grad()));
  };
  auto [p1, gx1, gw1] = run(true);
  auto [p2, gx2, gw2] = run(false);
  EXPECT_EQ(p1, p2);
  EXPECT_EQ(gx1, gx2);
  EXPECT_EQ(gw1, gw2);
  EXPECT_EQ(gx1[0], 0.0);  // filled positions pass no gradient back
  EXPECT_EQ(gx1[5], 0.0);
  EXPECT_NE(gx1[1], 0.0);
}

TEST(Engine, AViewsNodeDoesNotKeepItsInputsMemory) {
  // PyTorch's view nodes keep sizes, not data: a tensor seen only through a view (here the product,
  // transposed and then copied) is freed once nothing but the graph refers to it. Activations like the
  // attention's context before its heads are merged count on this (bench/compare.sh's peak memory).
  Tensor x = leaf64({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}});
  Tensor copied;
  std::weak_ptr<Storage> product_memory;
  {
    Tensor product = x * 2.0;  // MulBackward0 with a number saves nothing
    product_memory = product.impl().storage;
    copied = product.transpose(0, 1).view({3, 2}).contiguous();
  }
  EXPECT_TRUE(product_memory.expired());
  (copied * tensor({{1.0, 10.0}, {2.0, 20.0}, {3.0, 30.0}}, DType::Float64)).sum().backward();
  expect_values(x.grad(), {2, 3}, {2, 4, 6, 20, 40, 60});
}

TEST(Engine, AnInPlaceWriteBeforeTheBaseIsFreedIsStillDetected) {
  // The view's node watches its input's version counter, which outlives the memory: writing the base in
  // place and then dropping every tensor on it still makes backward through the view refuse.
  Tensor mask = tensor({true, false, false}).to(DType::Bool);
  Tensor x = leaf64({1.0, 2.0, 3.0});
  Tensor out;
  {
    Tensor y = x * 2.0;
    out = y.view({3}) * 3.0;
    y.masked_fill_(mask, 0.0);
  }
  EXPECT_THROW_WITH(out.sum().backward(), std::runtime_error, "ViewBackward", "modified in place");
}

TEST(Engine, InPlaceFillOfTheBaseOfAnEarlierViewIsDetected) {
  // v is a view of y taken before y.masked_fill_: v now holds the filled values, but its history still
  // says "2x" everywhere. Backward through v must not pass the gradient [2, 2, 2] (the truth is [0, 2, 2]).
  Tensor mask = tensor({true, false, false}).to(DType::Bool);
  Tensor x = leaf64({1.0, 2.0, 3.0});
  Tensor y = x * 2.0;
  Tensor v = y.view({3});
  y.masked_fill_(mask, 0.0);
  expect_values(v, {3}, {0, 4, 6});
  EXPECT_THROW_WITH(v.sum().backward(), std::runtime_error, "ViewBackward", "modified in place");

  // a view taken after the fill describes the filled tensor, and its gradient is right
  Tensor x2 = leaf64({1.0, 2.0, 3.0});
  Tensor y2 = x2 * 2.0;
  y2.masked_fill_(mask, 0.0);
  y2.view({3, 1}).t().sum().backward();
  expect_values(x2.grad(), {3}, {0, 2, 2});
}

TEST(Engine, MaskedFillInPlaceOnAViewWithHistoryIsRefused) {
  Tensor x = leaf64({{1.0, 2.0}, {3.0, 4.0}});
  Tensor y = (x * 2.0).t();
  EXPECT_THROW_WITH(y.masked_fill_(tensor({true, false}).to(DType::Bool), 0.0), std::runtime_error, "masked_fill_",
                    "view");
}

// ---------------------------------------------------------------- storage sharing

TEST(Engine, DetachSharesStorage) {
  Tensor x = leaf64({1.0, 2.0, 3.0});
  Tensor d = x.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_EQ(d.grad_fn(), nullptr);
  EXPECT_EQ(d.raw_data(), x.raw_data());
  EXPECT_FALSE(d.same(x));
  d.fill_(7.0);  // allowed: d does not require grad
  expect_values(x, {3}, {7, 7, 7});
  EXPECT_EQ(x.version(), 1u);  // one version counter per storage
  // detach of a non-leaf cuts the history
  Tensor y = x * 2.0;
  Tensor yd = y.detach();
  EXPECT_TRUE(yd.is_leaf());
  EXPECT_EQ(yd.raw_data(), y.raw_data());
}

TEST(Engine, ViewsShareStorageAndVersion) {
  Tensor base = arange(0.0, 12.0, 1.0, DType::Float32).view({3, 4});
  Tensor t = base.t();
  Tensor row = base[1];
  Tensor cols = base.slice(1, 1, std::nullopt, 2);
  Tensor flat = base.view({-1});
  for (const Tensor& v : {t, row, cols, flat}) {
    EXPECT_EQ(v.impl().storage, base.impl().storage);
    EXPECT_TRUE(v.impl().is_view);
  }
  EXPECT_EQ(row.offset(), 4);
  EXPECT_EQ(cols.strides(), (Shape{4, 2}));
  row.fill_(-1.0);
  EXPECT_EQ(base.version(), 1u);
  EXPECT_EQ(t.version(), 1u);
  expect_values(t.select(1, 1), {4}, {-1, -1, -1, -1});
  cols.mul_(10.0);
  EXPECT_EQ(flat.version(), 2u);
  expect_values(base, {3, 4}, {0, 10, 2, 30, -1, -10, -1, -10, 8, 90, 10, 110});
}

TEST(Engine, ViewOfALeafPassesGradientBack) {
  Tensor x = leaf64({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}});
  Tensor v = x.t().slice(0, 1, std::nullopt);  // [2, 2]: columns 1 and 2
  (v * v).sum().backward();
  expect_values(x.grad(), {2, 3}, {0, 4, 6, 0, 10, 12});
}

// ---------------------------------------------------------------- the observer hook

TEST(Engine, BackwardObserverSeesEveryNodeOnce) {
  std::vector<std::string> seen;
  BackwardObserver previous = set_backward_observer([&](const BackwardEvent& e) {
    seen.push_back(e.node->name);  // PyTorch's grad_fn names, overload digit included
  });
  Tensor x = leaf64({1.0, 2.0});
  Tensor a = x.exp();
  (a * a + a).sum().backward();
  set_backward_observer(previous);
  // exp runs once although its output is used 3 times
  EXPECT_EQ(seen, (std::vector<std::string>{"SumBackward0", "AddBackward0", "MulBackward0", "ExpBackward0"}));
}

// ---------------------------------------------------------------- post-accumulate-grad hooks

TEST(EngineHooks, ALeafsHookRunsOnceWhenItsGradientIsComplete) {
  // x is used by three nodes; the hook must see the sum of all three contributions, once.
  Tensor x = leaf64({1.0, 2.0});
  Tensor w = leaf64({3.0, 4.0});
  std::vector<std::vector<double>> seen;
  x.register_post_accumulate_grad_hook([&](Tensor& leaf) { seen.push_back(values(leaf.grad())); });
  Tensor f = (x * w + x * x + x.exp()).sum();
  f.backward();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], values(x.grad()));
  expect_values(x.grad(), {2}, {3 + 2 * 1 + std::exp(1.0), 4 + 2 * 2 + std::exp(2.0)});
}

TEST(EngineHooks, HooksRunDuringBackwardInTheOrderGradientsComplete) {
  // a is used only at the end of the forward, b only at its start: a's gradient completes first, while
  // the nodes that lead to b have yet to run.
  Tensor b = leaf64({2.0}), a = leaf64({3.0});
  Tensor h = (b * 5.0).exp().log();  // three nodes between b and the loss
  Tensor f = (h * a).sum();
  std::vector<std::string> order;
  size_t nodes_run_when_a_completed = 0, nodes_run = 0;
  BackwardObserver previous = set_backward_observer([&](const BackwardEvent& e) { nodes_run = e.position + 1; });
  a.register_post_accumulate_grad_hook([&](Tensor&) {
    order.push_back("a");
    nodes_run_when_a_completed = nodes_run;
  });
  b.register_post_accumulate_grad_hook([&](Tensor&) { order.push_back("b"); });
  f.backward();
  set_backward_observer(previous);
  EXPECT_EQ(order, (std::vector<std::string>{"a", "b"}));
  EXPECT_LT(nodes_run_when_a_completed, nodes_run);  // a's hook ran before backward was over
}

TEST(EngineHooks, RemovedHooksDoNotRunAndAccumulationCarriesOver) {
  Tensor x = leaf64({1.0});
  int calls = 0;
  uint64_t id = x.register_post_accumulate_grad_hook([&](Tensor&) { ++calls; });
  (x * 2.0).sum().backward();
  (x * 3.0).sum().backward();
  EXPECT_EQ(calls, 2);  // once per pass
  expect_values(x.grad(), {1}, {5});  // the hook sees the gradient accumulated over both passes
  x.remove_post_accumulate_grad_hook(id);
  (x * 2.0).sum().backward();
  EXPECT_EQ(calls, 2);
}

TEST(EngineHooks, ALeafNoGradientReachesGetsNoCall) {
  Tensor x = leaf64({1.0}), y = leaf64({2.0});
  int x_calls = 0, y_calls = 0;
  x.register_post_accumulate_grad_hook([&](Tensor&) { ++x_calls; });
  y.register_post_accumulate_grad_hook([&](Tensor&) { ++y_calls; });
  (x * 2.0).sum().backward();
  EXPECT_EQ(x_calls, 1);
  EXPECT_EQ(y_calls, 0);
  Tensor leaf = leaf64({4.0});  // backward on the leaf itself completes its gradient at once
  int leaf_calls = 0;
  leaf.register_post_accumulate_grad_hook([&](Tensor&) { ++leaf_calls; });
  leaf.backward(tensor({1.0}, DType::Float64));
  EXPECT_EQ(leaf_calls, 1);
}

TEST(EngineHooks, ADetachedCopyDoesNotInheritTheHooks) {
  Tensor x = leaf64({1.0});
  int calls = 0;
  x.register_post_accumulate_grad_hook([&](Tensor&) { ++calls; });
  Tensor copy = x.detach().requires_grad_();
  (copy * 2.0).sum().backward();
  EXPECT_EQ(calls, 0);
  expect_values(copy.grad(), {1}, {2});
}

TEST(EngineHooks, OnlyALeafThatRequiresGradTakesAHook) {
  Tensor x = leaf64({1.0});
  Tensor y = x * 2.0;
  EXPECT_THROW(
      {
        try {
          y.register_post_accumulate_grad_hook([](Tensor&) {});
        } catch (const std::invalid_argument& e) {
          EXPECT_NE(std::string(e.what()).find("not a leaf that requires grad (it was made by MulBackward0)"),
                    std::string::npos)
              << e.what();
          throw;
        }
      },
      std::invalid_argument);
  EXPECT_THROW(tensor({1.0}).register_post_accumulate_grad_hook([](Tensor&) {}), std::invalid_argument);
}

// ---------------------------------------------------------------- an embedding's rows added in place

// A tied token table, as in GPT-2: the head (h·Wᵀ) sends W a dense gradient first, then the embedding
// sends the gradient of the rows it looked up, which the engine adds into that .grad in place
// (BackwardFunction::add_into_grad) rather than as a dense tensor of mostly zeros.
Tensor tied_loss(const Tensor& w, const Tensor& ids) {
  Tensor h = embedding(w, ids);                  // [n, d]
  Tensor logits = matmul(h.tanh(), w.t());       // [n, vocabulary]
  return (logits * logits).sum();
}

// W's gradient with the engine's dense path: a backward observer makes it hand every gradient over as a
// tensor, as the trace does.
Tensor dense_path_gradient(const Tensor& w_values, const Tensor& ids, int passes) {
  Tensor w = w_values.detach().requires_grad_();
  BackwardObserver previous = set_backward_observer([](const BackwardEvent&) {});
  for (int i = 0; i < passes; ++i) tied_loss(w, ids).backward();
  set_backward_observer(previous);
  return w.grad();
}

TEST(EngineEmbeddingRows, AddedInPlaceTheyHaveTheBitsOfTheDenseSum) {
  Tensor ids = tensor({3, 0, 3, 5, 3, 0, 6});  // repeated rows; rows 1, 2 and 4 never looked up
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Tensor values = testing_helpers::randish({7, 4}, 71, -1.0, 1.0, dtype);
    for (int passes : {1, 2}) {  // the second backward accumulates into the first one's .grad
      Tensor w = values.detach().requires_grad_();
      for (int i = 0; i < passes; ++i) tied_loss(w, ids).backward();
      Tensor want = dense_path_gradient(values, ids, passes);
      std::vector<double> got = w.grad().to_vector<double>(), expected = want.to_vector<double>();
      ASSERT_EQ(got.size(), expected.size());
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(std::bit_cast<uint64_t>(got[i]), std::bit_cast<uint64_t>(expected[i]))
            << dtype_name(dtype) << ", " << passes << " pass(es), element " << i;
    }
  }
}

TEST(EngineEmbeddingRows, RowsNotLookedUpKeepTheirBits) {
  // Only the looked-up rows are touched: a −0 elsewhere stays −0 (adding a dense zero row would make it
  // +0). This is also how the test knows the rows went in place.
  Tensor w = testing_helpers::randish({5, 3}, 72, -1.0, 1.0, DType::Float32).requires_grad_();
  w.set_grad(full({5, 3}, -0.0, DType::Float32));
  embedding(w, tensor({1, 3, 1})).sum().backward();
  const std::vector<float> g = w.grad().to_vector<float>();
  for (int64_t row = 0; row < 5; ++row)
    for (int64_t col = 0; col < 3; ++col) {
      const float v = g[size_t(row * 3 + col)];
      if (row == 1) EXPECT_EQ(v, 2.0f);
      else if (row == 3) EXPECT_EQ(v, 1.0f);
      else EXPECT_TRUE(v == 0.0f && std::signbit(v)) << "row " << row << " col " << col << ": " << v;
    }
}

TEST(EngineEmbeddingRows, WhereTheyCannotGoInPlaceTheDenseGradientIsAdded) {
  Tensor ids = tensor({2, 2, 0});
  Tensor values = testing_helpers::randish({4, 3}, 73);
  Tensor want = dense_path_gradient(values, ids, 1);
  // a .grad laid out transposed (not contiguous): added as a dense tensor
  Tensor w = values.detach().requires_grad_();
  w.set_grad(zeros({3, 4}, DType::Float64).t());
  tied_loss(w, ids).backward();
  EXPECT_EQ(values_of(w.grad()), values_of(want));
  // a leaf with a post-accumulate hook sees the whole gradient, once
  Tensor hooked = values.detach().requires_grad_();
  std::vector<std::vector<double>> seen;
  hooked.register_post_accumulate_grad_hook([&](Tensor& leaf) { seen.push_back(values_of(leaf.grad())); });
  tied_loss(hooked, ids).backward();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], values_of(want));
  // anomaly mode scans every gradient as a tensor
  Tensor watched = values.detach().requires_grad_();
  {
    DetectAnomalyGuard anomaly;
    tied_loss(watched, ids).backward();
  }
  EXPECT_EQ(values_of(watched.grad()), values_of(want));
}

}  // namespace
