// test_instruct_cli.cpp — `train --task instruct` and `eval --task instruct` through the command line: the
// loss eval prints equals a hand computation over the positions each template counts (with the prompt
// counted too, and with --max-length cutting the examples), --responses' JSON Lines, the checkpoint's
// "template", a few steps lowering the counted loss, --init from a checkpoint of ours, a GPT-2 file and a
// Hugging Face folder (each taking the template its tokenizer names), and the refusals (one line, exit 2).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "autograd/autograd.h"
#include "model_files.h"
#include "sampling.h"
#include "nn/finetune/data.h"
#include "nn/finetune/template.h"
#include "nn/gpt.h"
#include "nn/gpt2.h"
#include "nn/llama.h"
#include "nn/safetensors.h"
#include "test_helpers.h"
#include "test_process.h"

namespace {

namespace fs = std::filesystem;
using CliRun = testing_process::Shell;

CliRun scratchgrad(const std::string& args) {
  return testing_process::shell(std::string(SCRATCHGRAD_BIN_DIR) + "/scratchgrad " + args);
}

void expect_refused(const CliRun& r, const std::string& needle) {
  EXPECT_EQ(r.status, 2) << r.command << "\n" << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("scratchgrad: error:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
  const size_t program = r.command.find("/bin/scratchgrad ");  // docs/reliability.md's catalog: the call
  const std::string call = program == std::string::npos ? r.command : r.command.substr(program + 5);
  testing_helpers::record_refusal(call, r.err.substr(0, r.err.find('\n')));
}

std::string write(const std::string& name, const std::string& text) {
  const std::string path = testing_process::scratch(name).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// A few records of both kinds: Alpaca's (with and without an input) and a two-turn conversation.
std::string instruction_data() {
  return write("instruct.jsonl",
               R"({"instruction": "Name a colour.", "input": "", "output": "Blue."})" "\n"
               R"({"instruction": "Add the numbers.", "input": "2 and 3", "output": "5"})" "\n"
               R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}, )"
               R"({"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Bye"}, )"
               R"({"role": "assistant", "content": "Goodbye."}]})" "\n"
               R"({"instruction": "Spell cat backwards.", "output": "tac"})" "\n");
}

// A tiny new GPT trained for `steps` steps on `data` in `template_name`, saved at the returned path.
std::string tiny_model(const std::string& name, const std::string& data, const std::string& template_name, int steps,
                       const std::string& more = "") {
  const std::string path = testing_process::scratch(name).string();
  const CliRun r = scratchgrad(fmt::format("train --task instruct --data {} --template {} --dim 16 --layers 1 --heads 2 "
                                           "--context 256 --batch 4 --steps {} --warmup 0 --lr 0.01 --eval-every 1000 "
                                           "--save {} {}",
                                           data, template_name, steps, path, more));
  EXPECT_EQ(r.status, 0) << r.command << "\n" << r.out << r.err;
  return path;
}

double printed_mean_loss(const std::string& out) {
  const size_t at = out.find("mean loss ");
  EXPECT_NE(at, std::string::npos) << out;
  return at == std::string::npos ? NAN : std::stod(out.substr(at + 10));
}

// The mean loss over the counted targets, by hand: each example's logits from the model, log-softmax, and
// −log p of token t + 1 at every position t whose next token the template counts (every one with the prompt),
// the examples cut at max_length tokens of input; summed over the whole set, divided by the count.
double hand_loss(const std::string& checkpoint, const std::string& data, const std::string& template_name,
                 bool train_on_prompt, int64_t max_length) {
  cli::LoadedModel m = cli::load_model(checkpoint);
  const nn::LanguageModel& model = *m.decoder();
  const finetune::BpeTemplateTokenizer tok(*m.tokenizer.bpe);
  const auto chat = finetune::make_template(template_name, tok);
  autograd::NoGradGuard no_grad;
  double total = 0;
  int64_t counted = 0;
  for (const auto& record : finetune::read_instruction_data(data)) {
    const finetune::Rendered r = chat->render(finetune::to_conversation(record, *chat));
    const int64_t inputs = std::min<int64_t>(int64_t(r.ids.size()) - 1, max_length);
    const std::vector<int64_t> x(r.ids.begin(), r.ids.begin() + inputs);
    const autograd::Tensor logp =
        autograd::log_softmax(model(autograd::from_vector(x, {1, inputs})).view({inputs, model.vocab_size()}), 1);
    for (int64_t t = 0; t < inputs; ++t) {
      if (!train_on_prompt && !r.counted[size_t(t + 1)]) continue;
      total -= logp[t][r.ids[size_t(t + 1)]].item();
      ++counted;
    }
  }
  return total / double(counted);
}

// The longest record of `data` in the checkpoint's tokens, rendered in `template_name`.
int64_t longest_record(const std::string& checkpoint, const std::string& data, const std::string& template_name) {
  cli::LoadedModel m = cli::load_model(checkpoint);
  const finetune::BpeTemplateTokenizer tok(*m.tokenizer.bpe);
  const auto chat = finetune::make_template(template_name, tok);
  size_t longest = 0;
  for (const auto& record : finetune::read_instruction_data(data))
    longest = std::max(longest, chat->render(finetune::to_conversation(record, *chat)).ids.size());
  return int64_t(longest);
}

// The greedy reply of the checkpoint's model to `record` up to its last reply, in ChatML: at most `tokens`
// tokens, stopped at <|im_end|> (left out), decoded, as JSON writes it (a byte that is not UTF-8 replaced).
std::string greedy_reply(cli::LoadedModel& m, const finetune::InstructionExample& record, int64_t tokens) {
  autograd::NumericsGuard fast(autograd::Numerics::fast);  // the command line's, for a GPT
  const finetune::BpeTemplateTokenizer tok(*m.tokenizer.bpe);
  const auto chat = finetune::make_template("chatml", tok);
  finetune::Conversation c = finetune::to_conversation(record, *chat);
  c.pop_back();  // the reply
  const std::vector<int64_t> prompt = chat->generation_prompt(c);
  cli::Continuation how = cli::greedy(tokens);
  how.stop_tokens = {chat->end_of_turn_id()};
  autograd::Generator unused;
  std::vector<int64_t> ids = cli::continue_text_cached(*m.decoder(), prompt, how, unused);
  ids.erase(ids.begin(), ids.begin() + int64_t(prompt.size()));
  EXPECT_LE(ids.size(), size_t(tokens));
  if (!ids.empty() && ids.back() == chat->end_of_turn_id()) ids.pop_back();
  const std::string text = m.tokenizer.decode(ids);
  return nlohmann::json::parse(nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

TEST(InstructCli, EvalLossIsTheHandComputedMeanOverEachTemplatesCountedTargets) {
  const std::string data = instruction_data();
  for (const std::string name : {"alpaca", "chatml", "llama3"}) {
    SCOPED_TRACE(name);
    const std::string checkpoint = tiny_model("tiny_" + name + ".safetensors", data, name, 2);
    cli::LoadedModel m = cli::load_model(checkpoint);
    EXPECT_EQ(m.checkpoint.metadata["template"], name);  // the chat command's default
    // a cut that takes the last tokens of the longest record (some or all of its last reply and its end of
    // turn) and leaves the others whole
    const int64_t cut = longest_record(checkpoint, data, name) - 4;
    struct Case {
      std::string flags;
      bool train_on_prompt;
      int64_t max_length;
    };
    const std::string cut_flag = fmt::format("--max-length {}", cut);
    for (const Case& c : {Case{"", false, 256}, Case{"--train-on-prompt", true, 256}, Case{cut_flag, false, cut},
                          Case{cut_flag + " --train-on-prompt", true, cut}}) {
      SCOPED_TRACE(c.flags);
      // no --template: eval takes the checkpoint's
      const CliRun r = scratchgrad(fmt::format("eval --task instruct --checkpoint {} --data {} {}", checkpoint, data, c.flags));
      ASSERT_EQ(r.status, 0) << r.out << r.err;
      EXPECT_NE(r.out.find("template " + name), std::string::npos) << r.out;
      // (a record whose reply the cut takes whole has nothing to count: it is left out, and said to be)
      const bool whole = c.max_length == 256 || c.train_on_prompt;
      EXPECT_EQ(r.out.find("eval: 4 examples") != std::string::npos, whole || r.out.find("left out") == std::string::npos)
          << r.out;
      const double want = hand_loss(checkpoint, data, name, c.train_on_prompt, c.max_length);
      EXPECT_NEAR(printed_mean_loss(r.out), want, 1e-4) << r.out;
      const size_t at = r.out.find("perplexity ");
      ASSERT_NE(at, std::string::npos);
      EXPECT_NEAR(std::stod(r.out.substr(at + 11)), std::exp(want), 1e-3 * std::exp(want));
    }
    // the cut changes what is counted: the loss is not the whole records' loss
    EXPECT_NE(hand_loss(checkpoint, data, name, false, cut), hand_loss(checkpoint, data, name, false, 256));
  }
}

TEST(InstructCli, MaxLengthLeavesOutRecordsWhoseReplyItCutsAway) {
  const std::string data = instruction_data();
  const std::string checkpoint = tiny_model("tiny_cut.safetensors", data, "alpaca", 1);
  // the Alpaca header alone is over 20 tokens (bytes): no reply starts within 20 of them
  const CliRun none = scratchgrad(fmt::format("eval --task instruct --checkpoint {} --data {} --max-length 20", checkpoint, data));
  expect_refused(none, "no record has a reply within --max-length 20");
  // the prompt counted: every record has targets within 20
  const CliRun all = scratchgrad(
      fmt::format("eval --task instruct --checkpoint {} --data {} --max-length 20 --train-on-prompt", checkpoint, data));
  EXPECT_EQ(all.status, 0) << all.err;
  EXPECT_NE(all.out.find("eval: 4 examples"), std::string::npos) << all.out;
}

TEST(InstructCli, ResponsesAreJsonLinesOfEachReplyBesideItsReference) {
  const std::string data = instruction_data();
  const std::string checkpoint = tiny_model("tiny_responses.safetensors", data, "chatml", 2);
  const std::string responses = testing_process::scratch("responses.jsonl").string();
  const CliRun r = scratchgrad(fmt::format("eval --task instruct --checkpoint {} --data {} --responses {} --tokens 8",
                                           checkpoint, data, responses));
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("wrote 4 responses to " + responses), std::string::npos) << r.out;
  std::istringstream lines(testing_process::slurp(responses));
  const std::vector<std::string> references = {"Blue.", "5", "Goodbye.", "tac"};
  const std::vector<std::string> prompts = {"Name a colour.", "Add the numbers.\n\n2 and 3", "Bye", "Spell cat backwards."};
  int exact = 0;
  size_t n = 0;
  cli::LoadedModel m = cli::load_model(checkpoint);
  const auto records = finetune::read_instruction_data(data);
  for (std::string line; std::getline(lines, line); ++n) {
    ASSERT_LT(n, references.size());
    const nlohmann::json j = nlohmann::json::parse(line);
    EXPECT_EQ(j["index"], n + 1);
    EXPECT_EQ(j["reference"], references[n]);
    EXPECT_EQ(j["prompt"], prompts[n]);
    const std::string response = j["response"];
    EXPECT_EQ(response, greedy_reply(m, records[n], 8));
    EXPECT_EQ(j["exact"], response == references[n]);
    exact += response == references[n];
  }
  EXPECT_EQ(n, references.size());
  EXPECT_NE(r.out.find(fmt::format("exact answers {}/4", exact)), std::string::npos) << r.out;
}

TEST(InstructCli, AFewStepsLowerTheCountedLoss) {
  const std::string data = instruction_data();
  const std::string before = tiny_model("tiny_before.safetensors", data, "chatml", 1);
  const std::string after = tiny_model("tiny_after.safetensors", data, "chatml", 40);
  auto loss_of = [&](const std::string& checkpoint) {
    const CliRun r = scratchgrad(fmt::format("eval --task instruct --checkpoint {} --data {}", checkpoint, data));
    EXPECT_EQ(r.status, 0) << r.err;
    return printed_mean_loss(r.out);
  };
  const double first = loss_of(before), last = loss_of(after);
  EXPECT_LT(last, first - 1.0) << "1 step: " << first << ", 40 steps: " << last;
}

TEST(InstructCli, ANewModelReadsBytesAndTheTemplatesSpecialTokens) {
  const std::string data = instruction_data();
  const std::string checkpoint = tiny_model("tiny_tokens.safetensors", data, "chatml", 1);
  cli::LoadedModel m = cli::load_model(checkpoint);
  EXPECT_EQ(m.tokenizer.kind, "bpe");
  EXPECT_EQ(m.tokenizer.bpe->vocab_size(), 256 + 3);
  for (const char* special : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"})
    EXPECT_TRUE(m.tokenizer.bpe->token_id(special).has_value()) << special;
  EXPECT_EQ(m.tokenizer.bpe->encode_ordinary("23 + 58").size(), 7u);  // one token a character
  // --vocab-size asks for merges learned from the rendered examples
  const std::string merged = tiny_model("tiny_merged.safetensors", data, "alpaca", 1, "--vocab-size 300");
  EXPECT_EQ(cli::load_model(merged).tokenizer.bpe->vocab_size(), 300);
}

TEST(InstructCli, RefusesWhatCannotApplyWithOneLine) {
  const std::string data = instruction_data();
  const std::string tiny = "--dim 16 --layers 1 --heads 2 --context 64 --steps 1 --warmup 0";
  expect_refused(scratchgrad(fmt::format("train --task instruct --data {} --template vicuna {}", data, tiny)),
                 "unknown template \"vicuna\": expected alpaca, chatml or llama3");
  expect_refused(scratchgrad(fmt::format("train --task instruct {}", tiny)), "--task instruct needs --data FILE");
  expect_refused(scratchgrad(fmt::format("train --task summarize --data {}", data)), "--task must be text");
  expect_refused(scratchgrad(fmt::format("train --task instruct --data {} --text {} {}", data, data, tiny)),
                 "--text does not apply to --task instruct");
  expect_refused(scratchgrad(fmt::format("train --task instruct --data {} --epochs 2 {}", data, tiny)),
                 "--epochs is for --task classify");
  expect_refused(scratchgrad(fmt::format("train --task instruct --data {} --lora-rank 2 {}", data, tiny)),
                 "--lora-rank does not apply to --task instruct");
  expect_refused(scratchgrad(fmt::format("train --data {} --steps 1", data)), "--data is for");
  expect_refused(scratchgrad("train --template chatml --steps 1"), "--template is for train --task instruct");
  expect_refused(scratchgrad("train --train-on-prompt --steps 1"), "--train-on-prompt is for train --task instruct");
  expect_refused(scratchgrad(fmt::format("train --task instruct --data {} --tokenizer char {}", data, tiny)),
                 "--tokenizer char has no special tokens");
  expect_refused(scratchgrad(fmt::format("train --task instruct --data {} --model mini", data)),
                 "--model mini cannot follow instructions");
  expect_refused(scratchgrad(fmt::format("train --task instruct --data {} --max-length 100 {}", data, tiny)),
                 "--max-length 100 is longer than the model's context of 64");
  expect_refused(scratchgrad(fmt::format("train --task instruct --data {} --vocab-size 258 --template chatml {}", data, tiny)),
                 "--vocab-size must be from 259");

  // missing and mistyped fields, named with their line
  const std::string no_output = write("no_output.jsonl", R"({"instruction": "Name a colour.", "input": ""})" "\n");
  expect_refused(scratchgrad(fmt::format("train --task instruct --data {} {}", no_output, tiny)), "line 1");
  expect_refused(scratchgrad(fmt::format("train --task instruct --data {} {}", no_output, tiny)), "\"output\"");
  const std::string bad_role = write("bad_role.jsonl",
                                     R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "bot", "content": "Yo"}]})" "\n");
  expect_refused(scratchgrad(fmt::format("train --task instruct --data {} {}", bad_role, tiny)), "\"bot\"");
  expect_refused(scratchgrad(fmt::format("train --task instruct --data {} {}", testing_process::scratch("absent.jsonl").string(), tiny)),
                 "absent.jsonl");

