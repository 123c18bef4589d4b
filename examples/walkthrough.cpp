// walkthrough — the numbers of docs/backprop-walkthrough.md: one training step of the workshop's character
// model (mini_self_attention.py), node by node, and small experiments for the questions the document
// answers. Every number is printed with 4 significant digits, so last-bit changes in the kernels rarely
// show; tests/test_walkthrough.cpp checks that the document holds this program's output verbatim.
//
//   walkthrough                     print every section
//   walkthrough --update FILE.md    rewrite the sections of the document in place (after a change)
//
// The output is a list of sections, each starting with a line "=== name ===". In the document, section
// `name` sits in a fenced block between <!-- walkthrough:begin name --> and <!-- walkthrough:end name -->.
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "autograd/inspect/trace.h"
#include "nn/nn.h"
#include "optim/optim.h"

using namespace autograd;

namespace {

const int kDigits = 4;
const double kNoise = 1e-7;  // gradients smaller than this are rounding noise: printed as ~0

std::string num(double v) { return inspect::trace_number(v, kDigits, kNoise); }
std::string summary(const Tensor& t) { return inspect::gradient_summary(t, kDigits, kNoise); }
std::string row(const Tensor& t) {
  std::string s;
  for (const std::string& line : inspect::value_lines(t, kDigits, 8, kNoise)) s += line;
  return s;
}
double norm(const Tensor& t) {
  double s = 0;
  for (double v : t.to_vector<double>()) s += v * v;
  return std::sqrt(s);
}

// ---------------------------------------------------------------- the workshop's model and first batch

struct Step {
  std::string chars;
  std::unique_ptr<nn::MiniSelfAttention> model;
  std::unique_ptr<optim::Adam> opt;
  Tensor xb, yb;
  int64_t V = 0;
  Tensor loss() const {
    Tensor logits = (*model)(xb);
    CallSite line("loss = F.cross_entropy(logits.view(-1, V), yb.view(-1))");
    return cross_entropy(logits.view({-1, V}), yb.view({-1}));
  }
};

Step build(std::ostream& out) {
  manual_seed(7);
  const std::string text = "aditi likes warm dosa ";
  Step s;
  std::set<char> charset(text.begin(), text.end());
  s.chars = std::string(charset.begin(), charset.end());
  std::map<char, int64_t> stoi;
  for (size_t i = 0; i < s.chars.size(); ++i) stoi[s.chars[i]] = int64_t(i);
  std::vector<int64_t> ids;
  for (char c : text) ids.push_back(stoi[c]);
  Tensor data = from_vector(ids, {int64_t(ids.size())});
  const int64_t D = 24, T = 8, B = 16;
  s.V = int64_t(s.chars.size());
  s.model = std::make_unique<nn::MiniSelfAttention>(nn::CharModelConfig{.vocab = s.V, .dim = D, .context = T});
  s.opt = std::make_unique<optim::Adam>(s.model->parameters(), optim::Adam::Options{.lr = 0.01});
  Tensor starts = randint(0, data.size(0) - T - 1, {B});
  std::vector<Tensor> xs, ys;
  for (int64_t j : starts.to_vector<int64_t>()) {
    xs.push_back(data.slice(0, j, j + T));
    ys.push_back(data.slice(0, j + 1, j + T + 1));
  }
  s.xb = stack(xs);
  s.yb = stack(ys);

  auto decode = [&](const Tensor& t) {
    std::string r;
    for (int64_t i : t.to_vector<int64_t>()) r += s.chars[size_t(i)];
    return r;
  };
  out << "=== setup ===\n";
  out << fmt::format("text \"{}\": V {} characters, D {}, T {}, B {}; manual_seed(7), model, Adam(lr 0.01)\n", text,
                     s.V, D, T, B);
  for (const auto& [name, p] : s.model->named_parameters())
    out << fmt::format("  {:<12} {}\n", name, shape_to_string(p.shape()));
  out << fmt::format("{} parameters; first batch: {} windows, e.g. xb[0] \"{}\" -> yb[0] \"{}\"\n",
                     s.model->num_parameters(), B, decode(s.xb[0]), decode(s.yb[0]));
  return s;
}

// ---------------------------------------------------------------- sections

void forward_and_backward(Step& s, std::ostream& out) {
  Tensor loss = s.loss();
  out << fmt::format("forward: logits [16, 8, {}], loss {} (a uniform guess scores ln {} = {})\n", s.V,
                     num(loss.item()), s.V, num(std::log(double(s.V))));
  out << "=== backward ===\n";
  {
    TraceGuard trace({.out = &out,
                      .max_values = 0,
                      .digits = kDigits,
                      .source_lines = false,
                      .zero_below = kNoise,
                      .names = s.model->named_parameters()});
    s.opt->zero_grad();
    loss.backward();
  }
  out << "=== gradients ===\n";
  for (const auto& [name, p] : s.model->named_parameters()) out << fmt::format("  {:<12} {}\n", name, summary(p.grad()));
}

// Plain recursion vs the engine's topological order, on y = z*z + z repeated: every z is used three times.
void order(std::ostream& out) {
  out << "=== order ===\n";
  const int depth = 8;
  Tensor x = scalar_tensor(0.1, DType::Float64).requires_grad_();
  Tensor z = x;
  for (int i = 0; i < depth; ++i) z = z * z + z;
  int64_t engine_calls = 0;
  BackwardObserver previous = set_backward_observer([&](const BackwardEvent&) { ++engine_calls; });
  z.backward(Tensor(), /*retain_graph=*/true);
  set_backward_observer(previous);
  const double engine_grad = x.grad().item();

  // The same closures, called by plain recursion: once per path from the root (with `visited`: once per node).
  NoGradGuard no_grad;
  struct Recursion {
    int64_t calls = 0;
    double grad = 0;
    std::set<const Node*>* visited = nullptr;
    void run(const Node* n, const Tensor& g) {
      if (visited && !visited->insert(n).second) return;
      ++calls;
      Grads grads = n->backward(g);
      for (size_t i = 0; i < grads.size(); ++i) {
        if (n->inputs[i].node) run(n->inputs[i].node.get(), grads[i]);
        else if (n->inputs[i].leaf) grad += grads[i].item();
      }
    }
  };
  Recursion every_path, once;
  every_path.run(z.grad_fn().get(), ones_like(z));
  std::set<const Node*> visited;
  once.visited = &visited;
  once.run(z.grad_fn().get(), ones_like(z));
  out << fmt::format("z = x = 0.1; {} times z = z*z + z: {} nodes, dz/dx = {}\n", depth, engine_calls, num(engine_grad));
  auto report = [&](const char* how, int64_t calls, double grad) {
    out << fmt::format("  {:<44} {:>6} node calls, x.grad {}\n", how, calls, num(grad));
  };
  report("engine (topological order):", engine_calls, engine_grad);
  report("recursion, once per path:", every_path.calls, every_path.grad);
  report("recursion, each node once (when first hit):", once.calls, once.grad);
  out << fmt::format("  at 20 layers, once per path: 3^20 - 1 = {} node calls\n", int64_t(std::pow(3.0, 20)) - 1);
}

// Gradients add up in .grad until someone zeroes them.
void accumulation(Step& s, std::ostream& out) {
  out << "=== accumulate ===\n";
  const Tensor& bias = s.model->head->bias;
  const double once = norm(bias.grad());
  out << fmt::format("head.bias.grad after the step's backward:           norm {}\n", num(once));
  s.loss().backward();
  const double twice = norm(bias.grad());
  out << fmt::format("same batch again, no zero_grad (grads add up):      norm {} ({}x)\n", num(twice), num(twice / once));
  s.opt->zero_grad();
  s.loss().backward();
  out << fmt::format("opt.zero_grad(), then again:                        norm {}\n", num(norm(bias.grad())));
}

// How sum_to undoes broadcasting: x = tok(idx) + pos(arange(t)) adds a [8, 24] table to every batch row.
void broadcasting(Step& s, std::ostream& out) {
  out << "=== broadcast ===\n";
  Tensor into_add, into_head;
  BackwardObserver previous = set_backward_observer([&](const BackwardEvent& e) {
    const std::string_view name = e.node->name;
    if (name == "AddBackward0" && e.node->call_site.starts_with("x = tok")) into_add = *e.grad_output;
    if (name == "AddmmBackward0" && e.node->call_site == "return head(x)") into_head = *e.grad_output;
  });
  s.opt->zero_grad();
  s.loss().backward();
  set_backward_observer(previous);
  NoGradGuard no_grad;
  out << fmt::format("x = tok(idx) + pos(arange(t)): [16, 8, 24] + [8, 24] -> {} (pos repeated for every window)\n",
                     shape_to_string(into_add.shape()));
  out << fmt::format("  AddBackward0's incoming gradient  {}\n", summary(into_add));
  out << fmt::format("  its sum_to([8, 24]) (sum over B)  {}\n", summary(into_add.sum_to({8, 24})));
  out << fmt::format("  pos.weight.grad                   {}\n", summary(s.model->pos->weight.grad()));
  out << fmt::format("logits = x Wᵀ + b: b [{}] is added to all 128 rows\n", s.V);
  out << fmt::format("  AddmmBackward0's incoming gradient {}\n", summary(into_head));
  out << fmt::format("  its sum over the 128 rows          {}\n", summary(into_head.sum(0)));
  out << fmt::format("  head.bias.grad                     {}\n", summary(s.model->head->bias.grad()));
}

// Scores of d_k-dimensional dot products spread like sqrt(d_k): unscaled, softmax saturates (one
// probability near 1) and the gradient through it dies; divided by sqrt(d_k), it stays the same size.
void scaling(std::ostream& out) {
  out << "=== scaling ===\n";
  out << "8 queries, 8 keys, N(0, 1) entries, 100 draws; gain = |gradient out of softmax| / |gradient into it|\n";
  out << fmt::format("  {:>5}  {:<36}  {}\n", "d_k", "q kᵀ: scores std, largest p, gain", "q kᵀ / sqrt(d_k): the same");
  manual_seed(0);
  const int64_t n = 8, trials = 100;
  for (int64_t d_k : {4, 16, 64, 256, 1024}) {
    double stats[2][3] = {};  // per variant: mean over the trials of scores std, largest p, gain
    for (int64_t trial = 0; trial < trials; ++trial) {
      Tensor q = randn({n, d_k}), k = randn({n, d_k}), g = randn({n, n});
      for (int scaled = 0; scaled < 2; ++scaled) {
        Tensor s = (q.matmul(k.t()) * (scaled ? 1.0 / std::sqrt(double(d_k)) : 1.0)).requires_grad_();
        Tensor p = softmax(s, -1);
        (p * g).sum().backward();
        std::vector<double> sv = s.detach().to_vector<double>(), pv = p.detach().to_vector<double>();
        double mean = 0, var = 0, top = 0;
        for (double v : sv) mean += v / double(sv.size());
        for (double v : sv) var += (v - mean) * (v - mean) / double(sv.size());
        for (int64_t r = 0; r < n; ++r) {
          double m = 0;
          for (int64_t c = 0; c < n; ++c) m = std::max(m, pv[size_t(r * n + c)]);
          top += m / double(n);
        }
        stats[scaled][0] += std::sqrt(var) / double(trials);
        stats[scaled][1] += top / double(trials);
        stats[scaled][2] += norm(s.grad()) / norm(g) / double(trials);
      }
    }
    std::string cells[2];
    for (int v = 0; v < 2; ++v)
      cells[v] = fmt::format("{:<7} {:<7} {}", inspect::trace_number(stats[v][0], 3), inspect::trace_number(stats[v][1], 3),
                             inspect::trace_number(stats[v][2], 3));
    out << fmt::format("  {:>5}  {:<36}  {}\n", d_k, cells[0], cells[1]);
  }
}

// Masking before the softmax vs zeroing probabilities after it, for query 1 of 4 tokens (it may see 0 and 1).
void masking(std::ostream& out) {
  out << "=== mask ===\n";
  Tensor future = tensor({0, 0, 1, 1}) == 1;
  Tensor v = tensor({1.0, 2.0, 3.0, 4.0});
  out << "scores of query 1 [0.5, 1, -0.3, 2]; keys 2 and 3 are in its future; output = p · [1, 2, 3, 4]\n";
  for (bool before : {true, false}) {
    Tensor s = tensor({0.5, 1.0, -0.3, 2.0}).requires_grad_();
    Tensor p = before ? softmax(s.masked_fill(future, -INFINITY), -1) : softmax(s, -1).masked_fill(future, 0.0);
    Tensor o = (p * v).sum();
    o.backward();
    out << fmt::format("  {}\n", before ? "mask, then softmax:" : "softmax, then zero the future:");
    out << fmt::format("    p {}  sum {}  output {}\n", row(p.detach()), num(p.detach().sum().item()), num(o.item()));
    out << fmt::format("    d output / d scores {}\n", row(s.grad()));
  }
}

// Replaces each section of the document with this run's text; returns false if a section is missing.
bool update_document(const std::string& path, const std::string& output) {
  std::ifstream in(path);
  if (!in) {
    std::cerr << "walkthrough: cannot read " << path << "\n";
    return false;
  }
  std::stringstream buf;
  buf << in.rdbuf();
  std::string doc = buf.str();
  std::istringstream lines(output);
  std::map<std::string, std::string> sections;
  std::vector<std::string> order;
  std::string line, current;
  while (std::getline(lines, line)) {
    if (line.starts_with("=== ") && line.ends_with(" ===")) {
      current = line.substr(4, line.size() - 8);
      order.push_back(current);
      continue;
    }
    sections[current] += line + "\n";
  }
  bool ok = true;
  for (const std::string& name : order) {
    const std::string begin = "<!-- walkthrough:begin " + name + " -->\n", end = "<!-- walkthrough:end " + name + " -->";
    size_t b = doc.find(begin), e = doc.find(end);
    if (b == std::string::npos || e == std::string::npos || e < b) {
      std::cerr << "walkthrough: " << path << " has no section '" << name << "' (add the two marker lines)\n";
      ok = false;
      continue;
    }
    doc.replace(b + begin.size(), e - b - begin.size(), "```text\n" + sections[name] + "```\n");
  }
  std::ofstream(path) << doc;
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  set_numerics(Numerics::exact);  // PyTorch's bits: this program prints the numbers PyTorch prints
  std::string update;
  if (argc == 3 && std::strcmp(argv[1], "--update") == 0) {
    update = argv[2];
  } else if (argc != 1) {
    std::cerr << "usage: walkthrough [--update docs/backprop-walkthrough.md]\n";
    return 2;
  }
  std::ostringstream out;
  Step step = build(out);
  forward_and_backward(step, out);
  order(out);
  accumulation(step, out);
  broadcasting(step, out);
  scaling(out);
  masking(out);
  if (update.empty()) {
    std::cout << out.str();
    return 0;
  }
  return update_document(update, out.str()) ? 0 : 1;
}
