// split.cpp — GPT-2's and GPT-4's split patterns as hand-written scanners. Each function below is one
// pattern: at byte offset `at`, it returns where the pattern's leftmost match starts there ends, trying the
// alternatives in the pattern's order (a regex engine picks the first alternative that matches).
#include "nn/tokenizer/split.h"

#include "nn/tokenizer/error.h"
#include "nn/tokenizer/unicode_classes.h"

namespace tokenizer {

namespace {

enum class Class { letter, number, space, other };

struct Char {
  char32_t code;
  size_t length;
  Class kind;
};

// Reads characters of `text`; past its end, a character of no class and no length.
class Scanner {
 public:
  explicit Scanner(std::string_view text) : text_(text) {}
  size_t size() const { return text_.size(); }

  Char at(size_t i) const {
    if (i >= text_.size()) return {0, 0, Class::other};
    const Utf8Char c = next_utf8_char(text_, i);
    return {c.code, c.length, classify(c.code)};
  }

  // The end of the run of characters from `i` that satisfy `keep` (at most `limit` of them).
  template <typename Keep>
  size_t run(size_t i, Keep keep, size_t limit = SIZE_MAX) const {
    for (size_t n = 0; n < limit && i < text_.size(); ++n) {
      const Char c = at(i);
      if (!keep(c)) break;
      i += c.length;
    }
    return i;
  }

  bool ascii_at(size_t i, char lower_case) const {  // the byte at i, any case, is `lower_case`
    return i < text_.size() && (text_[i] | 0x20) == lower_case;
  }
  char byte(size_t i) const { return i < text_.size() ? text_[i] : '\0'; }

