// normalize.cpp — NFC as Unicode Standard Annex #15 defines it: decompose every character fully (its
// canonical decomposition, applied until nothing is left to decompose), put each run of combining marks in
// the order of their combining classes (a stable sort), then compose each starter with the marks that
// follow it and are not blocked from it.
#include "nn/tokenizer/normalize.h"

#include <algorithm>
#include <iterator>
#include <vector>

#include "nn/tokenizer/unicode_classes.h"

namespace tokenizer {

namespace {

struct Decomposition {
  char32_t code, first, second;  // second is 0 for a singleton
};
struct CombiningRange {
  char32_t first, last;
  unsigned char combining_class;
};
struct Composition {
  char32_t first, second, composite;
};

#include "nn/tokenizer/nfc_tables.inc"

// Hangul syllables: a leading consonant L, a vowel V and an optional trailing consonant T, by arithmetic.
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

// A character in the working buffer: a code point, or (code kInvalidByte) a byte that is not UTF-8.
struct Unit {
  char32_t code;
  char byte;
};

int combining_class(char32_t c) {
  if (c < 0x300 || c == kInvalidByte) return 0;
  auto it = std::lower_bound(std::begin(k_combining), std::end(k_combining), c,
                             [](const CombiningRange& r, char32_t x) { return r.last < x; });
  return it != std::end(k_combining) && it->first <= c ? it->combining_class : 0;
}

const Decomposition* decomposition_of(char32_t c) {
  auto it = std::lower_bound(std::begin(k_decompositions), std::end(k_decompositions), c,
                             [](const Decomposition& d, char32_t x) { return d.code < x; });
  return it != std::end(k_decompositions) && it->code == c ? &*it : nullptr;
}

// The primary composite of (first, second), or 0 when they do not compose.
char32_t composite_of(char32_t first, char32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase && second < kVBase + kVCount)
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 && second > kTBase &&
      second < kTBase + kTCount)
    return first + (second - kTBase);
  auto it = std::lower_bound(std::begin(k_compositions), std::end(k_compositions), std::pair{first, second},
                             [](const Composition& c, std::pair<char32_t, char32_t> key) {
                               return std::pair{c.first, c.second} < key;
                             });
  return it != std::end(k_compositions) && it->first == first && it->second == second ? it->composite : 0;
}

void decompose(char32_t c, std::vector<Unit>& out) {
  if (c >= kSBase && c < kSBase + kSCount) {
    const char32_t s = c - kSBase;
    out.push_back({kLBase + s / kNCount, 0});
    out.push_back({kVBase + (s % kNCount) / kTCount, 0});
    if (s % kTCount) out.push_back({kTBase + s % kTCount, 0});
    return;
  }
  if (const Decomposition* d = decomposition_of(c)) {
    decompose(d->first, out);
    if (d->second) decompose(d->second, out);
    return;
  }
  out.push_back({c, 0});
}

// Each run of non-starters sorted by combining class, keeping the order of equal classes.
void order_marks(std::vector<Unit>& units) {
  for (size_t i = 0; i < units.size();) {
    if (combining_class(units[i].code) == 0) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < units.size() && combining_class(units[end].code) != 0) ++end;
    std::stable_sort(units.begin() + ptrdiff_t(i), units.begin() + ptrdiff_t(end),
                     [](const Unit& a, const Unit& b) { return combining_class(a.code) < combining_class(b.code); });
    i = end;
  }
}

// A mark composes with the last starter unless a character between them blocks it: one of class 0, or one
// whose class is the same as the mark's or higher. (A character right after the starter is never blocked.)
void compose(std::vector<Unit>& units) {
  if (units.empty()) return;
  size_t starter = SIZE_MAX, kept = 0;
  int last_class = -1;  // the class of the last character kept after the starter; -1: none yet
  for (size_t i = 0; i < units.size(); ++i) {
    const Unit u = units[i];
    const int cls = combining_class(u.code);
    const bool blocked = last_class != -1 && (last_class == 0 || last_class >= cls);
    if (starter != SIZE_MAX && !blocked && u.code != kInvalidByte) {
      if (const char32_t c = composite_of(units[starter].code, u.code)) {
        units[starter].code = c;
        continue;
      }
    }
    if (cls == 0) starter = kept, last_class = -1;
    else last_class = cls;
    if (cls == 0 && u.code == kInvalidByte) starter = SIZE_MAX;
    units[kept++] = u;
  }
  units.resize(kept);
}

void append_utf8(std::string& out, const Unit& u) {
  const char32_t c = u.code;
  if (c == kInvalidByte) out += u.byte;
  else if (c < 0x80) out += char(c);
  else if (c < 0x800) out += char(0xC0 | (c >> 6)), out += char(0x80 | (c & 0x3F));
  else if (c < 0x10000)
    out += char(0xE0 | (c >> 12)), out += char(0x80 | ((c >> 6) & 0x3F)), out += char(0x80 | (c & 0x3F));
  else
    out += char(0xF0 | (c >> 18)), out += char(0x80 | ((c >> 12) & 0x3F)), out += char(0x80 | ((c >> 6) & 0x3F)),
        out += char(0x80 | (c & 0x3F));
}

// NFC of a piece of text, through a buffer of its characters.
void append_nfc(std::string_view text, std::string& out) {
  std::vector<Unit> units;
  units.reserve(text.size());
  for (size_t at = 0; at < text.size();) {
    const Utf8Char c = next_utf8_char(text, at);
    if (c.code == kInvalidByte) units.push_back({kInvalidByte, text[at]});
    else decompose(c.code, units);
    at += c.length;
  }
  order_marks(units);
  compose(units);
  for (const Unit& u : units) append_utf8(out, u);
}

}  // namespace

std::string nfc(std::string_view text) {
  // ASCII is already NFC (no ASCII character decomposes or combines): most text takes this path.
  if (std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; }))
    return std::string(text);
  // An ASCII character never combines with what comes before it (it is a starter, and the second of no
  // composition), so the text is normalized in pieces cut before one: the buffer stays small on a long text.
  constexpr size_t kPieceBytes = 1 << 16;
  std::string out;
  out.reserve(text.size());
  for (size_t start = 0; start < text.size();) {
    size_t end = std::min(start + kPieceBytes, text.size());
    while (end < text.size() && static_cast<unsigned char>(text[end]) >= 0x80) ++end;
    append_nfc(text.substr(start, end - start), out);
    start = end;
  }
  return out;
}

const char* nfc_unicode_version() { return kNfcUnicodeVersion; }

}  // namespace tokenizer
