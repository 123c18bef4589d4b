// tokenizer.cpp — encoding (split into chunks, merge each chunk by rank), decoding, and the text format.
#include "nn/tokenizer/tokenizer.h"

#include <algorithm>
#include <charconv>
#include <functional>
#include <mutex>
#include <queue>
#include <sstream>

#include "nn/atomic_file.h"
#include "nn/tokenizer/normalize.h"
#include "nn/tokenizer/read_file.h"

namespace tokenizer {

namespace {

uint64_t pair_key(int32_t left, int32_t right) { return (uint64_t(uint32_t(left)) << 32) | uint32_t(right); }

// Appended piece by piece: "\"" + a temporary string draws GCC 12's false -Wrestrict (GCC bug 105329).
std::string quoted(std::string_view bytes) { return std::string("\"").append(escape_bytes(bytes)).append("\""); }

}  // namespace

// Chunks up to this many bytes are remembered (longer ones are rare and seldom repeat), and the cache
// starts afresh when it holds this many, so its memory stays bounded on any input.
constexpr size_t kCachedChunkBytes = 64;
constexpr size_t kCacheEntries = 1 << 17;

struct Tokenizer::ChunkCache {
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::mutex mutex;
  std::unordered_map<std::string, std::vector<int32_t>, Hash, std::equal_to<>> chunks;
};

std::string escape_bytes(std::string_view bytes) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (char ch : bytes) {
    const auto b = static_cast<unsigned char>(ch);
    if (b == '\\' || b == '"') out += '\\', out += ch;
    else if (b == '\n') out += "\\n";
    else if (b == '\t') out += "\\t";
    else if (b >= 0x20 && b < 0x7F) out += ch;
    else out += "\\x", out += hex[b >> 4], out += hex[b & 15];
  }
  return out;
}

Tokenizer::Tokenizer() : Tokenizer([] {
  std::vector<int32_t> ids(256);
  for (int b = 0; b < 256; ++b) ids[b] = b;
  return ids;
}(), {}, {}, SplitPattern::gpt4) {}

Tokenizer::Tokenizer(std::vector<int32_t> byte_ids, std::vector<Merge> merges,
                     std::map<std::string, int32_t> specials, SplitPattern pattern)
    : byte_ids_(std::move(byte_ids)), merges_(std::move(merges)), specials_(std::move(specials)), pattern_(pattern),
      cache_(std::make_shared<ChunkCache>()) {
  std::vector<std::pair<int32_t, std::string>> extra;
  std::vector<std::string> names;
  for (const auto& [text, id] : specials_) {
    if (text.empty()) throw TokenizerError("a special token cannot be empty");
    extra.emplace_back(id, text);
    names.push_back("special token " + quoted(text));
  }
  define_tokens(extra, names, false);
}

Tokenizer::Tokenizer(HuggingFaceRules rules, std::vector<int32_t> byte_ids, std::vector<Merge> merges,
                     SplitPattern pattern)
    : byte_ids_(std::move(byte_ids)), merges_(std::move(merges)), pattern_(pattern),
      cache_(std::make_shared<ChunkCache>()) {
  std::vector<std::pair<int32_t, std::string>> extra;
  std::vector<std::string> names;
  for (const auto& [id, bytes] : rules.vocabulary) {
    extra.emplace_back(id, bytes);
    names.push_back("vocabulary token " + quoted(bytes));
  }
  for (const AddedToken& t : rules.added) {
    if (t.content.empty()) throw TokenizerError("an added token cannot be empty");
    extra.emplace_back(t.id, t.content);
    names.push_back("added token " + quoted(t.content));
    specials_.emplace(t.content, t.id);
  }
  // The vocabulary first: Hugging Face's files may list a merge before the merges that make its parts.
  define_tokens(extra, names, true);
  if (rules.ignore_merges)
    for (const auto& [id, bytes] : rules.vocabulary) whole_tokens_.emplace(bytes, id);
  hugging_face_ = std::make_shared<const HuggingFaceRules>(std::move(rules));
}

