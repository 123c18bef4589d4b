// ops/gradients.h — gradient formulas that more than one op's backward function uses.
#pragma once
#include "autograd/tensor.h"

namespace autograd {

// y = gelu(x)  ⇒  dx = g ⊙ gelu'(x), where
//   gelu'(x) = Φ(x) + x·φ(x),  φ(x) = exp(−x²/2)/√(2π)                      (approximate "none": gelu(x) = x·Φ(x))
//   gelu'(x) = ½(1 + t) + ½x·(1 − t²)·√(2/π)·(1 + 3·0.044715·x²),
//              t = tanh(√(2/π)·(x + 0.044715·x³))                          (approximate "tanh")
// in one pass of the device's kernel (reference/gpt.cpp: the loop). Written into `dx` when given (it may be g).
Tensor gelu_gradient(const Tensor& g, const Tensor& x, bool tanh, Tensor dx = Tensor());

// y = x converted to another dtype  ⇒  dx = g converted back (ToCopyBackward0), for `converted` made from x
// without history: what Tensor::to records, and autocast_operand for a weight's kept bfloat16 copy.
Tensor record_conversion(const Tensor& x, Tensor converted);

}  // namespace autograd
