// test_bfloat16_cli.cpp — --precision fp32|bf16 on train, generate and eval: bf16 runs the products in
// bfloat16 (autograd/autocast.h) in fast numerics, and generate keeps the weights in bfloat16 (a BF16
// folder read as stored); --numerics exact --precision bf16 is refused, and so is a precision not known.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "autograd/autograd.h"
#include "nn/safetensors.h"
#include "test_helpers.h"
#include "test_process.h"

namespace {

namespace fs = std::filesystem;
using CliRun = testing_process::Shell;
using testing_process::ids_in;

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

std::vector<double> losses(const std::string& out) {
  std::vector<double> values;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("step", 0) == 0 && line.find("| loss ") != std::string::npos)
      values.push_back(std::stod(line.substr(line.find("| loss ") + 7)));
  return values;
}

const std::string& corpus() {
  static const std::string path = [] {
    std::string text;
    for (int i = 0; i < 20; ++i) text += "the quick brown fox jumps over the lazy dog. ";
    const std::string p = testing_process::scratch("bf16_corpus.txt").string();
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }();
  return path;
}

std::string tiny_gpt_run(const std::string& more) {
  return "train --model gpt --preset tiny --text " + corpus() + " --context 16 --batch 4 --warmup 2 --sample 8 " + more;
}

TEST(Cli, RefusesBf16PrecisionWithExactNumericsAndUnknownPrecisions) {
  expect_refused(scratchgrad(tiny_gpt_run("--steps 5 --precision bf16 --numerics exact")),
                 "--precision bf16 runs in fast numerics");
  expect_refused(scratchgrad("train --precision half"), "--precision: expected fp32 or bf16, got 'half'");
  expect_refused(scratchgrad("generate --checkpoint /nonexistent.safetensors --precision bf16 --numerics exact"),
                 "--precision bf16 runs in fast numerics");  // before any file is read
  expect_refused(scratchgrad("eval --checkpoint /nonexistent.safetensors --text " + corpus() +
                             " --precision fp16"),
                 "--precision: expected fp32 or bf16, got 'fp16'");
}