// Every id from 0 up is defined once: by a byte, a merge (repeats allowed when they spell the same bytes,
// as in some Hugging Face files) or one of `extra` (a special token; a Hugging Face file's vocabulary and
// added tokens, defined before the merges when `extra_first`, so that a merge may use any of them).
void Tokenizer::define_tokens(const std::vector<std::pair<int32_t, std::string>>& extra,
                              const std::vector<std::string>& extra_names, bool extra_first) {
  if (byte_ids_.size() != 256) throw TokenizerError("a tokenizer needs an id for each of the 256 bytes");
  std::vector<char> defined;
  const auto define = [&](int32_t id, std::string bytes, const std::string& what) {
    if (id < 0 || id > kMaxTokenId) throw TokenizerError(what + ": id " + std::to_string(id) + " is out of range");
    if (size_t(id) >= token_bytes_.size()) token_bytes_.resize(id + 1), defined.resize(id + 1, 0);
    if (defined[id] && token_bytes_[id] != bytes)
      throw TokenizerError(what + ": id " + std::to_string(id) + " already stands for " + quoted(token_bytes_[id]));
    defined[id] = 1;
    token_bytes_[id] = std::move(bytes);
  };
  for (int b = 0; b < 256; ++b) define(byte_ids_[b], std::string(1, char(b)), "byte " + std::to_string(b));
  const auto define_extra = [&] {
    for (size_t k = 0; k < extra.size(); ++k) define(extra[k].first, extra[k].second, extra_names[k]);
  };
  if (extra_first) define_extra();
  for (size_t rank = 0; rank < merges_.size(); ++rank) {
    const Merge& m = merges_[rank];
    const std::string what = "merge " + std::to_string(rank + 1);
    for (int32_t part : {m.left, m.right})
      if (part < 0 || size_t(part) >= defined.size() || !defined[part])
        throw TokenizerError(what + " uses token " + std::to_string(part) + ", which no byte or earlier merge makes");
    // (a Hugging Face vocabulary's token gets its bytes from its spelling: its merges must spell them too)
    define(m.result, token_bytes_[m.left] + token_bytes_[m.right], what);
    rank_of_pair_.emplace(pair_key(m.left, m.right), int32_t(rank));  // a repeated pair keeps its first rank
  }
  if (!extra_first) define_extra();
  for (size_t id = 0; id < defined.size(); ++id)
    if (!defined[id]) throw TokenizerError("token id " + std::to_string(id) + " is neither a byte, a merge nor a special token");
}

const std::string& Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size())
    throw TokenizerError("token id " + std::to_string(id) + " is out of range (vocabulary of " +
                         std::to_string(vocab_size()) + ")");
  return token_bytes_[id];
}

std::optional<int32_t> Tokenizer::token_id(std::string_view content) const {
  const auto it = specials_.find(std::string(content));
  if (it == specials_.end()) return std::nullopt;
  return it->second;
}

bool Tokenizer::is_special(int32_t id) const {
  for (const auto& [text, special_id] : specials_)
    if (special_id == id) return true;
  return false;
}

// BPE on one chunk: start from its bytes and apply the learned merges by rank, lowest first; equal ranks
// (the same pair at several places) merge from left to right. The candidates wait in a queue by (rank,
// position); one that a previous merge has changed is skipped when it comes up.
std::vector<int32_t> Tokenizer::merge_chunk(std::string_view chunk) const {
  if (!whole_tokens_.empty()) {  // ignore_merges: a chunk that is a token is that token, whatever the merges make
    const auto it = whole_tokens_.find(std::string(chunk));
    if (it != whole_tokens_.end()) return {it->second};
  }
  const int n = int(chunk.size());
  std::vector<int32_t> ids(n), next(n), prev(n);
  for (int i = 0; i < n; ++i) {
    ids[i] = byte_ids_[static_cast<unsigned char>(chunk[i])];
    next[i] = i + 1;
    prev[i] = i - 1;
  }
  using Candidate = std::pair<int32_t, int32_t>;  // (rank, position of the pair's left token)
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  const auto consider = [&](int left) {
    if (left < 0 || next[left] >= n) return;
    auto it = rank_of_pair_.find(pair_key(ids[left], ids[next[left]]));
    if (it != rank_of_pair_.end()) queue.emplace(it->second, left);
  };
  for (int i = 0; i + 1 < n; ++i) consider(i);
  while (!queue.empty()) {
    const auto [rank, p] = queue.top();
    queue.pop();
    const Merge& m = merges_[rank];
    const int q = next[p];
    if (ids[p] != m.left || q >= n || ids[q] != m.right) continue;  // changed since it was queued
    ids[p] = m.result;
    ids[q] = -1;
    next[p] = next[q];
    if (next[q] < n) prev[next[q]] = p;
    consider(prev[p]);
    consider(p);
  }
  std::vector<int32_t> out;
  for (int i = 0; i < n; i = next[i]) out.push_back(ids[i]);
  return out;
}

