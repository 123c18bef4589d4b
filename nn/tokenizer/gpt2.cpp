// gpt2.cpp — GPT-2's tokenizer from the files OpenAI (encoder.json + vocab.bpe) and Hugging Face
// (tokenizer.json) publish.
//
// Those files write tokens not as bytes but as printable characters: GPT-2's byte-to-unicode table maps each
// of the 256 bytes to one character, the printable ones (! to ~, ¡ to ¬, ® to ÿ) to themselves and the other
// 68 (control characters, space, ...) to U+0100 and up, in order. So the space byte is "Ġ" (U+0120) and the
// token " the" is written "Ġthe". Reading a file means mapping its characters back to bytes.
#include <filesystem>
#include <optional>
#include <unordered_map>

#include <nlohmann/json.hpp>

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

// The file's spelling of a token back to its bytes; false if a character is not in the table.
bool to_bytes(std::string_view written, std::string& bytes) {
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

std::string shown(std::string_view s) { return "\"" + escape_bytes(s) + "\""; }

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
      throw TokenizerError(vocab_name + ": token " + shown(written) + " has id " + std::to_string(id) + ", outside 0.." +
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
    const std::string where = merges_name + "'s merge " + std::to_string(k + 1) + " (" + left + " " + right + ")";
    if (l < 0 || r < 0) throw mismatch(where + " joins a token " + vocab_name + " does not have");
    if (n < 0) throw mismatch(where + " makes " + shown(left + right) + ", which " + vocab_name + " does not have");
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
    if (!to_bytes(written, bytes) || bytes != built->token_bytes(id))
      throw mismatch("token " + std::to_string(id) + " is spelt " + shown(written) + " in " + vocab_name +
                     " but the merges make " + shown(built->token_bytes(id)));
  }
  return std::move(*built);
}

nlohmann::json parse_json(const std::string& path, const char* what) {
  const std::string text = read_file(path, what);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw TokenizerError(path + ": not valid JSON (" + e.what() + ")");
  }
}

std::unordered_map<std::string, int32_t> vocabulary(const nlohmann::json& object, const std::string& name) {
  if (!object.is_object()) throw TokenizerError(name + ": the vocabulary must be a JSON object of token -> id");
  std::unordered_map<std::string, int32_t> vocab;
  for (const auto& [written, id] : object.items()) {
    if (!id.is_number_integer()) throw TokenizerError(name + ": the id of token " + shown(written) + " is not an integer");
    vocab.emplace(written, id.get<int32_t>());
  }
  std::vector<char> seen(vocab.size(), 0);
  for (const auto& [written, id] : vocab) {
    if (id >= 0 && size_t(id) < vocab.size() && seen[id]++)
      throw TokenizerError(name + ": id " + std::to_string(id) + " is given to two tokens");
  }
  return vocab;
}

}  // namespace

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
  const auto vocab = vocabulary(parse_json(encoder_json, "GPT-2's encoder.json"), encoder_json);
  const std::string bpe = read_file(vocab_bpe, "GPT-2's vocab.bpe");
  std::vector<std::pair<std::string, std::string>> merges;
  size_t at = 0;
  for (int line_number = 1; at < bpe.size(); ++line_number) {
    const size_t end = std::min(bpe.find('\n', at), bpe.size());
    std::string_view line(bpe.data() + at, end - at);
    at = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || (line_number == 1 && line.rfind("#version", 0) == 0)) continue;
    const size_t space = line.find(' ');
    if (space == std::string_view::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos)
      throw TokenizerError(vocab_bpe + ":" + std::to_string(line_number) + ": expected two tokens separated by one space, found " +
                           shown(line));
    merges.emplace_back(std::string(line.substr(0, space)), std::string(line.substr(space + 1)));
  }
  return assemble(vocab, merges, encoder_json, vocab_bpe);
}

Tokenizer load_hugging_face_tokenizer(const std::string& tokenizer_json) {
  const nlohmann::json root = parse_json(tokenizer_json, "the tokenizer.json");
  const auto fail = [&](const std::string& why) { return TokenizerError(tokenizer_json + ": " + why); };
  if (!root.is_object() || !root.contains("model") || !root["model"].is_object())
    throw fail("no \"model\": not a Hugging Face tokenizer.json");
  const nlohmann::json& model = root["model"];
  if (model.value("type", "") != "BPE") throw fail("the model is not \"BPE\"");
  // Only byte-level BPE (GPT-2's kind) reads as bytes; a pre-tokenizer of type ByteLevel says so.
  const std::string pre = root.contains("pre_tokenizer") ? root["pre_tokenizer"].dump() : "";
  if (pre.find("\"ByteLevel\"") == std::string::npos)
    throw fail("not a byte-level BPE like GPT-2's (its pre_tokenizer is not ByteLevel)");
  auto vocab = vocabulary(model.value("vocab", nlohmann::json()), tokenizer_json);
  std::vector<std::pair<std::string, std::string>> merges;
  if (!model.contains("merges") || !model["merges"].is_array()) throw fail("\"model\" has no \"merges\" list");
  for (const auto& m : model["merges"]) {
    if (m.is_string()) {  // "Ġ t"
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || space == 0 || space + 1 == s.size() || s.find(' ', space + 1) != std::string::npos)
        throw fail("merge " + shown(s) + " is not two tokens separated by one space");
      merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {  // ["Ġ", "t"]
      merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      throw fail("merge " + m.dump() + " is neither \"a b\" nor [\"a\", \"b\"]");
    }
  }
  // Added tokens (<|endoftext|>) are usually in the vocabulary already; add those that are not.
  if (root.contains("added_tokens") && root["added_tokens"].is_array())
    for (const auto& t : root["added_tokens"])
      if (t.is_object() && t.contains("content") && t.contains("id") && t["id"].is_number_integer())
        vocab.emplace(t["content"].get<std::string>(), t["id"].get<int32_t>());
  return assemble(vocab, merges, tokenizer_json + " (vocab)", tokenizer_json + " (merges)");
}

Tokenizer load_gpt2_tokenizer(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const fs::path dir(path);
    if (fs::exists(dir / "encoder.json") && fs::exists(dir / "vocab.bpe"))
      return load_gpt2_tokenizer((dir / "encoder.json").string(), (dir / "vocab.bpe").string());
    if (fs::exists(dir / "tokenizer.json")) return load_hugging_face_tokenizer((dir / "tokenizer.json").string());
    throw TokenizerError("'" + path + "' holds neither encoder.json with vocab.bpe nor tokenizer.json");
  }
  if (!fs::exists(path, ec)) throw TokenizerError("no GPT-2 tokenizer at '" + path + "' (give the folder of encoder.json "
                                                  "and vocab.bpe, or a tokenizer.json)");
  return load_hugging_face_tokenizer(path);
}

}  // namespace tokenizer
