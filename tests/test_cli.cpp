// test_cli.cpp — the scratchgrad command line: the default run, checkpoints, and every bad input
// refused with one line on stderr and exit status 2.
#include <gtest/gtest.h>

#include "test_helpers.h"
#include "test_process.h"
#include "autograd/cpu/runtime/core_peak.h"
#include "nn/safetensors.h"
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;

using CliRun = testing_process::Shell;
using testing_process::slurp;

// Runs `scratchgrad <args>` through the shell, capturing stdout, stderr and the exit status.
CliRun scratchgrad(const std::string& args) {
  return testing_process::shell(std::string(SCRATCHGRAD_BIN_DIR) + "/scratchgrad " + args);
}

fs::path temp_file(const std::string& name, const std::string& contents) {
  fs::path p = testing_process::scratch(name);
  std::ofstream(p, std::ios::binary) << contents;
  return p;
}

int count_lines(const std::string& s) { return int(std::count(s.begin(), s.end(), '\n')); }

// The refusal every bad input must get: status 2, exactly one line on stderr mentioning `needle`.
void expect_refused(const CliRun& r, const std::string& needle) {
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("scratchgrad: error:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
  EXPECT_EQ(r.err.find("terminate"), std::string::npos);
  const size_t program = r.command.find("/bin/scratchgrad ");
  const std::string call = program == std::string::npos ? r.command : r.command.substr(program + 5);
  testing_helpers::record_refusal(call, r.err.substr(0, r.err.find('\n')));
}

TEST(Cli, DefaultTrainReproducesTheWorkshopRun) {
  CliRun r = scratchgrad("train");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("step   0 | loss 2.655"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("step 100 | loss 0.219"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("generated: aditi likes warm dosaw\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\r'), std::string::npos) << "piped output must be plain lines";
}

TEST(Cli, CheckpointRoundTripsThroughGenerateAndInfo) {
  fs::path ck = fs::temp_directory_path() / ("scratchgrad_cli_rt_" + std::to_string(::getpid()) + ".safetensors");
  CliRun t = scratchgrad("train --steps 120 --save " + ck.string());
  ASSERT_EQ(t.status, 0) << t.err;
  ASSERT_TRUE(fs::exists(ck));
  // greedy generation from the saved model continues exactly like the end-of-training sample
  CliRun g = scratchgrad("generate --checkpoint " + ck.string() + " --tokens 14");
  ASSERT_EQ(g.status, 0) << g.err;
  std::string sample = t.out.substr(t.out.find("generated: ") + 11);
  sample = sample.substr(0, sample.find('\n') + 1);
  EXPECT_EQ(g.out, sample);
  CliRun i = scratchgrad("info --checkpoint " + ck.string());
  ASSERT_EQ(i.status, 0) << i.err;
  EXPECT_NE(i.out.find("vocab 13 dim 24 context 8 heads 1"), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("q.weight"), std::string::npos) << i.out;
  // sampling is reproducible for a seed
  CliRun s1 = scratchgrad("generate --checkpoint " + ck.string() + " --temperature 1.0 --top-k 5 --seed 4 --prompt dosa");
  CliRun s2 = scratchgrad("generate --checkpoint " + ck.string() + " --temperature 1.0 --top-k 5 --seed 4 --prompt dosa");
  EXPECT_EQ(s1.status, 0) << s1.err;
  EXPECT_EQ(s1.out, s2.out);
  fs::remove(ck);
}

TEST(Cli, HeldOutLossAndHeadsOnALongerText) {
  std::string text;
  for (int i = 0; i < 30; ++i) text += "the quick brown fox jumps over the lazy dog. ";
  fs::path f = temp_file("fox.txt", text);
  CliRun r = scratchgrad("train --text " + f.string() + " --steps 30 --eval-every 10 --heads 4 --dim 32 --context 16");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("held-out"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("generated: the quick brown f"), std::string::npos) << r.out;
}

TEST(Cli, RefusesMissingOrEmptyOrShortText) {
  expect_refused(scratchgrad("train --text /nonexistent/story.txt"), "/nonexistent/story.txt");
  expect_refused(scratchgrad("train --text " + temp_file("empty.txt", "").string()), "is empty");
  expect_refused(scratchgrad("train --text " + temp_file("short.txt", "abcdefgh").string()), "needs at least 10");
  expect_refused(scratchgrad("train --text " + temp_file("bad.txt", "ab\xff\xfe").string()), "UTF-8");
}

TEST(Cli, RefusesBadFlags) {
  expect_refused(scratchgrad("train --steps abc"), "--steps");
  expect_refused(scratchgrad("train --steps 0"), "--steps");
  expect_refused(scratchgrad("train --batch -3"), "--batch");
  expect_refused(scratchgrad("train --heads 5"), "--heads");
  expect_refused(scratchgrad("train --lr -0.1"), "--lr");
  expect_refused(scratchgrad("train --device tpu"), "--device");
  expect_refused(scratchgrad("train --bogus 1"), "bogus");
  expect_refused(scratchgrad("generate"), "--checkpoint");
}

TEST(Cli, RefusesAnUnwritableSavePathBeforeTraining) {
  CliRun r = scratchgrad("train --save /nonexistent/dir/model.safetensors");
  expect_refused(r, "/nonexistent/dir/model.safetensors");
  EXPECT_EQ(r.out.find("step"), std::string::npos) << "must fail before training";
}

TEST(Cli, RefusesPromptOutsideTheVocabulary) {
  fs::path ck = fs::temp_directory_path() / ("scratchgrad_cli_vocab_" + std::to_string(::getpid()) + ".safetensors");
  ASSERT_EQ(scratchgrad("train --steps 2 --save " + ck.string()).status, 0);
  expect_refused(scratchgrad("generate --checkpoint " + ck.string() + " --prompt 'dosa!'"), "'!'");
  expect_refused(scratchgrad("generate --checkpoint " + ck.string() + " --temperature -1"), "--temperature");
  fs::remove(ck);
}

// The same file as another safetensors writer would make it: no checksum entry (the header keeps its
// length, padded with the spaces JSON allows, so the data offsets stay right).
std::string without_checksum(std::string file) {
  const std::regex entry(R"("scratchgrad\.checksum":"fnv1a64:[0-9a-f]{16}",|,"scratchgrad\.checksum":"fnv1a64:[0-9a-f]{16}")");
  std::smatch m;
  if (!std::regex_search(file, m, entry)) return file;
  size_t header_end = 8;
  for (int i = 0; i < 8; ++i) header_end += size_t(static_cast<unsigned char>(file[size_t(i)])) << (8 * i);
  const size_t at = size_t(m.position()), n = size_t(m.length());
  file.erase(at, n);
  file.insert(header_end - n, n, ' ');
  return file;
}

TEST(Cli, RefusesCorruptAndTruncatedCheckpoints) {
  fs::path ck = fs::temp_directory_path() / ("scratchgrad_cli_bad_" + std::to_string(::getpid()) + ".safetensors");
  ASSERT_EQ(scratchgrad("train --steps 2 --save " + ck.string()).status, 0);
  std::string good = slurp(ck);
  expect_refused(scratchgrad("info --checkpoint /nonexistent.safetensors"), "/nonexistent.safetensors");
  expect_refused(scratchgrad("info --checkpoint " + temp_file("tiny.st", "abc").string()), "too short");
  expect_refused(scratchgrad("info --checkpoint " + temp_file("trunc.st", good.substr(0, good.size() - 100)).string()),
                 "truncated");
  expect_refused(scratchgrad("info --checkpoint " + temp_file("noise.st", std::string(64, 'x')).string()),
                 "header length");
  std::string bad_json = good;
  bad_json[9] = '#';  // inside the JSON header
  expect_refused(scratchgrad("info --checkpoint " + temp_file("json.st", bad_json).string()), "JSON");
  std::string bad_dtype = good;
  bad_dtype.replace(bad_dtype.find("\"F32\""), 5, "\"F16\"");
  expect_refused(scratchgrad("info --checkpoint " + temp_file("dtype.st", bad_dtype).string()), "dtype");
  std::string edited = good;  // metadata edited by hand: the checksum no longer holds
  edited.replace(edited.find("\"dim\":\"24\""), 10, "\"dim\":\"12\"");
  expect_refused(scratchgrad("generate --checkpoint " + temp_file("edited.st", edited).string()), "checksum mismatch");
  std::string bad_shape = without_checksum(good);  // the same lie in a file with no checksum: load_state_dict sees it
  ASSERT_EQ(bad_shape.find("scratchgrad.checksum"), std::string::npos);
  bad_shape.replace(bad_shape.find("\"dim\":\"24\""), 10, "\"dim\":\"12\"");
  expect_refused(scratchgrad("generate --checkpoint " + temp_file("shape.st", bad_shape).string()), "size mismatch");
  CliRun foreign = scratchgrad("generate --tokens 5 --checkpoint " + temp_file("foreign.st", without_checksum(good)).string());
  EXPECT_EQ(foreign.status, 0) << foreign.err;  // no checksum: loads, as files from other tools do
  fs::remove(ck);
}

}  // namespace

// The trainer clips inside AdamW's update (optim::clip_coefficient, then step(coefficient); test_optim.cpp
// checks that this is clip_grad_norm_ then step(), bit for bit). Here: a clip that binds changes the weights a
// run ends with, and one that never binds leaves every bit as --clip 0 (no clipping) does.
TEST(Cli, GptClippingTakesEffectInsideTheUpdate) {
  std::string text;
  for (int i = 0; i < 20; ++i) text += "a stitch in time saves nine. ";
  const fs::path corpus = temp_file("clip_corpus.txt", text);
  auto weights_after = [&](const std::string& clip) {
    const fs::path ck = testing_process::scratch("clip_" + clip + ".safetensors");
    CliRun t = scratchgrad("train --model gpt --preset tiny --steps 4 --warmup 1 --batch 2 --clip " + clip + " --text " +
                           corpus.string() + " --save " + ck.string());
    EXPECT_EQ(t.status, 0) << t.err;
    nn::NamedTensors weights;
    for (auto& [name, tensor] : nn::load_safetensors(ck.string()).tensors)
      if (name.rfind("optimizer.", 0) != 0) weights.emplace_back(name, tensor);
    return weights;
  };
  const nn::NamedTensors none = weights_after("0"), binding = weights_after("0.001"), loose = weights_after("1e9");
  ASSERT_FALSE(none.empty());
  ASSERT_EQ(binding.size(), none.size());
  ASSERT_EQ(loose.size(), none.size());
  bool moved = false;
  for (size_t i = 0; i < none.size(); ++i) {
    moved = moved || !equal(binding[i].second, none[i].second);
    testing_helpers::expect_same_float_bits(loose[i].second, none[i].second, none[i].first + ", a clip that never binds");
  }
  EXPECT_TRUE(moved) << "a gradient norm clipped to 0.001 left every weight as no clipping does";
}

TEST(Cli, TrainsAGptThenGeneratesAndDescribesIt) {
  std::string text;
  for (int i = 0; i < 40; ++i) text += "the quick brown fox jumps over the lazy dog. ";
  const fs::path corpus = temp_file("gpt_corpus.txt", text);
  const fs::path ck = testing_process::scratch("gpt.safetensors");
  const fs::path graph = testing_process::scratch("gpt.dot"), plot = testing_process::scratch("gpt.svg");
  CliRun t = scratchgrad("train --model gpt --preset tiny --steps 30 --warmup 5 --batch 4 --accumulate 2 --dropout 0.1 "
                         "--eval-every 10 --text " + corpus.string() + " --save " + ck.string() + " --graph " +
                         graph.string() + " --plot " + plot.string());
  ASSERT_EQ(t.status, 0) << t.err;
  const std::string dot = slurp(graph);  // each block's nodes carry the line of the block that made them
  for (const char* line : {"trf_blocks.0: x = att(norm1(x))", "trf_blocks.1: x = ff(norm2(x))",
                           "trf_blocks.1: return drop_shortcut(x) + shortcut", "logits = out_head(final_norm(x))"})
    EXPECT_NE(dot.find(line), std::string::npos) << line;
  EXPECT_NE(dot.find("NativeLayerNormBackward0"), std::string::npos);
  EXPECT_NE(slurp(plot).find("<svg"), std::string::npos);
  EXPECT_NE(t.out.find("training a GPT on 1800 characters"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("2 blocks D 48 T 32 B 4×2 heads 4"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("step  29 | loss"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("held-out"), std::string::npos) << t.out;
  if (autograd::cpu::core_peak_flops() > 0) {
    EXPECT_NE(t.out.find(" tok/s | mfu "), std::string::npos) << t.out;
  }
  // the loss falls from about ln V
  const double first = std::stod(t.out.substr(t.out.find("step   0 | loss ") + 16, 5));
  const double last = std::stod(t.out.substr(t.out.find("final loss ") + 11, 5));
  EXPECT_LT(last, first - 0.5) << t.out;
  CliRun i = scratchgrad("info --checkpoint " + ck.string());
  ASSERT_EQ(i.status, 0) << i.err;
  EXPECT_NE(i.out.find("model: GPT, 2 blocks, vocab 28 dim 48 context 32 heads 4, trained 30 steps"), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("trf_blocks.1.att.W_query.weight"), std::string::npos) << i.out;
  CliRun g = scratchgrad("generate --checkpoint " + ck.string() + " --prompt \"the \" --tokens 20 --temperature 0.8 --top-k 3");
  ASSERT_EQ(g.status, 0) << g.err;
  EXPECT_EQ(g.out.size(), std::string("the ").size() + 20 + 1) << g.out;
  CliRun again = scratchgrad("generate --checkpoint " + ck.string() + " --prompt \"the \" --tokens 20 --temperature 0.8 --top-k 3");
  EXPECT_EQ(again.out, g.out);  // same seed, same sample
  // generate keeps keys and values in a cache; past the context of 32 the window slides. The recomputation
  // of the whole window for each token (--no-kv-cache) draws the same characters, sampled and greedy.
  for (const char* how : {" --temperature 0.8 --top-k 3 --seed 11", " --temperature 0"}) {
    const std::string args = "generate --checkpoint " + ck.string() + " --prompt \"the \" --tokens 60 --ids" + how;
    CliRun cached = scratchgrad(args), recomputed = scratchgrad(args + " --no-kv-cache");
    ASSERT_EQ(cached.status, 0) << cached.err;
    EXPECT_EQ(std::count(cached.out.begin(), cached.out.end(), ' '), 60 - 1) << cached.out;  // the new ids only
    EXPECT_EQ(cached.out, recomputed.out) << how;
  }
}

TEST(Cli, RefusesBadGptFlags) {
  expect_refused(scratchgrad("train --model gpt --steps 10 --warmup 10"), "--warmup");
  expect_refused(scratchgrad("train --model gpt --preset huge"), "--preset");
  expect_refused(scratchgrad("train --preset tiny"), "--model gpt");
  expect_refused(scratchgrad("train --model gpt --dropout 1"), "--dropout");
  expect_refused(scratchgrad("train --model gpt --clip -1"), "--clip");
  expect_refused(scratchgrad("train --model gpt --accumulate 0"), "--accumulate");
  expect_refused(scratchgrad("train --model transformer"), "--model");
}

// --numerics (autograd/numerics.h): the workshop's model runs exact by default (PyTorch's numbers), the GPT
// fast; the flag or SCRATCHGRAD_NUMERICS choose otherwise, and a GPT checkpoint remembers its numerics.
TEST(Cli, NumericsByModelFlagAndEnvironment) {
  expect_refused(scratchgrad("train --numerics quick"), "--numerics: unknown numerics 'quick' (expected exact or fast)");
  expect_refused(testing_process::shell("SCRATCHGRAD_NUMERICS=quick " + std::string(SCRATCHGRAD_BIN_DIR) +
                                        "/scratchgrad train --steps 2"),
                 "SCRATCHGRAD_NUMERICS: unknown numerics 'quick'");
  CliRun exact = scratchgrad("train --steps 101 --numerics exact");
  ASSERT_EQ(exact.status, 0) << exact.err;
  EXPECT_NE(exact.out.find("step 100 | loss 0.219"), std::string::npos) << exact.out;
  CliRun fast = scratchgrad("train --steps 101 --numerics fast");
  ASSERT_EQ(fast.status, 0) << fast.err;
  EXPECT_NE(fast.out.find("step   0 | loss 2.655"), std::string::npos) << fast.out;

  std::string text;
  for (int i = 0; i < 20; ++i) text += "the quick brown fox jumps over the lazy dog. ";
  const fs::path corpus = temp_file("numerics_corpus.txt", text);
  auto numerics_of_run = [&](const std::string& environment, const std::string& flags) {
    const fs::path ck = testing_process::scratch("numerics.safetensors");
    CliRun t = testing_process::shell(environment + " " + SCRATCHGRAD_BIN_DIR + "/scratchgrad train " + flags +
                                      " --model gpt --preset tiny --steps 3 --warmup 1 --batch 2 --text " +
                                      corpus.string() + " --save " + ck.string());
    EXPECT_EQ(t.status, 0) << t.err;
    return nn::load_safetensors(ck.string()).metadata["run.numerics"];
  };
  EXPECT_EQ(numerics_of_run("", ""), "fast");
  EXPECT_EQ(numerics_of_run("", "--numerics exact"), "exact");
  EXPECT_EQ(numerics_of_run("SCRATCHGRAD_NUMERICS=exact", ""), "exact");
  EXPECT_EQ(numerics_of_run("SCRATCHGRAD_NUMERICS=exact", "--numerics fast"), "fast");  // the flag wins
}

// --kernels (autograd/numerics.h): the workshop's run on the reference kernels prints the same first loss
// and generates the same text; a bad value, on the flag or in SCRATCHGRAD_KERNELS, is the user's mistake.
TEST(Cli, KernelsFlagAndEnvironment) {
  expect_refused(scratchgrad("train --kernels fast"), "--kernels: unknown kernels 'fast' (expected cpu or reference)");
  expect_refused(testing_process::shell("SCRATCHGRAD_KERNELS=fast " + std::string(SCRATCHGRAD_BIN_DIR) +
                                        "/scratchgrad train --steps 2"),
                 "SCRATCHGRAD_KERNELS: unknown kernels 'fast'");
  CliRun reference = scratchgrad("train --steps 101 --kernels reference");
  ASSERT_EQ(reference.status, 0) << reference.err;
  EXPECT_NE(reference.out.find("step   0 | loss 2.655"), std::string::npos) << reference.out;
  EXPECT_NE(reference.out.find("step 100 | loss 0.219"), std::string::npos) << reference.out;
}

// A GPT run killed (kill -9) after its first periodic checkpoint, then resumed, prints the same losses
// from there on, and ends with the same final and held-out losses, as the run that was never stopped.
TEST(Cli, AKilledGptRunResumesToTheSameLosses) {
  std::string text;
  for (int i = 0; i < 40; ++i) text += "pack my box with five dozen liquor jugs. ";
  const fs::path corpus = temp_file("resume_corpus.txt", text);
  const fs::path ck = testing_process::scratch("resume.safetensors");
  fs::remove(ck);
  const std::string run = "train --model gpt --preset tiny --steps 30 --warmup 5 --batch 4 --dropout 0.1 --eval-every 1 --text " +
                          corpus.string();
  CliRun whole = scratchgrad(run);
  ASSERT_EQ(whole.status, 0) << whole.err;
  const std::string bin = std::string(SCRATCHGRAD_BIN_DIR) + "/scratchgrad ";
  testing_process::shell("(" + bin + run + " --save " + ck.string() + " --save-every 10 >/dev/null & pid=$!; while [ ! -e " +
                         ck.string() + " ]; do sleep 0.005; done; kill -9 $pid; wait $pid) 2>/dev/null");
  ASSERT_TRUE(fs::exists(ck));
  CliRun resumed = scratchgrad("train --resume " + ck.string());
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("resuming"), std::string::npos) << resumed.out;
  auto losses_from = [](const std::string& out, int first) {  // "step  k | loss x | held-out y" for k >= first
    std::string kept;
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
      if (line.starts_with("final")) kept += line + "\n";
      if (!line.starts_with("step") || std::stoi(line.substr(5, 3)) < first) continue;
      kept += line.substr(0, line.find(" tok/s")).substr(0, line.rfind(" | ", line.find(" tok/s"))) + "\n";
    }
    return kept;
  };
  const int from = std::stoi(resumed.out.substr(resumed.out.find("at step ") + 8));
  EXPECT_GE(from, 10);
  EXPECT_EQ(losses_from(resumed.out, from), losses_from(whole.out, from));
  EXPECT_NE(losses_from(whole.out, from).find("final loss"), std::string::npos);
  expect_refused(scratchgrad("train --resume " + corpus.string()), corpus.string());
}
