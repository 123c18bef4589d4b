// test_hardening_tokenizers.cpp — tokenizer files as a new user (or an attacker) hands them over, and the
// tokenizer commands: crafted JSON (nested deep, wrong types, ids past int32), files that are devices,
// too large or too much for the memory, a vocab.bpe cut short, `bpe --save` onto its own text or failing
// half way, a GPT whose tokenizer files were replaced, and `tokenize --decode` / `--checkpoint`. Every
// refusal is one line on stderr with exit status 2, naming the file, field or flag; never a crash, an
// exception's own text, or a silently different tokenizer.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "nn/safetensors.h"
#include "nn/tokenizer/tokenizer.h"
#include "test_process.h"
#include "text.h"
#include "tokenize.h"

namespace {

namespace fs = std::filesystem;
using testing_process::Shell;
using testing_process::scratch;
using testing_process::slurp;

const fs::path kGpt2 = fs::path(SCRATCHGRAD_SOURCE_DIR) / "tests" / "tokenizer" / "gpt2";
const std::string kBin = std::string(SCRATCHGRAD_BIN_DIR) + "/scratchgrad";

Shell scratchgrad(const std::string& args) { return testing_process::shell(kBin + " " + args); }

std::string write_file(const std::string& name, const std::string& contents) {
  const fs::path p = scratch(name);
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary | std::ios::trunc) << contents;
  return p.string();
}

// Status 2, one line on stderr naming every one of `needles`, and no exception's own words.
void expect_refused(const Shell& r, std::initializer_list<std::string> needles) {
  EXPECT_EQ(r.status, 2) << r.command << "\n" << r.err;
  EXPECT_EQ(testing_process::count(r.err, "\n"), 1) << r.err;
  EXPECT_EQ(r.err.rfind("scratchgrad: error: ", 0), 0u) << r.err;
  for (const std::string& needle : needles) EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
  for (const char* leak : {"json.exception", "bad_alloc", "internal error", "basic_string", "what()"})
    EXPECT_EQ(r.err.find(leak), std::string::npos) << r.err;
}

// GPT-2's tokenizer as a Hugging Face tokenizer.json, which `edit` may change first.
std::string tokenizer_json(const std::string& name, const std::function<void(nlohmann::json&)>& edit = {}) {
  nlohmann::json root;
  std::ifstream encoder(kGpt2 / "encoder.json"), merges(kGpt2 / "vocab.bpe");
  root["model"] = {{"type", "BPE"}, {"vocab", nlohmann::json::parse(encoder)}, {"merges", nlohmann::json::array()}};
  std::string line;
  std::getline(merges, line);  // #version
  while (std::getline(merges, line))
    if (!line.empty()) root["model"]["merges"].push_back(line);
  root["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}};
  root["added_tokens"] = nlohmann::json::array({{{"id", 50256}, {"content", "<|endoftext|>"}, {"special", true}}});
  if (edit) edit(root);
  return write_file(name, root.dump());
}

// A small byte-level tokenizer.json (the 256 bytes as GPT-2 spells them, ids 0-255; one merge "Ġ t" making
// "Ġt", 256; <|endoftext|>, 257), which `edit` may change first: quick to read, for the refusals.
std::string small_tokenizer_json(const std::string& name, const std::function<void(nlohmann::json&)>& edit = {}) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[tokenizer::gpt2_byte_to_unicode()[size_t(b)]] = b;
  vocab["\xc4\xa0t"] = 256;
  nlohmann::json root;
  root["model"] = {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"\xc4\xa0 t"}}};
  root["pre_tokenizer"] = {{"type", "ByteLevel"}};
  root["added_tokens"] = nlohmann::json::array({{{"id", 257}, {"content", "<|endoftext|>"}}});
  if (edit) edit(root);
  return write_file(name, root.dump());
}

