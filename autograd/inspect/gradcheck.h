// gradcheck.h — checks backward() against finite differences, in float64.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace autograd::inspect {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
};

struct GradcheckResult {
  bool ok = true;
  std::string message;  // on failure: which input, which element, analytical vs numerical
  explicit operator bool() const { return ok; }
};

// f maps the inputs to one tensor (any shape). Every floating input that requires grad is checked: the
// full Jacobian from backward (one backward per output element) against central differences
// (f(x + eps) - f(x - eps)) / 2eps. Inputs must be float64 for the comparison to be meaningful.
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& inputs,
                          GradcheckOptions options = {});

}  // namespace autograd::inspect