  // eval
  const std::string checkpoint = tiny_model("tiny_refusals.safetensors", data, "alpaca", 1);
  expect_refused(scratchgrad(fmt::format("eval --task instruct --checkpoint {}", checkpoint)), "needs --data FILE");
  expect_refused(scratchgrad(fmt::format("eval --task instruct --checkpoint {} --data {} --template nope", checkpoint, data)),
                 "unknown template \"nope\"");
  // the checkpoint's tokenizer was made for alpaca: ChatML's markers are not in it
  expect_refused(scratchgrad(fmt::format("eval --task instruct --checkpoint {} --data {} --template chatml", checkpoint, data)),
                 "the chatml template needs the special token <|im_end|>");
  expect_refused(scratchgrad(fmt::format("eval --task instruct --checkpoint {} --data {} --stride 4", checkpoint, data)),
                 "--stride is for scoring a text");
  expect_refused(scratchgrad(fmt::format("eval --checkpoint {} --data {}", checkpoint, data)),
                 "or --task instruct (instruction records)");
  expect_refused(scratchgrad(fmt::format("eval --task instruct --checkpoint {} --data {} --tokens 5", checkpoint, data)),
                 "--tokens is for --responses FILE");
  expect_refused(scratchgrad(fmt::format("eval --task instruct --checkpoint {} --data {} --responses {}", checkpoint, data, data)),
                 "--responses");
  // a character model's checkpoint has no special tokens
  const std::string chars = testing_process::scratch("chars.safetensors").string();
  ASSERT_EQ(scratchgrad(fmt::format("train --model gpt --preset tiny --context 8 --steps 1 --warmup 0 --save {}", chars)).status, 0);
  expect_refused(scratchgrad(fmt::format("eval --task instruct --checkpoint {} --data {}", chars, data)),
                 "a character tokenizer has no special tokens");
  expect_refused(scratchgrad(fmt::format("train --task instruct --init {} --data {} --steps 1", chars, data)),
                 "a character tokenizer has no special tokens");
}

