// test_finetune.cpp — `scratchgrad train --init FILE`: a full fine-tune of GPT-2's weights that learns and
// resumes to the same bits, a LoRA fine-tune that trains only its adapters (its checkpoint holds them and
// names its base; resume, generate, eval and merge take it), the NaN stop, and every conflicting flag
// refused with one line and exit status 2.
//
// The base is a small GPT-2 in Hugging Face's layout with GPT-2's whole vocabulary (random weights, written
// here), so that GPT-2's tokenizer reads the text for it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "autograd/autograd.h"
#include "nn/gpt2.h"
#include "nn/lora.h"
#include "nn/safetensors.h"
#include "test_process.h"

namespace {

namespace fs = std::filesystem;
using CliRun = testing_process::Shell;

const std::string kTokenizerDir = std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/tokenizer/gpt2";
// the fixture of make_gpt2_fixture.py: 2 blocks, width 32, context 16, and only GPT-2's first 50 ids
const std::string kSmallVocabularyModel =
    std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/reference/fixtures/gpt2/tiny_gpt2.safetensors";

CliRun scratchgrad(const std::string& args) {
  return testing_process::shell(std::string(SCRATCHGRAD_BIN_DIR) + "/scratchgrad " + args);
}

void expect_refused(const CliRun& r, const std::string& needle) {
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("scratchgrad: error:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
}

// A GPT-2 of 2 blocks, width 16, 2 heads, context 32, with GPT-2's 50,257-token vocabulary.
const std::string& base_model() {
  static const std::string path = [] {
    autograd::manual_seed(21);
    nn::GPTModel model(nn::GPTConfig{.vocab_size = 50257, .context_length = 32, .emb_dim = 16, .n_heads = 2,
                                     .n_layers = 2, .drop_rate = 0.0, .qkv_bias = true});
    model.tie_weights();
    const std::string p = testing_process::scratch("finetune_base.safetensors").string();
    nn::save_safetensors(p, nn::gpt2_state_dict(model), nn::gpt2_metadata(model));
    return p;
  }();
  return path;
}

const std::string& corpus() {
  static const std::string path = [] {
    std::string text;
    for (int i = 0; i < 30; ++i) text += "The cat sat on the mat, and the dog sat on the log. ";
    const std::string p = testing_process::scratch("finetune_corpus.txt").string();
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }();
  return path;
}

std::string finetune(const std::string& more) {
  return "train --init " + base_model() + " --tokenizer gpt2 --tokenizer-file " + kTokenizerDir + " --text " + corpus() +
         " " + more;
}

// "step   k | loss x" → x, for each progress line
std::vector<double> losses(const std::string& out) {
  std::vector<double> found;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);)
    if (line.starts_with("step")) found.push_back(std::stod(line.substr(line.find("loss ") + 5)));
  return found;
}

std::map<std::string, autograd::Tensor> tensors_of(const std::string& path) {
  nn::Checkpoint ck = nn::load_safetensors(path);
  return {ck.tensors.begin(), ck.tensors.end()};
}

bool same_bits(const autograd::Tensor& a, const autograd::Tensor& b) {
  return a.shape() == b.shape() && a.to_vector<float>() == b.to_vector<float>();
}

// The line "generated: ..." a run prints at its end.
std::string generated(const std::string& out) {
  const size_t at = out.find("generated: ");
  return at == std::string::npos ? "" : out.substr(at + 11, out.find('\n', at) - at - 11);
}

TEST(FineTune, AFullFineTuneLearnsTheText) {
  const fs::path ck = testing_process::scratch("finetune_full.safetensors");
  CliRun r = scratchgrad(finetune("--steps 40 --lr 3e-3 --eval-every 5 --save " + ck.string()));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("fine-tuning " + fs::absolute(base_model()).lexically_normal().string() + " (all "), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("2 blocks D 16 T 32 B 4 heads 2"), std::string::npos) << r.out;  // T: the model's 32 (< 64)
  const std::vector<double> seen = losses(r.out);
  ASSERT_GE(seen.size(), 5u) << r.out;
  EXPECT_GT(seen.front(), 10.0) << r.out;  // ln 50257 = 10.8: random weights know nothing
  EXPECT_LT(seen.back(), seen.front() - 3.0) << r.out;

  // its checkpoint is a GPT of ours with GPT-2's tied head: the sample the run printed is what generate
  // makes from it, and eval reads it
  EXPECT_EQ(nn::load_safetensors(ck.string()).metadata.at("tied_head"), "1");
  CliRun gen = scratchgrad("generate --checkpoint " + ck.string() + " --tokens 50");
  ASSERT_EQ(gen.status, 0) << gen.err;
  EXPECT_EQ(gen.out, generated(r.out) + "\n");
  CliRun eval = scratchgrad("eval --checkpoint " + ck.string() + " --text " + corpus());
  ASSERT_EQ(eval.status, 0) << eval.err;
  EXPECT_NE(eval.out.find("bits per byte"), std::string::npos) << eval.out;
}

