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
#include "nn/tokenizer/tokenizer.h"
#include "test_process.h"
#include "token_text.h"

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

const std::string kTokenizerDir = std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/tokenizer/gpt2";

const tokenizer::Tokenizer& gpt2_tokenizer() {
  static const tokenizer::Tokenizer tok = tokenizer::load_gpt2_tokenizer(kTokenizerDir);
  return tok;
}

using testing_process::ids_in;

std::string decoded(const std::vector<int64_t>& ids) {
  return gpt2_tokenizer().decode(std::vector<int32_t>(ids.begin(), ids.end()));
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
  // the recomputation of the whole window for every token gives the same ids
  CliRun recomputed = scratchgrad("generate --checkpoint " + kModel +
                                  " --prompt-ids '7 3 41' --temperature 0 --tokens 9 --ids --no-kv-cache");
  ASSERT_EQ(recomputed.status, 0) << recomputed.err;
  EXPECT_EQ(recomputed.out, r.out);
}

TEST(CliGpt2, ALongGenerationSaysHowLongItTakes) {
  // killed after 3 s of a run that would take hours: after 2 s it said how long the whole would take
  CliRun r = testing_process::shell("timeout 3 " + std::string(SCRATCHGRAD_BIN_DIR) + "/scratchgrad generate --checkpoint " +
                                    kModel + " --prompt-ids 7 --tokens 1000000000 --context-full slide --stop-id -1");
  EXPECT_NE(r.err.find("(generate: 1000000000 tokens at "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" in all; Ctrl-C stops)"), std::string::npos) << r.err;
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
  expect_refused(scratchgrad(g + " --prompt hello"), "needs its tokenizer to read --prompt TEXT: give --tokenizer-file");
  expect_refused(scratchgrad(g), "--prompt-ids");
  expect_refused(scratchgrad(g + " --prompt-ids '1 x'"), "'x' is not a token id");
  expect_refused(scratchgrad(g + " --prompt-ids '1 -3'"), "'-3' is not a token id");
  expect_refused(scratchgrad(g + " --prompt-ids '1 50'"), "prompt token 50 at position 1 is outside the vocabulary of 50");
  expect_refused(scratchgrad(g + " --prompt-ids 1 --stop-id 50"), "--stop-id 50 is outside the vocabulary of 50");
  expect_refused(scratchgrad(g + " --prompt-ids 1 --context-full wrap"), "--context-full must be refuse or slide");
  expect_refused(scratchgrad(g + " --prompt-ids 1 --top-p 0"), "--top-p must be in (0, 1]");
  expect_refused(scratchgrad(g + " --prompt-ids 1 --heads 5"), "its metadata gives n_head 4, not the 5 heads asked for");
  expect_refused(scratchgrad(g + " --prompt-ids 1 --threads 0"), "--threads");
}

std::string scratch_file(const std::string& name, const std::string& contents) {
  const std::filesystem::path p = testing_process::scratch(name);
  std::ofstream(p, std::ios::binary) << contents;
  return p.string();
}

// The fixture's vocabulary is GPT-2's first 50 ids: the one-byte tokens '!' .. 'R'. Single letters and
// punctuation, never side by side with their own kind, encode to those ids and to no merge.
const std::string kFixturePrompt = "A+B=C";

TEST(CliGpt2Text, APromptIsEncodedWithGpt2sTokenizerAndTheTextStreamed) {
  const std::vector<int32_t> want = gpt2_tokenizer().encode(kFixturePrompt);
  ASSERT_EQ(want, (std::vector<int32_t>{32, 10, 33, 28, 34}));
  const std::string common = " --temperature 0 --tokens 9 --numerics exact";
  CliRun by_ids = scratchgrad("generate --checkpoint " + kModel + " --prompt-ids '32 10 33 28 34' --ids" + common);
  CliRun ids = scratchgrad("generate --checkpoint " + kModel + " --tokenizer-file " + kTokenizerDir + " --prompt '" +
                           kFixturePrompt + "' --ids" + common);
  ASSERT_EQ(ids.status, 0) << ids.err;
  EXPECT_EQ(ids.out, by_ids.out);  // --ids still prints ids
  CliRun text = scratchgrad("generate --checkpoint " + kModel + " --tokenizer-file " + kTokenizerDir + " --prompt '" +
                            kFixturePrompt + "'" + common);
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_EQ(text.out, kFixturePrompt + decoded(ids_in(ids.out)) + "\n");
  EXPECT_NE(text.err.find("9 tokens in "), std::string::npos) << text.err;
  EXPECT_NE(text.err.find(" tokens/s, prompt of 5, 1 thread)"), std::string::npos) << text.err;
  // ids given, text out: the prompt's text first
  CliRun from_ids = scratchgrad("generate --checkpoint " + kModel + " --tokenizer-file " + kTokenizerDir +
                                " --prompt-ids '32 10 33 28 34'" + common);
  EXPECT_EQ(from_ids.out, text.out);
}