// A GPT trained in bf16 learns; its losses are not fp32's (the products round) but near them; the
// reference kernels' bf16 loops train it to nearly the same losses; fp32 is the default.
TEST(Precision, Bf16TrainsAGptNearTheFloat32Run) {
  const fs::path ck = testing_process::scratch("bf16_gpt.safetensors");
  const fs::path ck32 = testing_process::scratch("bf16_gpt_fp32.safetensors");
  CliRun bf16 = scratchgrad(tiny_gpt_run("--steps 30 --eval-every 10 --lr 1e-2 --precision bf16 --save " + ck.string()));
  CliRun fp32 = scratchgrad(tiny_gpt_run("--steps 30 --eval-every 10 --lr 1e-2 --save " + ck32.string()));
  CliRun fp32_named = scratchgrad(tiny_gpt_run("--steps 30 --eval-every 10 --lr 1e-2 --precision fp32"));
  CliRun loops = scratchgrad(tiny_gpt_run("--steps 30 --eval-every 10 --lr 1e-2 --precision bf16 --kernels reference"));
  for (const CliRun* r : {&bf16, &fp32, &fp32_named, &loops}) ASSERT_EQ(r->status, 0) << r->command << "\n" << r->err;
  const std::vector<double> b = losses(bf16.out), f = losses(fp32.out), l = losses(loops.out);
  ASSERT_GE(b.size(), 3u);
  ASSERT_EQ(b.size(), f.size());
  ASSERT_EQ(l.size(), f.size());
  EXPECT_LT(b.back(), b.front() - 0.5) << bf16.out;  // it learns
  EXPECT_EQ(losses(fp32_named.out), f);               // fp32 is the default
  for (size_t i = 0; i < f.size(); ++i) {
    EXPECT_NEAR(b[i], f[i], 0.05 * f[i]) << "step " << i;
    EXPECT_NEAR(l[i], b[i], 0.02 * b[i]) << "step " << i;
  }

  // its checkpoint: float32 master weights, not the fp32 run's (the products rounded), and the precision
  // recorded for a resumed run to go on in
  const nn::Checkpoint saved = nn::load_safetensors(ck.string()), saved32 = nn::load_safetensors(ck32.string());
  EXPECT_EQ(saved.metadata.at("run.precision"), "bf16");
  EXPECT_EQ(saved32.metadata.at("run.precision"), "fp32");
  bool any_differs = false;
  for (const auto& [name, t] : saved.tensors) {
    EXPECT_NE(t.dtype(), autograd::DType::BFloat16) << name;
    for (const auto& [name32, t32] : saved32.tensors)
      if (name32 == name && name.find("weight") != std::string::npos) any_differs |= !autograd::equal(t, t32);
  }
  EXPECT_TRUE(any_differs) << "bf16 products should move the weights";
  const fs::path resumed = testing_process::scratch("bf16_gpt_resumed.safetensors");
  CliRun more = scratchgrad("train --resume " + ck.string() + " --steps 32 --save " + resumed.string());
  ASSERT_EQ(more.status, 0) << more.err;
  EXPECT_EQ(nn::load_safetensors(resumed.string()).metadata.at("run.precision"), "bf16");

  // scored and sampled in bf16
  CliRun e = scratchgrad("eval --checkpoint " + ck.string() + " --text " + corpus() + " --precision bf16");
  ASSERT_EQ(e.status, 0) << e.err;
  EXPECT_NE(e.out.find("bits per byte"), std::string::npos) << e.out;
  CliRun g = scratchgrad("generate --checkpoint " + ck.string() + " --prompt 'the quick' --tokens 12 --ids --precision bf16");
  CliRun g_uncached = scratchgrad("generate --checkpoint " + ck.string() +
                                  " --prompt 'the quick' --tokens 12 --ids --precision bf16 --no-kv-cache");
  ASSERT_EQ(g.status, 0) << g.err;
  ASSERT_EQ(g_uncached.status, 0) << g_uncached.err;
  EXPECT_EQ(ids_in(g.out).size(), 12u);
  EXPECT_EQ(ids_in(g.out), ids_in(g_uncached.out));
  expect_refused(scratchgrad("generate --checkpoint " + ck.string() + " --precision bf16 --numerics exact"),
                 "--precision bf16 runs in fast numerics");
}

// The PyTorch twin's tiny BF16 folders, generated from in bf16 (the matrices kept as stored, the products
// on bfloat16 operands): the greedy ids of PyTorch's float32 run on the same weights.
TEST(Precision, Bf16GenerationOnBf16FoldersGivesTheFloat32GreedyIds) {
  const std::string fixtures = std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/reference/fixtures/hf/";
  for (const std::string family : {"llama32", "qwen2", "qwen3", "smollm2", "mistral"}) {
    SCOPED_TRACE(family);
    const nn::Checkpoint expected = nn::load_safetensors(fixtures + family + "_expected.safetensors");
    std::vector<int64_t> prompt, greedy;
    for (const auto& [name, tensor] : expected.tensors) {
      if (name == "ids") prompt = tensor.to_vector<int64_t>();
      if (name == "greedy") greedy = tensor.to_vector<int64_t>();
    }
    ASSERT_GE(prompt.size(), 5u);
    prompt.resize(5);
    ASSERT_FALSE(greedy.empty());
    CliRun r = scratchgrad(fmt::format("generate --checkpoint {} --prompt-ids '{}' --tokens {} --temperature 0 --ids "
                                       "--stop-id -1 --precision bf16",
                                       fixtures + family, fmt::join(prompt, " "), greedy.size()));
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(ids_in(r.out), greedy);
  }
}

}  // namespace
