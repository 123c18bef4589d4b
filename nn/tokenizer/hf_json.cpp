// hf_json.cpp — reading a Hugging Face tokenizer.json (hf_json.h). Every part of the file that changes the
// ids is either understood or refused by name: a tokenizer read half right would give other ids silently.
#include "nn/tokenizer/hf_json.h"

#include <algorithm>
#include <climits>
#include <optional>
#include <unordered_map>
#include <vector>

#include "nn/tokenizer/gpt2_files.h"
#include "nn/tokenizer/json_file.h"
#include "nn/tokenizer/limits.h"
#include "nn/tokenizer/read_file.h"

namespace tokenizer {

const char* const kLlama3SplitRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2SplitRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

namespace {

const char* const kOnlyByteLevel = "only byte-level BPE tokenizers (Llama 3's, Qwen's, SmolLM2's, GPT-2's) are read";

// An optional member: its value read by `read`, or `otherwise` when it is missing or null.
template <typename Read, typename T>
T optional_member(const JsonField& object, const char* key, Read read, T otherwise) {
  const std::optional<JsonField> member = object.find(key);
  return member && !member->is_null() ? read(*member) : otherwise;
}

bool flag(const JsonField& object, const char* key, bool otherwise = false) {
  return optional_member(object, key, [](const JsonField& f) { return f.boolean(); }, otherwise);
}

// model: a BPE without the parts that only SentencePiece-style and word-piece BPEs use.
void check_model(const JsonField& model) {
  const JsonField type = model["type"];
  const std::string kind = type.string();
  if (kind != "BPE")
    type.fail("is " + quoted_for_message(kind) + ": not a BPE (a Unigram, WordPiece or WordLevel model is not read); " +
              kOnlyByteLevel);
  if (flag(model, "byte_fallback"))
    model["byte_fallback"].fail("is true: a BPE over SentencePiece's pieces (Llama 2's, TinyLlama's) is not read; " +
                                std::string(kOnlyByteLevel));
  if (const std::optional<JsonField> dropout = model.find("dropout"); dropout && !dropout->is_null())
    dropout->fail("is set: BPE dropout (random merges, for training) is not read; set it to null");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (const std::optional<JsonField> f = model.find(key); f && !f->is_null() && f->string() != "")
      f->fail("is " + f->described() + ": a word-piece style BPE is not read; " + kOnlyByteLevel);
}

// normalizer: none, or NFC (alone or in a Sequence).
bool reads_nfc(const std::optional<JsonField>& normalizer) {
  if (!normalizer || normalizer->is_null()) return false;
  const JsonField type = (*normalizer)["type"];
  const std::string kind = type.string();
  if (kind == "NFC") return true;
  if (kind == "Sequence") {
    bool nfc = false;
    (*normalizer)["normalizers"].each_element([&](const JsonField& n) {
      if (!reads_nfc(n)) n["type"].fail("is not \"NFC\": only the NFC normalizer is read");
      nfc = true;
    });
    return nfc;
  }
  type.fail("is " + quoted_for_message(kind) + ": only the NFC normalizer (or none) is read");
}

// A ByteLevel pre-tokenizer: whether it splits with GPT-2's pattern (use_regex, true unless it says otherwise).
bool byte_level_uses_regex(const JsonField& pre) {
  if (flag(pre, "add_prefix_space"))
    pre["add_prefix_space"].fail("is true: a space put before the text is not read (Llama 3, Qwen and SmolLM2 set it false)");
  return flag(pre, "use_regex", true);
}

[[noreturn]] void refuse_pre_tokenizer(const JsonField& pre, const std::string& why) {
  pre.fail(why + "; read are ByteLevel, Sequence [Split (Llama 3's or Qwen's pattern), ByteLevel] and "
           "Sequence [Digits, ByteLevel]");
}

SplitPattern split_pattern_of(const JsonField& split) {
  const std::string behavior = split["behavior"].string();
  if (behavior != "Isolated") split["behavior"].fail("is " + quoted_for_message(behavior) + ", expected \"Isolated\"");
  if (flag(split, "invert")) split["invert"].fail("is true: an inverted split is not read");
  const JsonField pattern = split["pattern"];
  const std::optional<JsonField> regex = pattern.find("Regex");
  if (!regex) pattern.fail("is not a {\"Regex\": ...}: only the split patterns of Llama 3 and Qwen are read");
  const std::string text = regex->string();
  if (text == kLlama3SplitRegex) return SplitPattern::llama3;
  if (text == kQwen2SplitRegex) return SplitPattern::qwen2;
  regex->fail("is an unknown split pattern " + quoted_for_message(text) +
              ": only Llama 3's and Qwen's are read (each one is written out by hand, see split.h)");
}

SplitPattern pre_tokenizer_pattern(const std::optional<JsonField>& pre) {
  if (!pre || pre->is_null())
    throw TokenizerError(std::string("has no pre_tokenizer (not a byte-level BPE; ") + kOnlyByteLevel + ")");
  const std::string type = (*pre)["type"].string();
  if (type == "ByteLevel") return byte_level_uses_regex(*pre) ? SplitPattern::gpt2 : SplitPattern::none;
  if (type != "Sequence") refuse_pre_tokenizer((*pre)["type"], "is " + quoted_for_message(type));
  std::vector<JsonField> steps;
  (*pre)["pretokenizers"].each_element([&](const JsonField& p) { steps.push_back(p); });
  std::vector<std::string> types;
  for (const JsonField& p : steps) types.push_back(p["type"].string());
  if (types == std::vector<std::string>{"Split", "ByteLevel"}) {
    if (byte_level_uses_regex(steps[1]))
      steps[1].fail("splits with GPT-2's pattern (use_regex is true, or left out) after a Split: set use_regex false");
    return split_pattern_of(steps[0]);
  }
  if (types == std::vector<std::string>{"Digits", "ByteLevel"}) {
    if (!flag(steps[0], "individual_digits")) steps[0].fail("does not set individual_digits: only SmolLM2's Digits is read");
    if (!byte_level_uses_regex(steps[1])) steps[1]["use_regex"].fail("is false after Digits: only SmolLM2's layout is read");
    return SplitPattern::gpt2_digits;
  }
  std::string listed;
  for (const std::string& t : types) listed += (listed.empty() ? "" : ", ") + t;
  refuse_pre_tokenizer((*pre)["pretokenizers"], "is a Sequence of [" + listed + "]");
}

void check_decoder(const std::optional<JsonField>& decoder) {
  if (!decoder || decoder->is_null())
    throw TokenizerError("has no decoder: a byte-level BPE needs the ByteLevel decoder");
  const JsonField type = (*decoder)["type"];
  if (type.string() != "ByteLevel")
    type.fail("is " + quoted_for_message(type.string()) + ": only the ByteLevel decoder is read");
}

// The ids of one of TemplateProcessing's special_tokens, by its name in the template.
std::vector<int32_t> template_token_ids(const JsonField& processor, const std::string& name) {
  std::vector<int32_t> ids;
  processor["special_tokens"][name]["ids"].each_element([&](const JsonField& id) { ids.push_back(int32_t(id.integer(0, INT32_MAX))); });
  return ids;
}

// post_processor: what it puts before and after a single text.
void read_post_processor(const JsonField& processor, HuggingFaceRules& rules) {
  if (processor.is_null()) return;
  const JsonField type = processor["type"];
  const std::string kind = type.string();
  if (kind == "ByteLevel") return;  // it only moves offsets
  if (kind == "Sequence") {
    processor["processors"].each_element([&](const JsonField& p) { read_post_processor(p, rules); });
    return;
  }
  if (kind == "RobertaProcessing") {  // <s> text </s>: cls and sep are ["<s>", 0] and ["</s>", 2]
    const auto id_in = [&](const char* key) {
      const JsonField pair = processor[key];
      if (!pair.is_array() || pair.size() != 2) pair.fail("is " + pair.described() + ", expected [\"<s>\", 0]");
      int32_t id = 0;
      size_t at = 0;
      pair.each_element([&](const JsonField& e) { if (at++ == 1) id = int32_t(e.integer(0, INT32_MAX)); });
      return id;
    };
    rules.post_prefix.push_back(id_in("cls"));
    rules.post_suffix.push_back(id_in("sep"));
    return;
  }
  if (kind != "TemplateProcessing")
    type.fail("is " + quoted_for_message(kind) + ": read are TemplateProcessing, RobertaProcessing and ByteLevel");
  bool after_text = false;
  processor["single"].each_element([&](const JsonField& piece) {
    if (piece.find("Sequence")) {
      after_text = true;
      return;
    }
    const std::vector<int32_t> ids = template_token_ids(processor, piece["SpecialToken"]["id"].string());
    auto& into = after_text ? rules.post_suffix : rules.post_prefix;
    into.insert(into.end(), ids.begin(), ids.end());
  });
}

// model.vocab: the file's spelling of each token -> its id.
std::unordered_map<std::string, int32_t> read_vocab(const JsonField& vocab) {
  std::unordered_map<std::string, int32_t> out;
  std::unordered_map<int32_t, std::string> spelling_of;
  vocab.each_member([&](const std::string& written, const JsonField& id_field) {
    const auto id = int32_t(id_field.integer(0, kMaxTokenId));
    if (!spelling_of.emplace(id, written).second)
      id_field.fail("is " + std::to_string(id) + ", the id of " + quoted_for_message(spelling_of[id]) + " too");
    out.emplace(written, id);
  });
  return out;
}

AddedToken read_added_token(const JsonField& t) {
  AddedToken a;
  a.content = t["content"].string();
  if (a.content.empty()) t["content"].fail("is empty");
  a.id = int32_t(t["id"].integer(0, kMaxTokenId));
  a.special = flag(t, "special");
  a.lstrip = flag(t, "lstrip");
  a.rstrip = flag(t, "rstrip");
  a.single_word = flag(t, "single_word");
  a.normalized = flag(t, "normalized", !a.special);  // Hugging Face's default
  return a;
}

Tokenizer read_tokenizer_json(const std::string& path) {
  const JsonFile file(path, "the tokenizer.json");
  const JsonField root = file.root(), model = root["model"];
  check_model(model);
  HuggingFaceRules rules;
  rules.ignore_merges = flag(model, "ignore_merges");
  SplitPattern pattern;
  try {
    rules.nfc = reads_nfc(root.find("normalizer"));
    pattern = pre_tokenizer_pattern(root.find("pre_tokenizer"));
    check_decoder(root.find("decoder"));
  } catch (const TokenizerError& e) {  // the messages of a missing part do not name the file yet
    const std::string message = e.what();
    throw message.rfind(path + ": ", 0) == 0 ? e : TokenizerError(path + ": " + message);
  }
  if (const std::optional<JsonField> post = root.find("post_processor")) read_post_processor(*post, rules);

  const auto vocab = read_vocab(model["vocab"]);
  const auto id_of = [&](const std::string& written) {
    const auto it = vocab.find(written);
    return it == vocab.end() ? -1 : it->second;
  };
  std::vector<int32_t> byte_ids(256);
  std::string bytes;
  for (const auto& [written, id] : vocab)  // a token's bytes are its spelling read back, as the decoder reads it
    rules.vocabulary.emplace(id, byte_level_bytes(written, bytes) ? bytes : written);
  for (int b = 0; b < 256; ++b) {
    byte_ids[b] = id_of(gpt2_byte_to_unicode()[b]);
    if (byte_ids[b] < 0)
      model["vocab"].fail("has no token for byte " + std::to_string(b) + " (" + gpt2_byte_to_unicode()[b] +
                          "): not a byte-level BPE vocabulary");
  }
  std::vector<Merge> merges;
  model["merges"].each_element([&](const JsonField& m) {
    const auto [left, right] = hugging_face_merge(m);
    const int32_t l = id_of(left), r = id_of(right), n = id_of(left + right);
    if (l < 0 || r < 0) m.fail("joins " + quoted_for_message(l < 0 ? left : right) + ", which model.vocab does not have");
    if (n < 0) m.fail("makes " + quoted_for_message(left + right) + ", which model.vocab does not have");
    merges.push_back({l, r, n});
  });
  if (const std::optional<JsonField> added = root.find("added_tokens"); added && !added->is_null())
    added->each_element([&](const JsonField& t) { rules.added.push_back(read_added_token(t)); });
  std::vector<char> has_id;
  const auto note_id = [&](int32_t id) {
    if (size_t(id) >= has_id.size()) has_id.resize(size_t(id) + 1, 0);
    has_id[size_t(id)] = 1;
  };
  for (const auto& [written, id] : vocab) note_id(id);
  for (const AddedToken& t : rules.added) note_id(t.id);
  for (size_t id = 0; id < has_id.size(); ++id)
    if (!has_id[id])
      throw TokenizerError(path + ": no token has id " + std::to_string(id) +
                           " (model.vocab and added_tokens number the tokens from 0, without a gap)");
  try {
    return Tokenizer::hugging_face(std::move(byte_ids), std::move(merges), std::move(rules), pattern);
  } catch (const TokenizerError& e) {
    throw TokenizerError(path + ": " + e.what());
  }
}

}  // namespace

Tokenizer load_tokenizer_json(const std::string& path) {
  return naming_memory("the tokenizer from " + path, [&] { return read_tokenizer_json(path); });
}

}  // namespace tokenizer
