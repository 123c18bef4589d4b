// expect: run_backward \(rung 5\) adds the gradients in another order than the engine's backward\(\)
// check rung: 14
// A deliberate mistake for the checker's tests (tests/exercises/): the depth-first walk visits each node's inputs
// from the last to the first. That is a topological order too, and passes rung 5; but x's gradient in rung 14 is a
// sum of three (from q, k and v), and this order adds them otherwise than PyTorch's engine does.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "../exercises.h"

namespace exercises {

std::vector<Node*> topological_order(const Tensor& root) {
  Node* start = root.grad_fn().get();
  if (!start) return {};
  // Depth first, without recursion (a long chain would overflow the stack): a node is written down once
  // all the nodes below it are. Reversed, that post-order puts every node before its inputs' nodes.
  std::vector<Node*> post_order;
  std::unordered_set<Node*> seen{start};
  std::vector<std::pair<Node*, size_t>> stack{{start, 0}};  // (node, index of the next input to visit)
  while (!stack.empty()) {
    Node* node = stack.back().first;
    size_t& next = stack.back().second;
    if (next < node->inputs.size()) {
      Node* child = node->inputs[node->inputs.size() - 1 - next++].node.get();  // the last input first
      if (child && seen.insert(child).second) stack.emplace_back(child, 0);
    } else {
      post_order.push_back(node);
      stack.pop_back();
    }
  }
  std::reverse(post_order.begin(), post_order.end());
  return post_order;
}

void run_backward(const Tensor& root) {
  std::vector<Node*> order = topological_order(root);
  if (order.empty()) return;
  NoGradGuard no_grad;  // the backward pass itself is not recorded
  std::unordered_map<Node*, Tensor> incoming;  // the gradient of each node's output, summed over its uses
  incoming[order.front()] = ones_like(root);   // d root / d root = 1
  for (Node* node : order) {
    Tensor g = incoming[node];
    if (!g.defined()) continue;  // nothing reached it
    Grads grads = node->backward(g);
    for (size_t i = 0; i < grads.size(); ++i) {
      const Edge& edge = node->inputs[i];
      if (!grads[i].defined()) continue;
      if (edge.node) {  // a tensor used twice gets the sum of both uses' gradients
        Tensor& slot = incoming[edge.node.get()];
        slot = slot.defined() ? slot + grads[i] : grads[i];
      } else if (edge.leaf) {
        Tensor leaf(edge.leaf);
        leaf.set_grad(leaf.grad().defined() ? leaf.grad() + grads[i] : grads[i].clone());
      }
    }
  }
}

}  // namespace exercises
