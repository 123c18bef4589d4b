// format.cpp — PyTorch 1.13's tensor printing rules (torch/_tensor_str.py), reimplemented.
#include "autograd/print/format_rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include "autograd/compat.h"
#include "autograd/cpu/runtime/runtime.h"

// Text is built with fmt::format or appended to, never as "literal" + a temporary std::string: GCC 12 at -O3
// reports a false -Wrestrict inside that operator+ (GCC bug 105329).
namespace autograd::print {

PrintOptions& print_options() {
  static PrintOptions options;
  return options;
}

void set_printoptions(std::optional<int> precision, std::optional<bool> sci_mode,
                      std::optional<int> threshold, std::optional<int> edgeitems,
                      std::optional<int> linewidth) {
  PrintOptions& o = print_options();
  if (precision) o.precision = *precision;
  if (threshold) o.threshold = *threshold;
  if (edgeitems) o.edgeitems = *edgeitems;
  if (linewidth) o.linewidth = *linewidth;
  o.sci_mode = sci_mode;  // torch assigns it unconditionally, so None means "automatic again"
}

void set_printoptions(const PrintOptions& options) { print_options() = options; }

void reset_printoptions() { print_options() = PrintOptions{}; }

namespace {

// ---------------------------------------------------------------------------------------------
// Python's float formatting. fmt rounds exactly (half to even on exact ties), like Python; only
// NaN differs: Python never prints a sign on it, while NaNs from arithmetic often carry one.

std::string py_fixed(double v, int precision) {
  if (std::isnan(v)) return "nan";
  return fmt::format("{:.{}f}", v, precision);
}

std::string py_scientific(double v, int precision) {
  if (std::isnan(v)) return "nan";
  return fmt::format("{:.{}e}", v, precision);
}

std::string pad_left(std::string s, size_t width) {
  if (s.size() < width) s.insert(0, width - s.size(), ' ');
  return s;
}

// ---------------------------------------------------------------------------------------------
// Which elements are shown. A summarised dimension keeps `edgeitems` indices at each end.

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

struct Layout {
  const PrintOptions& opts;
  bool summarize;

  bool elides(int64_t size) const { return summarize && size > 2 * edge(); }
  int64_t edge() const { return std::max(opts.edgeitems, 0); }

  // Indices of one dimension that get printed; -1 marks where "..." goes. In the innermost
  // dimension torch slices with [-edgeitems:], so edgeitems == 0 keeps the whole tail there.
  std::vector<int64_t> shown(int64_t size, bool innermost) const {
    std::vector<int64_t> idx;
    if (!elides(size)) {
      for (int64_t i = 0; i < size; ++i) idx.push_back(i);
      return idx;
    }
    for (int64_t i = 0; i < edge(); ++i) idx.push_back(i);
    idx.push_back(-1);
    int64_t tail = (innermost && edge() == 0) ? 0 : size - edge();
    for (int64_t i = tail; i < size; ++i) idx.push_back(i);
    return idx;
  }
};

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

// Flat offsets of every printed element (what torch's get_summarized_data keeps).
std::vector<int64_t> shown_offsets(const PrintData& data, const Layout& layout) {
  std::vector<int64_t> offsets{0};
  const auto strides = row_major_strides(data.shape);
  for (size_t d = 0; d < data.shape.size(); ++d) {
    std::vector<int64_t> next;
    for (int64_t base : offsets)
      for (int64_t i : layout.shown(data.shape[d], d + 1 == data.shape.size()))
        if (i >= 0) next.push_back(base + i * strides[d]);
    offsets = std::move(next);
  }
  return offsets;
}

// ---------------------------------------------------------------------------------------------
// The element formatter: one column width and one notation for the whole tensor, chosen from
// the printed elements only (torch's _Formatter).

class ElementFormatter {
 public:
  ElementFormatter(const PrintData& data, const std::vector<int64_t>& offsets, const PrintOptions& opts)
      : data_(data), precision_(opts.precision) {
    if (is_floating(data.dtype))
      choose_float_mode(offsets, opts);
    else
      for (int64_t off : offsets) width_ = std::max(width_, plain_text(off).size());
  }

  size_t width() const { return width_; }

  std::string format(int64_t offset) const {
    if (!is_floating(data_.dtype)) return pad_left(plain_text(offset), width_);
    const double v = data_.floats[offset];
    if (sci_mode_) return pad_left(py_scientific(v, precision_), width_);
    if (int_mode_) {
      // The trailing dot marks a float tensor whose values happen to be integers.
      std::string s = py_fixed(v, 0);
      if (std::isfinite(v)) s += '.';
      return pad_left(s, width_);
    }
    return pad_left(py_fixed(v, precision_), width_);
  }

