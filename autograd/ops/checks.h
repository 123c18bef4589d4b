// ops/checks.h — the argument checks every op family shares, so each message is worded once.
#pragma once
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "autograd/tensor.h"

namespace autograd {

inline void check_floating(const Tensor& x, const char* op) {
  if (!is_floating(x.dtype()))
    throw std::invalid_argument(fmt::format("{}: expected a floating point tensor, got {} (shape {})", op,
                                            dtype_name(x.dtype()), x.shape_str()));
}

// GELU's `approximate`: "tanh" (true) or "none" (false); anything else is refused, naming `op`.
inline bool gelu_uses_tanh(const std::string& approximate, const Tensor& x, const char* op) {
  if (approximate != "none" && approximate != "tanh")
    throw std::invalid_argument(fmt::format("{}: approximate must be 'none' or 'tanh', got '{}' (input shape {})", op,
                                            approximate, x.shape_str()));
  return approximate == "tanh";
}

inline void check_same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  if (a.dtype() != b.dtype())
    throw std::invalid_argument(fmt::format("{}: dtype mismatch: {} (shape {}) and {} (shape {}); convert one with .to()",
                                            op, dtype_name(a.dtype()), a.shape_str(), dtype_name(b.dtype()),
                                            b.shape_str()));
}

inline void check_same_device(const Tensor& a, const Tensor& b, const char* op) {
  if (a.device() != b.device())
    throw std::invalid_argument(fmt::format("{}: expected all tensors on the same device, got {} and {}", op,
                                            a.device().str(), b.device().str()));
}

// linear's shapes: weight [out, in], x [..., in], bias [out] or undefined; `op` names the caller.
inline void check_linear_shapes(const Tensor& x, const Tensor& weight, const Tensor& bias, const char* op) {
  if (weight.dim() != 2)
    throw std::invalid_argument(fmt::format("{}: weight must be 2-D [out, in], got {}", op, weight.shape_str()));
  if (x.dim() == 0 || x.size(-1) != weight.size(1))
    throw std::invalid_argument(fmt::format("{}: input of shape {} does not match weight {} (in_features {})", op,
                                            x.shape_str(), weight.shape_str(), weight.size(1)));
  if (bias.defined() && (bias.dim() != 1 || bias.size(0) != weight.size(0)))
    throw std::invalid_argument(fmt::format("{}: bias of shape {} does not match weight {} (out_features {})", op,
                                            bias.shape_str(), weight.shape_str(), weight.size(0)));
}

}  // namespace autograd