 private:
  static Class classify(char32_t code) {
    if (code == kInvalidByte) return Class::other;
    if (is_letter(code)) return Class::letter;
    if (is_number(code)) return Class::number;
    if (is_whitespace(code)) return Class::space;
    return Class::other;
  }
  std::string_view text_;
};

auto of(Class kind) {
  return [kind](const Char& c) { return c.kind == kind; };
}

// \s+(?!\S)|\s+ at a whitespace character: the whole run when the text ends with it or it is one character;
// otherwise all but its last character, which then goes with what follows (" word" keeps its space).
size_t whitespace_run(const Scanner& s, size_t at) {
  size_t end = at, last_start = at, count = 0;
  while (end < s.size()) {
    const Char c = s.at(end);
    if (c.kind != Class::space) break;
    last_start = end;
    end += c.length;
    ++count;
  }
  if (end == s.size() || count == 1) return end;
  return last_start;
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
size_t gpt2_match_end(const Scanner& s, size_t at) {
  if (s.byte(at) == '\'') {
    const char next = s.byte(at + 1);
    if (next == 's' || next == 't' || next == 'm' || next == 'd') return at + 2;
    const char after = s.byte(at + 2);
    if ((next == 'r' && after == 'e') || (next == 'v' && after == 'e') || (next == 'l' && after == 'l')) return at + 3;
  }
  const Char c = s.at(at);
  // ` ?X+` for X = letters, numbers, or anything else but whitespace: an optional space, then a run of one class.
  const size_t start = (c.code == ' ' && s.at(at + 1).kind != Class::space && at + 1 < s.size()) ? at + 1 : at;
  const Class kind = s.at(start).kind;
  if (kind != Class::space) return s.run(start, of(kind));
  return whitespace_run(s, at);
}

bool is_line_break(char32_t c) { return c == '\r' || c == '\n'; }

// '(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+
//
// Llama 3's pattern spells three parts otherwise but matches the same: its `?` and `+` are not possessive,
// yet giving back would not help (the optional character before letters is never a letter, and [\r\n]*
// after punctuation may match nothing); and its `\s*[\r\n]+` backtracks to the run's last line break, the
// end `\s*[\r\n]` reaches too. Qwen's is Llama 3's with one digit a chunk: `max_digits` 1.
size_t gpt4_match_end(const Scanner& s, size_t at, size_t max_digits = 3) {
  if (s.byte(at) == '\'') {
    if (s.ascii_at(at + 1, 's') || s.ascii_at(at + 1, 'd') || s.ascii_at(at + 1, 'm') || s.ascii_at(at + 1, 't'))
      return at + 2;
    if ((s.ascii_at(at + 1, 'l') && s.ascii_at(at + 2, 'l')) || (s.ascii_at(at + 1, 'v') && s.ascii_at(at + 2, 'e')) ||
        (s.ascii_at(at + 1, 'r') && s.ascii_at(at + 2, 'e')))
      return at + 3;
  }
  const Char c = s.at(at);
  // [^\r\n\p{L}\p{N}]?+\p{L}+ : letters, perhaps after one character that is none of those.
  if (c.kind == Class::letter) return s.run(at, of(Class::letter));
  if (c.kind != Class::number && !is_line_break(c.code) && s.at(at + c.length).kind == Class::letter)
    return s.run(at + c.length, of(Class::letter));
  // \p{N}{1,3}
  if (c.kind == Class::number) return s.run(at, of(Class::number), max_digits);
  // ` ?[^\s\p{L}\p{N}]++[\r\n]*`: punctuation and the like, with the line breaks right after it.
  const size_t start = c.code == ' ' ? at + 1 : at;
  if (start < s.size() && s.at(start).kind == Class::other) {
    const size_t end = s.run(start, of(Class::other));
    return s.run(end, [](const Char& x) { return is_line_break(x.code); });
  }
  // \s*[\r\n]: whitespace up to and including its last line break.
  size_t end = at, after_break = 0;
  while (end < s.size()) {
    const Char x = s.at(end);
    if (x.kind != Class::space) break;
    end += x.length;
    if (is_line_break(x.code)) after_break = end;
  }
  if (after_break) return after_break;
  return whitespace_run(s, at);
}

size_t match_end(const Scanner& s, size_t at, SplitPattern pattern) {
  switch (pattern) {
    case SplitPattern::gpt2: return gpt2_match_end(s, at);
    case SplitPattern::qwen2: return gpt4_match_end(s, at, 1);
    default: return gpt4_match_end(s, at);
  }
}

void append_chunks(std::string_view text, SplitPattern pattern, std::vector<std::string_view>& chunks) {
  const Scanner s(text);
  for (size_t at = 0; at < text.size();) {
    const size_t end = match_end(s, at, pattern);
    chunks.push_back(text.substr(at, end - at));
    at = end;
  }
}

// SmolLM2's two steps: each number character is cut out as a chunk of its own (Hugging Face's Digits with
// individual_digits, which tests Rust's char::is_numeric: \p{N}), and GPT-2's pattern splits the text between.
void append_digits_then_gpt2(std::string_view text, std::vector<std::string_view>& chunks) {
  const Scanner s(text);
  size_t start = 0;
  for (size_t at = 0; at < text.size();) {
    const Char c = s.at(at);
    if (c.kind == Class::number) {
      append_chunks(text.substr(start, at - start), SplitPattern::gpt2, chunks);
      chunks.push_back(text.substr(at, c.length));
      start = at + c.length;
    }
    at += c.length;
  }
  append_chunks(text.substr(start), SplitPattern::gpt2, chunks);
}

}  // namespace

std::vector<std::string_view> split_chunks(std::string_view text, SplitPattern pattern) {
  std::vector<std::string_view> chunks;
  if (text.empty()) return chunks;
  if (pattern == SplitPattern::none) return {text};
  if (pattern == SplitPattern::gpt2_digits) append_digits_then_gpt2(text, chunks);
  else append_chunks(text, pattern, chunks);
  return chunks;
}

const char* pattern_name(SplitPattern pattern) {
  switch (pattern) {
    case SplitPattern::none: return "none";
    case SplitPattern::gpt2: return "gpt2";
    case SplitPattern::gpt4: return "gpt4";
    case SplitPattern::llama3: return "llama3";
    case SplitPattern::qwen2: return "qwen2";
    case SplitPattern::gpt2_digits: return "gpt2-digits";
  }
  return "?";
}

SplitPattern pattern_from_name(std::string_view name) {
  if (name == "none") return SplitPattern::none;
  if (name == "gpt2") return SplitPattern::gpt2;
  if (name == "gpt4") return SplitPattern::gpt4;
  if (name == "llama3") return SplitPattern::llama3;
  if (name == "qwen2") return SplitPattern::qwen2;
  if (name == "gpt2-digits") return SplitPattern::gpt2_digits;
  throw TokenizerError("unknown split pattern '" + std::string(name) +
                       "' (expected none, gpt2, gpt4, llama3, qwen2 or gpt2-digits)");
}

}  // namespace tokenizer
