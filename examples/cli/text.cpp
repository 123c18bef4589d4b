// text.cpp — UTF-8 and the character vocabulary.
#include "text.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

namespace cli {

namespace {

// Decodes the characters of `s`, calling emit(code point) for each, and returns how many bytes it used.
// With `more` (a chunk of a longer stream) a character cut off at the end is left for the next chunk;
// without it, refused. Offsets in messages count from `base`, the chunk's offset in the whole text.
template <typename Emit>
size_t decode_utf8_into(std::string_view s, uint64_t base, bool more, Emit&& emit) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    int extra = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xE ? 2 : (c >> 3) == 0x1E ? 3 : -1;
    if (extra > 0 && more && i + size_t(extra) >= s.size()) return i;  // the rest comes with the next chunk
    if (extra < 0 || i + size_t(extra) >= s.size())
      throw UsageError(fmt::format("text is not valid UTF-8 (byte {} at offset {})", int(c), base + i));
    char32_t cp = extra == 0 ? c : c & (0x3F >> extra);
    for (int k = 1; k <= extra; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + size_t(k)]);
      if ((cc >> 6) != 0x2) throw UsageError(fmt::format("text is not valid UTF-8 (offset {})", base + i));
      cp = (cp << 6) | (cc & 0x3F);
    }
    // One spelling per character, as Python's decoder demands: no longer form than needed (C0 80 for
    // NUL), no UTF-16 surrogate halves, nothing past U+10FFFF.
    static constexpr char32_t kLeast[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kLeast[extra])
      throw UsageError(fmt::format("text is not valid UTF-8 (an overlong encoding of U+{:04X} at offset {})",
                                   uint32_t(cp), base + i));
    if (cp >= 0xD800 && cp <= 0xDFFF)
      throw UsageError(fmt::format("text is not valid UTF-8 (the surrogate U+{:04X} at offset {})", uint32_t(cp), base + i));
    if (cp > 0x10FFFF)
      throw UsageError(fmt::format("text is not valid UTF-8 (U+{:X} is past U+10FFFF, at offset {})", uint32_t(cp), base + i));
    emit(cp);
    i += size_t(extra) + 1;
  }
  return i;
}

}  // namespace

