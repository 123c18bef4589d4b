// test_tokenizer.cpp — the byte-level BPE of nn/tokenizer/: Unicode classes, the split patterns against the
// `regex` module's cuts, training against a plain recount-everything BPE, byte-exact round trips, the text
// format, GPT-2's files against ids made by the npm encoder, and every bad input refused with a clear error.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nn/tokenizer/tokenizer.h"
#include "nn/tokenizer/unicode_classes.h"
#include "test_process.h"

#ifndef SCRATCHGRAD_SOURCE_DIR
#define SCRATCHGRAD_SOURCE_DIR "."
#endif

namespace {

namespace fs = std::filesystem;
using namespace tokenizer;

const fs::path kFixtures = fs::path(SCRATCHGRAD_SOURCE_DIR) / "tests" / "tokenizer";

std::string write_file(const std::string& name, const std::string& contents) {
  const fs::path p = testing_process::scratch(name);
  std::ofstream(p, std::ios::binary) << contents;
  return p.string();
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const TokenizerError& e) {
    return e.what();
  }
  return "(no error)";
}

#define EXPECT_TOKENIZER_ERROR(statement, needle)                                      \
  do {                                                                                 \
    const std::string message = error_of([&] { statement; });                          \
    EXPECT_NE(message.find(needle), std::string::npos) << "message: " << message;      \
  } while (0)

std::string some_text() {
  return "the cat sat on the mat. the cat ate the rat! It's the cat's hat, isn't it?\n"
         "    indented   code(x) == 42;\n日本語のテキスト 🎉🎉 café café\n";
}

// ---- Unicode classes ----

TEST(TokenizerUnicode, ClassesComeFromUnicodesTables) {
  EXPECT_STREQ(unicode_version(), "15.0.0");
  for (char32_t c : {U'a', U'Z', U'é', U'ß', U'日', U'한', U'ǅ', U'ʰ', U'ª'}) EXPECT_TRUE(is_letter(c)) << uint32_t(c);
  for (char32_t c : {U'0', U'9', U'٣', U'½', U'Ⅻ', U'①', U'𝟘'}) EXPECT_TRUE(is_number(c)) << uint32_t(c);
  for (char32_t c : {U' ', U'\t', U'\n', U'\v', U'\f', U'\r', U'\u0085', U'\u00a0', U'\u2028', U'\u3000'})
    EXPECT_TRUE(is_whitespace(c)) << uint32_t(c);
  // Not White_Space: the byte-order mark (JavaScript's \s has it) and the information separators.
  for (char32_t c : {U'\ufeff', U'\x1c', U'\u200b', U'x'}) EXPECT_FALSE(is_whitespace(c)) << uint32_t(c);
  for (char32_t c : {U'!', U'\u0301', U'🎉', U'_', U'\0', U'\U0010FFFF'}) {
    EXPECT_FALSE(is_letter(c)) << uint32_t(c);
    EXPECT_FALSE(is_number(c)) << uint32_t(c);
  }
}

TEST(TokenizerUnicode, InvalidUtf8IsOneCharacterPerByte) {
  EXPECT_EQ(next_utf8_char("\xc3\xa9", 0).code, U'é');
  EXPECT_EQ(next_utf8_char("\xc3\xa9", 0).length, 2u);
  for (std::string bad : {"\xc3", "\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xff", "\x80"}) {
    EXPECT_EQ(next_utf8_char(bad, 0).code, kInvalidByte) << escape_bytes(bad);
    EXPECT_EQ(next_utf8_char(bad, 0).length, 1u);
  }
}

// ---- split patterns ----

TEST(TokenizerSplit, MatchesTheRegexModule) {
  std::ifstream in(kFixtures / "split_fixture.json");
  ASSERT_TRUE(in) << "missing tests/tokenizer/split_fixture.json";
  const nlohmann::json fixture = nlohmann::json::parse(in);
  ASSERT_GE(fixture["cases"].size(), 20u);
  for (const auto& c : fixture["cases"]) {
    const std::string text = c["text"];
    const auto got = split_chunks(text, pattern_from_name(c["pattern"].get<std::string>()));
    const std::vector<std::string> want = c["chunks"];
    EXPECT_EQ(std::vector<std::string>(got.begin(), got.end()), want) << c["pattern"] << ": " << c["text"];
  }
}

