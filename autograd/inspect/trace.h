// trace.h — the backward trace: one block of text per node, as the engine runs it.
//
//   {
//     autograd::TraceGuard trace;  // to std::cerr; or TraceGuard trace(some_ostream)
//     loss.backward();
//   }
//
// or, for any program, without touching its code:
//
//   SCRATCHGRAD_TRACE=1      every backward pass
//   SCRATCHGRAD_TRACE=first  only the first backward pass (a training loop's first step)
//   SCRATCHGRAD_TRACE=N      the first N backward passes (N = 2, 3, ...; "1" means every pass)
//   unset, empty or 0        off
//
// (read once, at start-up; the trace goes to stderr). Each pass starts with a header giving its number and
// the number of nodes; then, per node in the engine's order (newest node first):
//
//   [5/28] AddmmBackward0  addmm() in matmul.cpp:99  <- "return head(x)"
//       grad_output            [128, 13]   norm 0.08556  min -0.007517  max 0.001507
//       0 → head.bias          [13]        norm 0.1711  min -0.1293  max 0.0532  (leaf: into .grad)
//                              [-0.1293, -0.02388, 0.03291, ...]
//       1 → [6] ViewBackward0  [128, 24]   norm 0.04973  min -0.001991  max 0.002077
//       2 → [7] TBackward0     [24, 13]    norm 0.3757  min -0.07197  max 0.09256
//
// the node's PyTorch name; the op function that recorded it and its source line; the CallSite label that
// was active (the user-level line); the incoming gradient; and each gradient it sends on, with where it
// goes: a later node (its position in this pass) or a leaf's .grad, and "gradient 2 of 3, summed" when
// several gradients meet at one place. Summary numbers are the L2 norm, min and max; tensors with at most
// 64 elements also show every value.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include "autograd/node.h"

namespace autograd::inspect {

struct TraceOptions {
  std::ostream* out = nullptr;  // nullptr: std::cerr
  int64_t max_values = 64;      // list every value of gradients with at most this many elements (0: never)
  int digits = 4;               // significant digits of every number
  bool source_lines = true;     // "matmul.cpp:99"; false: "matmul.cpp" (stable text for documents)
  int64_t passes = 0;           // trace only the first this-many backward passes (0: all)
  double zero_below = 0;        // print numbers smaller than this in magnitude as "~0" (rounding noise)
  // Leaf names to show, e.g. a module's named_parameters(); leaves not listed show their TensorImpl::name.
  std::vector<std::pair<std::string, Tensor>> names;
};

// The observer behind TraceGuard and SCRATCHGRAD_TRACE. Keeps its own count of passes.
BackwardObserver make_trace_observer(TraceOptions options = {});

// While alive, every backward pass is traced; the observer that was installed before (if any) keeps
// being called too, and is restored afterwards.
class TraceGuard {
 public:
  explicit TraceGuard(std::ostream& out);
  explicit TraceGuard(TraceOptions options = {});
  ~TraceGuard();
  TraceGuard(const TraceGuard&) = delete;
  TraceGuard& operator=(const TraceGuard&) = delete;

 private:
  BackwardObserver previous_;
};

// How many passes a SCRATCHGRAD_TRACE value asks for: -1 off, 0 every pass, N > 0 the first N.
int64_t trace_passes_from_setting(const char* value);
// The engine's initial observer: the trace when SCRATCHGRAD_TRACE asks for one, else an empty observer.
BackwardObserver trace_observer_from_environment();

// Text helpers shared by the instruments. "[128, 13]  norm 0.1124  min -0.0781  max 0.02171"
std::string gradient_summary(const Tensor& t, int digits = 4, double zero_below = 0);
// Every value as rows of at most `per_line` numbers: "[1, 2, 3]" (one line per row of the last dim).
std::vector<std::string> value_lines(const Tensor& t, int digits = 4, size_t per_line = 8, double zero_below = 0);
// One number with `digits` significant digits ("0.08839", "-1.5e-05"), or "~0" below zero_below.
std::string trace_number(double v, int digits = 4, double zero_below = 0);

}  // namespace autograd::inspect
