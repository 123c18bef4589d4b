// text.h — turning text into token ids and back: a character vocabulary over Unicode code points,
// sorted, as the workshop's `chars = sorted(set(text))` builds it.
#pragma once
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
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

std::string read_text_file(const std::string& path);  // throws UsageError when missing or unreadable
std::string printable(char32_t c);                      // 'a', '\n', U+00E9 ... for error messages

}  // namespace cli