TEST(TokenizerSplit, ChunksAlwaysConcatenateBackToTheText) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::string text(rng() % 64, '\0');
    for (char& ch : text) ch = char(rng() % 4 == 0 ? " \n'a1"[rng() % 5] : rng() % 256);
    for (SplitPattern p : {SplitPattern::none, SplitPattern::gpt2, SplitPattern::gpt4}) {
      std::string joined;
      for (std::string_view chunk : split_chunks(text, p)) {
        EXPECT_FALSE(chunk.empty());
        joined += chunk;
      }
      EXPECT_EQ(joined, text);
    }
  }
}

// ---- training ----

// minbpe's algorithm without any of the speed: recount every pair of every distinct chunk before each merge.
std::vector<Merge> recount_everything_bpe(const std::string& text, SplitPattern pattern, int merges) {
  std::map<std::vector<int32_t>, int64_t> chunks;
  for (std::string_view c : split_chunks(text, pattern)) chunks[std::vector<int32_t>(c.begin(), c.end())] += 0;
  std::map<std::vector<int32_t>, int64_t> counted;
  for (std::string_view c : split_chunks(text, pattern)) {
    std::vector<int32_t> ids;
    for (char ch : c) ids.push_back(static_cast<unsigned char>(ch));
    counted[ids] += 1;
  }
  std::vector<Merge> out;
  for (int k = 0; k < merges; ++k) {
    std::map<std::pair<int32_t, int32_t>, int64_t> stats;
    for (const auto& [ids, n] : counted)
      for (size_t i = 0; i + 1 < ids.size(); ++i) stats[{ids[i], ids[i + 1]}] += n;
    if (stats.empty()) break;
    auto best = stats.begin();  // the map is ordered by (left, right): the first of the most frequent wins ties
    for (auto it = stats.begin(); it != stats.end(); ++it)
      if (it->second > best->second) best = it;
    const int32_t n = 256 + k;
    std::map<std::vector<int32_t>, int64_t> merged;
    for (const auto& [ids, count] : counted) {
      std::vector<int32_t> next;
      for (size_t i = 0; i < ids.size(); ++i) {
        if (i + 1 < ids.size() && ids[i] == best->first.first && ids[i + 1] == best->first.second) next.push_back(n), ++i;
        else next.push_back(ids[i]);
      }
      merged[next] += count;
    }
    counted = std::move(merged);
    out.push_back({best->first.first, best->first.second, n});
  }
  return out;
}

TEST(TokenizerTrain, IncrementalCountsMakeTheSameMergesAsRecounting) {
  const std::string text = some_text() + some_text() + "aaaaaaa bbbb aaaa abababab";
  for (SplitPattern p : {SplitPattern::none, SplitPattern::gpt2, SplitPattern::gpt4}) {
    TrainOptions o;
    o.pattern = p;
    o.vocab_size = 256 + 60;
    const Tokenizer t = train(text, o);
    const std::vector<Merge> want = recount_everything_bpe(text, p, 60);
    ASSERT_EQ(t.merges().size(), want.size()) << pattern_name(p);
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_EQ(t.merges()[k].left, want[k].left) << pattern_name(p) << " merge " << k;
      EXPECT_EQ(t.merges()[k].right, want[k].right) << pattern_name(p) << " merge " << k;
    }
  }
}