 private:
  std::string plain_text(int64_t offset) const {
    const int64_t v = data_.ints[offset];
    if (data_.dtype == DType::Bool) return v ? "True" : "False";
    return std::to_string(v);
  }

  void choose_float_mode(const std::vector<int64_t>& offsets, const PrintOptions& opts) {
    std::vector<double> vals;  // nonzero finite elements: zeros and inf/nan never pick the mode
    for (int64_t off : offsets) {
      double v = data_.floats[off];
      if (std::isfinite(v) && v != 0.0) vals.push_back(v);
    }
    // torch returns before applying a forced sci_mode here, so all-zero/non-finite tensors
    // always print in integer mode.
    if (vals.empty()) return;

    double lo = INFINITY, hi = 0.0;
    for (double v : vals) {
      lo = std::min(lo, std::fabs(v));
      hi = std::max(hi, std::fabs(v));
      if (v != std::ceil(v)) int_mode_ = false;
    }
    const bool wide_range = hi / lo > 1000.0 || hi > 1.0e8;
    sci_mode_ = int_mode_ ? wide_range : (wide_range || lo < 1.0e-4);

    // The width comes from the automatic choice even when sci_mode is forced below.
    for (double v : vals) width_ = std::max(width_, auto_mode_text(v).size());
    if (opts.sci_mode) sci_mode_ = *opts.sci_mode;
  }

  std::string auto_mode_text(double v) const {
    if (sci_mode_) return py_scientific(v, precision_);
    if (int_mode_) return py_fixed(v, 0) + '.';
    return py_fixed(v, precision_);
  }

  const PrintData& data_;
  int precision_;
  bool int_mode_ = true;
  bool sci_mode_ = false;
  size_t width_ = 1;
};

// ---------------------------------------------------------------------------------------------
// Nested brackets. `indent` is the column of the opening bracket of the current level.

class Printer {
 public:
  Printer(const PrintData& data, const PrintOptions& opts, const Layout& layout)
      : data_(data), opts_(opts), layout_(layout), strides_(row_major_strides(data.shape)),
        formatter_(data, shown_offsets(data, layout), opts) {}

  std::string body(int indent) const {
    if (data_.shape.empty()) return formatter_.format(0);
    return tensor_str(0, 0, indent);
  }

 private:
  std::string tensor_str(size_t dim, int64_t offset, int indent) const {
    if (dim + 1 == data_.shape.size()) return vector_str(offset, indent);
    std::vector<std::string> slices;
    for (int64_t i : layout_.shown(data_.shape[dim], false))
      slices.push_back(i < 0 ? "..." : tensor_str(dim + 1, offset + i * strides_[dim], indent + 1));
    // Slices of a k-d block are separated by k-1 newlines, i.e. blank lines from 3-D up.
    const size_t remaining = data_.shape.size() - dim;
    const std::string separator = fmt::format(",{}{}", std::string(remaining - 1, '\n'), std::string(indent + 1, ' '));
    return fmt::format("[{}]", join(slices, separator));
  }

  std::string vector_str(int64_t offset, int indent) const {
    // Each element costs its width plus ", "; a row holds at least one element.
    const double element_length = static_cast<double>(formatter_.width() + 2);
    const auto fit = static_cast<int64_t>(std::floor((opts_.linewidth - indent) / element_length));
    const auto per_line = static_cast<size_t>(std::max<int64_t>(1, fit));

    std::vector<std::string> items;
    for (int64_t i : layout_.shown(data_.shape.back(), true))
      items.push_back(i < 0 ? " ..." : formatter_.format(offset + i));

    std::vector<std::string> lines;
    for (size_t i = 0; i < items.size(); ++i) {
      if (i % per_line == 0)
        lines.emplace_back();
      else
        lines.back() += ", ";
      lines.back() += items[i];
    }
    return fmt::format("[{}]", join(lines, fmt::format(",\n{}", std::string(indent + 1, ' '))));
  }

  static std::string join(const std::vector<std::string>& parts, const std::string& sep) {
    std::string out;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (i) out += sep;
      out += parts[i];
    }
    return out;
  }