// A folder holding GPT-2's encoder.json (as `encoder` gives it) and vocab.bpe (as `vocab_bpe` gives it).
std::string gpt2_folder(const std::string& name, const std::string& encoder, const std::string& vocab_bpe) {
  write_file(name + "/encoder.json", encoder);
  write_file(name + "/vocab.bpe", vocab_bpe);
  return scratch(name).string();
}

Shell tokenize_with(const std::string& tokenizer_file, const std::string& extra = "") {
  const std::string text = write_file("hello.txt", "Hello world");
  return scratchgrad("tokenize --tokenizer gpt2 --tokenizer-file " + tokenizer_file + " --ids --text " + text + extra);
}

// ---------------------------------------------------------------- crafted JSON

TEST(TokenizerHardening, JsonNestedDeepIsRefusedBeforeAnythingWalksIt) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  // in the pre-tokenizer (whose check used to dump it), inside one merge, and as an id of encoder.json
  std::string pre = slurp(tokenizer_json("deep_pre2.json", [](nlohmann::json& r) { r["pre_tokenizer"]["x"] = "DEEP"; }));
  pre.replace(pre.find("\"DEEP\""), 6, deep);
  expect_refused(tokenize_with(write_file("deep_pre3.json", pre)), {"deep_pre3.json", "nests JSON more than 64 levels deep"});
  std::string merge = slurp(tokenizer_json("deep_merge.json", [](nlohmann::json& r) { r["model"]["merges"][3] = "DEEP"; }));
  merge.replace(merge.find("\"DEEP\""), 6, deep);
  expect_refused(tokenize_with(write_file("deep_merge2.json", merge)), {"deep_merge2.json", "more than 64 levels"});
  const std::string folder =
      gpt2_folder("deep_encoder", R"({"!": )" + deep + "}", slurp(kGpt2 / "vocab.bpe"));
  expect_refused(tokenize_with(folder), {"encoder.json", "more than 64 levels"});
  // brackets inside strings are not nesting
  const tokenizer::Tokenizer t = tokenizer::load_hugging_face_tokenizer(tokenizer_json("brackets.json", [](nlohmann::json& r) {
    r["pre_tokenizer"]["note"] = std::string(1000, '[');
  }));
  EXPECT_EQ(t.vocab_size(), 50257);
}