TEST(TokenizerTrain, ReportsEachMergeWithItsCount) {
  TrainOptions o;
  o.pattern = SplitPattern::none;
  o.vocab_size = 258;
  std::vector<MergeStep> steps;
  o.on_merge = [&](const MergeStep& s) { steps.push_back(s); };
  const Tokenizer t = train("abababab", o);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].merge.left, 'a');
  EXPECT_EQ(steps[0].merge.right, 'b');
  EXPECT_EQ(steps[0].count, 4);
  EXPECT_EQ(steps[1].merge.left, 256);  // (ab)(ab)(ab)(ab) holds the pair (ab, ab) three times, overlapping
  EXPECT_EQ(steps[1].merge.right, 256);
  EXPECT_EQ(steps[1].count, 3);
  EXPECT_EQ(t.encode("abababab"), (std::vector<int32_t>{257, 257}));
  EXPECT_EQ(t.token_bytes(257), "abab");
}

TEST(TokenizerTrain, EveryByteStringRoundTrips) {
  std::string binary;
  for (int i = 0; i < 2000; ++i) binary += char((i * 37 + i / 7) % 256);
  static const char kOddBytes[] = "\0\0\xff\xfe invalid \xc3( utf-8 \xed\xa0\x80";  // NULs, invalid UTF-8
  binary += std::string(kOddBytes, sizeof kOddBytes - 1);
  const std::string text = some_text() + binary + some_text();
  for (SplitPattern p : {SplitPattern::none, SplitPattern::gpt2, SplitPattern::gpt4}) {
    TrainOptions o;
    o.pattern = p;
    o.vocab_size = 400;
    const Tokenizer t = train(text, o);
    EXPECT_EQ(t.vocab_size(), 400);
    EXPECT_EQ(t.decode(t.encode(text)), text);
    EXPECT_LT(t.encode(text).size(), text.size());
    std::mt19937 rng(3);
    for (int trial = 0; trial < 100; ++trial) {
      std::string x(rng() % 100, '\0');
      for (char& ch : x) ch = char(rng());
      EXPECT_EQ(t.decode(t.encode(x)), x);
    }
    EXPECT_TRUE(t.encode("").empty());
  }
}

TEST(TokenizerTrain, SpecialTokensAreWholeAndNeverMerged) {
  TrainOptions o;
  o.vocab_size = 270;
  o.specials = {"<|endoftext|>", "<|pad|>"};
  std::string text;
  for (int i = 0; i < 20; ++i) text += "first document<|endoftext|>second one<|pad|>";
  const Tokenizer t = train(text, o);
  EXPECT_EQ(t.vocab_size(), 270);
  EXPECT_EQ(t.specials().at("<|endoftext|>"), 268);
  EXPECT_EQ(t.specials().at("<|pad|>"), 269);
  for (const Merge& m : t.merges()) EXPECT_EQ(t.token_bytes(m.result).find('|'), std::string::npos);
  const auto ids = t.encode("x<|endoftext|><|pad|>y");
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 268), 1);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 269), 1);
  EXPECT_EQ(t.decode(ids), "x<|endoftext|><|pad|>y");
  const auto ordinary = t.encode_ordinary("<|pad|>");
  EXPECT_EQ(std::count(ordinary.begin(), ordinary.end(), 269), 0);
  EXPECT_EQ(t.decode(ordinary), "<|pad|>");
}

TEST(TokenizerTrain, SavedTextFormatLoadsBackTheSameTokenizer) {
  TrainOptions o;
  o.vocab_size = 320;
  o.specials = {"<|endoftext|>", "tab\there \"quoted\" # not a comment"};
  const Tokenizer t = train(some_text() + some_text(), o);
  const std::string path = write_file("bpe.txt", t.to_text());
  t.save(path);
  const Tokenizer back = Tokenizer::load(path);
  EXPECT_EQ(back.to_text(), t.to_text());
  EXPECT_EQ(back.specials(), t.specials());
  EXPECT_EQ(back.pattern(), t.pattern());
  EXPECT_EQ(back.encode(some_text() + "<|endoftext|>"), t.encode(some_text() + "<|endoftext|>"));
  EXPECT_NE(t.to_text().find("merge 97 116  # 256 = \"a\" + \"t\""), std::string::npos) << t.to_text().substr(0, 600);
  EXPECT_EQ(back.fingerprint(), t.fingerprint());
  o.vocab_size = 321;  // one merge more: another tokenizer
  EXPECT_NE(train(some_text() + some_text(), o).fingerprint(), t.fingerprint());
  // a save that cannot be made is a TokenizerError, and nothing is left behind
  EXPECT_TOKENIZER_ERROR(t.save(testing_process::scratch("no-such-folder").string() + "/t.bpe"), "cannot save the tokenizer: ");
}

