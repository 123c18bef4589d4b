// debug.h — instruments for looking inside the engine: anomaly mode and call-site labels.
#pragma once
#include <source_location>
#include <string>

#include "autograd/node.h"

namespace autograd {

// ---- anomaly mode (like torch.autograd.detect_anomaly) ----
// When on, the first NaN or Inf produced by a forward op or a backward node raises an error naming the op,
// the node and where it was recorded.
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
void check_anomaly_forward(const Tensor& out, const char* op);
void check_anomaly_backward(const Node& node, const Grads& grads);

// ---- call sites ----
// A label for the user-level code running now ("mini_self_attention.cpp:42" or "head(Linear)"); every
// node recorded while a CallSite is alive remembers it, so traces and errors can point at user code.
class CallSite {
 public:
  explicit CallSite(std::string label);
  explicit CallSite(std::source_location where = std::source_location::current());
  ~CallSite();
  CallSite(const CallSite&) = delete;
  CallSite& operator=(const CallSite&) = delete;

 private:
  std::string previous_;
};
const std::string& current_call_site();

}  // namespace autograd