TEST(TokenizerHardening, EveryFieldOfTheFileIsCheckedForItsType) {
  struct Case {
    const char* name;
    std::function<void(nlohmann::json&)> edit;
    const char* message;
  };
  const Case cases[] = {
      {"type_number.json", [](nlohmann::json& r) { r["model"]["type"] = 7; }, "model.type is a number (7), expected a string"},
      {"type_null.json", [](nlohmann::json& r) { r["model"]["type"] = nullptr; }, "model.type is null, expected a string"},
      {"type_missing.json", [](nlohmann::json& r) { r["model"].erase("type"); }, "model has no \"type\""},
      {"no_model.json", [](nlohmann::json& r) { r.erase("model"); }, "the file has no \"model\""},
      {"model_array.json", [](nlohmann::json& r) { r["model"] = nlohmann::json::array(); }, "model is an array, expected an object"},
      {"added_content.json", [](nlohmann::json& r) { r["added_tokens"][0]["content"] = 5; },
       "added_tokens[0].content is a number (5), expected a string"},
      {"added_id.json", [](nlohmann::json& r) { r["added_tokens"][0]["id"] = "257"; },
       "added_tokens[0].id is a string (\"257\"), not a whole number from 0 to 2147483647"},
      {"added_object.json", [](nlohmann::json& r) { r["added_tokens"] = {{"content", "x"}}; },
       "added_tokens is an object, expected an array"},
      {"merge_number.json", [](nlohmann::json& r) { r["model"]["merges"][0] = 17; },
       "model.merges[0] is a number (17), expected \"a b\" or [\"a\", \"b\"]"},
      {"merge_three.json", [](nlohmann::json& r) { r["model"]["merges"][0] = {"a", "b", "c"}; },
       "model.merges[0] has 3 tokens, expected 2"},
      {"merge_part.json", [](nlohmann::json& r) { r["model"]["merges"][0] = {"a", true}; },
       "model.merges[0][1] is true, expected a string"},
      {"merge_spaces.json", [](nlohmann::json& r) { r["model"]["merges"][0] = "a  b"; },
       "model.merges[0] is not two tokens separated by one space"},
      {"vocab_array.json", [](nlohmann::json& r) { r["model"]["vocab"] = {1, 2}; }, "model.vocab is an array, expected an object"},
      {"vocab_id_string.json", [](nlohmann::json& r) { r["model"]["vocab"]["\xc4\xa0t"] = "256"; },
       "model.vocab[\"\xc4\xa0t\"] is a string (\"256\"), not a whole number"},
      {"pre_type.json", [](nlohmann::json& r) { r["pre_tokenizer"]["type"] = 3; }, "pre_tokenizer.type is a number (3), expected a string"},
      {"pre_seq.json", [](nlohmann::json& r) { r["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", 1}}; },
       "pre_tokenizer.pretokenizers is a number (1), expected an array"},
      {"root_array.json", [](nlohmann::json& r) { r = nlohmann::json::array(); }, "the file is an array, expected an object"},
  };
  const Shell ok = tokenize_with(small_tokenizer_json("small.json"));
  ASSERT_EQ(ok.status, 0) << ok.err;
  EXPECT_EQ(ok.out, "72 101 108 108 111 32 119 111 114 108 100\n");  // "Hello world": bytes (its one merge is " t")
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = small_tokenizer_json(c.name, c.edit);
    expect_refused(tokenize_with(path), {path + ": " + c.message});
  }
  // a Sequence holding a ByteLevel pre-tokenizer (Llama 3's kind) is byte-level, but splits by its own
  // pattern first: it is read by the rules of today's tokenizer.json files (nn/tokenizer/hf_json.h), which
  // refuse this one's second split
  const std::string seq = tokenizer_json("sequence.json", [](nlohmann::json& r) {
    r["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "Split"}}, {{"type", "ByteLevel"}}}}};
  });
  expect_refused(tokenize_with(seq), {seq + ": pre_tokenizer.pretokenizers[1] splits with GPT-2's pattern (use_regex "
                                      "is true, or left out) after a Split: set use_regex false"});
}

TEST(TokenizerHardening, IdsAreReadWhole) {
  const auto with_id = [](const std::string& name, const nlohmann::json& id) {
    return tokenizer_json(name, [&](nlohmann::json& r) { r["model"]["vocab"]["\xc4\xa0the"] = id; });
  };
  const std::string wraps = with_id("id_wraps.json", (uint64_t(1) << 32) + 262);  // read as 262 once
  expect_refused(tokenize_with(wraps), {"id_wraps.json: model.vocab[\"\xc4\xa0the\"] is a number (4294967558), not a whole number from 0 to 2147483647"});
  expect_refused(tokenize_with(with_id("id_negative.json", -1)), {"is a number (-1), not a whole number from 0"});
  expect_refused(tokenize_with(with_id("id_float.json", 262.0)), {"is a number (262.0), not a whole number"});
  expect_refused(tokenize_with(with_id("id_huge.json", 1e300)), {"not a whole number"});
  const std::string added = tokenizer_json("added_wraps.json", [](nlohmann::json& r) {
    r["added_tokens"][0]["id"] = (uint64_t(1) << 32) + 50256;
  });
  expect_refused(tokenize_with(added), {"added_tokens[0].id is a number (4295017552), not a whole number"});
  // encoder.json alike, and a number past a double's range is not JSON this reader holds
  std::string encoder = slurp(kGpt2 / "encoder.json");
  encoder.replace(encoder.find("\"!\": 0"), 6, "\"!\": 4294967296");
  expect_refused(tokenize_with(gpt2_folder("enc_wraps", encoder, slurp(kGpt2 / "vocab.bpe"))),
                 {"encoder.json: [\"!\"] is a number (4294967296), not a whole number from 0 to 2147483647"});
  expect_refused(tokenize_with(write_file("overflow.json", R"({"model": {"type": "BPE", "vocab": {"a": 1e400}}})")),
                 {"overflow.json: not valid JSON"});
  expect_refused(tokenize_with(write_file("syntax.json", "{\n  \"model\": {,\n}")),
                 {"syntax.json: not valid JSON (at line 2, column 13)"});
}