TEST(InstructCli, InitFromACheckpointOfOursKeepsItsTemplateAndTokenizer) {
  const std::string data = instruction_data();
  const std::string base = tiny_model("tiny_base.safetensors", data, "llama3", 1);
  const std::string tuned = testing_process::scratch("tiny_tuned.safetensors").string();
  const CliRun r = scratchgrad(fmt::format("train --task instruct --init {} --data {} --steps 3 --save {}", base, data, tuned));
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("template llama3"), std::string::npos) << r.out;
  cli::LoadedModel m = cli::load_model(tuned);
  EXPECT_EQ(m.checkpoint.metadata["template"], "llama3");
  EXPECT_EQ(m.checkpoint.metadata["task"], "instruct");
  expect_refused(scratchgrad(fmt::format("train --task instruct --init {} --data {} --context 32 --steps 1", base, data)),
                 "--context does not apply to --task instruct with --init");
}

TEST(InstructCli, Gpt2WeightsTakeTheAlpacaTemplateAndGpt2sTokens) {
  // a GPT-2 file of GPT-2's vocabulary (tiny otherwise), whose tokenizer has <|endoftext|> alone: the book's
  // Alpaca prompt is the template its special tokens name
  autograd::manual_seed(3);
  nn::GPTModel gpt2(nn::GPTConfig{.vocab_size = 50257, .context_length = 128, .emb_dim = 8, .n_heads = 2,
                                  .n_layers = 1, .drop_rate = 0.0, .qkv_bias = true});
  gpt2.tie_weights();
  const std::string file = testing_process::scratch("tiny_gpt2_vocab.safetensors").string();
  nn::save_safetensors(file, nn::gpt2_state_dict(gpt2), nn::gpt2_metadata(gpt2));
  const std::string tokenizer = std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/tokenizer/gpt2";
  const std::string data = instruction_data();
  const std::string tuned = testing_process::scratch("tiny_gpt2_sft.safetensors").string();
  const CliRun r = scratchgrad(fmt::format("train --task instruct --init {} --tokenizer-file {} --data {} --steps 2 --save {}",
                                           file, tokenizer, data, tuned));
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("template alpaca"), std::string::npos) << r.out;
  cli::LoadedModel m = cli::load_model(tuned);
  EXPECT_EQ(m.checkpoint.metadata["template"], "alpaca");
  EXPECT_EQ(m.tokenizer.kind, "gpt2");
  const CliRun e = scratchgrad(fmt::format("eval --task instruct --checkpoint {} --data {}", tuned, data));
  ASSERT_EQ(e.status, 0) << e.out << e.err;
  EXPECT_NEAR(printed_mean_loss(e.out), hand_loss(tuned, data, "alpaca", false, 128), 1e-4) << e.out;
  expect_refused(scratchgrad(fmt::format("train --task instruct --init {} --data {} --steps 2", file, data)),
                 "give --tokenizer-file");
}

