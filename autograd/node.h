// node.h — one recorded operation in the graph (PyTorch's grad_fn).
//
// An op that wants a gradient calls `record(...)` with its backward function: given the gradient of its
// output, it returns the gradient of each input. Each op's sits right next to its forward code in
// autograd/ops/*.cpp, so a reader sees both halves of the op together.
#pragma once
#include <cstddef>
#include <functional>
#include <type_traits>
#include <memory>
#include <span>
#include <string_view>
#include <string>
#include <vector>

#include "autograd/compat.h"
#include "autograd/memory/pooled_box.h"
#include "autograd/memory/small_vector.h"
#include "autograd/tensor.h"

namespace autograd {

using Grads = memory::SmallVector<Tensor, 3>;  // one entry per input; an undefined Tensor means "no gradient"

// A node's backward function: apply(grad_output) returns the gradient of each input. Every op of
// autograd/ops/ defines its own beside its forward (MulBackward0, MatmulBackward, ...), the tensors it saved
// as members and its formula in apply; the engine calls apply directly, so in a debugger the frame below
// run_node is the op's own. A lambda works too (record wraps it in a Closure): the exercises write theirs so.
struct BackwardFunction {
  virtual ~BackwardFunction() = default;
  virtual Grads apply(const Tensor& grad_output) = 0;
  // Optional, for an op of one input whose gradient is zero but in a few rows (embedding: the rows it looked
  // up): the same gradient added into `grad`, a leaf's existing .grad, in place. False where it cannot (the
  // default): the engine then calls apply and adds as usual.
  virtual bool add_into_grad(const Tensor& /*grad_output*/, const Tensor& /*grad*/) { return false; }
};

// A lambda as a backward function: Grads(const Tensor& grad_output).
template <typename F> struct Closure final : BackwardFunction {
  F f;
  explicit Closure(F fn) : f(std::move(fn)) {}
  Grads apply(const Tensor& grad_output) override { return f(grad_output); }
};

// What record takes and a node keeps: one backward function, in a block from the pool (memory/pooled_box.h).
class BackwardFn : public memory::PooledBox<BackwardFunction> {
 public:
  BackwardFn() = default;
  BackwardFn(std::nullptr_t) {}
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, BackwardFn>>>
  BackwardFn(F f) : PooledBox(wrap(std::move(f))) {}
  using PooledBox::operator=;
  // backward(g) == backward->apply(g): how an engine of one's own calls it (the exercises' rung 5); the
  // engine here calls apply itself, so that a debugger shows no frame between run_node and apply.
  Grads operator()(const Tensor& grad_output) const { return (*this)->apply(grad_output); }

 private:
  template <typename F> static auto wrap(F f) {
    if constexpr (std::is_base_of_v<BackwardFunction, F>) return f;
    else return Closure<F>(std::move(f));
  }
};

// Where one input's gradient goes: into another node, or into a leaf tensor's .grad, or nowhere.
struct Edge {
  std::shared_ptr<Node> node;
  std::shared_ptr<TensorImpl> leaf;
  bool wants_grad() const { return node || leaf; }
};

// A tensor a node saved for backward, with the version it had then (to detect later in-place edits): its
// storage, which the closure reads, or only the storage's version counter, for a view's node, whose
// closure reads no data and so must not keep the memory alive (watch_in_place_writes).
struct SavedVersion {
  std::shared_ptr<Storage> storage;
  std::shared_ptr<const uint64_t> counter;  // set instead of storage
  uint64_t version;
  uint64_t current() const { return storage ? storage->version() : *counter; }
};

struct Node {
  const char* name = "";        // PyTorch's grad_fn name: "MulBackward0", "MmBackward0", ...
  // A node that does the work of a chain of PyTorch's nodes is named after the one that does the math;
  // this is the chain's outermost node, which PyTorch shows as the output's grad_fn (BmmBackward0 stands
  // for BmmBackward0 → UnsafeViewBackward0: docs/autograd.md lists every merge). Printing uses it.
  const char* outermost_name = nullptr;
  const char* grad_fn_name() const { return outermost_name ? outermost_name : name; }
  memory::SmallVector<Edge, 3> inputs;  // parallel to the Grads the closure returns
  // Empty once released. Its add_into_grad, where it has one, runs instead of apply when the one input is a
  // leaf that already holds a .grad (GPT-2's tied token table: the head's gradient arrives first) and no
  // instrument (a trace, anomaly mode, a post-accumulate hook) is watching: it spares a dense gradient of
  // mostly zeros and its addition, for that table a 154 MB fill and a 154 MB add every step.
  BackwardFn backward;
  memory::SmallVector<SavedVersion, 3> saved;
  Shape output_shape;           // the shape the incoming gradient must have
  DType output_dtype = DType::Float32;
  uint64_t sequence_nr = 0;     // creation order: among ready nodes, the engine runs the newest first
  compat::source_location where;   // the op function that recorded it
  std::string_view call_site;   // the user-level label active when recorded (interned; see CallSite)
  bool released = false;

  Node() {}  // user-provided: make_shared/make_pooled then skip zero-filling all ~400 bytes first
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  ~Node();  // unlinks long chains iteratively (a recursive destructor would overflow the stack)
};

// Records `out` as produced by a differentiable op. Does nothing (returns `out` unchanged) in no-grad
// mode or when no input requires grad. `saved` lists the tensors the closure captured, so modifying one
// of them in place before backward is detected.
Tensor record(const char* name, Tensor out, std::span<const Tensor> inputs, std::span<const Tensor> saved,
              BackwardFn backward, compat::source_location where = compat::source_location::current());
// The usual call, with braced lists: record("MulBackward0", out, {a, b}, {a, b}, MulBackward0(a, b)).
inline Tensor record(const char* name, Tensor out, std::initializer_list<Tensor> inputs,
                     std::initializer_list<Tensor> saved, BackwardFn backward,
                     compat::source_location where = compat::source_location::current()) {
  return record(name, std::move(out), std::span<const Tensor>(inputs.begin(), inputs.size()),
                std::span<const Tensor>(saved.begin(), saved.size()), std::move(backward), where);
}

// For a view op: makes the node that `out` was just recorded with (if any) refuse to run once `in`'s
// storage is written in place, without keeping that storage alive. PyTorch's view nodes keep only sizes,
// so a tensor seen only through views is freed as soon as nothing but the graph refers to it.
void watch_in_place_writes(const Tensor& out, const Tensor& in);

// True when a new op with these inputs would be recorded.
bool needs_grad(std::initializer_list<Tensor> inputs);
bool needs_grad(std::span<const Tensor> inputs);

// ---- grad mode ----
bool is_grad_enabled();
void set_grad_enabled(bool enabled);

// While alive, no op is recorded (like `with torch.no_grad():`).
class NoGradGuard {
 public:
  NoGradGuard() : previous_(is_grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// Runs reverse mode from `root` (see engine.cpp).
void backward(const Tensor& root, const Tensor& gradient = Tensor(), bool retain_graph = false);

// ---- instruments (issue "See the backprop"): hooks the engine calls, off by default ----
struct BackwardEvent {
  const Node* node;
  const Tensor* grad_output;
  const Grads* grad_inputs;
  size_t position = 0;  // how many nodes this backward pass ran before this one: 0 = the root, a new pass
};
using BackwardObserver = std::function<void(const BackwardEvent&)>;
// Installs an observer called after each node runs; returns the previous one. At start-up the observer
// is the backward trace when SCRATCHGRAD_TRACE is set (see trace.h), else none.
BackwardObserver set_backward_observer(BackwardObserver observer);

}  // namespace autograd
