// normalize.h — Unicode's NFC normalization (canonical decomposition, canonical ordering, canonical
// composition), which Qwen's tokenizer.json applies to a text before splitting it. "e" + U+0301 (a combining
// acute accent) and the one character "é" then encode alike.
//
// The tables (nfc_tables.inc) are generated from Python's unicodedata by make_nfc_tables.py; Hangul syllables
// are decomposed and composed by arithmetic. Bytes that are not valid UTF-8 pass through unchanged, each one a
// character of its own that never combines.
#pragma once
#include <string>
#include <string_view>

namespace tokenizer {

std::string nfc(std::string_view text);
const char* nfc_unicode_version();  // of the tables, e.g. "14.0.0"

}  // namespace tokenizer