TEST(InstructCli, AHuggingFaceFolderTakesTheTemplateItsTokenizerNames) {
  // a tiny Llama folder whose tokenizer.json is a Llama 3 tokenizer's (tests/reference/fixtures/hf_tokenizer):
  // its header tokens name the llama3 template
  const fs::path dir = testing_process::scratch("tiny_llama3_folder");
  fs::create_directories(dir);
  nn::LlamaConfig c;
  c.vocab_size = 862, c.hidden_size = 16, c.intermediate_size = 32, c.num_hidden_layers = 1;
  c.num_attention_heads = 2, c.num_key_value_heads = 1, c.max_position_embeddings = 256, c.rope_theta = 10000.0;
  autograd::manual_seed(5);
  nn::LlamaModel llama(c);
  nn::save_safetensors((dir / "model.safetensors").string(), llama.state_dict(), {{"format", "pt"}});
  const nlohmann::json config{{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"vocab_size", 862},
                              {"hidden_size", 16}, {"intermediate_size", 32}, {"num_hidden_layers", 1},
                              {"num_attention_heads", 2}, {"num_key_value_heads", 1}, {"max_position_embeddings", 256},
                              {"rms_norm_eps", 1e-5}, {"rope_theta", 10000.0}, {"tie_word_embeddings", true},
                              {"hidden_act", "silu"}, {"torch_dtype", "float32"}};
  std::ofstream(dir / "config.json") << config.dump(2);
  fs::copy_file(std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/reference/fixtures/hf_tokenizer/tiny-llama3.tokenizer.json",
                dir / "tokenizer.json", fs::copy_options::overwrite_existing);
  const std::string data = instruction_data();
  const std::string tuned = testing_process::scratch("tiny_llama3_sft.safetensors").string();
  const CliRun r = scratchgrad(fmt::format("train --task instruct --init {} --data {} --steps 2 --save {}", dir.string(),
                                           data, tuned));
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("template llama3"), std::string::npos) << r.out;
  cli::LoadedModel m = cli::load_model(tuned);
  EXPECT_EQ(m.checkpoint.metadata["template"], "llama3");
  ASSERT_NE(m.llama, nullptr);
  const CliRun e = scratchgrad(fmt::format("eval --task instruct --checkpoint {} --data {}", tuned, data));
  ASSERT_EQ(e.status, 0) << e.out << e.err;
  EXPECT_NEAR(printed_mean_loss(e.out), hand_loss(tuned, data, "llama3", false, 256), 1e-4) << e.out;
  // the folder itself is read by eval too, in the template its tokenizer names
  const CliRun folder = scratchgrad(fmt::format("eval --task instruct --checkpoint {} --data {}", dir.string(), data));
  ASSERT_EQ(folder.status, 0) << folder.out << folder.err;
  EXPECT_NE(folder.out.find("template llama3"), std::string::npos) << folder.out;
}

}  // namespace
