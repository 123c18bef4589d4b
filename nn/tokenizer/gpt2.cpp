// gpt2.cpp — GPT-2's tokenizer from the files OpenAI (encoder.json + vocab.bpe) and Hugging Face
// (tokenizer.json) publish.
//
// Those files write tokens not as bytes but as printable characters: GPT-2's byte-to-unicode table maps each
// of the 256 bytes to one character, the printable ones (! to ~, ¡ to ¬, ® to ÿ) to themselves and the other
// 68 (control characters, space, ...) to U+0100 and up, in order. So the space byte is "Ġ" (U+0120) and the
// token " the" is written "Ġthe". Reading a file means mapping its characters back to bytes.
#include <algorithm>
#include <climits>
#include <filesystem>
#include <optional>
#include <unordered_map>

#include "nn/tokenizer/gpt2_files.h"
#include "nn/tokenizer/json_file.h"
#include "nn/tokenizer/read_file.h"
#include "nn/tokenizer/tokenizer.h"
#include "nn/tokenizer/unicode_classes.h"

namespace tokenizer {

namespace {

std::string utf8(char32_t c) {
  std::string s;
  if (c < 0x80) s += char(c);
  else if (c < 0x800) s += char(0xC0 | (c >> 6)), s += char(0x80 | (c & 0x3F));
  else s += char(0xE0 | (c >> 12)), s += char(0x80 | ((c >> 6) & 0x3F)), s += char(0x80 | (c & 0x3F));
  return s;
}

// Bytes (a token's, or a line of vocab.bpe, which need not be UTF-8) quoted for a message: escaped, and at
// most 40 of them (a crafted file's token may be megabytes long).
std::string shown(std::string_view bytes) {
  return "\"" + escape_bytes(bytes.substr(0, 40)) + (bytes.size() > 40 ? "...\"" : "\"");
}

// The tokenizer from a vocabulary (the files' spelling -> id) and the merges in rank order (pairs of spellings).
// Ids that are neither a byte nor made by a merge are special tokens (GPT-2 has one: <|endoftext|>).
Tokenizer assemble(const std::unordered_map<std::string, int32_t>& vocab,
                   const std::vector<std::pair<std::string, std::string>>& merge_pairs, const std::string& vocab_name,
                   const std::string& merges_name) {
  const auto mismatch = [&](const std::string& why) {
    return TokenizerError(vocab_name + " and " + merges_name + " do not belong together: " + why);
  };
  std::vector<int32_t> byte_ids(256);
  std::vector<char> used(vocab.size(), 0);
  const auto id_of = [&](const std::string& written) -> int32_t {
    auto it = vocab.find(written);
    return it == vocab.end() ? -1 : it->second;
  };
  for (const auto& [written, id] : vocab)
    if (id < 0 || size_t(id) >= vocab.size())
      throw TokenizerError(vocab_name + ": token " + quoted_for_message(written) + " has id " + std::to_string(id) + ", outside 0.." +
                           std::to_string(vocab.size() - 1) + " (ids must number the tokens from 0)");
  for (int b = 0; b < 256; ++b) {
    byte_ids[b] = id_of(gpt2_byte_to_unicode()[b]);
    if (byte_ids[b] < 0)
      throw TokenizerError(vocab_name + ": no token for byte " + std::to_string(b) + " (" + gpt2_byte_to_unicode()[b] +
                           "): not a byte-level BPE vocabulary");
    used[byte_ids[b]] = 1;
  }
  std::vector<Merge> merges;
  merges.reserve(merge_pairs.size());
  for (size_t k = 0; k < merge_pairs.size(); ++k) {
    const auto& [left, right] = merge_pairs[k];
    const int32_t l = id_of(left), r = id_of(right), n = id_of(left + right);
    const std::string where = merges_name + "'s merge " + std::to_string(k + 1) + " (" + quoted_for_message(left) + " " +
                              quoted_for_message(right) + ")";
    if (l < 0 || r < 0) throw mismatch(where + " joins a token " + vocab_name + " does not have");
    if (n < 0) throw mismatch(where + " makes " + quoted_for_message(left + right) + ", which " + vocab_name + " does not have");
    merges.push_back({l, r, n});
    used[n] = 1;
  }
  std::map<std::string, int32_t> specials;
  std::string bytes;
  for (const auto& [written, id] : vocab) {
    if (used[id]) continue;
    // A special token's text is its spelling in the file (GPT-2's <|endoftext|> is ASCII, the same either way).
    specials.emplace(written, id);
  }
  std::optional<Tokenizer> built;
  try {
    built.emplace(std::move(byte_ids), std::move(merges), std::move(specials), SplitPattern::gpt2);
  } catch (const TokenizerError& e) {
    throw mismatch(e.what());
  }
  // Every token's spelling must be the bytes its merges make.
  for (const auto& [written, id] : vocab) {
    if (!used[id]) continue;
    if (!byte_level_bytes(written, bytes) || bytes != built->token_bytes(id))
      throw mismatch("token " + std::to_string(id) + " is spelt " + quoted_for_message(written) + " in " + vocab_name +
                     " but the merges make " + shown(built->token_bytes(id)));
  }
  return std::move(*built);
}

// The largest id a tokenizer file may give: ids are int32.
constexpr int64_t kMaxId = INT32_MAX;

// A vocabulary: a JSON object of token (as the file spells it) -> id.
std::unordered_map<std::string, int32_t> vocabulary(const JsonField& object) {
  std::unordered_map<std::string, int32_t> vocab;
  object.each_member([&](const std::string& written, const JsonField& id) {
    vocab.emplace(written, int32_t(id.integer(0, kMaxId)));
  });
  std::vector<char> seen(vocab.size(), 0);
  for (const auto& [written, id] : vocab)
    if (size_t(id) < vocab.size() && seen[id]++) object.fail("gives id " + std::to_string(id) + " to two tokens");
  return vocab;
}

// "Ġ t" as its two tokens; false unless it is two non-empty tokens separated by one space.
bool split_merge(std::string_view line, std::pair<std::string, std::string>& merge) {
  const size_t space = line.find(' ');
  if (space == std::string_view::npos || space == 0 || space + 1 == line.size() ||
      line.find(' ', space + 1) != std::string_view::npos)
    return false;
  merge = {std::string(line.substr(0, space)), std::string(line.substr(space + 1))};
  return true;
}

// GPT-2's special tokens are spelt as OpenAI spells them all: <|endoftext|>, <|im_start|>, ...
bool spelt_as_special(std::string_view token) {
  return token.size() > 4 && token.starts_with("<|") && token.ends_with("|>");
}

// OpenAI's files: every token of encoder.json is a byte, the result of one merge of vocab.bpe, or a special
// token. Counting them catches a vocab.bpe emptied or cut short, whose missing merges would otherwise leave
// their tokens to be taken for special tokens: another tokenizer, silently.
void check_token_counts(const Tokenizer& t, size_t tokens, size_t merges, const std::string& encoder_json,
                        const std::string& vocab_bpe) {
  size_t specials = 0;
  for (const auto& [text, id] : t.specials()) specials += spelt_as_special(text);
  if (tokens == 256 + merges + specials) return;
  const std::string counted = std::to_string(merges) + " merges and " + std::to_string(specials) +
                              (specials == 1 ? " special token" : " special tokens") + " (<|...|>) make " +
                              std::to_string(256 + merges + specials);
  throw TokenizerError(encoder_json + " and " + vocab_bpe + " do not belong together: " + encoder_json + " has " +
                       std::to_string(tokens) + " tokens, but the 256 bytes, " + counted +
                       " (a vocab.bpe cut short, or another model's?)");
}

// pre_tokenizer {"type": "ByteLevel", ...}, or a "Sequence" of pre-tokenizers one of which is.
bool is_byte_level(const JsonField& pre) {
  if (pre.is_null()) return false;
  const std::string type = pre["type"].string();
  if (type == "ByteLevel") return true;
  if (type != "Sequence") return false;
  bool found = false;
  pre["pretokenizers"].each_element([&](const JsonField& p) { found = found || is_byte_level(p); });
  return found;
}

}  // namespace

bool byte_level_bytes(std::string_view written, std::string& bytes) {
  static const std::unordered_map<char32_t, unsigned char> byte_of = [] {
    std::unordered_map<char32_t, unsigned char> m;
    const auto& table = gpt2_byte_to_unicode();
    for (int b = 0; b < 256; ++b) m[next_utf8_char(table[b], 0).code] = static_cast<unsigned char>(b);
    return m;
  }();
  bytes.clear();
  for (size_t at = 0; at < written.size();) {
    const Utf8Char c = next_utf8_char(written, at);
    auto it = byte_of.find(c.code);
    if (it == byte_of.end()) return false;
    bytes += char(it->second);
    at += c.length;
  }
  return true;
}

std::pair<std::string, std::string> hugging_face_merge(const JsonField& m) {
  std::pair<std::string, std::string> merge;
  if (m.is_string()) {
    if (!split_merge(m.string(), merge)) m.fail("is not two tokens separated by one space");
    return merge;
  }
  if (!m.is_array()) m.fail("is " + m.described() + ", expected \"a b\" or [\"a\", \"b\"]");
  std::vector<std::string> parts;
  m.each_element([&](const JsonField& part) { parts.push_back(part.string()); });
  if (parts.size() != 2) m.fail("has " + std::to_string(parts.size()) + " tokens, expected 2");
  return {parts[0], parts[1]};
}

const std::vector<std::string>& gpt2_byte_to_unicode() {
  static const std::vector<std::string> table = [] {
    std::vector<std::string> t(256);
    char32_t next_free = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[b] = utf8(printable ? char32_t(b) : next_free++);
    }
    return t;
  }();
  return table;
}

