// test_trace.cpp — the backward trace: TraceGuard's text, its order (the engine's), the values shown, the
// pass limit, and SCRATCHGRAD_TRACE in real programs.
#include <gtest/gtest.h>

#include "test_process.h"
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "autograd/inspect/trace.h"
#include "nn/nn.h"
#include "test_helpers.h"

namespace {

using namespace autograd;
using namespace autograd::inspect;
namespace fs = std::filesystem;

using testing_process::count;

TEST(Trace, ExactTextForASmallGraph) {
  Tensor x = tensor({1.0, 2.0}, DType::Float64).requires_grad_();
  Tensor product = x * x;
  Tensor sum = product + x;
  Tensor y = sum.sum();
  std::ostringstream out;
  {
    TraceGuard trace({.out = &out, .source_lines = false, .names = {{"x", x}}});
    y.backward();
  }
  // Node names and recording functions belong to the ops; this test is about the trace's layout: each
  // block pads its labels to its widest one ("→" is one column), then two spaces, then the numbers.
  const std::string Sum = y.grad_fn()->name, Add = sum.grad_fn()->name, Mul = product.grad_fn()->name;
  auto header = [](int k, const std::string& name, const Tensor& t) {
    return fmt::format("[{}/3] {}  {}\n", k, name, recorded_at(*t.grad_fn(), false));
  };
  auto columns = [](size_t w) {
    return [w](const std::string& label, const std::string& numbers, const std::string& values = "") {
      size_t shown = label.size() - 2 * size_t(label.find("→") != std::string::npos);  // 3 bytes, 1 column
      std::string line = "    " + label + std::string(w - shown + 2, ' ') + numbers + "\n";
      if (!values.empty()) line += std::string(6 + w, ' ') + values + "\n";
      return line;
    };
  };
  const std::string ones = "[2]         norm 1.414  min 1  max 1", x_grad = "[2]         norm 2.236  min 1  max 2";
  auto block1 = columns(std::max<size_t>(11, 8 + Add.size()));
  auto block2 = columns(std::max<size_t>(11, 8 + Mul.size()));
  auto block3 = columns(11);
  std::string expected =
      "backward pass 1: 3 nodes, newest first (a node runs once every node that uses its output has run)\n" +
      header(1, Sum, y) + block1("grad_output", "[]  = 1") + block1("0 → [2] " + Add, ones, "[1, 1]") +
      header(2, Add, sum) + block2("grad_output", ones, "[1, 1]") + block2("0 → [3] " + Mul, ones, "[1, 1]") +
      block2("1 → x", ones + "  (leaf: into .grad, gradient 1 of 3)", "[1, 1]") +  //
      header(3, Mul, product) + block3("grad_output", ones, "[1, 1]") +
      block3("0 → x", x_grad + "  (leaf: into .grad, gradient 2 of 3, summed)", "[1, 2]") +
      block3("1 → x", x_grad + "  (leaf: into .grad, gradient 3 of 3, summed)", "[1, 2]");
  EXPECT_EQ(out.str(), expected);
  testing_helpers::expect_values(x.grad(), {2}, {3.0, 5.0});  // tracing changes nothing: 2x + 1
}

TEST(Trace, SourceLinesAndCallSites) {
  Tensor x = testing_helpers::leaf({3}, 1);
  Tensor y;
  {
    CallSite line("y = exp(x).sum()");
    y = x.exp().sum();
  }
  std::ostringstream out;
  {
    TraceGuard trace(out);
    y.backward();
  }
  const std::string text = out.str();
  EXPECT_TRUE(std::regex_search(text, std::regex(R"re(\[2/2\] ExpBackward0  exp\(\) in elementwise\.cpp:[0-9]+  <- "y = exp\(x\)\.sum\(\)")re")))
      << text;
  EXPECT_NE(text.find("0 → leaf [3]"), std::string::npos) << "an unnamed leaf shows its shape: " << text;
}

TEST(Trace, FollowsTheEnginesOrderThroughTheCharModel) {
  manual_seed(7);
  nn::MiniSelfAttention model({.vocab = 13, .dim = 24, .context = 8});
  Tensor idx = randint(0, 13, {4, 8});
  Tensor loss = cross_entropy(model(idx).view({-1, 13}), randint(0, 13, {32}));
  std::vector<std::string> ran;
  BackwardObserver previous = set_backward_observer([&](const BackwardEvent& e) { ran.push_back(e.node->name); });
  std::ostringstream out;
  {
    TraceGuard trace(out);  // chains to the observer above
    loss.backward();
  }
  set_backward_observer(previous);
  const std::string text = out.str();
  ASSERT_EQ(ran.size(), 28u);
  std::istringstream lines(text);
  std::string line;
  size_t next = 1;
  while (std::getline(lines, line)) {
    if (!line.starts_with("[")) continue;
    std::string head = fmt::format("[{}/28] {}  ", next, ran[next - 1]);
    EXPECT_TRUE(line.starts_with(head)) << "expected '" << head << "' at: " << line;
    ++next;
  }
  EXPECT_EQ(next, 29u) << text;
  // parameters by name (the model names its leaves), the model's own line labels, the three uses of x
  for (const char* name : {"tok.weight", "pos.weight", "q.weight", "q.bias", "k.weight", "v.bias", "head.weight"})
    EXPECT_EQ(count(text, std::string("→ ") + name + " "), 1) << name << "\n" << text;
  EXPECT_NE(text.find("<- \"att = att.masked_fill(mask[:t, :t] == 0, -inf)\""), std::string::npos);
  EXPECT_NE(text.find("AddBackward0  [4, 8, 24]  norm"), std::string::npos);
  EXPECT_EQ(count(text, "of 3, summed)"), 2) << text;
  // values are listed for the small gradients (biases: 13 and 24 numbers), not for the big ones
  EXPECT_TRUE(std::regex_search(text, std::regex(R"(→ head\.bias +\[13\] .*\n +\[-?[0-9])"))) << text;
  EXPECT_FALSE(std::regex_search(text, std::regex(R"(→ head\.weight +\[13, 24\] .*\n +\[-?[0-9])"))) << text;
}

TEST(Trace, ListsValuesUpToTheLimit) {
  for (int64_t n : {64, 65}) {
    Tensor x = testing_helpers::leaf({n}, 3);
    std::ostringstream out;
    {
      TraceGuard trace({.out = &out, .names = {{"x", x}}});
      (x * 2.0).sum().backward();
    }
    // 64 values in rows of 8: 8 lines per listed tensor (incoming gradient and the one to x)
    const int rows = count(out.str(), "\n      ");
    EXPECT_EQ(rows, n == 64 ? 3 * 8 : 0) << out.str();  // Sum's outgoing, Mul's incoming and outgoing
  }
  TraceOptions none{.max_values = 0};
  std::ostringstream out;
  none.out = &out;
  Tensor x = testing_helpers::leaf({4}, 4);
  {
    TraceGuard trace(none);
    (x * 2.0).sum().backward();
  }
  EXPECT_EQ(count(out.str(), "\n      "), 0) << out.str();
}

TEST(Trace, PassLimitAndChaining) {
  Tensor x = testing_helpers::leaf({2}, 5);
  std::ostringstream first_only, every;
  int outer_calls = 0;
  BackwardObserver previous = set_backward_observer([&](const BackwardEvent&) { ++outer_calls; });
  {
    TraceGuard all({.out = &every});
    TraceGuard one({.out = &first_only, .passes = 1});
    for (int i = 0; i < 3; ++i) (x * x).sum().backward();
  }
  BackwardObserver restored = set_backward_observer(previous);
  EXPECT_EQ(count(first_only.str(), "backward pass "), 1);
  EXPECT_EQ(count(every.str(), "backward pass "), 3);
  EXPECT_NE(every.str().find("backward pass 3: 2 nodes"), std::string::npos) << every.str();
  EXPECT_EQ(outer_calls, 6) << "the observer installed before the guards keeps being called";
  ASSERT_TRUE(restored);  // the guards put it back
  restored({});
  EXPECT_EQ(outer_calls, 7);
}

TEST(Trace, NonFiniteAndRoundingNoise) {
  EXPECT_EQ(trace_number(0.000123456), "0.0001235");
  EXPECT_EQ(trace_number(-2.5e-9, 4, 1e-7), "~0");
  EXPECT_EQ(trace_number(0.0, 4, 1e-7), "0");
  EXPECT_EQ(trace_number(12345.678, 3), "1.23e+04");
  Tensor g = tensor({1.0, -INFINITY, 3.0});
  EXPECT_EQ(gradient_summary(g), "[3]         norm inf  min -inf  max 3");
  EXPECT_EQ(value_lines(tensor({{1.0, 2.0}, {3.0, 4.0}})), (std::vector<std::string>{"[1, 2]", "[3, 4]"}));
  EXPECT_EQ(value_lines(arange(0.0, 10.0, 1.0, DType::Float32), 4, 8),
            (std::vector<std::string>{"[0, 1, 2, 3, 4, 5, 6, 7,", " 8, 9]"}));
}

TEST(Trace, EnvironmentSetting) {
  EXPECT_EQ(trace_passes_from_setting(nullptr), -1);
  EXPECT_EQ(trace_passes_from_setting(""), -1);
  EXPECT_EQ(trace_passes_from_setting("0"), -1);
  EXPECT_EQ(trace_passes_from_setting("1"), 0);
  EXPECT_EQ(trace_passes_from_setting("all"), 0);
  EXPECT_EQ(trace_passes_from_setting("first"), 1);
  EXPECT_EQ(trace_passes_from_setting("3"), 3);
}

// ---------------------------------------------------------------- SCRATCHGRAD_TRACE in real programs

using ProgramRun = testing_process::Shell;

// Runs a built program with `env` settings (e.g. "SCRATCHGRAD_TRACE=first" or "-u SCRATCHGRAD_TRACE").
ProgramRun run(const std::string& env, const std::string& program_and_args) {
  return testing_process::shell(fmt::format("env {} {}/{}", env, SCRATCHGRAD_BIN_DIR, program_and_args));
}

TEST(Trace, EnvironmentVariableTracesAnyProgram) {
  ProgramRun plain = run("-u SCRATCHGRAD_TRACE", "scratchgrad train --steps 3");
  ProgramRun all = run("SCRATCHGRAD_TRACE=1", "scratchgrad train --steps 3");
  ProgramRun first = run("SCRATCHGRAD_TRACE=first", "scratchgrad train --steps 3");
  ProgramRun off = run("SCRATCHGRAD_TRACE=0", "scratchgrad train --steps 3");
  ASSERT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(plain.err, "");
  EXPECT_EQ(off.err, "");
  EXPECT_EQ(count(all.err, "backward pass "), 3) << all.err;
  EXPECT_EQ(count(first.err, "backward pass "), 1);
  EXPECT_NE(first.err.find("<- \"loss = cross_entropy(logits.view(-1, V), yb.view(-1))\""), std::string::npos);
  // the trace only reads: training prints the same losses (the timing columns differ)
  auto losses = [](const std::string& s) {
    static const std::regex loss("loss [0-9.]+");
    std::string r;
    for (std::sregex_iterator it(s.begin(), s.end(), loss), end; it != end; ++it) r += it->str();
    return r;
  };
  EXPECT_EQ(losses(all.out), losses(plain.out));
  EXPECT_FALSE(losses(plain.out).empty());
}

TEST(Trace, TheWorkshopModelsFirstStep) {
  // the issue's command: SCRATCHGRAD_TRACE=first build/bin/mini_self_attention
  ProgramRun plain = run("-u SCRATCHGRAD_TRACE", "mini_self_attention");
  ProgramRun traced = run("SCRATCHGRAD_TRACE=first", "mini_self_attention");
  ASSERT_EQ(traced.status, 0) << traced.err;
  EXPECT_EQ(traced.out, plain.out);
  EXPECT_EQ(count(traced.err, "backward pass "), 1);
  EXPECT_NE(traced.err.find("backward pass 1: 28 nodes"), std::string::npos) << traced.err;
  EXPECT_TRUE(traced.err.starts_with("backward pass 1: 28 nodes")) << traced.err.substr(0, 200);
  EXPECT_NE(traced.err.find("[28/28] "), std::string::npos);
  EXPECT_NE(traced.err.find("→ pos.weight  [8, 24]"), std::string::npos) << traced.err;
  EXPECT_NE(traced.err.find("<- \"loss = F.cross_entropy(logits.view(-1, V), yb.view(-1))\""), std::string::npos);
}

}  // namespace
