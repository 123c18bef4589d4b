// engine.cpp — recording the graph, and reverse mode over it.
//
// The whole algorithm:
//   1. From the root, count for every reachable node how many edges point into it (its dependencies).
//   2. Seed the root's gradient (1 for a scalar). Run a node only when all its dependencies have run:
//      then its incoming gradient is complete, because everyone who uses its output came first.
//   3. Call the node's closure; add each returned gradient into the input node's pending sum, or into the
//      leaf's .grad. (An embedding whose table already holds a .grad adds its rows there itself instead:
//      BackwardFunction::add_into_grad.)
//   4. Unless retain_graph, drop the closures so the saved tensors are freed.
//   5. A leaf with post-accumulate-grad hooks is counted like a node: once every edge into it has been
//      passed, its .grad is complete for this pass and its hooks run (what data-parallel training uses to
//      start sending a gradient while backward goes on).
// Why not plain recursion from the root? A value used twice (x in x*x + x) would be visited once per use
// and pass on a partial gradient each time; the topological order waits until all uses have reported.
#include <stdexcept>
#include <atomic>
#include <cstdint>
#include <queue>
#include <unordered_map>

#include <fmt/format.h>

#include "autograd/node.h"
#include "autograd/inspect/anomaly.h"
#include "autograd/inspect/call_site.h"
#include "autograd/ops.h"
#include "autograd/memory/node_table.h"
#include "autograd/inspect/trace.h"

namespace autograd {

namespace {
thread_local bool grad_enabled = true;
BackwardObserver backward_observer = inspect::trace_observer_from_environment();  // SCRATCHGRAD_TRACE
}  // namespace

// A graph of a million chained ops is a million nested shared_ptr<Node>s: destroying the last one would
// recurse a million frames deep. Instead, take over the inputs of every node we hold the last reference
// to, so each node dies with no children left to destroy.
Node::~Node() {
  bool last_owner = false;  // of some input node: only then can destroying it recurse
  for (const Edge& e : inputs) last_owner = last_owner || (e.node && e.node.use_count() == 1);
  if (!last_owner) return;
  memory::SmallVector<std::shared_ptr<Node>, 8> orphans;  // usually a few at a time: no heap allocation
  for (Edge& e : inputs)
    if (e.node) orphans.push_back(std::move(e.node));
  while (!orphans.empty()) {
    std::shared_ptr<Node> node = std::move(orphans.back());
    orphans.pop_back();
    if (node.use_count() == 1)
      for (Edge& e : node->inputs)
        if (e.node) orphans.push_back(std::move(e.node));
  }
}

bool is_grad_enabled() { return grad_enabled; }
void set_grad_enabled(bool enabled) { grad_enabled = enabled; }

BackwardObserver set_backward_observer(BackwardObserver observer) {
  std::swap(observer, backward_observer);
  return observer;
}

bool needs_grad(std::span<const Tensor> inputs) {
  if (!grad_enabled) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}
bool needs_grad(std::initializer_list<Tensor> inputs) {
  return needs_grad(std::span<const Tensor>(inputs.begin(), inputs.size()));
}

static Edge edge_to(const Tensor& t) {
  Edge e;
  if (!t.defined() || !t.requires_grad()) return e;
  if (t.grad_fn()) e.node = t.grad_fn();
  else e.leaf = t.impl_ptr();
  return e;
}

Tensor record(const char* name, Tensor out, std::span<const Tensor> inputs, std::span<const Tensor> saved,
              BackwardFn backward, compat::source_location where) {
  if (!grad_enabled) return out;
  bool any = false;
  for (const Tensor& t : inputs) any = any || (t.defined() && t.requires_grad());
  if (!any) return out;

  auto node = memory::make_pooled<Node>();
  static std::atomic<uint64_t> next_sequence_nr{0};
  node->name = name;
  node->sequence_nr = next_sequence_nr++;
  node->inputs.reserve(inputs.size());
  for (const Tensor& t : inputs) node->inputs.push_back(edge_to(t));
  node->saved.reserve(saved.size());
  for (const Tensor& t : saved)
    if (t.defined()) node->saved.push_back({t.impl().storage, nullptr, t.version()});
  node->backward = std::move(backward);
  node->output_shape = out.shape();
  node->output_dtype = out.dtype();
  node->where = where;
  node->call_site = inspect::current_call_site();
  out.impl().grad_fn = std::move(node);
  out.impl().requires_grad = true;
  inspect::check_anomaly_forward(out, inputs);
  return out;
}

void watch_in_place_writes(const Tensor& out, const Tensor& in) {
  if (!out.defined() || !out.grad_fn()) return;
  Storage& storage = *in.impl().storage;
  out.impl().grad_fn->saved.push_back({nullptr, storage.version_counter(), storage.version()});
}

// For every node reachable from the root: how many edges point into it, i.e. how many gradients it
// must wait for before it can run.
// The engine's bookkeeping lives in per-pass tables keyed by node (memory/node_table.h), whose memory
// comes from one arena per backward(), so a pass makes no allocation per node for it.
using DependencyCounts = memory::NodeTable<Node, int>;
using PendingGradients = memory::NodeTable<Node, Tensor>;  // an undefined Tensor: no gradient (yet, or any more)
// Only for leaves with hooks: edges not yet passed, and whether any of them brought a gradient.
struct LeafProgress {
  int edges_left = 0;
  bool got_gradient = false;
};
using HookedLeaves = memory::NodeTable<TensorImpl, LeafProgress>;

static bool has_hooks(const Edge& e) { return e.leaf && !e.leaf->post_accumulate_grad_hooks.empty(); }

static DependencyCounts count_dependencies(Node* root, HookedLeaves& hooked, compat::pmr::memory_resource* arena) {
  DependencyCounts dependencies(arena);
  dependencies[root] = 0;
  compat::pmr::vector<Node*> stack({root}, arena);
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (const Edge& e : node->inputs) {
      if (has_hooks(e)) ++hooked[e.leaf.get()].edges_left;
      Node* child = e.node.get();
      if (!child) continue;
      if (!dependencies.contains(child)) stack.push_back(child);
      ++dependencies[child];
    }
  }
  return dependencies;
}

