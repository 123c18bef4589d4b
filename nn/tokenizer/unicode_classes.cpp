// unicode_classes.cpp — class lookups by binary search in the generated range tables; ASCII answers at once.
#include "nn/tokenizer/unicode_classes.h"

#include <algorithm>
#include <iterator>

namespace tokenizer {

namespace {

struct CodePointRange {
  char32_t first, last;
};

#include "nn/tokenizer/unicode_classes.inc"

template <size_t N>
bool in_table(const CodePointRange (&table)[N], char32_t c) {
  // The first range whose end is at or after c holds c if its start is not after it.
  auto it = std::lower_bound(std::begin(table), std::end(table), c,
                             [](const CodePointRange& r, char32_t x) { return r.last < x; });
  return it != std::end(table) && it->first <= c;
}

}  // namespace

bool is_letter(char32_t c) {
  if (c < 0x80) return (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
  return in_table(k_letters, c);
}

bool is_number(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return in_table(k_numbers, c);
}

bool is_whitespace(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= '\t' && c <= '\r');
  return in_table(k_spaces, c);
}

const char* unicode_version() { return kUnicodeVersion; }

Utf8Char next_utf8_char(std::string_view text, size_t at) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char b0 = byte(at);
  if (b0 < 0x80) return {b0, 1};
  size_t length;
  char32_t code, smallest;
  if (b0 >= 0xC2 && b0 <= 0xDF) length = 2, code = b0 & 0x1F, smallest = 0x80;
  else if (b0 >= 0xE0 && b0 <= 0xEF) length = 3, code = b0 & 0x0F, smallest = 0x800;
  else if (b0 >= 0xF0 && b0 <= 0xF4) length = 4, code = b0 & 0x07, smallest = 0x10000;
  else return {kInvalidByte, 1};
  if (at + length > text.size()) return {kInvalidByte, 1};
  for (size_t i = 1; i < length; ++i) {
    if ((byte(at + i) & 0xC0) != 0x80) return {kInvalidByte, 1};
    code = (code << 6) | (byte(at + i) & 0x3F);
  }
  // Overlong forms, UTF-16 surrogates and code points past U+10FFFF are not UTF-8.
  if (code < smallest || (code >= 0xD800 && code <= 0xDFFF) || code > 0x10FFFF) return {kInvalidByte, 1};
  return {code, length};
}

}  // namespace tokenizer