Tokenizer load_gpt2_tokenizer(const std::string& encoder_json, const std::string& vocab_bpe) {
  return naming_memory("GPT-2's tokenizer from " + encoder_json + " and " + vocab_bpe, [&] {
    const auto vocab = vocabulary(JsonFile(encoder_json, "GPT-2's encoder.json").root());
    const std::string bpe = read_file(vocab_bpe, "GPT-2's vocab.bpe");
    std::vector<std::pair<std::string, std::string>> merges;
    size_t at = 0;
    for (int line_number = 1; at < bpe.size(); ++line_number) {
      const size_t end = std::min(bpe.find('\n', at), bpe.size());
      std::string_view line(bpe.data() + at, end - at);
      at = end + 1;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.empty() || (line_number == 1 && line.rfind("#version", 0) == 0)) continue;
      if (!split_merge(line, merges.emplace_back()))
        throw TokenizerError(vocab_bpe + ":" + std::to_string(line_number) +
                             ": expected two tokens separated by one space, found " + shown(line));
    }
    Tokenizer t = assemble(vocab, merges, encoder_json, vocab_bpe);
    check_token_counts(t, vocab.size(), merges.size(), encoder_json, vocab_bpe);
    return t;
  });
}

Tokenizer load_hugging_face_tokenizer(const std::string& tokenizer_json) {
  return naming_memory("the tokenizer from " + tokenizer_json, [&] {
    const JsonFile file(tokenizer_json, "the tokenizer.json");
    const JsonField root = file.root(), model = root["model"];
    if (model["type"].string() != "BPE") model["type"].fail("is not \"BPE\": only BPE tokenizers are read");
    // Only byte-level BPE (GPT-2's kind) reads as bytes; a pre-tokenizer of type ByteLevel says so.
    const std::optional<JsonField> pre = root.find("pre_tokenizer");
    if (!pre || !is_byte_level(*pre))
      throw TokenizerError(tokenizer_json + ": not a byte-level BPE like GPT-2's (its pre_tokenizer is not ByteLevel)");
    auto vocab = vocabulary(model["vocab"]);
    std::vector<std::pair<std::string, std::string>> merges;
    model["merges"].each_element([&](const JsonField& m) { merges.push_back(hugging_face_merge(m)); });
    // Added tokens (<|endoftext|>) are usually in the vocabulary already; add those that are not.
    if (const std::optional<JsonField> added = root.find("added_tokens"); added && !added->is_null())
      added->each_element([&](const JsonField& t) { vocab.emplace(t["content"].string(), int32_t(t["id"].integer(0, kMaxId))); });
    return assemble(vocab, merges, tokenizer_json + " (vocab)", tokenizer_json + " (merges)");
  });
}

Tokenizer load_gpt2_tokenizer(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto exists = [&](const fs::path& p) { return fs::exists(p, ec); };
  if (fs::is_directory(path, ec)) {
    const fs::path dir(path);
    if (exists(dir / "encoder.json") && exists(dir / "vocab.bpe"))
      return load_gpt2_tokenizer((dir / "encoder.json").string(), (dir / "vocab.bpe").string());
    if (exists(dir / "tokenizer.json")) return load_hugging_face_tokenizer((dir / "tokenizer.json").string());
    throw TokenizerError("'" + path + "' holds neither encoder.json with vocab.bpe nor tokenizer.json");
  }
  if (!exists(path)) throw TokenizerError("no GPT-2 tokenizer at '" + path + "' (give the folder of encoder.json "
                                          "and vocab.bpe, or a tokenizer.json)");
  return load_hugging_face_tokenizer(path);
}

}  // namespace tokenizer
