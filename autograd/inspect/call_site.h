// inspect/call_site.h — labels for user-level code, and the text that says where a node came from.
#pragma once
#include <string>
#include <string_view>

#include "autograd/node.h"

namespace autograd::inspect {

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
  explicit CallSite(SourceLocation where = SourceLocation::current());
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

}  // namespace autograd::inspect
