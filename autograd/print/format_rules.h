// format.h — turns tensor data into the exact text PyTorch 1.13 prints for str(tensor).
//
// This layer knows nothing about the Tensor class: the caller copies the elements into a
// PrintData (row-major, on the CPU) and passes the autograd suffixes it wants shown.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "autograd/dtype.h"

namespace autograd::print {

// Mirrors torch's PRINT_OPTS. sci_mode: nullopt = decide per tensor, true/false = force.
struct PrintOptions {
  int precision = 4;    // digits after the decimal point (>= 0)
  int threshold = 1000; // summarise with "..." when numel exceeds this
  int edgeitems = 3;    // items kept at each end of a summarised dimension
  int linewidth = 80;   // characters per line before a row wraps
  std::optional<bool> sci_mode;
};

// Spelling for "let the formatter choose" at call sites: set_printoptions(3, kSciModeAuto).
inline constexpr std::optional<bool> kSciModeAuto = std::nullopt;

// The process-wide options format_tensor uses by default.
PrintOptions& print_options();

// Same semantics as torch.set_printoptions: options left out keep their value, except sci_mode,
// which every call assigns (so omitting it, or passing kSciModeAuto, restores automatic mode).
//   set_printoptions(3, false);            // torch.set_printoptions(precision=3, sci_mode=False)
//   set_printoptions({}, kSciModeAuto);    // torch.set_printoptions(sci_mode=None)
void set_printoptions(std::optional<int> precision = {}, std::optional<bool> sci_mode = {},
                      std::optional<int> threshold = {}, std::optional<int> edgeitems = {},
                      std::optional<int> linewidth = {});
void set_printoptions(const PrintOptions& options);
// torch.set_printoptions(profile="default"): precision 4, threshold 1000, edgeitems 3, linewidth 80, automatic.
void reset_printoptions();

// Plain data to print: row-major contiguous values, already on the CPU.
struct PrintData {
  DType dtype = DType::Float32;
  std::vector<int64_t> shape;  // empty = 0-d scalar tensor
  std::vector<double> floats;  // Float32/Float64 elements (float32 widened exactly to double)
  std::vector<int64_t> ints;   // Int64 elements, or Bool as 0/1
};

// str(tensor) as PyTorch prints it. `suffixes` are the caller's extra "key=value" parts, shown
// after the ones format_tensor derives itself (size=... for empty tensors, dtype=torch.float64
// and the like), e.g. "grad_fn=<AddBackward0>" or "requires_grad=True".
// Throws std::invalid_argument when the element count does not match the shape.
std::string format_tensor(const PrintData& data, const std::vector<std::string>& suffixes = {});
// Same, with explicit options instead of the global ones.
std::string format_tensor(const PrintData& data, const std::vector<std::string>& suffixes,
                          const PrintOptions& options);

// Python's repr(float): shortest round-trip digits, fixed notation for 1e-4 <= |v| < 1e16,
// exponent notation otherwise ("5.960464477539063e-08", "0.1", "1e+16", "2.0", "inf", "nan", "-0.0").
std::string python_float_repr(double v);

}  // namespace autograd::print
