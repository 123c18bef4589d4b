// inspect/anomaly.h — anomaly mode: the first NaN or Inf an op or a node produces raises an error that says
// where it came from (call sites: call_site.h). The backward trace is in trace.h, graph pictures in dot.h.
#pragma once
#include <span>

#include "autograd/node.h"

namespace autograd::inspect {

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

}  // namespace autograd::inspect