void Tokenizer::encode_chunks(std::string_view text, std::vector<int32_t>& out) const {
  for (std::string_view chunk : split_chunks(text, pattern_)) {
    if (chunk.size() > kCachedChunkBytes) {
      const std::vector<int32_t> ids = merge_chunk(chunk);
      out.insert(out.end(), ids.begin(), ids.end());
      continue;
    }
    {
      std::lock_guard lock(cache_->mutex);
      auto it = cache_->chunks.find(chunk);
      if (it != cache_->chunks.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        continue;
      }
    }
    std::vector<int32_t> ids = merge_chunk(chunk);
    out.insert(out.end(), ids.begin(), ids.end());
    std::lock_guard lock(cache_->mutex);
    if (cache_->chunks.size() >= kCacheEntries) cache_->chunks.clear();
    cache_->chunks.emplace(std::string(chunk), std::move(ids));
  }
}

std::vector<int32_t> Tokenizer::encode_ordinary(std::string_view text) const {
  std::vector<int32_t> out;
  if (hugging_face_ && hugging_face_->nfc) encode_chunks(nfc(text), out);
  else encode_chunks(text, out);
  return out;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  if (hugging_face_) {
    encode_hugging_face(text, out);
    return out;
  }
  while (!text.empty()) {
    // The earliest special token in the text (the longest one where two start at the same place).
    size_t at = std::string_view::npos;
    const std::pair<const std::string, int32_t>* found = nullptr;
    for (const auto& special : specials_) {
      const size_t where = text.find(special.first);
      if (where < at || (where == at && where != std::string_view::npos && special.first.size() > found->first.size()))
        at = where, found = &special;
    }
    encode_chunks(text.substr(0, at), out);
    if (!found) break;
    out.push_back(found->second);
    text.remove_prefix(at + found->first.size());
  }
  return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) out += token_bytes(id);
  return out;
}

// ---- the text format ----

std::string Tokenizer::to_text() const {
  if (hugging_face_)
    throw TokenizerError("a Hugging Face tokenizer.json's tokenizer has no scratchgrad-bpe text form; it is kept as its file");
  for (int b = 0; b < 256; ++b)
    if (byte_ids_[b] != b)
      throw TokenizerError("only a tokenizer whose ids 0-255 are the bytes 0-255 (one that `train` made) has the "
                           "scratchgrad-bpe text form; GPT-2's is kept as its own files");
  for (size_t k = 0; k < merges_.size(); ++k)
    if (merges_[k].result != int32_t(256 + k))
      throw TokenizerError("only a tokenizer whose merge k makes id 256+k has the scratchgrad-bpe text form");
  std::ostringstream out;
  out << "scratchgrad-bpe 1\n"
      << "# A byte-level BPE tokenizer (docs/tokenizer.md). Ids 0-255 are the bytes; merge k (from 0) makes id\n"
      << "# 256+k from two earlier tokens, and encoding applies the merges in this order. Text after # is a comment.\n"
      << "pattern " << pattern_name(pattern_) << "\n"
      << "merges " << merges_.size() << "\n"
      << "specials " << specials_.size() << "\n";
  for (const Merge& m : merges_)
    out << "merge " << m.left << ' ' << m.right << "  # " << m.result << " = " << quoted(token_bytes_[m.left]) << " + "
        << quoted(token_bytes_[m.right]) << "\n";
  std::vector<std::pair<int32_t, std::string>> by_id;
  for (const auto& [text, id] : specials_) by_id.emplace_back(id, text);
  std::sort(by_id.begin(), by_id.end());
  for (const auto& [id, text] : by_id) out << "special " << id << ' ' << quoted(text) << "\n";
  return out.str();
}