TEST(CliGpt2Text, TokensOutsideTheModelsVocabularyAreRefused) {
  const std::string g = "generate --checkpoint " + kModel + " --tokenizer-file " + kTokenizerDir;
  // " world" is one GPT-2 token, 995: the fixture has 50 rows
  expect_refused(scratchgrad(g + " --prompt 'A world'"),
                 "token 995 (\" world\") at position 1 is outside the model's vocabulary of 50 (the tokenizer has 50257)");
  expect_refused(scratchgrad(g + " --prompt ''"), "the prompt is empty");
  expect_refused(scratchgrad(g + " --prompt A --prompt-ids 1"), "give the prompt once");
  expect_refused(scratchgrad("generate --checkpoint " + kModel + " --tokenizer-file /nonexistent/gpt2 --prompt A"),
                 "generate: --tokenizer-file");
  const std::string text = scratch_file("eval_far.txt", "Hello world, this is GPT-2's vocabulary.");
  expect_refused(scratchgrad("eval --checkpoint " + kModel + " --tokenizer-file " + kTokenizerDir + " --text " + text),
                 "is outside the model's vocabulary of 50");
}

// A model with GPT-2's whole vocabulary (random weights, written here): sampled tokens include pieces of
// multi-byte characters, and the streamed text is still exactly the decoded ids.
TEST(CliGpt2Text, TheStreamedTextIsTheDecodedIdsOnAFullVocabulary) {
  autograd::manual_seed(11);
  nn::GPTModel model(nn::GPTConfig{.vocab_size = 50257, .context_length = 32, .emb_dim = 8, .n_heads = 2,
                                   .n_layers = 1, .drop_rate = 0.0, .qkv_bias = true});
  model.tie_weights();
  const std::string path = testing_process::scratch("full_vocab_gpt2.safetensors").string();
  nn::save_safetensors(path, nn::gpt2_state_dict(model), nn::gpt2_metadata(model));
  const std::string prompt = "h\xc3\xa9llo \xf0\x9f\x98\x80 \xe4\xb8\x96\xe7\x95\x8c";  // "héllo 😀 世界"
  const std::string g = "generate --checkpoint " + path + " --tokenizer-file " + kTokenizerDir + " --prompt '" + prompt +
                        "' --temperature 1.5 --seed 3 --tokens 20 --stop-id -1";
  CliRun ids = scratchgrad(g + " --ids"), text = scratchgrad(g);
  ASSERT_EQ(ids.status, 0) << ids.err;
  ASSERT_EQ(text.status, 0) << text.err;
  ASSERT_EQ(ids_in(ids.out).size(), 20u) << ids.out;
  EXPECT_EQ(text.out, prompt + decoded(ids_in(ids.out)) + "\n");
}

TEST(CliEvalText, Gpt2TextGivesTheLibrarysLossAndBitsPerByte) {
  const std::string text = "A+B=C;D:E(F)G-H.I,J/K!L?M@N<O>P&Q%R";
  const std::vector<int32_t> encoded = gpt2_tokenizer().encode(text);
  const std::vector<int64_t> ids(encoded.begin(), encoded.end());
  for (int64_t id : ids) ASSERT_LT(id, 50) << text;
  const std::string file = scratch_file("eval_gpt2_text.txt", text);
  CliRun r = scratchgrad("eval --checkpoint " + kModel + " --tokenizer-file " + kTokenizerDir + " --text " + file +
                         " --stride 4 --numerics exact");
  ASSERT_EQ(r.status, 0) << r.err;
  auto model = nn::load_gpt2(kModel);
  const nn::TextLoss loss = nn::sliding_window_loss([&](const autograd::Tensor& x) { return (*model)(x); }, ids, 16, 4);
  EXPECT_NE(r.out.find(fmt::format("eval: {} tokens ({} bytes), context 16, stride 4\n", ids.size(), text.size())),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(fmt::format("mean loss {:.4f} nats, perplexity {:.3f}, bits per byte {:.4f}\n", loss.mean(),
                                   loss.perplexity(), loss.bits_per_byte(int64_t(text.size())))),
            std::string::npos)
      << r.out;
  expect_refused(scratchgrad("eval --checkpoint " + kModel + " --tokenizer-file " + kTokenizerDir + " --ids-file " + file),
                 "--ids-file is ids already");
}

TEST(Utf8Stream, HoldsBackOnlyAnUnfinishedCharacter) {
  cli::Utf8Stream s;
  EXPECT_EQ(s.push("ab\xf0\x9f"), "ab");        // an emoji's first two bytes wait
  EXPECT_EQ(s.push("\x98"), "");
  EXPECT_EQ(s.push("\x80!"), "\xf0\x9f\x98\x80!");
  EXPECT_EQ(s.push("\x80"), "\x80");            // a stray continuation byte can never be finished
  EXPECT_EQ(s.push("\xe4"), "");
  EXPECT_EQ(s.push("x"), "\xe4x");               // nor a lead byte followed by ASCII
  EXPECT_EQ(s.push("\xff"), "\xff");            // nor a byte that starts nothing
  EXPECT_EQ(s.push("\xe4\xb8"), "");
  EXPECT_EQ(s.flush(), "\xe4\xb8");              // the end of the output: whatever is left
  EXPECT_EQ(s.flush(), "");
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
  expect_refused(scratchgrad("eval --checkpoint " + kModel + " --text " + text), "give --tokenizer-file");
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
  nn::save_lora(adapters, *adapted, config, nn::lora_base(kModel));
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
