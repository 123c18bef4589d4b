// test_hardening_generate.cpp — `generate` on every kind of model alike (train's character model and GPTs,
// GPT-2's and llm.c's files): one set of checks, --prompt-ids, --ids and --top-p everywhere; flags that
// cannot apply to a model refused (generate, eval, train); the environment checked, whole, by every command
// before it does anything; numbers on the command line read whole. Every refusal: exit status 2, one line
// naming the flag, variable or file, no exception text.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/cpu/runtime/runtime.h"
#include "nn/gpt2.h"
#include "nn/safetensors.h"
#include "test_helpers.h"
#include "test_process.h"

namespace {

namespace fs = std::filesystem;
using testing_process::Shell;

const std::string kBin = std::string(SCRATCHGRAD_BIN_DIR) + "/scratchgrad ";

// The source tree's GPT-2 fixtures, copied to the scratch folder: the refusals name them by a path that is
// the same in every checkout (docs/reliability.md's catalog shows it as <tmp>).
std::string scratch_copy(const std::string& from_source) {
  const fs::path from = fs::path(SCRATCHGRAD_SOURCE_DIR) / from_source;
  const fs::path to = testing_process::scratch(from.filename().string());
  if (!fs::exists(to)) fs::copy(from, to, fs::copy_options::recursive);
  return to.string();
}
const std::string& gpt2_file() {
  static const std::string path = scratch_copy("tests/reference/fixtures/gpt2/tiny_gpt2.safetensors");
  return path;
}
const std::string& llmc_file() {
  static const std::string path = scratch_copy("tests/reference/fixtures/gpt2/tiny_gpt2_llmc.bin");
  return path;
}
const std::string& gpt2_tokenizer() {
  static const std::string path = scratch_copy("tests/tokenizer/gpt2");
  return path;
}

Shell scratchgrad(const std::string& args) { return testing_process::shell(kBin + args); }

// The standard every refusal meets: status 2, one line on stderr naming `needle`, no exception's own text.
void expect_refused(const Shell& r, const std::string& needle) {
  EXPECT_EQ(r.status, 2) << r.command << "\n" << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.rfind("scratchgrad: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
  for (const char* leak : {"internal error", "terminate", "what()", "bad_alloc", "json.exception", "stoll", "stod"})
    EXPECT_EQ(r.err.find(leak), std::string::npos) << r.err;
  const size_t program = r.command.find("/bin/scratchgrad ");
  testing_helpers::record_refusal(program == std::string::npos ? r.command : r.command.substr(program + 5),
                                  r.err.substr(0, r.err.find('\n')));
}

fs::path write_file(const std::string& name, const std::string& contents) {
  const fs::path p = testing_process::scratch(name);
  std::ofstream(p, std::ios::binary) << contents;
  return p;
}

std::string story() {
  std::string text;
  for (int i = 0; i < 20; ++i) text += "the quick brown fox jumps over the lazy dog. pack my box with five jugs. ";
  return text;
}

// One checkpoint of each of train's kinds, trained once for the whole file.
const std::string& trained(const std::string& name, const std::string& flags) {
  static std::map<std::string, std::string> made;
  auto [at, fresh] = made.emplace(name, testing_process::scratch(name + ".safetensors").string());
  if (fresh) {
    const Shell r = scratchgrad("train --steps 3 --text " + write_file("generate_story.txt", story()).string() + " " +
                                flags + " --save " + at->second);
    EXPECT_EQ(r.status, 0) << r.err;
  }
  return at->second;
}
const std::string& char_model() { return trained("gen_mini", "--context 8"); }
const std::string& char_gpt() { return trained("gen_gpt", "--model gpt --preset tiny --warmup 1 --batch 2 --sample 0"); }
const std::string& bpe_gpt() {
  return trained("gen_bpe", "--model gpt --preset tiny --warmup 1 --batch 2 --sample 0 --tokenizer bpe --vocab-size 280");
}

using testing_process::ids_in;

std::string joined(const std::vector<int64_t>& ids) {
  std::string out;
  for (int64_t id : ids) out += (out.empty() ? "" : " ") + std::to_string(id);
  return out;
}

// ---- one path for every kind

// --ids prints the new ids only; --prompt-ids continues those ids; text out begins with the prompt's text.
TEST(GenerateEveryKind, PromptIdsAndIdsMeanTheSameOnEveryModel) {
  for (const std::string& ck : {char_model(), char_gpt(), bpe_gpt()}) {
    const std::string g = "generate --checkpoint " + ck + " --prompt 'the ' --tokens 12";
    const Shell ids = scratchgrad(g + " --ids"), text = scratchgrad(g);
    ASSERT_EQ(ids.status, 0) << ids.err;
    ASSERT_EQ(text.status, 0) << text.err;
    EXPECT_EQ(ids_in(ids.out).size(), 12u) << ck << ": " << ids.out;
    EXPECT_EQ(text.out.rfind("the ", 0), 0u) << text.out;
  }
  // a character model's ids index its sorted characters (the checkpoint's "vocab"): "the " given as ids
  // continues as "the " given as text, in ids and in text
  const std::string ck = char_model();
  const std::string vocab = nn::load_safetensors(ck).metadata.at("vocab");
  std::string the;
  for (char c : std::string("the ")) the += std::to_string(vocab.find(c)) + " ";
  const std::string g = "generate --checkpoint " + ck + " --tokens 12";
  const Shell by_ids = scratchgrad(g + " --prompt-ids '" + the + "' --ids");
  ASSERT_EQ(by_ids.status, 0) << by_ids.err;
  EXPECT_EQ(by_ids.out, scratchgrad(g + " --prompt 'the ' --ids").out);
  EXPECT_EQ(scratchgrad(g + " --prompt-ids '" + the + "'").out, scratchgrad(g + " --prompt 'the '").out);
  // every kind reports its speed on stderr, as GPT-2's files do
  EXPECT_NE(by_ids.err.find("12 tokens in "), std::string::npos) << by_ids.err;
  EXPECT_NE(by_ids.err.find("prompt of 4, 1 thread)"), std::string::npos) << by_ids.err;
}

TEST(GenerateEveryKind, PromptIdsContinueThoseIdsNotTheSample) {
  // the GPT's default prompt is its sample's; --prompt-ids is another prompt, and is what is continued
  const std::string g = "generate --checkpoint " + char_gpt() + " --tokens 10 --ids";
  const Shell sample = scratchgrad(g), given = scratchgrad(g + " --prompt-ids '3 4 5 6 7 8 9 10 11 12 13 14'");
  ASSERT_EQ(given.status, 0) << given.err;
  EXPECT_NE(given.out, sample.out);
  EXPECT_NE(given.err.find("prompt of 12,"), std::string::npos) << given.err;
  EXPECT_EQ(ids_in(given.out).size(), 10u) << given.out;
}

TEST(GenerateEveryKind, TopPAppliesToEveryModel) {
  // a nucleus so small it holds only the likeliest token samples greedily; all of it samples otherwise
  for (const std::string& ck : {char_model(), char_gpt(), gpt2_file()}) {
    const std::string g = "generate --checkpoint " + ck + " --prompt-ids '1 2 3' --tokens 12 --ids --seed 3";
    const Shell greedy = scratchgrad(g), nucleus = scratchgrad(g + " --temperature 5 --top-p 1e-9");
    const Shell hot = scratchgrad(g + " --temperature 5");
    ASSERT_EQ(nucleus.status, 0) << nucleus.err;
    EXPECT_EQ(nucleus.out, greedy.out) << ck;
    EXPECT_NE(hot.out, greedy.out) << ck << ": a hot sample should differ from greedy (else this test cannot fail)";
  }
}

TEST(GenerateEveryKind, StopIdStopsEveryModel) {
  for (const std::string& ck : {char_model(), char_gpt(), gpt2_file()}) {
    const std::string g = "generate --checkpoint " + ck + " --prompt-ids '1 2 3' --tokens 12 --ids --temperature 1 --seed 5";
    const Shell all = scratchgrad(g + " --stop-id -1");
    const std::vector<int64_t> ids = ids_in(all.out);
    ASSERT_EQ(ids.size(), 12u) << all.out << all.err;
    const Shell stopped = scratchgrad(g + " --stop-id " + std::to_string(ids[5]));
    const size_t first = size_t(std::find(ids.begin(), ids.end(), ids[5]) - ids.begin());
    EXPECT_EQ(stopped.out, joined(std::vector<int64_t>(ids.begin(), ids.begin() + std::ptrdiff_t(first) + 1)) + "\n") << ck;
  }
}

// ---- refusals: the same checks on every kind

TEST(Cli, RefusesBadGenerateValuesOnEveryKindOfModel) {
  for (const std::string& ck : {char_model(), char_gpt(), gpt2_file(), llmc_file()}) {
    const std::string g = "generate --checkpoint " + ck + " --prompt-ids 1";
    expect_refused(scratchgrad(g + " --top-p 7"), "--top-p must be in (0, 1], got 7");
    expect_refused(scratchgrad(g + " --top-p 0"), "--top-p must be in (0, 1], got 0");
    expect_refused(scratchgrad(g + " --top-p nan"), "--top-p: nan is not a finite number");
    expect_refused(scratchgrad(g + " --threads 0"), "--threads must be from 1 to 1024, got 0");
    expect_refused(scratchgrad(g + " --prompt a"), "give the prompt once: --prompt TEXT or --prompt-ids IDS");
    expect_refused(scratchgrad(g + " --stop-id -7"), "--stop-id must be a token id, or -1 (never stop), got -7");
    expect_refused(scratchgrad(g + " --stop-id 999999"), "--stop-id 999999 is outside the vocabulary of");
    expect_refused(scratchgrad("generate --checkpoint " + ck + " --prompt-ids '1 999999'"),
                   "--prompt-ids: prompt token 999999 at position 1 is outside the vocabulary of");
    expect_refused(scratchgrad("generate --checkpoint " + ck + " --prompt-ids '1 2x'"), "--prompt-ids: '2x' is not a token id");
  }
}

TEST(Cli, RefusesGenerateFlagsThatCannotApplyToTheModel) {
  expect_refused(scratchgrad("generate --checkpoint " + char_gpt() + " --heads 4"),
                 "--heads is for GPT-2's model.safetensors that does not say its head count; " + char_gpt() +
                     " is a GPT that reads characters");
  expect_refused(scratchgrad("generate --checkpoint " + char_gpt() + " --context-full bogus"),
                 "--context-full must be refuse or slide, got 'bogus'");
  expect_refused(scratchgrad("generate --checkpoint " + char_gpt() + " --context-full slide"),
                 "--context-full is for GPT-2's and llm.c's files");
  expect_refused(scratchgrad("generate --checkpoint " + char_model() + " --tokenizer-file " + gpt2_tokenizer()),
                 "--tokenizer-file is for GPT-2's files and GPTs trained with --tokenizer gpt2");
  expect_refused(scratchgrad("generate --checkpoint " + bpe_gpt() + " --tokenizer-file " + gpt2_tokenizer()),
                 "--tokenizer-file is for GPT-2's files");
  expect_refused(scratchgrad("generate --checkpoint " + char_model() + " --no-kv-cache"), "--no-kv-cache is for GPT and Llama models");
  expect_refused(scratchgrad("generate --checkpoint " + llmc_file() + " --prompt-ids 1 --heads 2"),
                 "--heads is for GPT-2's model.safetensors");
}

TEST(Cli, RefusesEvalAndTrainFlagsThatCannotApply) {
  const std::string text = write_file("eval_story.txt", story()).string();
  expect_refused(scratchgrad("eval --checkpoint " + char_model() + " --text " + text + " --tokenizer-file " + gpt2_tokenizer()),
                 "--tokenizer-file is for GPT-2's files and GPTs trained with --tokenizer gpt2");
  expect_refused(scratchgrad("eval --checkpoint " + char_gpt() + " --text " + text + " --heads 2"), "--heads is for");
  expect_refused(scratchgrad("train --vocab-size 300"), "--vocab-size is for --tokenizer bpe");
  expect_refused(scratchgrad("train --model gpt --preset tiny --tokenizer char --vocab-size 300"),
                 "--vocab-size is for --tokenizer bpe (the BPE's vocabulary); this run is a GPT that reads characters");
  expect_refused(scratchgrad("train --layers 3"), "--layers is for --model gpt or llama; this run is the workshop's character model");
  expect_refused(scratchgrad("train --save-every 5 --save x.safetensors"), "--save-every is for --model gpt");
}

// A tokenizer that cannot spell every token the model may make is refused before the prompt is printed.
TEST(Cli, RefusesAModelLargerThanItsTokenizerBeforeAnyOutput) {
  autograd::manual_seed(2);
  nn::GPTModel model(nn::GPTConfig{.vocab_size = 50300, .context_length = 16, .emb_dim = 8, .n_heads = 2,
                                   .n_layers = 1, .drop_rate = 0.0, .qkv_bias = true});
  model.tie_weights();
  const std::string path = testing_process::scratch("vocab_50300.safetensors").string();
  nn::save_safetensors(path, nn::gpt2_state_dict(model), nn::gpt2_metadata(model));
  const Shell r = scratchgrad("generate --checkpoint " + path + " --tokenizer-file " + gpt2_tokenizer() +
                              " --prompt Hello --tokens 3");
  expect_refused(r, "the model's vocabulary of 50300 is larger than its tokenizer's of 50257");
  EXPECT_EQ(r.out, "");
  // its ids can still be seen
  EXPECT_EQ(ids_in(scratchgrad("generate --checkpoint " + path + " --prompt-ids 1 --tokens 3 --ids").out).size(), 3u);
}

// ---- the environment: every command, before anything else

TEST(Cli, RefusesABadEnvironmentInEveryCommand) {
  auto with = [](const std::string& setting, const std::string& args) { return testing_process::shell(setting + " " + kBin + args); };
  const std::string missing = "/nonexistent/model.safetensors";
  for (const std::string& args : {"info --checkpoint " + missing, "eval --checkpoint " + missing + " --text x",
                                  "merge --lora " + missing + " --out /nonexistent/out", "generate --checkpoint " + missing,
                                  std::string("tokenize --tokenizer char --text /nonexistent/t")}) {
    // the variable is named, not the file the command would have read first
    expect_refused(with("SCRATCHGRAD_KERNELS=bogus", args), "SCRATCHGRAD_KERNELS: unknown kernels 'bogus'");
    expect_refused(with("SCRATCHGRAD_NUMERICS=bogus", args), "SCRATCHGRAD_NUMERICS: unknown numerics 'bogus'");
  }
  const std::string info = "info --checkpoint " + missing;
  expect_refused(with("SCRATCHGRAD_THREADS=2x", info), "SCRATCHGRAD_THREADS=2x: expected a whole number of threads");
  expect_refused(with("SCRATCHGRAD_THREADS=0", info), "SCRATCHGRAD_THREADS=0: expected a whole number of threads");
  expect_refused(with("SCRATCHGRAD_DIST_TIMEOUT=1e400", info), "SCRATCHGRAD_DIST_TIMEOUT=1e400: give a number of seconds");
  expect_refused(with("SCRATCHGRAD_DIST_TIMEOUT=2x", info), "SCRATCHGRAD_DIST_TIMEOUT=2x: give a number of seconds");
  expect_refused(with("SCRATCHGRAD_CPU_KERNELS=sse9", info), "SCRATCHGRAD_CPU_KERNELS=\"sse9\" is not a kernel set");
  expect_refused(with("SCRATCHGRAD_MATMUL=fastest", info), "SCRATCHGRAD_MATMUL=fastest: expected blis or blis-all");
  expect_refused(with("SCRATCHGRAD_TRACE=often", info), "SCRATCHGRAD_TRACE=often: expected 0 (off)");
  expect_refused(with("SCRATCHGRAD_DENORMALS=drop", info), "SCRATCHGRAD_DENORMALS=drop: expected keep");
  // good values pass
  const Shell fine = with("SCRATCHGRAD_THREADS=2 SCRATCHGRAD_DIST_TIMEOUT=0.5 SCRATCHGRAD_TRACE=0 SCRATCHGRAD_KERNELS=cpu",
                          "info --checkpoint " + char_model());
  EXPECT_EQ(fine.status, 0) << fine.err;
}

TEST(Environment, ThreadsAreReadWholeByTheRuntime) {
  using autograd::cpu::thread_count_from_setting;
  EXPECT_EQ(thread_count_from_setting("4"), 4);
  EXPECT_EQ(thread_count_from_setting("1024"), 1024);
  for (const char* bad : {"2x", "0", "-1", "1025", "99999999999", "", " 2", "+2", "2.0"})
    EXPECT_EQ(thread_count_from_setting(bad), 0) << bad;
  EXPECT_EQ(thread_count_from_setting(nullptr), 0);
}

// ---- numbers on the command line are read whole

TEST(Cli, RefusesNumbersThatAreNotWhole) {
  expect_refused(scratchgrad("generate --checkpoint x --tokens 2x"), "--tokens: 2x is not a whole number");
  expect_refused(scratchgrad("generate --checkpoint x --threads 2x"), "--threads: 2x is not a whole number");
  expect_refused(scratchgrad("generate --checkpoint x --stop-id 5x"), "--stop-id: 5x is not a whole number");
  expect_refused(scratchgrad("generate --checkpoint x --temperature nan"), "--temperature: nan is not a finite number");
  expect_refused(scratchgrad("train --lr 1e400"), "--lr: 1e400 is not a finite number");
  expect_refused(scratchgrad("train --steps +5"), "--steps: +5 is not a whole number");
  expect_refused(scratchgrad("eval --checkpoint x --text y --stride 1.5"), "--stride: 1.5 is not a whole number");
  expect_refused(scratchgrad("merge --lora x --out y --heads 0x10"), "--heads: 0x10 is not a whole number");
}

// ---- what a learner reads

TEST(GenerateEveryKind, HelpAndHintsSayTokensAndHowToDrawTheGraph) {
  const Shell help = scratchgrad("generate --help");
  EXPECT_NE(help.out.find("tokens to generate (characters for a character model)"), std::string::npos) << help.out;
  const Shell train_help = scratchgrad("train --help");
  EXPECT_NE(train_help.out.find("tokens to generate at the end"), std::string::npos) << train_help.out;
  const std::string dot = testing_process::scratch("step.dot").string();
  const Shell t = scratchgrad("train --steps 2 --graph " + dot);
  ASSERT_EQ(t.status, 0) << t.err;
  const std::string svg = testing_process::scratch("step.svg").string();
  EXPECT_NE(t.out.find("dot -Tsvg " + dot + " -o " + svg), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("apt-get install graphviz"), std::string::npos) << t.out;
}

}  // namespace
