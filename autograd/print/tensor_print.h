// print.h — PyTorch-style text for tensors: operator<<, to_string, and an fmt formatter.
#pragma once
#include <string>

#include <fmt/format.h>

#include "autograd/print/format_rules.h"
#include "autograd/tensor.h"

namespace autograd {
std::string to_string(const Tensor& t);
// Python's tuple(t.shape): "(4, 4)", "(5,)", "()".
std::string shape_tuple(const Tensor& t);
}

template <> struct fmt::formatter<autograd::Tensor> : fmt::formatter<std::string> {
  auto format(const autograd::Tensor& t, format_context& ctx) const {
    return fmt::formatter<std::string>::format(autograd::to_string(t), ctx);
  }
};