// ---- the house ----

// No part of nn/tokenizer/ reaches back to a part that includes it: a part is a stem (split.h and split.cpp),
// and its arrows are the nn/tokenizer headers its files include. (split.cpp once included tokenizer.h for
// TokenizerError while tokenizer.h included split.h; the error type now has its own header, error.h.)
TEST(TokenizerHouse, NoTwoPartsOfTheTokenizerIncludeEachOther) {
  const fs::path dir = fs::path(SCRATCHGRAD_SOURCE_DIR) / "nn" / "tokenizer";
  std::map<std::string, std::set<std::string>> includes;  // part -> the parts it includes
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string ext = entry.path().extension().string();
    if (ext != ".h" && ext != ".cpp") continue;
    const std::string part = entry.path().stem().string();
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);) {
      const std::string prefix = "#include \"nn/tokenizer/";
      if (line.rfind(prefix, 0) != 0 || line.find(".h\"") == std::string::npos) continue;
      const std::string included = line.substr(prefix.size(), line.find(".h\"") - prefix.size());
      if (included != part) includes[part].insert(included);
    }
  }
  ASSERT_TRUE(includes.count("tokenizer") && includes.count("split")) << "no sources found in " << dir;
  // depth-first search for a cycle, naming it when there is one
  std::map<std::string, int> state;  // 1: on the current path, 2: done
  std::vector<std::string> path;
  std::function<void(const std::string&)> visit = [&](const std::string& part) {
    state[part] = 1;
    path.push_back(part);
    for (const std::string& next : includes[part]) {
      if (state[next] == 1) {
        std::string cycle;
        for (auto it = std::find(path.begin(), path.end(), next); it != path.end(); ++it) cycle += *it + " -> ";
        ADD_FAILURE() << "nn/tokenizer/ parts include each other: " << cycle << next;
      } else if (state[next] == 0) {
        visit(next);
      }
    }
    path.pop_back();
    state[part] = 2;
  };
  for (const auto& [part, _] : includes)
    if (state[part] == 0) visit(part);
}

// ---- bad input ----

TEST(TokenizerErrors, TrainingRefusesWhatCannotWork) {
  TrainOptions o;
  o.vocab_size = 300;
  EXPECT_TOKENIZER_ERROR(train("", o), "the training text is empty");
  o.vocab_size = 255;
  EXPECT_TOKENIZER_ERROR(train("abc", o), "a vocabulary of 255 is too small: it needs 256 byte tokens");
  o.vocab_size = 257;
  o.specials = {"<a>", "<b>"};
  EXPECT_TOKENIZER_ERROR(train("abc", o), "is too small: it needs 256 byte tokens and 2 special tokens");
  o.vocab_size = 300;
  o.specials = {"<a>", "<a>"};
  EXPECT_TOKENIZER_ERROR(train("abc", o), "special token \"<a>\" given twice");
  o.specials = {};
  o.vocab_size = 1000;
  EXPECT_TOKENIZER_ERROR(train("abcd", o), "larger than this text allows");
  EXPECT_TOKENIZER_ERROR(train("abcd", o), "after 3 merges (at most 259 tokens)");
}

TEST(TokenizerErrors, DecodeRefusesIdsOutOfRange) {
  const Tokenizer bytes;
  EXPECT_EQ(bytes.decode({104, 105}), "hi");
  EXPECT_TOKENIZER_ERROR(bytes.decode({104, 256}), "token id 256 is out of range (vocabulary of 256)");
  EXPECT_TOKENIZER_ERROR(bytes.decode({-1}), "token id -1 is out of range");
}