namespace {

// Reads the format's lines, with the file name and line number for every error.
class LineReader {
 public:
  LineReader(std::string_view text, std::string source) : text_(text), source_(std::move(source)) {}

  // The next line that is not blank or a comment, without its comment; false at the end.
  bool next(std::string& line) {
    while (at_ < text_.size()) {
      const size_t end = std::min(text_.find('\n', at_), text_.size());
      std::string_view raw = text_.substr(at_, end - at_);
      at_ = end + 1;
      ++number_;
      if (const size_t hash = raw.find('#'); hash != std::string_view::npos && raw.substr(0, 7) != "special")
        raw = raw.substr(0, hash);
      while (!raw.empty() && (raw.back() == ' ' || raw.back() == '\r' || raw.back() == '\t')) raw.remove_suffix(1);
      if (raw.empty()) continue;
      line = std::string(raw);
      return true;
    }
    return false;
  }

  // The message quotes the file's line, which may hold any byte: control characters (a '\r' would break
  // the one-line message) are written as \xNN.
  [[noreturn]] void fail(const std::string& why) const {
    std::string message = source_ + ":" + std::to_string(number_) + ": ";
    for (unsigned char c : why) {
      if (c < 0x20 || c == 0x7f) {
        static const char hex[] = "0123456789abcdef";
        message += {'\\', 'x', hex[c >> 4], hex[c & 15]};
      } else {
        message += char(c);
      }
    }
    throw TokenizerError(message);
  }

  // The line `<keyword> <fields...>`: the fields after the keyword, or an error.
  std::vector<std::string> fields(const std::string& line, const std::string& keyword, size_t count) const {
    std::istringstream in(line);
    std::string word;
    in >> word;
    if (word != keyword) fail("expected '" + keyword + " ...', found '" + line + "'");
    std::vector<std::string> out;
    while (out.size() < count && in >> word) out.push_back(word);
    std::string extra;
    if (out.size() != count || (in >> extra)) fail("expected '" + keyword + "' and " + std::to_string(count) + " fields: '" + line + "'");
    return out;
  }

  int64_t number(const std::string& field, int64_t low, int64_t high) const {
    int64_t value = 0;
    const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
    if (ec != std::errc() || end != field.data() + field.size() || value < low || value > high)
      fail("'" + field + "' is not a number from " + std::to_string(low) + " to " + std::to_string(high));
    return value;
  }

  std::string unquote(std::string_view s) const {
    if (s.size() < 2 || s.front() != '"' || s.back() != '"') fail("expected a quoted string, found '" + std::string(s) + "'");
    s = s.substr(1, s.size() - 2);
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] != '\\') {
        out += s[i];
        continue;
      }
      if (++i == s.size()) fail("a string ends in a lone backslash");
      switch (s[i]) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case '\\': out += '\\'; break;
        case '"': out += '"'; break;
        case 'x': {
          int value = 0;
          if (i + 2 >= s.size()) fail("\\x needs two hex digits");
          const auto [end, ec] = std::from_chars(s.data() + i + 1, s.data() + std::min(s.size(), i + 3), value, 16);
          if (ec != std::errc() || end != s.data() + i + 3) fail("\\x needs two hex digits");
          out += char(value);
          i += 2;
          break;
        }
        default: fail(std::string("unknown escape \\") + s[i]);
      }
    }
    return out;
  }

 private:
  std::string_view text_;
  std::string source_;
  size_t at_ = 0;
  int number_ = 0;
};

}  // namespace

