// test_piped_text.cpp — a pipe as --text (what `--text <(cat a b)` passes, /dev/fd/63, or a FIFO): read
// as a file is, under the same 1 GiB limit, and recorded as a text that a resume cannot read again.
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "nn/safetensors.h"
#include "test_helpers.h"
#include "test_process.h"
#include "text.h"

namespace fs = std::filesystem;
using testing_process::Shell;
using testing_process::scratch;

namespace {

const std::string kBin = std::string(SCRATCHGRAD_BIN_DIR) + "/scratchgrad";
const std::string kRun = " train --model gpt --preset tiny --steps 3 --warmup 1 --eval-every 10 --sample 0 --threads 1";

Shell scratchgrad(const std::string& args) { return testing_process::shell(kBin + " " + args); }
// bash, for its process substitution: `<(cat f)` becomes a pipe named /dev/fd/N
Shell in_bash(const std::string& args) { return testing_process::shell("bash -c '" + kBin + " " + args + "'"); }

std::string text() {
  std::string t;
  for (int i = 0; i < 40; ++i) t += "pack my box with five dozen liquor jugs. ";
  return t;
}

fs::path text_file() {
  const fs::path p = scratch("piped_text.txt");
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text();
  return p;
}

// Status 2 and one line on stderr naming `needle`, as every refused input gets (recorded for the catalog).
void expect_refused(const Shell& r, const std::string& needle) {
  EXPECT_EQ(r.status, 2) << r.command << "\n" << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("scratchgrad: error:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
  const size_t program = r.command.find("/bin/scratchgrad ");
  const std::string call = program == std::string::npos ? r.command : r.command.substr(program + 5);
  testing_helpers::record_refusal(call, r.err.substr(0, r.err.find('\n')));
}

// A run on the text through a pipe, saved to `name`.
fs::path piped_run(const std::string& name, const std::string& flags = "") {
  const fs::path saved = scratch(name);
  const Shell r = in_bash(kRun + flags + " --text <(cat " + text_file().string() + ") --save " + saved.string());
  EXPECT_EQ(r.status, 0) << r.command << "\n" << r.err;
  return saved;
}

}  // namespace

TEST(PipedText, TrainsOnAPipeAsOnTheFileItself) {
  const fs::path from_file = scratch("from_file.safetensors");
  const Shell r = scratchgrad(kRun + " --text " + text_file().string() + " --save " + from_file.string());
  ASSERT_EQ(r.status, 0) << r.err;
  const fs::path from_pipe = piped_run("from_pipe.safetensors");
  const nn::Checkpoint a = nn::load_safetensors(from_file.string()), b = nn::load_safetensors(from_pipe.string());
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i)
    EXPECT_TRUE(autograd::equal(a.tensors[i].second, b.tensors[i].second)) << a.tensors[i].first;
  // the same text by its size and hash; the pipe recorded as one (its path, /dev/fd/N, names nothing later)
  EXPECT_EQ(b.metadata.at("run.text_hash"), cli::tokenize_text(text(), "memory").hash);
  EXPECT_EQ(b.metadata.at("run.text_bytes"), std::to_string(text().size()));
  EXPECT_EQ(a.metadata.at("run.text_pipe"), "0");
  EXPECT_EQ(b.metadata.at("run.text_pipe"), "1");
  EXPECT_TRUE(b.metadata.at("run.text").starts_with("/dev/fd/")) << b.metadata.at("run.text");
}

TEST(PipedText, APipedRunResumesOnTheSameTextPassedAgain) {
  const fs::path saved = piped_run("resumed_from_pipe.safetensors");
  const Shell from_file = scratchgrad("train --resume " + saved.string() + " --steps 4 --text " + text_file().string());
  EXPECT_EQ(from_file.status, 0) << from_file.err;
  const Shell from_pipe = in_bash("train --resume " + saved.string() + " --steps 4 --text <(cat " + text_file().string() + ")");
  EXPECT_EQ(from_pipe.status, 0) << from_pipe.err;
}

TEST(PipedText, TheBpeTokenizerReadsAPipeToo) {
  const fs::path saved = piped_run("bpe_from_pipe.safetensors", " --tokenizer bpe --vocab-size 270");
  EXPECT_EQ(nn::load_safetensors(saved.string()).metadata.at("run.text_pipe"), "1");
}

TEST(Hardening, RefusesResumingAPipedRunWithoutItsText) {
  const fs::path saved = piped_run("no_text_to_resume.safetensors");
  expect_refused(scratchgrad("train --resume " + saved.string() + " --steps 4"),
                 "the run read its text from a pipe (/dev/fd/");
}

// The limit is counted as the bytes come: 1 GiB and one byte of zeros (valid UTF-8) through a pipe.
TEST(Hardening, RefusesAPipeThatSendsMoreThanTheTextLimit) {
  const Shell r = testing_process::shell("head -c " + std::to_string(cli::kMaxTextBytes + 1) + " /dev/zero | " + kBin +
                                         " bpe --text /dev/stdin");
  expect_refused(r, "text /dev/stdin (a pipe) sent more than the limit of 1073741824 bytes (1 GiB)");
}
