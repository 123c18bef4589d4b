// debug.h — instruments for looking inside the engine: anomaly mode, call-site labels, and the text that
// says where a node came from. The backward trace is in trace.h, graph pictures in dot.h, SVG in svg.h.
#pragma once
#include <span>
#include <source_location>
#include <string>
#include <string_view>
#include <vector>

#include "autograd/node.h"

namespace autograd {

// ---- anomaly mode (like torch.autograd.detect_anomaly) ----
// When on, the first NaN or Inf produced by a forward op or a backward node raises std::runtime_error
// naming the op, the node, where the op recorded it and the active CallSite label. "Produced" means:
//   forward:  a recorded op's output holds a NaN although none of its inputs did, or an Inf although none
//             of its inputs did. masked_fill is allowed its infinities (writing -inf before a softmax is
//             how a causal mask works), not NaN. Ops that record nothing (no input requires grad, or
//             inside NoGradGuard) are not checked.
//   backward: a node returns a gradient holding a NaN or an Inf.
// The checks copy every output to the CPU: slow, for debugging only.
bool is_anomaly_enabled();
void set_anomaly_enabled(bool enabled);
class DetectAnomalyGuard {
 public:
  DetectAnomalyGuard() : previous_(is_anomaly_enabled()) { set_anomaly_enabled(true); }
  ~DetectAnomalyGuard() { set_anomaly_enabled(previous_); }
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool previous_;
};
// Called by the engine: `out` was just recorded (it has its grad_fn) from `inputs`.
void check_anomaly_forward(const Tensor& out, std::span<const Tensor> inputs);
void check_anomaly_backward(const Node& node, const Grads& grads);

// ---- call sites ----
// A label for the user-level code running now ("mini_self_attention.cpp:42", or the line of the model
// it stands for); every node recorded while a CallSite is alive remembers it (Node::call_site), so
// traces, graphs and anomaly errors can point at user code. The previous label comes back when the
// CallSite dies. set() relabels, for a function that labels its statements one after another:
//   CallSite line("x = tok(idx) + pos(arange(t))");
//   ...
//   line.set("att = q(x) @ k(x).T / sqrt(D)");
class CallSite {
 public:
  explicit CallSite(std::string label);
  explicit CallSite(std::source_location where = std::source_location::current());
  ~CallSite();
  CallSite(const CallSite&) = delete;
  CallSite& operator=(const CallSite&) = delete;
  void set(std::string label);

 private:
  std::string_view previous_;
};
// Labels are interned (kept once, forever), so every node can hold a cheap view of its label instead
// of a copy — recording stays allocation-free however long the label is.
std::string_view current_call_site();

// ---- where a node came from ----
// The op function that recorded the node, without namespace, return type or parameters: "addmm", "log",
// "record_reshaping" (the helper behind view/reshape).
std::string recording_function(const Node& node);
// "addmm() in matmul.cpp:99"; with_line = false leaves out ":99" (text that stays the same when the
// file is edited, for documents).
std::string recorded_at(const Node& node, bool with_line = true);

// Writes `text` to `path`; throws std::runtime_error naming the path and the reason when it cannot.
void write_text_file(const std::string& path, const std::string& text);

}  // namespace autograd