Tokenizer Tokenizer::from_text(std::string_view text, const std::string& source_name) {
  LineReader in(text, source_name);
  std::string line;
  if (!in.next(line) || line != "scratchgrad-bpe 1")
    in.fail("not a scratchgrad BPE tokenizer (its first line must be 'scratchgrad-bpe 1')");
  SplitPattern pattern = SplitPattern::gpt4;
  int64_t merge_count = 0, special_count = 0;
  if (!in.next(line)) in.fail("ends before its 'pattern' line");
  try {
    pattern = pattern_from_name(in.fields(line, "pattern", 1)[0]);
  } catch (const TokenizerError& e) {
    in.fail(e.what());
  }
  if (!in.next(line)) in.fail("ends before its 'merges' line");
  merge_count = in.number(in.fields(line, "merges", 1)[0], 0, 10'000'000);
  if (!in.next(line)) in.fail("ends before its 'specials' line");
  special_count = in.number(in.fields(line, "specials", 1)[0], 0, 100'000);

  std::vector<Merge> merges;
  for (int64_t k = 0; k < merge_count; ++k) {
    if (!in.next(line)) in.fail("truncated: " + std::to_string(k) + " merges of the " + std::to_string(merge_count) + " announced");
    const auto f = in.fields(line, "merge", 2);
    const int32_t id = int32_t(256 + k);
    const int32_t left = int32_t(in.number(f[0], 0, id - 1)), right = int32_t(in.number(f[1], 0, id - 1));
    merges.push_back({left, right, id});
  }
  std::map<std::string, int32_t> specials;
  for (int64_t k = 0; k < special_count; ++k) {
    if (!in.next(line)) in.fail("truncated: " + std::to_string(k) + " special tokens of the " + std::to_string(special_count) + " announced");
    const size_t space = line.find(' ', 8);
    if (line.rfind("special ", 0) != 0 || space == std::string::npos) in.fail("expected 'special <id> \"<text>\"': '" + line + "'");
    const int32_t id = int32_t(in.number(line.substr(8, space - 8), 256 + merge_count, 256 + merge_count + special_count - 1));
    if (!specials.emplace(in.unquote(line.substr(space + 1)), id).second) in.fail("special token repeated: " + line);
  }
  if (in.next(line)) in.fail("unexpected line after the last special token: '" + line + "'");
  std::vector<int32_t> byte_ids(256);
  for (int b = 0; b < 256; ++b) byte_ids[b] = b;
  try {
    return Tokenizer(std::move(byte_ids), std::move(merges), std::move(specials), pattern);
  } catch (const TokenizerError& e) {
    throw TokenizerError(source_name + ": " + e.what());
  }
}

// Written whole or not at all (nn/atomic_file.h): a save that fails half way (a full disk, a file-size
// limit) keeps the previous file as it was.
void Tokenizer::save(const std::string& path) const {
  const std::string text = to_text();
  try {
    nn::write_file_atomically(path, text);
  } catch (const nn::FileWriteError& e) {
    throw TokenizerError(std::string("cannot save the tokenizer: ") + e.what());
  }
}

std::string Tokenizer::fingerprint() const {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64, as a run's text is identified
  const auto add = [&](std::string_view bytes) {
    for (unsigned char b : bytes) h = (h ^ b) * 0x100000001b3ull;
  };
  const auto add_number = [&](int64_t n) { add(std::to_string(n) + ","); };
  add(pattern_name(pattern_));
  for (int32_t id : byte_ids_) add_number(id);
  for (const Merge& m : merges_) add_number(m.left), add_number(m.right), add_number(m.result);
  for (const auto& [text, id] : specials_) add_number(int64_t(text.size())), add(text), add_number(id);
  if (const HuggingFaceRules* hf = hugging_face_.get()) {  // (a tokenizer of ours or GPT-2's keeps its old fingerprint)
    add("hugging-face");
    for (const AddedToken& t : hf->added)
      add_number(t.id), add_number(t.special), add_number(t.lstrip), add_number(t.rstrip), add_number(t.single_word),
          add_number(t.normalized);
    for (const auto& [id, bytes] : hf->vocabulary) add_number(id), add_number(int64_t(bytes.size())), add(bytes);
    add_number(hf->ignore_merges), add_number(hf->nfc);
    for (int32_t id : hf->post_prefix) add_number(id);
    add("|");
    for (int32_t id : hf->post_suffix) add_number(id);
  }
  static const char* hex = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, h >>= 4) out[size_t(i)] = hex[h & 15];
  return out;
}

Tokenizer Tokenizer::load(const std::string& path) {
  return naming_memory("the tokenizer from " + path, [&] { return from_text(read_file(path, "the tokenizer file"), path); });
}

}  // namespace tokenizer
