// inspect/dot.h — the graph behind a tensor as a Graphviz DOT picture.
//
//   autograd::inspect::write_text_file("graph.dot", autograd::inspect::to_dot(loss, model.named_parameters()));
//   $ dot -Tsvg graph.dot -o graph.svg
//
// Arrows run the way values flow forward: from parameters (green ellipses, with their names) and other
// leaves (grey) through the op nodes (boxes: the node's PyTorch name, the op function that recorded it,
// the CallSite label active then) to the root (blue). Each arrow carries the shape of the tensor it
// stands for. Backward runs against the arrows; "#3" on a node is its place in the engine's order, the
// same number the backward trace (trace.h) shows.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "autograd/tensor.h"

namespace autograd::inspect {

struct DotOptions {
  std::string title;          // shown above the graph
  std::string root_name;      // label of the root tensor; default: its TensorImpl::name, else "output"
  bool source_lines = true;   // "matmul.cpp:99" (false: "matmul.cpp")
};

// `names`: leaf tensors to label, e.g. a module's named_parameters(); other leaves show their
// TensorImpl::name, or "leaf".
std::string to_dot(const Tensor& root, const std::vector<std::pair<std::string, Tensor>>& names = {},
                   const DotOptions& options = {});

// Writes `text` to `path`; throws std::runtime_error naming the path and the reason when it cannot.
void write_text_file(const std::string& path, const std::string& text);

}  // namespace autograd::inspect
