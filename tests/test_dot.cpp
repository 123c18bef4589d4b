// test_dot.cpp — to_dot: the graph's nodes, leaves and shapes, text Graphviz accepts (checked with `dot`
// when it is installed), and the --graph options of scratchgrad train and mini_self_attention.
#include <gtest/gtest.h>

#include "test_process.h"
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "autograd/inspect/anomaly.h"
#include "autograd/inspect/dot.h"
#include "nn/nn.h"
#include "test_helpers.h"

namespace {

using namespace autograd;
namespace fs = std::filesystem;

using testing_process::count;

using testing_process::scratch;
using testing_process::shell;
using testing_process::Shell;
using testing_process::slurp;

bool have_graphviz() { return std::system("command -v dot >/dev/null 2>&1") == 0; }

// Renders `dot_text` with Graphviz; expects it to be accepted without a word on stderr; returns the SVG.
std::string render(const std::string& dot_text, const std::string& name) {
  fs::path in = scratch(name + ".dot"), out = scratch(name + ".svg");
  write_text_file(in.string(), dot_text);
  Shell r = shell("dot -Tsvg " + in.string() + " -o " + out.string());
  EXPECT_EQ(r.status, 0) << r.err << "\n" << dot_text;
  EXPECT_EQ(r.err, "") << dot_text;
  return slurp(out);
}

TEST(Dot, NodesLeavesAndShapes) {
  Tensor x = testing_helpers::leaf({4, 3}, 1);
  Tensor w = testing_helpers::leaf({3, 2}, 2);
  Tensor b = testing_helpers::leaf({2}, 3);
  b.impl().name = "bias";  // a name of its own (what register_parameter sets)
  Tensor y = (x.matmul(w) + b).sum();
  const std::string dot = to_dot(y, {{"w", w}}, {.title = "tiny"});
  EXPECT_TRUE(dot.starts_with("digraph autograd {\n")) << dot;
  EXPECT_TRUE(dot.ends_with("}\n"));
  EXPECT_NE(dot.find("label=\"tiny\\nvalues flow along the arrows, gradients against them\""), std::string::npos) << dot;
  // op nodes in the engine's order, with the function that recorded them
  EXPECT_TRUE(std::regex_search(dot, std::regex(R"re(n1 \[shape=box.*label="#1 Sum[A-Za-z0-9]*\\nsum\(\) in reduce\.cpp:[0-9]+"\];)re")))
      << dot;
  EXPECT_NE(dot.find("label=\"#2 AddBackward0\\nadd() in elementwise.cpp:"), std::string::npos);
  EXPECT_NE(dot.find("label=\"#3 MmBackward0\\n"), std::string::npos);
  EXPECT_EQ(count(dot, "shape=box, style=\"rounded"), 3);
  // leaves: named by the caller, by their own name, or not at all
  EXPECT_NE(dot.find("label=\"w\\n[3, 2]\""), std::string::npos) << dot;
  EXPECT_NE(dot.find("label=\"bias\\n[2]\""), std::string::npos);
  EXPECT_NE(dot.find("label=\"leaf\\n[4, 3]\""), std::string::npos);
  EXPECT_EQ(count(dot, "shape=ellipse"), 3);
  // the root, with its value
  EXPECT_NE(dot.find(fmt::format("root [shape=box, style=filled, fillcolor=\"#cfe2ff\", label=\"output\\n[] = {:.4g}\"]",
                                 y.item())),
            std::string::npos)
      << dot;
  // edges run forward, labelled with the shape of the value they carry
  EXPECT_EQ(count(dot, " -> "), 6);
  EXPECT_NE(dot.find("n3 -> n2 [label=\" [4, 2]\"];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n1 -> root [label=\" []\"];"), std::string::npos);
  EXPECT_TRUE(std::regex_search(dot, std::regex(R"(l[0-9]+ -> n3 \[label=" \[3, 2\]"\];)")));
  if (!have_graphviz()) GTEST_SKIP() << "Graphviz's dot is not installed";
  std::string svg = render(dot, "tiny");
  EXPECT_NE(svg.find("MmBackward0"), std::string::npos);
  EXPECT_NE(svg.find(">bias</text>"), std::string::npos);
}

TEST(Dot, QuotesAndBackslashesInLabels) {
  Tensor x = testing_helpers::leaf({2}, 4);
  x.impl().name = "x \"the input\"";
  Tensor y;
  {
    CallSite line(R"(y = f("a\b") {x} <tag> | 1)");
    y = x.exp().sum();
  }
  const std::string dot = to_dot(y, {}, {.title = "a \"quoted\" title", .root_name = "y\\n"});
  EXPECT_NE(dot.find(R"(y = f(\"a\\b\") {x} <tag> | 1)"), std::string::npos) << dot;
  EXPECT_NE(dot.find(R"(x \"the input\"\n[2])"), std::string::npos) << dot;
  if (!have_graphviz()) GTEST_SKIP() << "Graphviz's dot is not installed";
  std::string svg = render(dot, "quotes");
  EXPECT_NE(svg.find("y = f(&quot;a\\b&quot;) {x} &lt;tag&gt; | 1"), std::string::npos) << svg;
}

TEST(Dot, LeafAndNoGraph) {
  Tensor x = testing_helpers::leaf({2, 2}, 5);
  std::string dot = to_dot(x, {{"x", x}});
  EXPECT_NE(dot.find("label=\"x\\n[2, 2]\""), std::string::npos) << dot;
  EXPECT_NE(dot.find("l1 -> root;"), std::string::npos) << dot;
  std::string plain = to_dot(tensor({1.0}));
  EXPECT_EQ(count(plain, " -> "), 0);
  if (!have_graphviz()) GTEST_SKIP() << "Graphviz's dot is not installed";
  render(dot, "leaf");
  render(plain, "plain");
}

TEST(Dot, TheCharModelsStep) {
  manual_seed(7);
  nn::MiniSelfAttention model({.vocab = 13, .dim = 24, .context = 8});
  Tensor loss = cross_entropy(model(randint(0, 13, {4, 8})).view({-1, 13}), randint(0, 13, {32}));
  const std::string dot = to_dot(loss, model.named_parameters(), {.root_name = "loss"});
  EXPECT_EQ(count(dot, "shape=box, style=\"rounded"), 28);
  for (int k = 1; k <= 28; ++k) EXPECT_EQ(count(dot, fmt::format("label=\"#{} ", k)), 1) << k;
  for (const auto& [name, p] : model.named_parameters())
    EXPECT_EQ(count(dot, fmt::format("label=\"{}\\n{}\"", name, shape_to_string(p.shape()))), 1) << name << "\n" << dot;
  EXPECT_EQ(count(dot, "shape=ellipse"), 10);
  for (const char* op : {"EmbeddingBackward0", "AddmmBackward0", "MaskedFillBackward0", "SoftmaxBackward0",
                         "BmmBackward0", "TransposeBackward0", "NllLossBackward0"})
    EXPECT_NE(dot.find(op), std::string::npos) << op;
  EXPECT_NE(dot.find("att = att.masked_fill(mask[:t, :t] == 0, -inf)"), std::string::npos);
  EXPECT_NE(dot.find(" [label=\" [4, 8, 8]\"]"), std::string::npos) << "attention scores [B, T, T]";
  EXPECT_NE(dot.find("label=\"loss\\n[] = "), std::string::npos);
  if (!have_graphviz()) GTEST_SKIP() << "Graphviz's dot is not installed";
  std::string svg = render(dot, "char_model");
  EXPECT_NE(svg.find("head.weight"), std::string::npos);
}

TEST(Dot, ScratchgradTrainWritesTheFirstStepsGraph) {
  fs::path file = scratch("train.dot");
  Shell r = shell(std::string(SCRATCHGRAD_BIN_DIR) + "/scratchgrad train --steps 2 --graph " + file.string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("wrote the graph of step 0 to " + file.string()), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("step   0 | loss 2.655"), std::string::npos) << "writing the graph changes nothing";
  const std::string dot = slurp(file);
  EXPECT_NE(dot.find("label=\"loss\\n[] = 2.655\""), std::string::npos) << dot;
  EXPECT_NE(dot.find("label=\"q.weight\\n[24, 24]\""), std::string::npos);
  EXPECT_EQ(count(dot, "shape=box, style=\"rounded"), 28);
  // a path that cannot be written is refused before training starts
  Shell bad = shell(std::string(SCRATCHGRAD_BIN_DIR) + "/scratchgrad train --graph /nonexistent/dir/g.dot");
  EXPECT_EQ(bad.status, 2) << bad.err;
  EXPECT_NE(bad.err.find("/nonexistent/dir/g.dot"), std::string::npos) << bad.err;
  EXPECT_EQ(bad.out, "");
  if (!have_graphviz()) GTEST_SKIP() << "Graphviz's dot is not installed";
  render(dot, "train");
}

TEST(Dot, MiniSelfAttentionWritesTheFirstStepsGraph) {
  fs::path file = scratch("mini.dot");
  Shell plain = shell(std::string(SCRATCHGRAD_BIN_DIR) + "/mini_self_attention");
  Shell r = shell(std::string(SCRATCHGRAD_BIN_DIR) + "/mini_self_attention --graph " + file.string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, plain.out);
  const std::string dot = slurp(file);
  EXPECT_EQ(count(dot, "shape=box, style=\"rounded"), 28) << dot;
  EXPECT_NE(dot.find("label=\"tok.weight\\n[13, 24]\""), std::string::npos);
  EXPECT_NE(dot.find("loss = F.cross_entropy(logits.view(-1, V), yb.view(-1))"), std::string::npos);
  Shell usage = shell(std::string(SCRATCHGRAD_BIN_DIR) + "/mini_self_attention --graph");
  EXPECT_EQ(usage.status, 2);
  if (!have_graphviz()) GTEST_SKIP() << "Graphviz's dot is not installed";
  render(dot, "mini");
}

}  // namespace
