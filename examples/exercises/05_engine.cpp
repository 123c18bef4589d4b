// Exercise 5: the engine itself — a topological order, and the gradient accumulation of backward().
//
// Every op you have written recorded a Node (autograd/node.h): its backward closure, and one Edge per
// input saying where that input's gradient goes — edge.node (the Node that made the input) or
// edge.leaf (a leaf tensor that wants .grad), or nowhere. root.grad_fn() is the last node.
//
// 1. topological_order(root): every node reachable from root.grad_fn(), each once, each before all the
//    nodes it sends gradients to. Then when a node runs, every use of its output has sent its share.
// 2. run_backward(root): start with dL/droot = 1 (ones_like(root)); run each node's closure,
//    node->backward(g), in that order; for each input i, add grads[i] into what edge i leads to: the
//    next node's incoming gradient, or the leaf's .grad. A tensor used twice gets the SUM of both uses'
//    gradients; and .grad adds up across calls, as PyTorch's does (why optimizers zero it).
//
// Tools: Tensor(edge.leaf) is a handle on the leaf; leaf.grad() (undefined if none), leaf.set_grad(t).
//
// Rungs 14 and 15 train models on this engine of yours: every gradient they compute is run_backward's.
//
// Check it:  make exercise N=5      Explained in: docs/autograd.md ("backward()", "Why a topological
//                                   order and not recursion?"), docs/backprop-walkthrough.md
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "exercises.h"

namespace exercises {

std::vector<Node*> topological_order(const Tensor& root) {
  (void)root;
  not_implemented(5);  // YOUR CODE
}

void run_backward(const Tensor& root) {
  (void)root;
  not_implemented(5);  // YOUR CODE
}

}  // namespace exercises

// Hints, one at a time:
// 1. Depth first from root.grad_fn(): write a node down after all its inputs' nodes (post-order); the
//    reverse of that list puts every node before its inputs. Keep a set of visited nodes.
// 2. The checker walks a chain of 20001 nodes: a recursive walk needs one stack frame per node. Use a
//    std::vector as your own stack of (node, next input index).
// 3. std::unordered_map<Node*, Tensor> holds each node's incoming gradient; slot = slot.defined() ?
//    slot + g : g.
// 4. Run the closures under NoGradGuard: the backward pass itself is not recorded.
