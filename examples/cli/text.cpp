// text.cpp — UTF-8 and the character vocabulary.
#include "text.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

namespace cli {

std::u32string decode_utf8(const std::string& s) {
  std::u32string out;
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    int extra = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xE ? 2 : (c >> 3) == 0x1E ? 3 : -1;
    if (extra < 0 || i + size_t(extra) >= s.size())
      throw UsageError(fmt::format("text is not valid UTF-8 (byte {} at offset {})", int(c), i));
    char32_t cp = extra == 0 ? c : c & (0x3F >> extra);
    for (int k = 1; k <= extra; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + size_t(k)]);
      if ((cc >> 6) != 0x2) throw UsageError(fmt::format("text is not valid UTF-8 (offset {})", i));
      cp = (cp << 6) | (cc & 0x3F);
    }
    // One spelling per character, as Python's decoder demands: no longer form than needed (C0 80 for
    // NUL), no UTF-16 surrogate halves, nothing past U+10FFFF.
    static constexpr char32_t kLeast[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kLeast[extra])
      throw UsageError(fmt::format("text is not valid UTF-8 (an overlong encoding of U+{:04X} at offset {})", uint32_t(cp), i));
    if (cp >= 0xD800 && cp <= 0xDFFF)
      throw UsageError(fmt::format("text is not valid UTF-8 (the surrogate U+{:04X} at offset {})", uint32_t(cp), i));
    if (cp > 0x10FFFF)
      throw UsageError(fmt::format("text is not valid UTF-8 (U+{:X} is past U+10FFFF, at offset {})", uint32_t(cp), i));
    out.push_back(cp);
    i += size_t(extra) + 1;
  }
  return out;
}

std::string encode_utf8(char32_t c) {
  std::string out;
  if (c < 0x80) {
    out += char(c);
  } else if (c < 0x800) {
    out += char(0xC0 | (c >> 6));
    out += char(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += char(0xE0 | (c >> 12));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  } else {
    out += char(0xF0 | (c >> 18));
    out += char(0x80 | ((c >> 12) & 0x3F));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  }
  return out;
}

std::string encode_utf8(const std::u32string& text) {
  std::string out;
  for (char32_t c : text) out += encode_utf8(c);
  return out;
}

std::string printable(char32_t c) {
  if (c == '\n') return "'\\n'";
  if (c == '\t') return "'\\t'";
  if (c < 0x20 || c == 0x7F) return fmt::format("U+{:04X}", uint32_t(c));
  return "'" + encode_utf8(c) + "'";
}

Vocabulary::Vocabulary(const std::u32string& chars) : chars_(chars) {
  for (size_t i = 0; i < chars_.size(); ++i) index_[chars_[i]] = int64_t(i);
}

Vocabulary Vocabulary::from_text(const std::u32string& text) {
  std::set<char32_t> distinct(text.begin(), text.end());
  return Vocabulary(std::u32string(distinct.begin(), distinct.end()));
}

std::vector<int64_t> Vocabulary::encode(const std::u32string& text) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size());
  for (char32_t c : text) {
    auto it = index_.find(c);
    if (it == index_.end())
      throw UsageError(fmt::format("character {} is not in the model's vocabulary of {} characters", printable(c),
                                   chars_.size()));
    ids.push_back(it->second);
  }
  return ids;
}

std::u32string Vocabulary::decode(const std::vector<int64_t>& ids) const {
  std::u32string out;
  for (int64_t i : ids) out.push_back(chars_.at(size_t(i)));
  return out;
}

std::string read_text_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw UsageError(fmt::format("cannot read text file {}: it is a folder (pass a file)", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(fmt::format("cannot read text file {}: {}", path, std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw UsageError(fmt::format("cannot read text file {}", path));
  return ss.str();
}

}  // namespace cli
