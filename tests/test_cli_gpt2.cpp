// test_cli_gpt2.cpp — `scratchgrad generate` on a GPT-2 checkpoint (the fixture of make_gpt2_fixture.py):
// streamed ids equal to nn::generate's, the speed on stderr, and every bad input refused with one line
// and exit status 2.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "nn/generation.h"
#include "nn/gpt2.h"
#include "nn/lora.h"
#include "nn/perplexity.h"
#include "test_process.h"

namespace {

using CliRun = testing_process::Shell;

const std::string kModel = std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/reference/fixtures/gpt2/tiny_gpt2.safetensors";

CliRun scratchgrad(const std::string& args) {
  return testing_process::shell(std::string(SCRATCHGRAD_BIN_DIR) + "/scratchgrad " + args);
}

void expect_refused(const CliRun& r, const std::string& needle) {
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("scratchgrad: error:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
}

std::string joined(const std::vector<int64_t>& ids) {
  std::ostringstream out;
  for (size_t i = 0; i < ids.size(); ++i) out << (i ? " " : "") << ids[i];
  return out.str();
}

TEST(CliGpt2, GreedyIdsAreTheLibrarysAndTheSpeedIsReported) {
  CliRun r = scratchgrad("generate --checkpoint " + kModel + " --prompt-ids '7 3 41' --temperature 0 --tokens 9 --ids");
  ASSERT_EQ(r.status, 0) << r.err;
  auto model = nn::load_gpt2(kModel);
  nn::GenerationOptions options;
  options.sampling.temperature = 0;
  options.max_new_tokens = 9;
  autograd::Generator gen(0);
  EXPECT_EQ(r.out, joined(nn::generate(*model, {7, 3, 41}, options, gen)) + "\n");
  EXPECT_NE(r.err.find("9 tokens in "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" tokens/s, prompt of 3, 1 thread)"), std::string::npos) << r.err;
}

TEST(CliGpt2, LlmcsBinGeneratesTheSameIds) {
  const std::string bin = std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/reference/fixtures/gpt2/tiny_gpt2_llmc.bin";
  const std::string args = " --prompt-ids '7 3 41' --temperature 0 --tokens 9 --numerics exact";
  CliRun from_bin = scratchgrad("generate --checkpoint " + bin + args);
  ASSERT_EQ(from_bin.status, 0) << from_bin.err;
  EXPECT_EQ(from_bin.out, scratchgrad("generate --checkpoint " + kModel + args).out);
}

TEST(CliGpt2, SamplingIsReproducibleAndStopsAtTheStopId) {
  const std::string base = "generate --checkpoint " + kModel + " --prompt-ids 1,2 --temperature 0.9 --top-k 20 --top-p 0.9 "
                           "--seed 5 --tokens 12";
  CliRun a = scratchgrad(base), b = scratchgrad(base);
  ASSERT_EQ(a.status, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  std::istringstream words(a.out);
  std::vector<int64_t> ids;
  for (int64_t id; words >> id;) ids.push_back(id);
  ASSERT_EQ(ids.size(), 12u);
  CliRun stopped = scratchgrad(base + " --stop-id " + std::to_string(ids[4]));
  ASSERT_EQ(stopped.status, 0) << stopped.err;
  const size_t first = size_t(std::find(ids.begin(), ids.end(), ids[4]) - ids.begin());
  EXPECT_EQ(stopped.out, joined(std::vector<int64_t>(ids.begin(), ids.begin() + std::ptrdiff_t(first) + 1)) + "\n");
}

TEST(CliGpt2, TheContextsEndRefusesOrSlides) {
  // the fixture's context is 16: 3 + 14 − 1 = 16 positions fit, 15 tokens do not
  EXPECT_EQ(scratchgrad("generate --checkpoint " + kModel + " --prompt-ids '7 3 41' --tokens 14").status, 0);
  expect_refused(scratchgrad("generate --checkpoint " + kModel + " --prompt-ids '7 3 41' --tokens 15"),
                 "need 17 positions, more than the context of 16");
  CliRun slid = scratchgrad("generate --checkpoint " + kModel + " --prompt-ids '7 3 41' --tokens 40 --context-full slide");
  ASSERT_EQ(slid.status, 0) << slid.err;
  EXPECT_NE(slid.err.find("40 tokens in "), std::string::npos) << slid.err;
}

TEST(CliGpt2, BadInputIsRefused) {
  const std::string g = "generate --checkpoint " + kModel;
  expect_refused(scratchgrad(g + " --prompt hello"), "no GPT-2 tokenizer");
  expect_refused(scratchgrad(g), "--prompt-ids");
  expect_refused(scratchgrad(g + " --prompt-ids '1 x'"), "'x' is not a token id");
  expect_refused(scratchgrad(g + " --prompt-ids '1 -3'"), "'-3' is not a token id");
  expect_refused(scratchgrad(g + " --prompt-ids '1 50'"), "prompt token 50 at position 1 is outside the vocabulary of 50");
  expect_refused(scratchgrad(g + " --prompt-ids 1 --stop-id 50"), "--stop-id 50 is outside the vocabulary of 50");
  expect_refused(scratchgrad(g + " --prompt-ids 1 --context-full wrap"), "--context-full must be refuse or slide");
  expect_refused(scratchgrad(g + " --prompt-ids 1 --top-p 0"), "--top-p must be in (0, 1]");
  expect_refused(scratchgrad(g + " --prompt-ids 1 --heads 5"), "cannot split emb_dim 32 into 5 heads");
  expect_refused(scratchgrad(g + " --prompt-ids 1 --threads 0"), "--threads");
}

std::string scratch_file(const std::string& name, const std::string& contents) {
  const std::filesystem::path p = testing_process::scratch(name);
  std::ofstream(p, std::ios::binary) << contents;
  return p.string();
}

TEST(CliEval, Gpt2IdsGiveTheLibrarysSlidingWindowLoss) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 40; ++i) ids.push_back((i * 13 + 5) % 50);
  const std::string file = scratch_file("eval_ids.txt", joined(ids) + "\n");
  CliRun r = scratchgrad("eval --checkpoint " + kModel + " --ids-file " + file + " --stride 4 --numerics exact");
  ASSERT_EQ(r.status, 0) << r.err;
  auto model = nn::load_gpt2(kModel);
  const nn::TextLoss loss = nn::sliding_window_loss([&](const autograd::Tensor& x) { return (*model)(x); }, ids, 16, 4);
  EXPECT_NE(r.out.find("eval: 40 tokens, context 16, stride 4\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(fmt::format("mean loss {:.4f} nats, perplexity {:.3f}\n", loss.mean(), loss.perplexity())),
            std::string::npos)
      << r.out;
}

TEST(CliEval, ACharacterModelGetsBitsPerByte) {
  const std::string ck = testing_process::scratch("eval_char.safetensors").string();
  CliRun t = scratchgrad("train --steps 20 --save " + ck);
  ASSERT_EQ(t.status, 0) << t.err;
  const std::string text = scratch_file("eval_text.txt", "aditi likes warm dosa aditi likes warm dosa ");
  CliRun r = scratchgrad("eval --checkpoint " + ck + " --text " + text);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("eval: 44 tokens (44 bytes), context 8, stride 4\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bits per byte "), std::string::npos) << r.out;
  // one token per byte: bits per byte is the mean loss in bits
  const double mean = std::stod(r.out.substr(r.out.find("mean loss ") + 10));
  const double bpb = std::stod(r.out.substr(r.out.find("bits per byte ") + 14));
  EXPECT_NEAR(bpb, mean / std::log(2.0) * 43 / 44, 2e-4) << r.out;

  expect_refused(scratchgrad("eval --checkpoint " + ck + " --text " + text + " --stride 9"), "--stride 9 is longer than the context of 8");
  expect_refused(scratchgrad("eval --checkpoint " + ck), "--text FILE");
  expect_refused(scratchgrad("eval --checkpoint " + ck + " --ids-file " + text), "--ids-file is for GPT-2");
  expect_refused(scratchgrad("eval --checkpoint " + kModel + " --text " + text), "no GPT-2 tokenizer");
  expect_refused(scratchgrad("eval --checkpoint " + kModel + " --ids-file " + scratch_file("bad_ids.txt", "1 2 x")),
                 "--ids-file: 'x' is not a token id");
  expect_refused(scratchgrad("eval --checkpoint " + kModel + " --ids-file " + scratch_file("one_id.txt", "7")),
                 "scoring needs at least 2");
}

TEST(CliMerge, WritesTheAdaptedModelAsAPlainGpt2File) {
  auto adapted = nn::load_gpt2(kModel);
  autograd::manual_seed(4);
  const nn::LoraConfig config{.rank = 2, .alpha = 4, .targets = {"attn", "mlp"}};
  for (auto& [name, p] : nn::add_lora(*adapted, config)) {
    autograd::NoGradGuard no_grad;
    autograd::normal_(p, 0.0, 0.3);
  }
  const std::string adapters = testing_process::scratch("merge_adapters.safetensors").string();
  const std::string merged = testing_process::scratch("merge_out.safetensors").string();
  nn::save_lora(adapters, *adapted, config, kModel);
  CliRun r = scratchgrad("merge --lora " + adapters + " --out " + merged);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("(rank 2, alpha 4, attn,mlp)"), std::string::npos) << r.out;
  auto model = nn::load_gpt2(merged);
  autograd::NoGradGuard no_grad;
  const autograd::Tensor ids = autograd::from_vector(std::vector<int64_t>{4, 8, 15, 16, 23, 42}, {1, 6});
  const std::vector<float> got = (*model)(ids).to_vector<float>(), want = (*adapted)(ids).to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-5 * (1 + std::abs(want[i]))) << i;

  expect_refused(scratchgrad("merge --lora " + kModel + " --out " + merged), "not a LoRA adapters file");
  expect_refused(scratchgrad("merge --lora " + adapters), "--out");
}

}  // namespace