static void check_saved_versions(const Node& node) {
  for (const SavedVersion& s : node.saved)
    if (s.current() != s.version)
      throw std::runtime_error(fmt::format(
          "backward: a tensor saved by {} was modified in place after it was saved (version {} now, {} when "
          "saved); clone it before the in-place op, or do the in-place op before using it",
          node.name, s.current(), s.version));
}

// Whether nothing but this handle refers to `t` or its memory, and it fills its buffer densely: then
// .grad can take it over instead of copying it (PyTorch's AccumulateGrad steals such gradients too).
static bool sole_owner_of_dense_buffer(const Tensor& t) {
  const std::shared_ptr<TensorImpl>& impl = t.impl_ptr();
  return impl.use_count() == 1 && impl->storage.use_count() == 1 && impl->offset == 0 && t.is_contiguous() &&
         impl->storage->nbytes == size_t(t.numel()) * dtype_size(t.dtype()) && !impl->grad_fn;
}

static void accumulate_into_leaf(TensorImpl& leaf, const Tensor& grad) {
  if (grad.shape() != leaf.shape)
    throw std::logic_error(fmt::format("backward: gradient of shape {} for a leaf of shape {}",
                                       shape_to_string(grad.shape()), shape_to_string(leaf.shape)));
  if (!leaf.grad) {
    // Own the buffer: the incoming gradient may alias another tensor (for example an expanded view),
    // unless it is a fresh tensor no one else holds.
    leaf.grad = sole_owner_of_dense_buffer(grad) ? grad.impl_ptr() : grad.clone().impl_ptr();
  } else {
    Tensor(leaf.grad).add_(grad);
  }
}

static void run_post_accumulate_grad_hooks(const std::shared_ptr<TensorImpl>& leaf) {
  Tensor t(leaf);
  for (auto& [id, hook] : leaf->post_accumulate_grad_hooks) hook(t);
}

// The node's add_into_grad (BackwardFunction), where nothing needs its gradient as a tensor: its one input
// is a leaf that already holds a .grad, with no post-accumulate hooks, and neither a backward observer (the
// trace) nor anomaly mode (which scans every gradient) is on. True when the node's gradient went there.
static bool added_into_leaf_grad(Node& node, const Tensor& grad_output) {
  if (node.inputs.size() != 1 || backward_observer || inspect::is_anomaly_enabled()) return false;
  const Edge& e = node.inputs[0];
  if (!e.leaf || !e.leaf->grad || has_hooks(e)) return false;
  return node.backward->add_into_grad(grad_output, Tensor(e.leaf->grad));
}

