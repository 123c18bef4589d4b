// dot.cpp — to_dot (see dot.h).
#include "autograd/inspect/dot.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <fmt/format.h>

#include "autograd/inspect/call_site.h"
#include "autograd/node.h"
#include "autograd/inspect/trace.h"

// Text is built with fmt::format or appended to, never as "literal" + a temporary std::string: GCC 12 at -O3
// reports a false -Wrestrict inside that operator+ (GCC bug 105329).
namespace autograd::inspect {

namespace {

// A DOT double-quoted string: quotes and backslashes escaped, newlines as \n.
std::string quoted(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') q += '\\';
    if (c == '\n') q += "\\n";
    else q += c;
  }
  return q + "\"";
}

}  // namespace

std::string to_dot(const Tensor& root, const std::vector<std::pair<std::string, Tensor>>& names,
                   const DotOptions& options) {
  std::unordered_map<const TensorImpl*, std::string> given;
  for (const auto& [name, t] : names)
    if (t.defined()) given[&t.impl()] = name;

  // Every node reachable from the root, in the engine's order (newest first, see trace.cpp).
  std::vector<const Node*> nodes;
  if (root.defined() && root.grad_fn()) {
    std::vector<const Node*> stack{root.grad_fn().get()};
    std::unordered_map<const Node*, bool> seen{{stack[0], true}};
    while (!stack.empty()) {
      const Node* n = stack.back();
      stack.pop_back();
      nodes.push_back(n);
      for (const Edge& e : n->inputs)
        if (e.node && seen.emplace(e.node.get(), true).second) stack.push_back(e.node.get());
    }
    std::sort(nodes.begin(), nodes.end(), [](const Node* a, const Node* b) { return a->sequence_nr > b->sequence_nr; });
  }
  std::unordered_map<const Node*, std::string> node_id;
  for (size_t i = 0; i < nodes.size(); ++i) node_id[nodes[i]] = fmt::format("n{}", i + 1);

  std::string out = "digraph autograd {\n";
  std::string title = options.title.empty() ? "" : options.title + "\n";
  title += "values flow along the arrows, gradients against them";
  out += fmt::format("  graph [label={}, labelloc=t, fontname=\"Helvetica\", fontsize=12];\n", quoted(title));
  out += "  node [fontname=\"Helvetica\", fontsize=10];\n  edge [fontname=\"Helvetica\", fontsize=9];\n";

  std::map<const TensorImpl*, std::string> leaf_id;  // (map: stable order of ids)
  std::string leaves, edges;
  auto leaf = [&](const TensorImpl& t) -> const std::string& {
    auto [it, added] = leaf_id.emplace(&t, fmt::format("l{}", leaf_id.size() + 1));
    if (added) {
      auto g = given.find(&t);
      std::string name = g != given.end() ? g->second : (t.name.empty() ? "leaf" : t.name);
      bool named = g != given.end() || !t.name.empty();
      leaves += fmt::format("  {} [shape=ellipse, style=filled, fillcolor={}, label={}];\n", it->second,
                            named ? "\"#d5ecd4\"" : "\"#e4e4e4\"", quoted(name + "\n" + shape_to_string(t.shape)));
    }
    return it->second;
  };

  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = *nodes[i];
    std::string label = fmt::format("#{} {}\n{}", i + 1, n.name, recorded_at(n, options.source_lines));
    if (!n.call_site.empty()) label += fmt::format("\n{}", n.call_site);
    out += fmt::format("  {} [shape=box, style=\"rounded,filled\", fillcolor=\"#f2f2f2\", label={}];\n",
                       node_id[&n], quoted(label));
    for (const Edge& e : n.inputs) {
      if (e.node)
        edges += fmt::format("  {} -> {} [label={}];\n", node_id[e.node.get()], node_id[&n],
                             quoted(fmt::format(" {}", shape_to_string(e.node->output_shape))));
      else if (e.leaf)
        edges += fmt::format("  {} -> {} [label={}];\n", leaf(*e.leaf), node_id[&n],
                             quoted(fmt::format(" {}", shape_to_string(e.leaf->shape))));
    }
  }

  if (root.defined()) {
    std::string name = !options.root_name.empty() ? options.root_name
                       : !root.impl().name.empty() ? root.impl().name
                                                   : "output";
    std::string label = name + "\n" + shape_to_string(root.shape());
    if (root.numel() == 1 && is_floating(root.dtype())) label += fmt::format(" = {:.4g}", root.detach().item());
    out += fmt::format("  root [shape=box, style=filled, fillcolor=\"#cfe2ff\", label={}];\n", quoted(label));
    if (root.grad_fn())
      edges += fmt::format("  {} -> root [label={}];\n", node_id[root.grad_fn().get()],
                           quoted(fmt::format(" {}", shape_to_string(root.shape()))));
    else if (root.requires_grad())
      edges += fmt::format("  {} -> root;\n", leaf(root.impl()));
  }
  return out + leaves + edges + "}\n";
}

void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error(fmt::format("{}: cannot write here ({})", path, std::strerror(errno)));
  out << text;
  out.close();
  if (!out) throw std::runtime_error(fmt::format("{}: writing failed ({})", path, std::strerror(errno)));
}

}  // namespace autograd::inspect