// ---------------------------------------------------------------- what is read, and how much

TEST(TokenizerHardening, ATokenizerFileMustBeARegularFileWithinTheLimit) {
  const std::string text = write_file("story.txt", "the cat sat on the mat. the cat ate the rat.\n");
  expect_refused(tokenize_with("/dev/zero"), {"/dev/zero", "not a regular file"});
  expect_refused(scratchgrad("tokenize --tokenizer bpe --tokenizer-file /dev/zero --text " + text),
                 {"/dev/zero", "not a regular file"});
  expect_refused(scratchgrad("train --model gpt --preset tiny --tokenizer gpt2 --tokenizer-file /dev/zero --text " + text),
                 {"--tokenizer-file", "/dev/zero", "not a regular file"});
  // a FIFO where encoder.json should be: refused without opening it (opening would wait for a writer)
  const fs::path fifo_dir = scratch("fifo_gpt2");
  fs::create_directories(fifo_dir);
  fs::copy_file(kGpt2 / "vocab.bpe", fifo_dir / "vocab.bpe", fs::copy_options::overwrite_existing);
  fs::remove(fifo_dir / "encoder.json");
  ASSERT_EQ(::mkfifo((fifo_dir / "encoder.json").c_str(), 0600), 0);
  expect_refused(tokenize_with(fifo_dir.string()), {"encoder.json", "not a regular file"});
  // a folder where a file should be
  const fs::path folder_dir = scratch("folder_gpt2");
  fs::create_directories(folder_dir / "encoder.json");
  fs::copy_file(kGpt2 / "vocab.bpe", folder_dir / "vocab.bpe", fs::copy_options::overwrite_existing);
  expect_refused(tokenize_with(folder_dir.string()), {"encoder.json", "it is a folder"});
  // over the limit (a sparse file: nothing is read)
  const fs::path huge = scratch("huge_tokenizer.json");
  std::ofstream(huge).close();
  fs::resize_file(huge, tokenizer::kMaxFileBytes + 1);
  expect_refused(tokenize_with(huge.string()),
                 {"huge_tokenizer.json", "67108865 bytes, over the limit of 67108864 bytes for a tokenizer file"});
  expect_refused(scratchgrad("tokenize --tokenizer bpe --tokenizer-file " + huge.string() + " --text " + text),
                 {"over the limit of 67108864 bytes"});
}

#if !defined(__SANITIZE_ADDRESS__)  // AddressSanitizer's shadow memory cannot be mapped under ulimit -v
TEST(TokenizerHardening, RunningOutOfMemoryNamesTheFileBeingRead) {
  if (testing_process::emulated_on_x86())
    GTEST_SKIP() << "under qemu-user the address-space limit (ulimit -v) binds the emulator, which then cannot map the "
                    "program at all";
  // 60 MB of encoder.json (2.4 million tokens): under 64 MiB, but more than these limits let it parse
  std::string encoder = "{";
  for (int i = 0; encoder.size() < 60'000'000; ++i) encoder += "\"tok" + std::to_string(i) + "\": " + std::to_string(i) + ", ";
  encoder += "\"end\": 0}";
  const std::string folder = gpt2_folder("big_encoder", encoder, slurp(kGpt2 / "vocab.bpe"));
  encoder.clear();
  int out_of_memory = 0;
  for (int limit_kb : {250'000, 400'000}) {
    SCOPED_TRACE(limit_kb);
    const Shell r = testing_process::shell("ulimit -v " + std::to_string(limit_kb) + " && " + kBin +
                                           " tokenize --tokenizer gpt2 --tokenizer-file " + folder + " --ids --text " +
                                           write_file("hi.txt", "hi"));
    expect_refused(r, {"encoder.json"});  // never an abort (status 134): the half-built tree is freed safely
    out_of_memory += r.err.find("out of memory") != std::string::npos;
  }
  EXPECT_GE(out_of_memory, 1);
  // an endless standard input under a memory limit: the message names standard input, not --dim
  const Shell r = testing_process::shell("ulimit -v 250000 && yes | " + kBin + " tokenize --ids");
  expect_refused(r, {"standard input"});
  // bpe on a text too large for the memory left: the message names the text
  std::string words;
  for (int i = 0; i < 3'000'000; ++i) words += "ab cd ef ";
  const std::string text = write_file("big_words.txt", words);
  expect_refused(testing_process::shell("ulimit -v 200000 && " + kBin + " bpe --vocab-size 300 --text " + text),
                 {"bpe: out of memory learning merges from " + text + " (27000000 bytes)"});
}
#endif