  const PrintData& data_;
  const PrintOptions& opts_;
  const Layout& layout_;
  std::vector<int64_t> strides_;
  ElementFormatter formatter_;
};

// ---------------------------------------------------------------------------------------------
// The "tensor(...)" wrapper and its suffixes.

constexpr int kPrefixIndent = 7;  // strlen("tensor(")

std::string python_tuple(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

std::string torch_dtype(DType d) { return fmt::format("torch.{}", dtype_name(d)); }

// size=/dtype= parts torch adds before the autograd ones. float32 is the default dtype; int64
// and bool are recognisable from their values, except in an empty tensor.
std::vector<std::string> derived_suffixes(const PrintData& data, bool empty) {
  std::vector<std::string> out;
  if (empty) {
    if (data.shape.size() != 1) out.push_back(fmt::format("size={}", python_tuple(data.shape)));
    if (data.dtype != DType::Float32) out.push_back(fmt::format("dtype={}", torch_dtype(data.dtype)));
  } else if (data.dtype == DType::Float64 || data.dtype == DType::BFloat16) {
    out.push_back(fmt::format("dtype={}", torch_dtype(data.dtype)));
  }
  return out;
}

// A suffix moves to its own line when it would push the current last line past linewidth.
std::string add_suffixes(std::string text, const std::vector<std::string>& suffixes, int linewidth) {
  const size_t nl = text.rfind('\n');
  // torch's arithmetic: the last line's length plus 2 (rfind gives -1 without a newline).
  int64_t last_line_len = static_cast<int64_t>(text.size()) - (nl == std::string::npos ? -1 : static_cast<int64_t>(nl)) + 1;
  for (const std::string& suffix : suffixes) {
    const auto len = static_cast<int64_t>(suffix.size());
    if (last_line_len + len + 2 > linewidth) {
      text += fmt::format(",\n{}{}", std::string(kPrefixIndent, ' '), suffix);
      last_line_len = kPrefixIndent + len;
    } else {
      text += ", " + suffix;
      last_line_len += len + 2;
    }
  }
  return text + ")";
}

void check_sizes(const PrintData& data, int64_t numel) {
  for (int64_t d : data.shape)
    if (d < 0) throw std::invalid_argument("format_tensor: negative dimension");
  const size_t have = is_floating(data.dtype) ? data.floats.size() : data.ints.size();
  if (have != static_cast<size_t>(numel))
    throw std::invalid_argument(fmt::format("format_tensor: shape {} needs {} elements, got {}",
                                            python_tuple(data.shape), numel, have));
}

}  // namespace

std::string format_tensor(const PrintData& data, const std::vector<std::string>& suffixes,
                          const PrintOptions& options) {
  // The engine flushes denormals to zero for speed (cpu/runtime/runtime.h). With that on, the CPU reads a
  // subnormal like 5e-324 as 0 in every comparison and in std::to_chars, so printing would show 0.0.
  [[maybe_unused]] cpu::KeepSubnormals exact;
  const int64_t numel = numel_of(data.shape);
  check_sizes(data, numel);
  const bool empty = numel == 0;

  std::string text = "tensor(";
  if (empty) {
    text += "[]";
  } else {
    const Layout layout{options, numel > options.threshold};
    text += Printer(data, options, layout).body(kPrefixIndent);
  }
  std::vector<std::string> all = derived_suffixes(data, empty);
  all.insert(all.end(), suffixes.begin(), suffixes.end());
  return add_suffixes(std::move(text), all, options.linewidth);
}

std::string format_tensor(const PrintData& data, const std::vector<std::string>& suffixes) {
  return format_tensor(data, suffixes, print_options());
}

// ---------------------------------------------------------------------------------------------
// repr(float): std::to_chars finds the shortest round-trip digits (compat.h); Python's layout rules decide
// where the decimal point goes.

std::string python_float_repr(double v) {
  [[maybe_unused]] cpu::KeepSubnormals exact;  // (flush-to-zero off: see format_tensor)
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";

  const std::string sci = compat::shortest_scientific(v);  // e.g. "-5.960464477539063e-08"

  const bool negative = sci[0] == '-';
  const size_t e_pos = sci.find('e');
  std::string digits;
  for (size_t i = negative ? 1 : 0; i < e_pos; ++i)
    if (sci[i] != '.') digits += sci[i];
  const int exponent = std::atoi(sci.c_str() + e_pos + 1);
  const int decpt = exponent + 1;  // digits "d1d2..." mean 0.d1d2... * 10^decpt
  const int ndigits = static_cast<int>(digits.size());

  std::string out = negative ? "-" : "";
  if (decpt <= -4 || decpt > 16) {
    out += digits.substr(0, 1);
    if (ndigits > 1) out += fmt::format(".{}", digits.substr(1));
    out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
  } else if (decpt <= 0) {
    out += fmt::format("0.{}{}", std::string(-decpt, '0'), digits);
  } else if (decpt >= ndigits) {
    out += digits + std::string(decpt - ndigits, '0') + ".0";
  } else {
    out += digits.substr(0, decpt) + "." + digits.substr(decpt);
  }
  return out;
}

}  // namespace autograd::print