// Runs `run` whole, and again killed (kill -9) after its first periodic checkpoint (every 5 steps) and
// resumed; expects the resumed run to start before step `steps`, say `resumed_says`, and end with the
// same bits as the whole one. Gives the whole run's tensors and the resumed checkpoint's path.
std::pair<std::map<std::string, autograd::Tensor>, fs::path> expect_resume_to_same_bits(const std::string& run, int steps,
                                                                                       const std::string& name,
                                                                                       const std::string& resumed_says) {
  const fs::path whole_ck = testing_process::scratch(name + "_whole.safetensors");
  const fs::path ck = testing_process::scratch(name + "_killed.safetensors");
  fs::remove(ck);
  CliRun whole = scratchgrad(run + " --save " + whole_ck.string());
  EXPECT_EQ(whole.status, 0) << whole.err;
  const std::string bin = std::string(SCRATCHGRAD_BIN_DIR) + "/scratchgrad ";
  testing_process::shell("(" + bin + run + " --save " + ck.string() + " --save-every 5 >/dev/null & pid=$!; while [ ! -e " +
                         ck.string() + " ]; do sleep 0.002; done; kill -9 $pid; wait $pid) 2>/dev/null");
  EXPECT_TRUE(fs::exists(ck));
  CliRun resumed = scratchgrad("train --resume " + ck.string() + " --save " + ck.string());
  EXPECT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_NE(resumed.out.find(resumed_says), std::string::npos) << resumed.out;
  const size_t at = resumed.out.find("at step ");
  EXPECT_TRUE(at != std::string::npos && std::stoi(resumed.out.substr(at + 8)) < steps) << resumed.out;
  const auto want = tensors_of(whole_ck.string()), got = tensors_of(ck.string());
  EXPECT_EQ(got.size(), want.size());
  for (const auto& [tensor, t] : want) {
    const auto found = got.find(tensor);
    EXPECT_TRUE(found != got.end() && same_bits(found->second, t)) << tensor << ": missing, or other bits";
  }
  return {want, ck};
}

// Killed (kill -9) after a periodic checkpoint and resumed, a full fine-tune ends with the same bits as
// the run that was never stopped.
TEST(FineTune, AFullFineTuneResumesToTheSameBits) {
  const auto [want, ck] = expect_resume_to_same_bits(
      finetune("--steps 20 --warmup 4 --context 16 --dropout 0.1 --eval-every 3"), 20, "finetune", "resuming");
  EXPECT_FALSE(want.count("out_head.weight")) << "the tied head is saved once, as tok_emb.weight";
}