TEST(TokenizerErrors, CorruptedOrTruncatedMergesFilesNameTheLine) {
  TrainOptions o;
  o.vocab_size = 270;
  const std::string good = train(some_text(), o).to_text();
  EXPECT_NO_THROW(Tokenizer::from_text(good, "ok.bpe"));
  EXPECT_TOKENIZER_ERROR(Tokenizer::from_text(good.substr(0, good.size() / 2), "half.bpe"), "half.bpe:");
  EXPECT_TOKENIZER_ERROR(Tokenizer::from_text(good.substr(0, good.size() / 2), "half.bpe"), "truncated: ");
  EXPECT_TOKENIZER_ERROR(Tokenizer::from_text("", "empty.bpe"), "empty.bpe:0: not a scratchgrad BPE tokenizer");
  EXPECT_TOKENIZER_ERROR(Tokenizer::from_text("#version: 0.2\nĠ t\n", "vocab.bpe"), "not a scratchgrad BPE tokenizer");
  std::string future = good;
  future.replace(future.find("\nmerge ") + 1, 10, "merge 300 ");
  EXPECT_TOKENIZER_ERROR(Tokenizer::from_text(future, "f.bpe"), "'300' is not a number from 0 to 255");
  std::string garbage = good;
  garbage.replace(garbage.find("\nmerge ") + 1, 6, "merg3 ");
  EXPECT_TOKENIZER_ERROR(Tokenizer::from_text(garbage, "g.bpe"), "g.bpe:7: expected 'merge ...'");
  EXPECT_TOKENIZER_ERROR(Tokenizer::from_text(good + "merge 1 2\n", "long.bpe"), "unexpected line after the last");
  EXPECT_TOKENIZER_ERROR(Tokenizer::from_text("scratchgrad-bpe 1\npattern gpt5\n", "p.bpe"), "unknown split pattern 'gpt5'");
  EXPECT_TOKENIZER_ERROR(Tokenizer::load(testing_process::scratch("missing.bpe").string()), "cannot read the tokenizer file");
}

// ---- GPT-2 ----

const fs::path kGpt2 = kFixtures / "gpt2";

TEST(TokenizerGpt2, ByteToUnicodeTable) {
  const auto& t = gpt2_byte_to_unicode();
  EXPECT_EQ(t['!'], "!");
  EXPECT_EQ(t[' '], "Ġ");       // U+0120
  EXPECT_EQ(t['\n'], "Ċ");      // U+010A
  EXPECT_EQ(t[0], "Ā");         // U+0100
  EXPECT_EQ(t[0xAD], "Ń");      // the soft hyphen is not printable: U+0143
  EXPECT_EQ(t[0xFF], "ÿ");
  EXPECT_EQ(std::set<std::string>(t.begin(), t.end()).size(), 256u);
}

TEST(TokenizerGpt2, EncodesAsTheNpmEncoderOnItsFixture) {
  const Tokenizer gpt2 = load_gpt2_tokenizer(kGpt2.string());
  EXPECT_EQ(gpt2.vocab_size(), 50257);
  EXPECT_EQ(gpt2.merges().size(), 50000u);
  EXPECT_EQ(gpt2.specials().at("<|endoftext|>"), 50256);
  std::ifstream in(kFixtures / "gpt2_fixture.json");
  const nlohmann::json fixture = nlohmann::json::parse(in);
  ASSERT_GE(fixture.size(), 8u);
  for (const auto& c : fixture) {
    const std::string text = c["text"];
    const std::vector<int32_t> want = c["ids"];
    EXPECT_EQ(gpt2.encode(text), want) << text;
    EXPECT_EQ(gpt2.decode(want), text);
  }
  EXPECT_EQ(gpt2.encode("Hello world<|endoftext|>"), (std::vector<int32_t>{15496, 995, 50256}));
  // encoder.py knows no special tokens: there "<|endoftext|>" is text, "<", "|", "end", "of", "text", "|", ">".
  EXPECT_EQ(gpt2.encode_ordinary("<|endoftext|>"), (std::vector<int32_t>{27, 91, 437, 1659, 5239, 91, 29}));
}

