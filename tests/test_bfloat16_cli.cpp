// test_bfloat16_cli.cpp — --precision fp32|bf16 on train, generate and eval: bf16 runs the products in
// bfloat16 (autograd/autocast.h) in fast numerics; --numerics exact --precision bf16 is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "test_helpers.h"
#include "test_process.h"

namespace {

namespace fs = std::filesystem;
using CliRun = testing_process::Shell;

CliRun scratchgrad(const std::string& args) {
  return testing_process::shell(std::string(SCRATCHGRAD_BIN_DIR) + "/scratchgrad " + args);
}

// status 2 and one line on stderr naming the problem (recorded for docs/reliability.md's catalog)
void expect_refused(const CliRun& r, const std::string& needle) {
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
  const size_t program = r.command.find("/bin/scratchgrad ");
  const std::string call = program == std::string::npos ? r.command : r.command.substr(program + 5);
  testing_helpers::record_refusal(call, r.err.substr(0, r.err.find('\n')));
}

TEST(Cli, RefusesBf16PrecisionWithExactNumerics) {
  expect_refused(scratchgrad("train --precision bf16 --numerics exact"), "--precision bf16 runs in fast numerics");
  expect_refused(scratchgrad("train --precision half"), "--precision: expected fp32 or bf16, got 'half'");
}

// A GPT trained a few steps in bf16, then scored and sampled in bf16: each runs, and its losses are those of
// a model that learns (finite, falling from about ln V).
TEST(Precision, Bf16TrainEvalGenerate) {
  std::string text;
  for (int i = 0; i < 20; ++i) text += "the quick brown fox jumps over the lazy dog. ";
  const fs::path corpus = testing_process::scratch("bf16_corpus.txt");
  std::ofstream(corpus) << text;
  const fs::path ck = testing_process::scratch("bf16.safetensors");
  CliRun t = scratchgrad("train --model gpt --preset tiny --steps 20 --warmup 2 --batch 4 --eval-every 10 --text " +
                         corpus.string() + " --precision bf16 --save " + ck.string());
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_NE(t.out.find("step   0 | loss"), std::string::npos) << t.out;
  CliRun e = scratchgrad("eval --checkpoint " + ck.string() + " --text " + corpus.string() + " --precision bf16");
  ASSERT_EQ(e.status, 0) << e.err;
  CliRun g = scratchgrad("generate --checkpoint " + ck.string() + " --tokens 5 --precision bf16");
  ASSERT_EQ(g.status, 0) << g.err;
  expect_refused(scratchgrad("generate --checkpoint " + ck.string() + " --precision bf16 --numerics exact"),
                 "--precision bf16 runs in fast numerics");
}

}  // namespace
