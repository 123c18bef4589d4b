// test_tokenizer_cli.cpp — `scratchgrad tokenize` and `scratchgrad bpe` as a user runs them, and every bad input
// refused with one line on stderr and exit status 2.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "test_process.h"

#ifndef SCRATCHGRAD_SOURCE_DIR
#define SCRATCHGRAD_SOURCE_DIR "."
#endif

namespace {

namespace fs = std::filesystem;
using testing_process::Shell;

Shell scratchgrad(const std::string& args) {
  return testing_process::shell(std::string(SCRATCHGRAD_BIN_DIR) + "/scratchgrad " + args);
}

std::string file_with(const std::string& name, const std::string& contents) {
  const fs::path p = testing_process::scratch(name);
  std::ofstream(p, std::ios::binary) << contents;
  return p.string();
}

const std::string kGpt2 = std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/tokenizer/gpt2";

void expect_refused(const Shell& r, const std::string& needle) {
  EXPECT_EQ(r.status, 2) << r.command << "\n" << r.err;
  EXPECT_EQ(testing_process::count(r.err, "\n"), 1) << r.err;
  EXPECT_NE(r.err.find("scratchgrad: error: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
}

std::string some_text() {
  std::string s;
  for (int i = 0; i < 30; ++i) s += "the cat sat on the mat; the cat ate the rat. ";
  return s;
}

TEST(TokenizerCli, Gpt2IdsForScripts) {
  const Shell r = scratchgrad("tokenize --tokenizer gpt2 --tokenizer-file " + kGpt2 + " --ids --text " +
                              file_with("hello.txt", "Hello world<|endoftext|>"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "15496 995 50256\n");
}

TEST(TokenizerCli, EachTokenWithItsIdFromStandardInput) {
  const Shell r = testing_process::shell("printf 'Hello world' | " + std::string(SCRATCHGRAD_BIN_DIR) +
                                         "/scratchgrad tokenize --tokenizer gpt2 --tokenizer-file " + kGpt2);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, " 15496 \"Hello\"\n   995 \" world\"\n2 tokens for 11 bytes (5.50 bytes per token)\n");
  const Shell c = scratchgrad("tokenize --tokenizer char --ids --text " + file_with("abc.txt", "abcab"));
  ASSERT_EQ(c.status, 0) << c.err;
  EXPECT_EQ(c.out, "0 1 2 0 1\n");
}

TEST(TokenizerCli, BpeExplainsItsFirstMergesAndSavesWhatTokenizeReads) {
  const std::string text = file_with("cats.txt", some_text());
  const std::string saved = testing_process::scratch("cats.bpe").string();
  const Shell r = scratchgrad("bpe --text " + text + " --vocab-size 270 --explain --explain-count 3 --save " + saved);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("merge    1: \"a\" + \"t\" -> token 256 \"at\" (180 times)"), std::string::npos) << r.out;
  EXPECT_EQ(testing_process::count(r.out, "merge "), 3) << r.out;
  EXPECT_NE(r.out.find("learned 14 merges (gpt4 split) from 1350 bytes"), std::string::npos) << r.out;
  const Shell t = scratchgrad("tokenize --tokenizer bpe --tokenizer-file " + saved + " --text " + text);
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_NE(t.out.find("\" the\"\n"), std::string::npos) << t.out;
}

TEST(TokenizerCli, BadInputIsRefusedWithExitStatus2) {
  const std::string text = file_with("small.txt", "abcd");
  expect_refused(scratchgrad("bpe --text " + file_with("empty.txt", "") + " --vocab-size 300"), "the training text is empty");
  expect_refused(scratchgrad("bpe --text " + text + " --vocab-size 100"), "a vocabulary of 100 is too small");
  expect_refused(scratchgrad("bpe --text " + text + " --vocab-size 1000"), "larger than this text allows");
  expect_refused(scratchgrad("bpe --text " + text + " --pattern gpt9"), "unknown split pattern 'gpt9'");
  expect_refused(scratchgrad("tokenize --tokenizer bpe --text " + text), "needs --tokenizer-file");
  expect_refused(scratchgrad("tokenize --tokenizer bpe --tokenizer-file " + file_with("cut.bpe", "scratchgrad-bpe 1\npattern gpt4\nmerges 3\nspecials 0\nmerge 97 98\n") +
                             " --text " + text),
                 "truncated: 1 merges of the 3 announced");
  expect_refused(scratchgrad("tokenize --tokenizer gpt2 --tokenizer-file " + kGpt2 + " --text " + file_with("empty2.txt", "")),
                 "is empty");
  expect_refused(scratchgrad("tokenize --tokenizer wordpiece --text " + text), "unknown --tokenizer 'wordpiece'");
  expect_refused(scratchgrad("tokenize --tokenizer gpt2 --tokenizer-file " + testing_process::scratch("no-such-dir").string() +
                             " --text " + text),
                 "no GPT-2 tokenizer at");
}

}  // namespace
