// numbers.h — a number read from text that a user wrote (a flag, a field of a file, an environment variable)
// is read whole: "2x", " 2", "2.0", "" and values outside the range asked for are refused, never read as
// their first digits, wrapped (2^32 + k as k) or saturated (1e400 as infinity). The caller says what was
// wrong and where, naming the flag, file or field.
#pragma once
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <system_error>

namespace nn {

// The whole number `text` spells, in [lo, hi]; nullopt for anything else.
inline std::optional<int64_t> parse_whole(std::string_view text, int64_t lo = std::numeric_limits<int64_t>::min(),
                                          int64_t hi = std::numeric_limits<int64_t>::max()) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);  // no sign "+", no spaces: refused
  if (text.empty() || error != std::errc() || stop != end || value < lo || value > hi) return std::nullopt;
  return value;
}

// The finite real number `text` spells ("0.5", "1e-3"); nullopt for anything else, "nan", "inf" and
// values too large for a double among them.
inline std::optional<double> parse_finite(std::string_view text) {
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || stop != end || !std::isfinite(value)) return std::nullopt;
  return value;
}

}  // namespace nn
