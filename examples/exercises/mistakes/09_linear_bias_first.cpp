// expect: draws the weight first, then the bias
// A deliberate mistake for the checker's tests (tests/exercises/): the bias drawn before the weight.
#include <cmath>

#include "../exercises.h"

namespace exercises {

MyLinear::MyLinear(int64_t in_features, int64_t out_features, bool has_bias) {
  // torch.nn.Linear.reset_parameters: kaiming_uniform_(weight, a=√5), computed in double in this order:
  // gain = √(2 / (1 + a²)), std = gain / √fan_in, bound = √3 · std   (which is 1/√fan_in, up to rounding)
  const double a = std::sqrt(5.0);
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  const double std = gain / std::sqrt(double(in_features));
  const double bound = std::sqrt(3.0) * std;
  weight = empty({out_features, in_features});
  const double bias_bound = 1.0 / std::sqrt(double(in_features));
  if (has_bias) {
    bias = empty({out_features});
    uniform_(bias, -bias_bound, bias_bound);  // the mistake: the bias's draws before the weight's
  }
  uniform_(weight, -bound, bound);
  weight = register_parameter("weight", weight);
  if (has_bias) bias = register_parameter("bias", bias);
}

Tensor MyLinear::forward(const Tensor& x) const {
  // y = x Wᵀ + b; linear() adds the bias inside the product, as PyTorch's addmm does (the same bits)
  return linear(x, weight, bias);
}

}  // namespace exercises