std::u32string decode_utf8(const std::string& s) {
  std::u32string out;
  decode_utf8_into(s, 0, false, [&](char32_t cp) { out.push_back(cp); });
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

namespace {

// FNV-1a over 64 bits, as the checkpoints' checksum: identifies a text (not a defence against forgery).
struct TextHash {
  uint64_t h = 0xcbf29ce484222325ull;
  void add(std::string_view bytes) {
    for (unsigned char b : bytes) h = (h ^ b) * 0x100000001b3ull;
  }
  // 16 hex digits, without the checkpoints' "fnv1a64:" prefix (which marks their own checksum)
  std::string str() const { return fmt::format("{:016x}", h); }
};

// Characters to ids in one pass: each new character gets the next provisional id, and once the whole
// text is seen the ids are renumbered in the sorted order of the characters (the vocabulary's order).
class Tokenizer {
 public:
  explicit Tokenizer(std::string where) : where_(std::move(where)), provisional_(0x110000, -1) {}

  void reserve(size_t characters) { ids_.reserve(characters); }  // at most one per byte: no regrowth

  // Adds the next bytes of the text; `last` says no more follow.
  void add(std::string_view bytes, bool last) {
    hash_.add(bytes);
    pending_.append(bytes);
    size_t used = 0;
    try {
      used = decode_utf8_into(pending_, offset_, !last, [&](char32_t cp) { ids_.push_back(id_of(cp)); });
    } catch (const UsageError& e) {
      throw UsageError(where_ + ": " + e.what());
    }
    offset_ += used;
    pending_.erase(0, used);
  }

  TokenizedText finish() {
    std::vector<char32_t> sorted = seen_;
    std::sort(sorted.begin(), sorted.end());
    std::vector<uint16_t> renumber(seen_.size());
    for (size_t k = 0; k < sorted.size(); ++k) renumber[size_t(provisional_[sorted[k]])] = uint16_t(k);
    for (uint16_t& id : ids_) id = renumber[id];
    TokenizedText t;
    t.vocab = Vocabulary(std::u32string(sorted.begin(), sorted.end()));
    t.ids = std::move(ids_);
    t.bytes = offset_;
    t.hash = hash_.str();
    return t;
  }

 private:
  uint16_t id_of(char32_t cp) {
    int32_t& id = provisional_[cp];
    if (id < 0) {
      if (int64_t(seen_.size()) == kMaxVocabulary)
        throw UsageError(fmt::format("{}: has more than {} distinct characters (the most a vocabulary holds)", where_,
                                     kMaxVocabulary));
      id = int32_t(seen_.size());
      seen_.push_back(cp);
    }
    return uint16_t(id);
  }

  std::string where_;
  std::vector<int32_t> provisional_;  // code point → provisional id, -1 when not seen yet
  std::vector<char32_t> seen_;        // provisional id → code point
  std::vector<uint16_t> ids_;
  std::string pending_;  // bytes of a character cut off at the end of a chunk
  uint64_t offset_ = 0;  // bytes decoded so far
  TextHash hash_;
};

// An open text: a regular file, or a pipe (`--text <(cat a b)` passes one as /dev/fd/63), whose size is
// known only once it has been read.
struct OpenText {
  int fd = -1;
  bool pipe = false;
  ~OpenText() {
    if (fd >= 0) ::close(fd);
  }
};

// Opens a text for reading: a regular file within the size limit, or a pipe. Refuses a folder, a device or
// a socket. (Opening a named pipe waits, as `cat` does, until something writes to it.)
void open_text_file(const std::string& path, OpenText& text) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw UsageError(fmt::format("cannot read text file {}: {}", path, std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) throw UsageError(fmt::format("cannot read text file {}: it is a folder (pass a file)", path));
  if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode))
    throw UsageError(fmt::format("cannot read text file {}: it is not a regular file or a pipe (a device or socket); "
                                 "pass a file",
                                 path));
  if (uint64_t(st.st_size) > kMaxTextBytes)
    throw UsageError(fmt::format("text file {} has {} bytes, over the limit of {} bytes (1 GiB)", path,
                                 uint64_t(st.st_size), kMaxTextBytes));
  text.pipe = S_ISFIFO(st.st_mode);
  text.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (text.fd < 0) throw UsageError(fmt::format("cannot read text file {}: {}", path, std::strerror(errno)));
}

// Calls take(chunk, last) for the text's bytes, a chunk at a time, stopping past kMaxTextBytes (a pipe that
// sends more, a file that grows while it is read).
template <typename Take>
void read_in_chunks(const std::string& path, Take&& take) {
  OpenText text;
  open_text_file(path, text);
  std::string chunk(size_t(1) << 20, '\0');
  uint64_t total = 0;
  for (;;) {
    const ssize_t got = ::read(text.fd, chunk.data(), chunk.size());
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw UsageError(fmt::format("cannot read text file {}: {}", path, std::strerror(errno)));
    total += uint64_t(got);
    if (total > kMaxTextBytes)
      throw UsageError(text.pipe ? fmt::format("text {} (a pipe) sent more than the limit of {} bytes (1 GiB)", path,
                                               kMaxTextBytes)
                                 : fmt::format("text file {} grew past the limit of {} bytes while being read", path,
                                               kMaxTextBytes));
    take(std::string_view(chunk.data(), size_t(got)), got == 0);
    if (got == 0) return;
  }
}

}  // namespace

TokenizedText tokenize_text(std::string_view text, const std::string& where) {
  Tokenizer tokenizer(where);
  tokenizer.add(text, true);
  return tokenizer.finish();
}

TokenizedText read_tokenized_text(const std::string& path) {
  Tokenizer tokenizer(path);
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (!ec && size <= kMaxTextBytes) tokenizer.reserve(size_t(size));
  read_in_chunks(path, [&](std::string_view chunk, bool last) { tokenizer.add(chunk, last); });
  return tokenizer.finish();
}

bool is_pipe(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
}

std::string read_text_file(const std::string& path) {
  std::string out;
  read_in_chunks(path, [&](std::string_view chunk, bool) { out.append(chunk); });
  return out;
}

}  // namespace cli
