// test_seed_programs.cpp — the workshop's character model, line by line.
//
// ctest's seed_program.mini_self_attention compares the whole output of build/bin/mini_self_attention
// with tests/reference/seed_programs/mini_self_attention.expected byte for byte. This test checks the
// same five lines one at a time, so a failure says which line went wrong and what it means. The
// expected lines are what mini_self_attention.py prints under PyTorch 1.13's portable CPU kernels
// (ATEN_CPU_CAPABILITY=default, one thread); a plain `python3` run uses the AVX2 kernels and prints
// 0.275 / 0.110 at steps 200 / 300 instead (see reference/seed_programs/README.md).
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "test_process.h"

namespace {

struct ProgramRun {
  int status = -1;
  std::vector<std::string> lines;
};

// Runs build/bin/<program> and returns its exit status and the lines it printed.
ProgramRun run_program(const std::string& program) {
  const testing_process::Shell shell = testing_process::shell(std::string(SCRATCHGRAD_BIN_DIR) + "/" + program);
  ProgramRun r;
  r.status = shell.status;
  std::istringstream out(shell.out);
  for (std::string line; std::getline(out, line);) r.lines.push_back(line);
  return r;
}

}  // namespace

TEST(SeedPrograms, MiniSelfAttentionPrintsPortablePyTorchsLossesAndText) {
  const ProgramRun r = run_program("mini_self_attention");
  ASSERT_EQ(r.status, 0) << SCRATCHGRAD_BIN_DIR "/mini_self_attention did not exit cleanly";
  ASSERT_EQ(r.lines.size(), 5u) << "expected four loss lines and the generated line";

  EXPECT_EQ(r.lines[0], "step   0 | loss 2.655")
      << "the loss before any update: the initial weights (manual_seed(7): Embedding's normal_, Linear's "
         "uniform_) or the first batch differ from PyTorch's";
  EXPECT_EQ(r.lines[1], "step 100 | loss 0.219")
      << "step 100 is still close to PyTorch even with last-bit differences; a change here means the "
         "training itself (forward, backward or Adam) is off";
  EXPECT_EQ(r.lines[2], "step 200 | loss 0.172")
      << "training is chaotic after step ~100: step 200 matches only when every rounding matches "
         "PyTorch's portable kernels (0.275 is PyTorch's AVX2 kernels; see docs/parity.md and "
         "build/bin/scratchgrad_tests --gtest_filter='Parity*' for the first op that differs)";
  EXPECT_EQ(r.lines[3], "step 300 | loss 0.131")
      << "step 300 matches only when every rounding matches PyTorch's portable kernels (0.110 is "
         "PyTorch's AVX2 kernels); run the Parity tests to find the first op that differs";
  EXPECT_EQ(r.lines[4], "generated: aditi likes warm dosaw")
      << "greedy generation from \"aditi li\" after 301 steps";
}