TEST(FineTune, LoraTrainsOnlyItsAdaptersAndSavesThemAlone) {
  const fs::path ck = testing_process::scratch("finetune_lora.safetensors");
  CliRun r = scratchgrad(finetune("--lora-rank 4 --lora-alpha 8 --lora-targets attn,mlp --steps 30 --lr 1e-2 --eval-every 5 "
                                  "--sample 12 --save " + ck.string()));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("LoRA rank 4 alpha 8 on attn,mlp, 2304 of "), std::string::npos) << r.out;  // counted below
  const std::vector<double> seen = losses(r.out);
  EXPECT_LT(seen.back(), seen.front() - 0.5) << r.out;

  // the checkpoint: the adapters, their Adam state, and the base by name
  nn::Checkpoint saved = nn::load_safetensors(ck.string());
  EXPECT_EQ(saved.metadata.at("format"), "scratchgrad-lora");
  EXPECT_EQ(saved.metadata.at("base"), fs::absolute(base_model()).lexically_normal().string());
  int64_t adapters = 0, adapter_tensors = 0, first_moments = 0;
  for (const auto& [name, t] : saved.tensors) {
    EXPECT_TRUE(name.find(".lora.") != std::string::npos || name.starts_with("optimizer.")) << name;
    if (name.find(".lora.") != std::string::npos) adapters += t.numel(), ++adapter_tensors;
    if (name.ends_with(".exp_avg")) ++first_moments;
  }
  EXPECT_EQ(first_moments, adapter_tensors) << "Adam's state is the adapters' alone";
  // per block: 4 attention layers 16→16 (A [4, 16], B [16, 4]) and 16→64, 64→16 (A [4, in], B [out, 4])
  EXPECT_EQ(adapters, 2 * (4 * (64 + 64) + (4 * 16 + 64 * 4) + (4 * 64 + 16 * 4)));

  // the model the run ended with is the base with these adapters: its greedy sample is generate's on the
  // checkpoint (had any base weight moved, they would differ)
  CliRun gen = scratchgrad("generate --checkpoint " + ck.string() + " --tokens 12");
  ASSERT_EQ(gen.status, 0) << gen.err;
  EXPECT_EQ(gen.out, generated(r.out) + "\n");
  CliRun info = scratchgrad("info --checkpoint " + ck.string());
  EXPECT_EQ(info.status, 0) << info.err;
  CliRun eval = scratchgrad("eval --checkpoint " + ck.string() + " --text " + corpus());
  ASSERT_EQ(eval.status, 0) << eval.err;

  // merged, it is a plain GPT-2 file that generates (with the key/value cache) what the adapted model does
  const fs::path merged = testing_process::scratch("finetune_merged.safetensors");
  CliRun m = scratchgrad("merge --lora " + ck.string() + " --out " + merged.string());
  ASSERT_EQ(m.status, 0) << m.err;
  const std::string prompt = " --prompt 'The cat sat' --tokens 10 --temperature 0 --tokenizer-file " + kTokenizerDir;
  CliRun from_merged = scratchgrad("generate --checkpoint " + merged.string() + prompt + " --stop-id -1");
  CliRun from_adapters = scratchgrad("generate --checkpoint " + ck.string() + prompt);
  ASSERT_EQ(from_merged.status, 0) << from_merged.err;
  ASSERT_EQ(from_adapters.status, 0) << from_adapters.err;
  EXPECT_EQ(from_merged.out, from_adapters.out);
  // the base's own tensors pass through merge unchanged where no adapter was: the embeddings, LayerNorms
  const auto base = tensors_of(base_model()), out = tensors_of(merged.string());
  for (const char* name : {"wte.weight", "wpe.weight", "h.0.ln_1.weight", "h.1.ln_2.bias", "ln_f.weight"})
    EXPECT_TRUE(same_bits(out.at(name), base.at(name))) << name;
  EXPECT_FALSE(same_bits(out.at("h.0.attn.c_attn.weight"), base.at("h.0.attn.c_attn.weight")));
}

TEST(FineTune, ALoraRunResumesToTheSameBits) {
  const auto [want, ck] = expect_resume_to_same_bits(finetune("--lora-rank 2 --steps 15 --warmup 3 --eval-every 3"), 15,
                                                     "finetune_lora", "LoRA rank 2");
  expect_refused(scratchgrad("train --resume " + ck.string() + " --lora-rank 4"), "--lora-rank cannot change a resumed run");
}

// A fine-tune whose loss stops being a number stops at once, naming the step, and the last checkpoint it
// wrote stays as it was.
TEST(FineTune, ADivergingFineTuneStopsAndKeepsItsLastCheckpoint) {
  for (const std::string lora : {"", "--lora-rank 2 "}) {
    const fs::path ck = testing_process::scratch("finetune_nan.safetensors");
    fs::remove(ck);
    CliRun r = scratchgrad(finetune(lora + "--steps 40 --warmup 0 --lr 1e9 --clip 0 --save-every 1 --save " + ck.string()));
    expect_refused(r, "the run diverged, so it stops here");
    const size_t at = r.err.find("step ");
    ASSERT_NE(at, std::string::npos) << r.err;
    const int step = std::stoi(r.err.substr(at + 5));
    if (step > 0 && r.err.find("keeps the run as it was after") != std::string::npos) {
      ASSERT_TRUE(fs::exists(ck)) << r.err;
      nn::Checkpoint kept = nn::load_safetensors(ck.string());
      EXPECT_NE(r.err.find("after " + kept.metadata.at("run.steps_done") + " steps"), std::string::npos) << r.err;
      for (const auto& [name, t] : kept.tensors)
        for (float v : t.to(autograd::DType::Float32).to_vector<float>()) ASSERT_TRUE(std::isfinite(v)) << name;
    }
  }
}

// A checkpoint of our own GPT (a char-level run) fine-tunes too, fully or with adapters, with its own
// tokenizer.
TEST(FineTune, OurOwnGptCheckpointFineTunes) {
  const fs::path own = testing_process::scratch("finetune_own.safetensors");
  CliRun base = scratchgrad("train --model gpt --preset tiny --steps 5 --warmup 1 --text " + corpus() + " --save " + own.string());
  ASSERT_EQ(base.status, 0) << base.err;
  CliRun full = scratchgrad("train --init " + own.string() + " --text " + corpus() + " --steps 5");
  ASSERT_EQ(full.status, 0) << full.err;
  EXPECT_NE(full.out.find("2 blocks D 48 T 32"), std::string::npos) << full.out;
  CliRun lora = scratchgrad("train --init " + own.string() + " --text " + corpus() + " --steps 5 --lora-rank 2");
  ASSERT_EQ(lora.status, 0) << lora.err;
  expect_refused(scratchgrad("train --init " + own.string() + " --text " + corpus() + " --tokenizer gpt2 --tokenizer-file " +
                             kTokenizerDir),
                 "the checkpoint reads its own char tokenizer");
}

