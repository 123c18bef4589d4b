// text.h — turning text into token ids and back: a character vocabulary over Unicode code points,
// sorted, as the workshop's `chars = sorted(set(text))` builds it.
#pragma once
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace cli {

// Bad input from the user (a missing file, a flag out of range, ...): one line, exit status 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::u32string decode_utf8(const std::string& text);  // throws UsageError on invalid UTF-8
std::string encode_utf8(const std::u32string& text);
std::string encode_utf8(char32_t c);

class Vocabulary {
 public:
  explicit Vocabulary(const std::u32string& chars);  // the distinct, sorted characters
  static Vocabulary from_text(const std::u32string& text);
  int64_t size() const { return int64_t(chars_.size()); }
  std::vector<int64_t> encode(const std::u32string& text) const;  // throws UsageError on unknown characters
  std::u32string decode(const std::vector<int64_t>& ids) const;
  const std::u32string& chars() const { return chars_; }

 private:
  std::u32string chars_;
  std::map<char32_t, int64_t> index_;
};

// The largest text `train --text` reads. Its characters are kept as one 2-byte id each, so a text of this
// size needs about twice its size in memory (ASCII), and a vocabulary of at most kMaxVocabulary characters.
inline constexpr uint64_t kMaxTextBytes = uint64_t(1) << 30;  // 1 GiB
inline constexpr int64_t kMaxVocabulary = 65536;

// A text in token form: its vocabulary and one small integer per character, and what identifies it
// (recorded in a run's checkpoint, so that a resume can tell another text from the same one).
struct TokenizedText {
  Vocabulary vocab{std::u32string()};
  std::vector<uint16_t> ids;  // index into vocab.chars()
  uint64_t bytes = 0;         // the UTF-8 size
  std::string hash;           // FNV-1a 64 of the bytes, 16 hex digits
};

// Reads a text file, or a pipe (`--text <(cat a b)`), in chunks (never whole), decoding and tokenizing as it
// goes. Refuses, with a UsageError naming the file: a folder, a device or socket, more than kMaxTextBytes
// (a pipe's bytes are counted as they come), invalid UTF-8 (with the offset), more than kMaxVocabulary
// distinct characters.
TokenizedText read_tokenized_text(const std::string& path);
// The same for text in memory; `where` names it in messages.
TokenizedText tokenize_text(std::string_view text, const std::string& where);

// Reads a whole text file, with the same refusals as read_tokenized_text (but no vocabulary limit).
std::string read_text_file(const std::string& path);
// Whether `path` is a pipe: its text can be read once, so a run records it as a text to pass again.
bool is_pipe(const std::string& path);
std::string printable(char32_t c);                      // 'a', '\n', U+00E9 ... for error messages

}  // namespace cli
