// trace.cpp — the backward trace (see trace.h).
#include "autograd/inspect/trace.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <unordered_map>

#include <fmt/format.h>

#include "autograd/inspect/call_site.h"

namespace autograd::inspect {

namespace {

std::vector<double> host_values(const Tensor& t) {
  NoGradGuard no_grad;
  return t.detach().to_vector<double>();
}

// One backward pass as the trace sees it: every node's position in the engine's order, and how many
// gradients each node and each leaf waits for (more than one: they are summed).
struct Pass {
  std::unordered_map<const Node*, size_t> position;  // 1-based
  std::unordered_map<const void*, int> expected, arrived;
  size_t nodes = 0;

  explicit Pass(const Node* root) {
    // The engine runs a node once every node that uses its output has run, newest first among the
    // ready ones. Users are always newer than what they use, so that order is simply: newest first.
    std::vector<const Node*> all{root}, stack{root};
    std::unordered_map<const Node*, bool> seen{{root, true}};
    while (!stack.empty()) {
      const Node* n = stack.back();
      stack.pop_back();
      for (const Edge& e : n->inputs) {
        if (e.leaf) ++expected[e.leaf.get()];
        if (!e.node) continue;
        ++expected[e.node.get()];
        if (seen.emplace(e.node.get(), true).second) {
          all.push_back(e.node.get());
          stack.push_back(e.node.get());
        }
      }
    }
    std::sort(all.begin(), all.end(), [](const Node* a, const Node* b) { return a->sequence_nr > b->sequence_nr; });
    for (size_t i = 0; i < all.size(); ++i) position[all[i]] = i + 1;
    nodes = all.size();
  }
};

struct Tracer {
  TraceOptions options;
  std::unordered_map<const TensorImpl*, std::string> names;
  int64_t passes_seen = 0;
  std::unique_ptr<Pass> pass;

  explicit Tracer(TraceOptions o) : options(std::move(o)) {
    for (const auto& [name, t] : options.names)
      if (t.defined()) names[&t.impl()] = name;
  }

  std::string leaf_name(const TensorImpl& leaf) const {
    auto it = names.find(&leaf);
    if (it != names.end()) return it->second;
    return leaf.name.empty() ? "leaf " + shape_to_string(leaf.shape) : leaf.name;
  }

  // "gradient 2 of 3, summed" when several gradients meet at `target`.
  std::string meeting(const void* target) {
    int expected = pass->expected[target], arrived = ++pass->arrived[target];
    if (expected <= 1) return "";
    return fmt::format("gradient {} of {}{}", arrived, expected, arrived > 1 ? ", summed" : "");
  }
  static std::string note(const std::string& a, const std::string& b) {
    std::string both = a.empty() ? b : b.empty() ? a : a + ", " + b;
    return both.empty() ? "" : "  (" + both + ")";
  }

  void operator()(const BackwardEvent& e) {
    if (e.position == 0) {
      ++passes_seen;
      pass.reset();
      if (options.passes > 0 && passes_seen > options.passes) return;
      pass = std::make_unique<Pass>(e.node);
      out() << fmt::format("backward pass {}: {} nodes, newest first (a node runs once every node that uses its "
                           "output has run)\n",
                           passes_seen, pass->nodes);
    }
    if (!pass) return;
    print_node(e);
  }

  std::ostream& out() const { return options.out ? *options.out : std::cerr; }

  void print_node(const BackwardEvent& e) {
    const Node& node = *e.node;
    auto pos = pass->position.find(&node);
    std::string header = fmt::format("[{}/{}] {}  {}", pos == pass->position.end() ? 0 : pos->second, pass->nodes,
                                     node.name, recorded_at(node, options.source_lines));
    if (!node.call_site.empty()) header += "  <- \"" + std::string(node.call_site) + "\"";
    std::vector<std::pair<std::string, Tensor>> rows;  // label, gradient
    std::vector<std::string> notes;
    rows.emplace_back("grad_output", *e.grad_output);
    notes.emplace_back();
    for (size_t i = 0; i < e.grad_inputs->size(); ++i) {
      const Tensor& g = (*e.grad_inputs)[i];
      const Edge& edge = node.inputs[i];
      if (!edge.wants_grad()) {
        rows.emplace_back(fmt::format("{} → (needs no gradient)", i), Tensor());
        notes.emplace_back();
        continue;
      }
      if (!g.defined()) {
        rows.emplace_back(fmt::format("{} → (no gradient)", i), Tensor());
        notes.emplace_back();
        continue;
      }
      if (edge.leaf) {
        rows.emplace_back(fmt::format("{} → {}", i, leaf_name(*edge.leaf)), g);
        notes.push_back(note("leaf: into .grad", meeting(edge.leaf.get())));
      } else {
        auto p = pass->position.find(edge.node.get());
        rows.emplace_back(fmt::format("{} → [{}] {}", i, p == pass->position.end() ? 0 : p->second, edge.node->name), g);
        notes.push_back(note("", meeting(edge.node.get())));
      }
    }
    size_t width = 0;
    for (const auto& r : rows) width = std::max(width, display_width(r.first));
    std::string text = header + "\n";
    for (size_t r = 0; r < rows.size(); ++r) {
      const auto& [label, g] = rows[r];
      std::string line = "    " + label;
      if (g.defined()) {
        line += std::string(width - display_width(label) + 2, ' ') + gradient_summary(g, options.digits, options.zero_below) + notes[r];
      }
      text += line + "\n";
      if (g.defined() && g.numel() > 1 && g.numel() <= options.max_values)
        for (const std::string& v : value_lines(g, options.digits, 8, options.zero_below))
          text += std::string(6 + width, ' ') + v + "\n";
    }
    out() << text << std::flush;
  }