TEST(FineTune, ConflictingFlagsAreRefused) {
  expect_refused(scratchgrad(finetune("--dim 32")), "--dim cannot be given with --init: the model's shape comes from");
  expect_refused(scratchgrad(finetune("--layers 3")), "--layers cannot be given with --init");
  expect_refused(scratchgrad(finetune("--preset tiny")), "--preset cannot be given with --init");
  expect_refused(scratchgrad(finetune("--model mini")), "--model mini with --init");
  expect_refused(scratchgrad(finetune("--context 33")), "--context 33 is longer than the context of");
  expect_refused(scratchgrad(finetune("--lora-rank 0")), "--lora-rank must be at least 1");
  expect_refused(scratchgrad(finetune("--lora-rank 17")), "--lora-rank 17 is larger than the adapted layers");
  expect_refused(scratchgrad(finetune("--lora-rank 2 --lora-targets attn,head")), "'head' is not a target");
  expect_refused(scratchgrad(finetune("--lora-rank 2 --lora-alpha -1")), "--lora-alpha must be a positive number");
  expect_refused(scratchgrad(finetune("--lora-alpha 4")), "--lora-alpha and --lora-targets need --lora-rank");
  expect_refused(scratchgrad("train --lora-rank 2"), "give --init FILE");
  expect_refused(scratchgrad("train --init " + base_model() + " --tokenizer char --text " + corpus()),
                 "--tokenizer char does not fit");
  expect_refused(scratchgrad(finetune("--save " + base_model())), "--save");  // never over its own base
  // the fixture's 50 rows cannot read GPT-2's 50,257 tokens
  expect_refused(scratchgrad("train --init " + kSmallVocabularyModel + " --tokenizer-file " + kTokenizerDir + " --text " +
                             corpus()),
                 "has a vocabulary of 50 tokens and the gpt2 tokenizer 50257");
  // llm.c's .bin of the same weights is read as GPT-2's, and refused for the same reason
  const std::string bin = std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/reference/fixtures/gpt2/tiny_gpt2_llmc.bin";
  expect_refused(scratchgrad("train --init " + bin + " --tokenizer-file " + kTokenizerDir + " --text " + corpus()),
                 "tiny_gpt2_llmc.bin has a vocabulary of 50 tokens");
  expect_refused(scratchgrad("train --init " + corpus() + " --text " + corpus()), corpus());
  expect_refused(scratchgrad("train --init /nonexistent/model.safetensors --text " + corpus()), "/nonexistent/model.safetensors");
}

// A frozen weight (a LoRA run's base) gets no gradient, and skipping its products leaves the input's
// gradient exactly as it was: linear with and without a bias, linear_after_gelu (the feed-forward's
// contraction) and a plain matmul.
TEST(FrozenWeights, GetNoGradientAndLeaveTheInputsGradientAsItWas) {
  using autograd::Tensor;
  autograd::manual_seed(5);
  const Tensor x0 = autograd::randn({2, 3, 8}), w0 = autograd::randn({5, 8}), b0 = autograd::randn({5});
  using Op = std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>;
  const std::vector<std::pair<std::string, Op>> ops = {
      {"linear", [](const Tensor& x, const Tensor& w, const Tensor& b) { return autograd::linear(x, w, b); }},
      {"linear without bias", [](const Tensor& x, const Tensor& w, const Tensor&) { return autograd::linear(x, w); }},
      {"linear_after_gelu",
       [](const Tensor& x, const Tensor& w, const Tensor& b) { return autograd::linear_after_gelu(x, w, b, "tanh"); }},
      {"matmul", [](const Tensor& x, const Tensor& w, const Tensor&) { return autograd::matmul(x, w.t()); }}};
  for (const auto& [name, op] : ops) {
    auto input_gradient = [&](bool frozen) {
      Tensor x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(!frozen), b = b0.clone().requires_grad_(!frozen);
      (op(x, w, b) * op(x, w, b)).sum().backward();
      EXPECT_EQ(w.grad().defined(), !frozen) << name;
      const bool uses_bias = name == "linear" || name == "linear_after_gelu";
      EXPECT_EQ(b.grad().defined(), !frozen && uses_bias) << name;
      return x.grad().to_vector<float>();
    };
    EXPECT_EQ(input_gradient(true), input_gradient(false)) << name;
  }
}

}  // namespace
