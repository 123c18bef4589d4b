// test_cli_tokenizers.cpp — `scratchgrad train --tokenizer bpe|gpt2` and what the checkpoint's tokenizer
// gives generate, info, eval and --resume; every bad choice refused with one line and exit status 2.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "nn/safetensors.h"
#include "nn/tokenizer/tokenizer.h"
#include "test_process.h"

namespace {

using CliRun = testing_process::Shell;

CliRun scratchgrad(const std::string& args) {
  return testing_process::shell(std::string(SCRATCHGRAD_BIN_DIR) + "/scratchgrad " + args);
}

void expect_refused(const CliRun& r, const std::string& needle) {
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
}

const std::string kGpt2Dir = std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/tokenizer/gpt2";

// Sentences enough for a few dozen merges; the held-out tenth ends in a word the training part never has.
std::string story() {
  std::string text;
  const char* lines[] = {"the cat sat on the warm mat and looked at the morning light.\n",
                         "a dog ran past the garden gate, barking at the postman.\n",
                         "she poured the tea slowly, watching the steam rise in curls.\n",
                         "the children counted stars until the last lamp went out.\n"};
  for (int i = 0; i < 24; ++i) text += lines[i % 4];
  for (int i = 0; i < 12; ++i) text += "zyzzyva zyzzyva quux. ";
  return text;
}

std::string write_file(const std::string& name, const std::string& contents) {
  const std::filesystem::path p = testing_process::scratch(name);
  std::ofstream(p, std::ios::binary) << contents;
  return p.string();
}

const std::string kSmallGpt = " --model gpt --layers 1 --dim 16 --heads 2 --context 16 --batch 4 --warmup 1 --eval-every 3"
                              " --sample 12 --numerics exact";

std::string line_with(const std::string& out, const std::string& start) {
  const size_t at = out.find(start);
  return at == std::string::npos ? "" : out.substr(at, out.find('\n', at) - at);
}

// Characters are scored in bits per byte too: a held-out character of a UTF-8 text takes 1 to 4 bytes.
TEST(CliTokenizers, CharactersAreScoredInBitsPerByteToo) {
  // ASCII: one byte per character, so bits per byte is the held-out loss in bits
  const std::string file = write_file("char_story.txt", story());
  CliRun t = scratchgrad("train --tokenizer char --text " + file + " --steps 6" + kSmallGpt);
  ASSERT_EQ(t.status, 0) << t.err;
  const std::string final_line = line_with(t.out, "final loss");
  ASSERT_NE(final_line.find(" bits per byte)"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find(" bits/byte) | "), std::string::npos) << t.out;
  const double held_out = std::stod(final_line.substr(final_line.find("held-out ") + 9));
  const double bpb = std::stod(final_line.substr(final_line.find("(") + 1));
  EXPECT_NEAR(bpb, held_out / std::log(2.0), 2e-3) << final_line;
  // two bytes per character (é): half as many bits per byte as per character
  std::string only_accents;
  for (int i = 0; i < 400; ++i) only_accents += i % 3 ? "\xc3\xa9" : "\xc3\xa8";
  CliRun u = scratchgrad("train --tokenizer char --text " + write_file("accents.txt", only_accents) + " --steps 6" + kSmallGpt);
  ASSERT_EQ(u.status, 0) << u.err;
  const std::string line = line_with(u.out, "final loss");
  const double u_held_out = std::stod(line.substr(line.find("held-out ") + 9));
  const double u_bpb = std::stod(line.substr(line.find("(") + 1));
  EXPECT_NEAR(u_bpb, u_held_out / std::log(2.0) / 2, 2e-3) << line;
}

TEST(CliTokenizers, BpeIsLearnedFromTheTrainingSplitAndCarriedByTheCheckpoint) {
  const std::string text = story(), file = write_file("bpe_story.txt", text);
  const std::string ck = testing_process::scratch("bpe_run.safetensors").string();
  CliRun t = scratchgrad("train --tokenizer bpe --vocab-size 300 --text " + file + " --steps 6 --save " + ck + kSmallGpt);
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_NE(t.out.find(" tokens (bpe tokenizer, vocabulary 300, "), std::string::npos) << t.out;
  EXPECT_NE(t.out.find(" bits/byte) | "), std::string::npos) << t.out;  // the progress line
  EXPECT_NE(line_with(t.out, "final loss").find(" bits per byte)"), std::string::npos) << t.out;

  // the tokenizer is the one learned from the first nine tenths alone
  const nn::Checkpoint saved = nn::load_safetensors(ck);
  ASSERT_EQ(saved.metadata.at("tokenizer"), "bpe");
  tokenizer::TrainOptions options;
  options.vocab_size = 300;
  const tokenizer::Tokenizer want = tokenizer::train(std::string_view(text).substr(0, text.size() - text.size() / 10), options);
  EXPECT_EQ(saved.metadata.at("tokenizer.bpe"), want.to_text());
  const tokenizer::Tokenizer all = tokenizer::train(text, options);
  EXPECT_NE(want.to_text(), all.to_text());  // so the check above can tell the two apart

  CliRun info = scratchgrad("info --checkpoint " + ck);
  ASSERT_EQ(info.status, 0) << info.err;
  EXPECT_NE(info.out.find("tokenizer: bpe, 300 tokens (44 merges)\n"), std::string::npos) << info.out;

  const std::string g = "generate --checkpoint " + ck + " --prompt 'the cat' --tokens 8";
  CliRun ids = scratchgrad(g + " --ids"), words = scratchgrad(g);
  ASSERT_EQ(ids.status, 0) << ids.err;
  ASSERT_EQ(words.status, 0) << words.err;
  std::istringstream in(ids.out);
  std::vector<int32_t> generated;
  for (int32_t id; in >> id;) generated.push_back(id);
  ASSERT_EQ(generated.size(), 8u) << ids.out;  // --ids: the new ids only
  std::vector<int32_t> prompt_and_new = want.encode("the cat");
  prompt_and_new.insert(prompt_and_new.end(), generated.begin(), generated.end());
  EXPECT_EQ(words.out, want.decode(prompt_and_new) + "\n");  // the text: the prompt, then the new tokens'
  // the prompt as ids continues the same way
  std::string prompt_ids;
  for (int32_t id : want.encode("the cat")) prompt_ids += std::to_string(id) + " ";
  EXPECT_EQ(scratchgrad("generate --checkpoint " + ck + " --prompt-ids '" + prompt_ids + "' --tokens 8 --ids").out, ids.out);

  CliRun eval = scratchgrad("eval --checkpoint " + ck + " --text " + file);
  ASSERT_EQ(eval.status, 0) << eval.err;
  EXPECT_NE(eval.out.find(" tokens (" + std::to_string(text.size()) + " bytes), context 16"), std::string::npos) << eval.out;
  EXPECT_NE(eval.out.find("bits per byte "), std::string::npos) << eval.out;
}

TEST(CliTokenizers, AResumedBpeRunGoesOnWithItsOwnTokenizer) {
  const std::string file = write_file("bpe_resume.txt", story());
  const std::string part = testing_process::scratch("bpe_part.safetensors").string();
  const std::string more = testing_process::scratch("bpe_more.safetensors").string();
  CliRun cut = scratchgrad("train --tokenizer bpe --vocab-size 280 --text " + file + kSmallGpt + " --steps 4 --save " + part);
  ASSERT_EQ(cut.status, 0) << cut.err;
  CliRun resumed = scratchgrad("train --resume " + part + " --steps 7 --save " + more);
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("resuming " + part + " at step 4"), std::string::npos) << resumed.out;
  EXPECT_NE(resumed.out.find(" tokens (bpe tokenizer, vocabulary 280, "), std::string::npos) << resumed.out;
  EXPECT_NE(resumed.out.find("step   6 | "), std::string::npos) << resumed.out;
  const nn::Checkpoint before = nn::load_safetensors(part), after = nn::load_safetensors(more);
  EXPECT_EQ(after.metadata.at("tokenizer.bpe"), before.metadata.at("tokenizer.bpe"));
  EXPECT_EQ(after.metadata.at("run.steps_done"), "7");
  expect_refused(scratchgrad("train --resume " + part + " --tokenizer char"), "--tokenizer cannot change a resumed run");
  expect_refused(scratchgrad("train --resume " + part + " --vocab-size 300"), "--vocab-size cannot change a resumed run");
}

TEST(CliTokenizers, Gpt2sTokenizerTrainsAndDecodes) {
  const std::string file = write_file("gpt2_story.txt", story());
  const std::string ck = testing_process::scratch("gpt2_run.safetensors").string();
  CliRun t = scratchgrad("train --tokenizer gpt2 --tokenizer-file " + kGpt2Dir + " --text " + file + " --steps 2 --save " +
                         ck + kSmallGpt);
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_NE(t.out.find(" tokens (gpt2 tokenizer, vocabulary 50257, "), std::string::npos) << t.out;
  CliRun info = scratchgrad("info --checkpoint " + ck);
  EXPECT_NE(info.out.find("tokenizer: gpt2, 50257 tokens (50000 merges, 1 special, from "), std::string::npos) << info.out;
  CliRun g = scratchgrad("generate --checkpoint " + ck + " --prompt 'Hello world' --tokens 3 --ids");
  ASSERT_EQ(g.status, 0) << g.err;
  // "Hello", " world" are 15496 995 in GPT-2's ids: given so, they continue alike
  EXPECT_EQ(scratchgrad("generate --checkpoint " + ck + " --prompt-ids '15496 995' --tokens 3 --ids").out, g.out);
  EXPECT_EQ(std::count(g.out.begin(), g.out.end(), ' '), 2) << g.out;  // the 3 new ids only
}

TEST(CliTokenizers, BadChoicesAreRefused) {
  const std::string file = write_file("bad_story.txt", story());
  const std::string t = "train --text " + file + " --steps 2" + kSmallGpt;
  expect_refused(scratchgrad(t + " --tokenizer words"), "--tokenizer must be char, bpe or gpt2, got 'words'");
  expect_refused(scratchgrad("train --tokenizer bpe --steps 2"), "--tokenizer bpe trains --model gpt");
  expect_refused(scratchgrad(t + " --tokenizer bpe --vocab-size 100"), "--vocab-size must be in 256..65536");
  expect_refused(scratchgrad(t + " --tokenizer bpe --vocab-size 5000"), "train: --tokenizer bpe: ");
  expect_refused(scratchgrad(t + " --tokenizer gpt2"), "--tokenizer gpt2 needs --tokenizer-file");
  expect_refused(scratchgrad(t + " --tokenizer gpt2 --tokenizer-file /nonexistent/gpt2"), "train: --tokenizer-file");
  expect_refused(scratchgrad(t + " --tokenizer bpe --tokenizer-file " + kGpt2Dir), "--tokenizer-file is for --tokenizer gpt2");
}

}  // namespace