  // Characters as a terminal shows them: "→" is three bytes in UTF-8 but one column.
  static size_t display_width(const std::string& s) {
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
  }
};

}  // namespace

std::string trace_number(double v, int digits, double zero_below) {
  if (v != 0 && std::abs(v) < zero_below) return "~0";
  return fmt::format("{:.{}g}", v, digits);
}

std::string gradient_summary(const Tensor& t, int digits, double zero_below) {
  auto number = [&](double v, int d) { return trace_number(v, d, zero_below); };
  std::vector<double> v = host_values(t);
  std::string shape = shape_to_string(t.shape());
  if (v.empty()) return shape + "  (empty)";
  if (v.size() == 1) return fmt::format("{}  = {}", shape, number(v[0], digits));
  shape = fmt::format("{:<10}", shape);  // lines up the numbers of the usual shapes
  double sum_sq = 0, lo = v[0], hi = v[0];
  for (double x : v) {
    sum_sq += x * x;
    lo = std::min(lo, x);  // (NaN never wins a comparison: min/max of the finite values, norm shows NaN)
    hi = std::max(hi, x);
  }
  return fmt::format("{}  norm {}  min {}  max {}", shape, number(std::sqrt(sum_sq), digits), number(lo, digits),
                     number(hi, digits));
}

std::vector<std::string> value_lines(const Tensor& t, int digits, size_t per_line, double zero_below) {
  auto number = [&](double v, int d) { return trace_number(v, d, zero_below); };
  std::vector<double> v = host_values(t);
  const size_t row = t.dim() == 0 ? 1 : size_t(std::max<int64_t>(t.size(-1), 1));
  std::vector<std::string> lines;
  for (size_t start = 0; start < v.size(); start += row) {
    const size_t end = std::min(v.size(), start + row);
    for (size_t chunk = start; chunk < end; chunk += per_line) {
      std::string line = chunk == start ? "[" : " ";
      for (size_t i = chunk; i < std::min(end, chunk + per_line); ++i)
        line += (i == chunk ? "" : ", ") + number(v[i], digits);
      line += std::min(end, chunk + per_line) == end ? "]" : ",";
      lines.push_back(line);
    }
  }
  return lines;
}

BackwardObserver make_trace_observer(TraceOptions options) {
  auto tracer = std::make_shared<Tracer>(std::move(options));
  return [tracer](const BackwardEvent& e) { (*tracer)(e); };
}

TraceGuard::TraceGuard(std::ostream& out) : TraceGuard(TraceOptions{.out = &out}) {}

TraceGuard::TraceGuard(TraceOptions options) {
  BackwardObserver trace = make_trace_observer(std::move(options));
  // install first, then chain to whatever was there before
  previous_ = set_backward_observer(nullptr);
  set_backward_observer([trace, previous = previous_](const BackwardEvent& e) {
    trace(e);
    if (previous) previous(e);
  });
}

TraceGuard::~TraceGuard() { set_backward_observer(previous_); }

int64_t trace_passes_from_setting(const char* value) {
  if (!value || !*value || std::strcmp(value, "0") == 0) return -1;
  if (std::strcmp(value, "first") == 0) return 1;
  char* end = nullptr;
  long long n = std::strtoll(value, &end, 10);
  if (end && *end == '\0' && n > 1) return n;
  return 0;  // "1", "all", anything else: every pass
}

BackwardObserver trace_observer_from_environment() {
  int64_t passes = trace_passes_from_setting(std::getenv("SCRATCHGRAD_TRACE"));
  if (passes < 0) return nullptr;
  return make_trace_observer({.passes = passes});
}

}  // namespace autograd::inspect