static void run_node(Node& node, Tensor grad_output, PendingGradients& pending, HookedLeaves& hooked,
                     size_t position) {
  if (node.released)
    throw std::runtime_error(fmt::format(
        "backward: the graph through {} has already been freed by an earlier backward(); pass "
        "retain_graph=true to the first backward() to run backward twice",
        node.name));
  check_saved_versions(node);
  if (added_into_leaf_grad(node, grad_output)) return;
  Grads grads = node.backward->apply(grad_output);  // the op's backward function (autograd/ops/)
  if (grads.size() != node.inputs.size())
    throw std::logic_error(fmt::format("backward: {} returned {} gradients for {} inputs", node.name, grads.size(),
                                       node.inputs.size()));
  if (backward_observer) backward_observer({&node, &grad_output, &grads, position});
  inspect::check_anomaly_backward(node, grads);
  // Let go of the incoming gradient: a node that passes it on as a view (TBackward0, ViewBackward0)
  // then leaves that view the buffer's only holder, and a leaf can keep it without a copy.
  grad_output = Tensor();
  for (size_t i = 0; i < grads.size(); ++i) {
    const Edge& e = node.inputs[i];
    if (!grads[i].defined() || !e.wants_grad()) continue;
    if (e.leaf) {
      accumulate_into_leaf(*e.leaf, grads[i]);
      if (has_hooks(e)) hooked[e.leaf.get()].got_gradient = true;
    } else {
      Tensor& slot = pending[e.node.get()];
      slot = slot.defined() ? add(slot, grads[i]) : grads[i];
    }
  }
}

// (The pass itself is the member function, so that in a debugger a node's backward function is three frames
// below Tensor::backward: Tensor::backward, run_node, the op's apply.)
void backward(const Tensor& root, const Tensor& gradient, bool retain_graph) { root.backward(gradient, retain_graph); }

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  const Tensor& root = *this;
  if (!root.requires_grad())
    throw std::runtime_error(
        "backward: element 0 of tensors does not require grad and does not have a grad_fn (set requires_grad on "
        "a leaf before computing with it)");
  Tensor seed = gradient;
  if (!seed.defined()) {
    if (root.numel() != 1)
      throw std::runtime_error(fmt::format(
          "backward: grad can be implicitly created only for scalar outputs, but the output has shape {}; pass "
          "a gradient of that shape",
          root.shape_str()));
    seed = ones_like(root);
  } else if (seed.shape() != root.shape()) {
    throw std::runtime_error(fmt::format("backward: gradient has shape {} but the output has shape {}",
                                         seed.shape_str(), root.shape_str()));
  }

  NoGradGuard no_grad;  // the backward formulas themselves are not recorded
  if (!root.grad_fn()) {  // backward on a leaf: its gradient is the seed itself
    accumulate_into_leaf(root.impl(), seed);
    run_post_accumulate_grad_hooks(root.impl_ptr());
    return;
  }
  std::byte arena_buffer[16 * 1024];  // enough for a few hundred nodes; larger graphs spill to the heap
  compat::pmr::monotonic_buffer_resource arena(arena_buffer, sizeof(arena_buffer));
  PendingGradients pending(&arena);
  Node* root_node = root.grad_fn().get();
  pending[root_node] = seed;
  HookedLeaves hooked(&arena);
  DependencyCounts dependencies = count_dependencies(root_node, hooked, &arena);
  // A node is ready once every node that feeds it has run. Among ready nodes the newest (highest
  // sequence number) runs first — PyTorch's order, which also fixes the order in which gradients
  // arriving at a shared input are summed, so sums round exactly as they do there.
  auto newer_first = [](const Node* a, const Node* b) { return a->sequence_nr < b->sequence_nr; };
  std::priority_queue<Node*, compat::pmr::vector<Node*>, decltype(newer_first)> ready(newer_first,
                                                                                compat::pmr::vector<Node*>(&arena));
  ready.push(root_node);
  size_t ran = 0;
  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    Tensor& slot = pending[node];
    if (slot.defined()) {  // else no gradient reached it (only through non-differentiable paths)
      Tensor grad_output = std::move(slot);
      slot = Tensor();
      run_node(*node, std::move(grad_output), pending, hooked, ran++);
      if (!retain_graph) {
        node->backward = nullptr;  // frees every tensor the backward function saved
        node->saved.clear();
        node->released = true;
      }
    }
    for (const Edge& e : node->inputs) {
      if (e.node && --dependencies[e.node.get()] == 0) ready.push(e.node.get());
      if (!has_hooks(e)) continue;
      LeafProgress& leaf = hooked[e.leaf.get()];
      if (--leaf.edges_left == 0 && leaf.got_gradient) run_post_accumulate_grad_hooks(e.leaf);
    }
  }
}

}  // namespace autograd