TEST(TokenizerGpt2, HuggingFaceTokenizerJsonGivesTheSameIds) {
  std::ifstream enc(kGpt2 / "encoder.json"), bpe(kGpt2 / "vocab.bpe");
  nlohmann::json root;
  root["model"] = {{"type", "BPE"}, {"vocab", nlohmann::json::parse(enc)}, {"merges", nlohmann::json::array()}};
  std::string line;
  std::getline(bpe, line);  // #version
  while (std::getline(bpe, line))
    if (!line.empty()) root["model"]["merges"].push_back(line);
  root["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}};
  root["added_tokens"] = nlohmann::json::array({{{"id", 50256}, {"content", "<|endoftext|>"}, {"special", true}}});
  const std::string path = write_file("tokenizer.json", root.dump());
  const Tokenizer hf = load_gpt2_tokenizer(path);
  const Tokenizer openai = load_gpt2_tokenizer(kGpt2.string());
  const std::string text = some_text() + "<|endoftext|>" + some_text();
  EXPECT_EQ(hf.encode(text), openai.encode(text));
  EXPECT_EQ(hf.vocab_size(), 50257);
  EXPECT_EQ(hf.fingerprint(), openai.fingerprint());  // the same tokenizer, whichever files it came from

  root["pre_tokenizer"] = {{"type", "Metaspace"}};
  EXPECT_TOKENIZER_ERROR(load_gpt2_tokenizer(write_file("meta.json", root.dump())), "not a byte-level BPE");
}

TEST(TokenizerErrors, Gpt2FilesThatDoNotBelongTogether) {
  const std::string encoder = testing_process::slurp(kGpt2 / "encoder.json");
  const std::string vocab = testing_process::slurp(kGpt2 / "vocab.bpe");
  // A vocab.bpe from another model: a merge whose result encoder.json lacks.
  const std::string enc_path = write_file("encoder.json", encoder);
  EXPECT_TOKENIZER_ERROR(load_gpt2_tokenizer(enc_path, write_file("other.bpe", vocab + "Ġqz xq\n")),
                         "do not belong together: ");
  EXPECT_TOKENIZER_ERROR(load_gpt2_tokenizer(enc_path, write_file("other.bpe", vocab + "Ġqz xq\n")),
                         "merge 50001 (\"Ġqz\" \"xq\") joins a token");
  // Merges in another order make other tokens than encoder.json spells.
  std::string swapped = vocab;
  swapped.replace(swapped.find("\nĠ t\n"), 5, "\nĠ a\n");
  EXPECT_TOKENIZER_ERROR(load_gpt2_tokenizer(enc_path, write_file("swapped.bpe", swapped)), "do not belong together");
  EXPECT_TOKENIZER_ERROR(load_gpt2_tokenizer(write_file("cut.json", encoder.substr(0, encoder.size() / 2)),
                                             (kGpt2 / "vocab.bpe").string()),
                         "not valid JSON");
  EXPECT_TOKENIZER_ERROR(load_gpt2_tokenizer(enc_path, write_file("bad.bpe", "#version: 0.2\nĠt\n")),
                         "bad.bpe:2: expected two tokens separated by one space");
  EXPECT_TOKENIZER_ERROR(load_gpt2_tokenizer(testing_process::scratch("nothing").string()), "no GPT-2 tokenizer at");
  const Tokenizer gpt2 = load_gpt2_tokenizer(kGpt2.string());
  EXPECT_TOKENIZER_ERROR(gpt2.decode({50257}), "token id 50257 is out of range (vocabulary of 50257)");
  EXPECT_TOKENIZER_ERROR(gpt2.to_text(), "GPT-2's is kept as its own files");
}

}  // namespace