TEST(TokenizerHardening, StandardInputIsReadUpToAStatedLimit) {
  std::istringstream small("0123456789");
  EXPECT_EQ(cli::read_bounded(small, 10, "standard input"), "0123456789");
  std::istringstream large("0123456789a");
  try {
    cli::read_bounded(large, 10, "standard input");
    ADD_FAILURE() << "11 bytes were read under a limit of 10";
  } catch (const cli::UsageError& e) {
    EXPECT_STREQ(e.what(), "tokenize: standard input holds more than 10 bytes, the most tokenize reads");
  }
  // across the 1 MiB chunks it reads in
  std::istringstream chunks(std::string((size_t(1) << 20) * 2 + 5, 'x'));
  EXPECT_EQ(cli::read_bounded(chunks, cli::kMaxTextBytes, "standard input").size(), (size_t(1) << 21) + 5);
}

// ---------------------------------------------------------------- a vocab.bpe that is not whole

TEST(TokenizerHardening, AVocabBpeCutShortIsRefusedNamingTheCounts) {
  const std::string encoder = slurp(kGpt2 / "encoder.json"), merges = slurp(kGpt2 / "vocab.bpe");
  const std::string version = merges.substr(0, merges.find('\n') + 1);
  size_t cut = 0;  // after the first line and 30,000 merges
  for (int line = 0; line < 30001; ++line) cut = merges.find('\n', cut) + 1;
  struct Case {
    const char* name;
    std::string vocab_bpe;
    const char* counts;
  };
  const Case cases[] = {
      {"empty", "", "has 50257 tokens, but the 256 bytes, 0 merges and 1 special token (<|...|>) make 257"},
      {"version_only", version, "0 merges and 1 special token (<|...|>) make 257"},
      {"cut", merges.substr(0, cut), "30000 merges and 1 special token (<|...|>) make 30257"},
      {"repeated", merges + merges.substr(version.size(), merges.find('\n', version.size()) + 1 - version.size()),
       "50001 merges and 1 special token (<|...|>) make 50258"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string folder = gpt2_folder(std::string("vocab_") + c.name, encoder, c.vocab_bpe);
    expect_refused(tokenize_with(folder), {"vocab.bpe do not belong together", c.counts});
  }
  // the whole file loads: 256 + 50,000 + 1
  EXPECT_EQ(tokenizer::load_gpt2_tokenizer(gpt2_folder("vocab_whole", encoder, merges)).vocab_size(), 50257);
}

// ---------------------------------------------------------------- bpe --save

TEST(TokenizerHardening, BpeSaveNeverReplacesItsOwnText) {
  std::string story;
  for (int i = 0; i < 40; ++i) story += "the cat sat on the mat; the dog sat on the log. ";
  const std::string text = write_file("own_text.txt", story);
  expect_refused(scratchgrad("bpe --text " + text + " --vocab-size 270 --save " + text),
                 {"--text " + text + " and --save " + text + " name the same file"});
  const fs::path link = scratch("own_text_link.txt"), hard = scratch("own_text_hard.txt");
  fs::remove(link), fs::remove(hard);
  fs::create_symlink(text, link);
  fs::create_hard_link(text, hard);
  expect_refused(scratchgrad("bpe --text " + text + " --vocab-size 270 --save " + link.string()), {"name the same file"});
  expect_refused(scratchgrad("bpe --text " + text + " --vocab-size 270 --save " + hard.string()), {"name the same file"});
  expect_refused(scratchgrad("bpe --text " + text + " --vocab-size 270 --save /dev/null"), {"--save /dev/null", "not a regular file"});
  EXPECT_EQ(slurp(text), story);
}

TEST(TokenizerHardening, ABpeSaveThatFailsKeepsThePreviousTokenizer) {
  std::string story;  // words of 3 to 7 letters from a fixed generator: pairs enough for 300 merges
  uint32_t state = 1;
  for (int i = 0; i < 6000; ++i) {
    state = state * 1664525u + 1013904223u;
    for (uint32_t n = 3 + (state >> 28) % 5, k = 0; k < n; ++k) story += char('a' + (state >> (3 * k)) % 26);
    story += ' ';
  }
  const std::string text = write_file("many_words.txt", story);
  const fs::path saved = scratch("kept.bpe");
  fs::remove(saved);
  const Shell first = scratchgrad("bpe --text " + text + " --vocab-size 600 --save " + saved.string());
  ASSERT_EQ(first.status, 0) << first.err;
  const std::string before = slurp(saved);
  ASSERT_GT(before.size(), 4096u);  // so that a 4 KiB file-size limit stops the next save half way
  const Shell r = testing_process::shell("ulimit -f 4 && " + kBin + " bpe --text " + text + " --vocab-size 590 --save " +
                                         saved.string());
  expect_refused(r, {"kept.bpe", "File too large", "the previous file is kept"});
  EXPECT_EQ(slurp(saved), before);
  for (const auto& entry : fs::directory_iterator(saved.parent_path()))
    EXPECT_FALSE(entry.path().filename().string().starts_with("kept.bpe.tmp")) << entry.path();
}

// ---------------------------------------------------------------- tokenize --decode, --checkpoint

TEST(TokenizerHardening, TokenizeDecodesIdsToTheirBytes) {
  const std::string bytes = std::string("Hello w\xc3\xb6rld\n\t\xff\x00 ok", 19) + "<|endoftext|>";
  const Shell ids = scratchgrad("tokenize --tokenizer gpt2 --tokenizer-file " + kGpt2.string() + " --ids --text " +
                                write_file("bytes.txt", bytes));
  ASSERT_EQ(ids.status, 0) << ids.err;
  const Shell back = scratchgrad("tokenize --tokenizer gpt2 --tokenizer-file " + kGpt2.string() + " --decode --text " +
                                 write_file("ids.txt", ids.out));
  ASSERT_EQ(back.status, 0) << back.err;
  EXPECT_EQ(back.out, bytes);  // as they are: invalid UTF-8 and NUL included, no newline added
  const Shell piped = testing_process::shell("printf '15496\\n\\t 995  50256' | " + kBin + " tokenize --tokenizer gpt2 "
                                             "--tokenizer-file " + kGpt2.string() + " --decode");
  ASSERT_EQ(piped.status, 0) << piped.err;
  EXPECT_EQ(piped.out, "Hello world<|endoftext|>");
  // a saved BPE of ours
  const std::string story = write_file("decode_story.txt", "the cat sat on the mat. the cat ate the rat. ");
  const std::string bpe = scratch("decode.bpe").string();
  ASSERT_EQ(scratchgrad("bpe --text " + story + " --vocab-size 260 --save " + bpe).status, 0);
  const Shell mine = testing_process::shell("echo 256 32 257 | " + kBin + " tokenize --tokenizer bpe --tokenizer-file " + bpe + " --decode");
  ASSERT_EQ(mine.status, 0) << mine.err;
  const tokenizer::Tokenizer t = tokenizer::Tokenizer::load(bpe);
  EXPECT_EQ(mine.out, t.decode({256, 32, 257}));

  const std::string g = "tokenize --tokenizer gpt2 --tokenizer-file " + kGpt2.string() + " --decode --text ";
  expect_refused(scratchgrad(g + write_file("bad_word.txt", "15496 99x 995")),
                 {"bad_word.txt: '99x' (word 2) is not a token id, a whole number from 0 to 50256"});
  expect_refused(scratchgrad(g + write_file("past.txt", "50257")), {"'50257' (word 1) is not a token id"});
  expect_refused(scratchgrad(g + write_file("negative.txt", "-1")), {"'-1' (word 1) is not a token id"});
  expect_refused(scratchgrad(g + write_file("wraps.txt", "4294967297")), {"'4294967297' (word 1) is not a token id"});
  expect_refused(scratchgrad(g + write_file("spaces.txt", " \n ")), {"spaces.txt holds no ids"});
  expect_refused(testing_process::shell("echo 1 2 | " + kBin + " tokenize --decode"),
                 {"--tokenizer char has no alphabet to decode with", "--checkpoint"});
  expect_refused(scratchgrad("tokenize --tokenizer char --decode --text " + write_file("char_ids.txt", "0 1")),
                 {"no alphabet to decode with"});
  expect_refused(scratchgrad(g + write_file("ids2.txt", "1") + " --ids"), {"--ids shows a text's ids; --decode reads ids"});
}

TEST(TokenizerHardening, TokenizeUsesACheckpointsOwnTokenizer) {
  std::string story;
  for (int i = 0; i < 30; ++i) story += "the cat sat on the warm mat and looked at the morning light.\n";
  const std::string text = write_file("ck_story.txt", story);
  const std::string small = " --model gpt --layers 1 --dim 16 --heads 2 --context 16 --batch 4 --warmup 1 --sample 0 --steps 2";
  // a BPE run: the checkpoint's tokenizer both ways
  const std::string bpe_ck = scratch("tok_bpe.safetensors").string();
  ASSERT_EQ(scratchgrad("train --tokenizer bpe --vocab-size 280 --text " + text + " --save " + bpe_ck + small).status, 0);
  const tokenizer::Tokenizer own =
      tokenizer::Tokenizer::from_text(nn::load_safetensors(bpe_ck).metadata.at("tokenizer.bpe"), "tokenizer.bpe");
  const Shell ids = scratchgrad("tokenize --checkpoint " + bpe_ck + " --ids --text " + write_file("cat.txt", "the cat sat"));
  ASSERT_EQ(ids.status, 0) << ids.err;
  std::string want;
  for (int32_t id : own.encode("the cat sat")) want += (want.empty() ? "" : " ") + std::to_string(id);
  EXPECT_EQ(ids.out, want + "\n");
  const Shell back = scratchgrad("tokenize --checkpoint " + bpe_ck + " --decode --text " + write_file("cat_ids.txt", ids.out));
  ASSERT_EQ(back.status, 0) << back.err;
  EXPECT_EQ(back.out, "the cat sat");
  // a character model: its alphabet decodes, and a character it lacks is refused
  const std::string char_ck = scratch("tok_char.safetensors").string();
  ASSERT_EQ(scratchgrad("train --steps 2 --text " + text + " --save " + char_ck).status, 0);
  const Shell chars = scratchgrad("tokenize --checkpoint " + char_ck + " --ids --text " + write_file("tac.txt", "tac"));
  ASSERT_EQ(chars.status, 0) << chars.err;
  const Shell char_back = scratchgrad("tokenize --checkpoint " + char_ck + " --decode --text " + write_file("tac_ids.txt", chars.out));
  ASSERT_EQ(char_back.status, 0) << char_back.err;
  EXPECT_EQ(char_back.out, "tac");
  expect_refused(scratchgrad("tokenize --checkpoint " + char_ck + " --text " + write_file("zq.txt", "zq")),
                 {"zq.txt", "character 'z' is not in the model's vocabulary"});
  expect_refused(scratchgrad("tokenize --checkpoint " + char_ck + " --decode --text " + write_file("big_id.txt", "9999")),
                 {"'9999' (word 1) is not a token id"});
  // flags that cannot apply
  expect_refused(scratchgrad("tokenize --checkpoint " + bpe_ck + " --tokenizer bpe --text " + text),
                 {"--tokenizer cannot be given with --checkpoint"});
  expect_refused(scratchgrad("tokenize --checkpoint " + bpe_ck + " --tokenizer-file " + kGpt2.string() + " --text " + text),
                 {"--tokenizer-file is for a checkpoint trained with --tokenizer gpt2"});
  const std::string gpt2_file = std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/reference/fixtures/gpt2/tiny_gpt2.safetensors";
  expect_refused(scratchgrad("tokenize --checkpoint " + gpt2_file + " --text " + text), {"holds no tokenizer", "--tokenizer gpt2"});
}

TEST(TokenizerHardening, AGpt2RunRefusesAnotherTokenizerAtItsPath) {
  const std::string encoder = slurp(kGpt2 / "encoder.json"), merges = slurp(kGpt2 / "vocab.bpe");
  const std::string folder = gpt2_folder("run_gpt2", encoder, merges);
  std::string story;
  for (int i = 0; i < 30; ++i) story += "the cat sat on the warm mat and looked at the morning light.\n";
  const std::string text = write_file("gpt2_run_story.txt", story);
  const std::string ck = scratch("gpt2_run.safetensors").string();
  const std::string small = " --model gpt --layers 1 --dim 16 --heads 2 --context 16 --batch 4 --warmup 1 --sample 0";
  ASSERT_EQ(scratchgrad("train --tokenizer gpt2 --tokenizer-file " + folder + " --steps 2 --text " + text + " --save " + ck + small).status, 0);
  const std::string fingerprint = tokenizer::load_gpt2_tokenizer(folder).fingerprint();
  EXPECT_EQ(nn::load_safetensors(ck).metadata.at("tokenizer.gpt2_hash"), fingerprint);
  // the same tokenizer as a tokenizer.json: the same fingerprint, so it is accepted where the files moved
  const Shell moved = scratchgrad("generate --checkpoint " + ck + " --tokenizer-file " + tokenizer_json("same.json") +
                                  " --prompt Hello --tokens 2 --ids");
  EXPECT_EQ(moved.status, 0) << moved.err;
  // another tokenizer of the same size at the run's path: the ids of "!" and "\"" swapped
  nlohmann::json swapped = nlohmann::json::parse(encoder);
  std::swap(swapped["!"], swapped["\""]);
  write_file("run_gpt2/encoder.json", swapped.dump());
  const std::string other = tokenizer::load_gpt2_tokenizer(folder).fingerprint();
  ASSERT_NE(other, fingerprint);
  const std::string both = "(fingerprint " + fingerprint + "), but the files there now are another tokenizer (fingerprint " + other + ")";
  expect_refused(scratchgrad("generate --checkpoint " + ck + " --prompt Hello --tokens 2"), {ck, folder, both});
  expect_refused(scratchgrad("eval --checkpoint " + ck + " --text " + text), {both});
  expect_refused(scratchgrad("tokenize --checkpoint " + ck + " --text " + text), {both});
  expect_refused(scratchgrad("train --resume " + ck + " --steps 3"), {both});
  expect_refused(scratchgrad("generate --checkpoint " + ck + " --tokenizer-file " + folder + " --prompt Hello --tokens 2"),
                 {"--tokenizer-file " + folder + " is another tokenizer (fingerprint " + other + ")"});
}

}  // namespace
