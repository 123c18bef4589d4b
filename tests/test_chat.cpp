// test_chat.cpp — chatting with a model (nn/finetune/chat_session.h and `scratchgrad chat`): each reply's
// logits equal a recompute of the whole conversation while the cache reads each token once, the reply stops
// at the template's end of turn or its limit, the ids a chat reads are those render() gives training (alpaca,
// chatml, llama3, with and without a system prompt), a full context drops the oldest turns, /reset and /system,
// and the command line: its scripted replies equal generate's greedy continuation of the rendered
// conversation (chatml, llama3 and alpaca chosen from the tokenizer), and its refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "autograd/autograd.h"
#include "chat.h"
#include "nn/finetune/chat_session.h"
#include "nn/finetune/error.h"
#include "nn/finetune/template.h"
#include "nn/gpt.h"
#include "nn/gpt2.h"
#include "nn/llama.h"
#include "nn/safetensors.h"
#include "nn/tokenizer/tokenizer.h"
#include "test_helpers.h"
#include "test_process.h"
#include "test_sft_helpers.h"

namespace {

namespace fs = std::filesystem;
using autograd::Tensor;
using finetune::ChatSession;
using finetune::ReplyOptions;

// ---------------------------------------------------------------- the library

// A model that counts the positions it is fed through its cache: a conversation read once has fed each of
// its tokens once (the last reply's end-of-turn token, sampled but not yet read, aside).
class CountingModel : public nn::LanguageModel {
 public:
  explicit CountingModel(const nn::LanguageModel& inner) : inner_(inner) {}
  Tensor forward(const Tensor& ids) const override { return inner_.forward(ids); }
  nn::KVCache make_kv_cache(int64_t batch, int64_t capacity) const override { return inner_.make_kv_cache(batch, capacity); }
  Tensor forward_cached(const Tensor& ids, nn::KVCache& cache) const override {
    fed += ids.size(1);
    return inner_.forward_cached(ids, cache);
  }
  int64_t context_length() const override { return inner_.context_length(); }
  int64_t vocab_size() const override { return inner_.vocab_size(); }
  mutable int64_t fed = 0;

 private:
  const nn::LanguageModel& inner_;
};

// A tiny random GPT over the byte tokenizer's ids (the bytes, then its specials at 1000 to 1004).
std::unique_ptr<nn::GPTModel> tiny_gpt(int64_t context) {
  autograd::manual_seed(5);
  return std::make_unique<nn::GPTModel>(nn::GPTConfig{.vocab_size = 1005, .context_length = context, .emb_dim = 16,
                                                      .n_heads = 2, .n_layers = 2, .drop_rate = 0.0, .qkv_bias = true});
}

// The last position's logits of the whole of `ids`, read at once without a cache.
Tensor recomputed(const nn::LanguageModel& model, const std::vector<int64_t>& ids) {
  autograd::NoGradGuard no_grad;
  const Tensor logits = model.forward(autograd::from_vector(ids, {1, int64_t(ids.size())}));
  return logits[0].select(0, -1).cpu();
}

double largest_difference(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  EXPECT_EQ(x.size(), y.size());
  double most = 0;
  for (size_t i = 0; i < x.size(); ++i) most = std::max(most, std::abs(x[i] - y[i]));
  return most;
}

// Sends `messages`, checking at every reply token that the logits it was chosen from are those of the whole
// conversation so far read at once. Returns the notices the session gave.
std::vector<std::string> converse_and_check(ChatSession& session, const nn::LanguageModel& model,
                                            const std::vector<std::string>& messages, const ReplyOptions& options) {
  std::vector<std::string> notices;
  session.on_context_full([&](const std::string& line) { notices.push_back(line); });
  autograd::Generator gen(1);
  for (const std::string& message : messages) {
    SCOPED_TRACE(message);
    int64_t checked = 0;
    session.reply(message, options, gen, [&](int64_t, const Tensor& logits) {
      std::vector<int64_t> before = session.tokens();
      before.pop_back();  // the token just chosen from these logits
      EXPECT_EQ(session.cached(), int64_t(before.size()));
      EXPECT_LT(largest_difference(logits, recomputed(model, before)), 1e-4) << "reply token " << checked;
      ++checked;
    });
    EXPECT_GT(checked, 0);
  }
  return notices;
}

TEST(ChatSession, EachReplysLogitsEqualARecomputeOfTheWholeConversation) {
  const auto gpt = tiny_gpt(256);
  const CountingModel model(*gpt);
  const sft_testing::ByteTokenizer tok = sft_testing::smollm2_like();
  const auto chat = finetune::make_template("chatml", tok);
  ChatSession session(model, *chat, "Be brief.");
  const ReplyOptions options{.max_tokens = 6, .sampling = {.temperature = 0.8}};
  const std::vector<std::string> notices =
      converse_and_check(session, model, {"Hi!", "What is 2 + 3?", "And 4 + 4?"}, options);
  EXPECT_TRUE(notices.empty());
  EXPECT_EQ(session.turns(), 3u);
  // The first turn's prompt is the template's generation prompt of the conversation so far.
  const std::vector<int64_t> first = chat->generation_prompt({{"system", "Be brief."}, {"user", "Hi!"}});
  const std::vector<int64_t> all = session.tokens();
  ASSERT_GE(all.size(), first.size());
  EXPECT_EQ(std::vector<int64_t>(all.begin(), all.begin() + int64_t(first.size())), first);
  // Each token was read once, and all were but the last turn's tail: its end-of-turn token and the "\n" after
  // it (and its last token when the reply was cut at its limit), which the next message reads.
  EXPECT_EQ(model.fed, session.cached());
  const int64_t unread = int64_t(all.size()) - session.cached();
  EXPECT_TRUE(unread == 2 || unread == 3) << unread;
  EXPECT_EQ(tok.spell({all.end() - 2, all.end()}), "<|im_end|>\n");
}

TEST(ChatSession, AFullContextDropsTheOldestTurnsAndReadsTheRestAgain) {
  const auto gpt = tiny_gpt(96);
  const nn::GPTModel& model = *gpt;
  const sft_testing::ByteTokenizer tok = sft_testing::llama3_like();
  const auto chat = finetune::make_template("llama3", tok);
  ChatSession session(model, *chat);
  // A llama3 turn here is about 33 tokens of prompt, then up to 8 of reply and its <|eot_id|>: the third
  // message does not fit after two turns, and the logits after each drop are still the recompute's.
  const std::vector<std::string> notices =
      converse_and_check(session, model, {"one one one", "two two two", "three three", "four four"},
                         ReplyOptions{.max_tokens = 8, .sampling = {.temperature = 0.0}});
  ASSERT_FALSE(notices.empty());
  EXPECT_NE(notices[0].find("the context of 96 tokens is full: dropped the oldest"), std::string::npos) << notices[0];
  EXPECT_LE(int64_t(session.tokens().size()), 96);
  EXPECT_LT(session.turns(), 4u);
  // The opening stays; the last turn is the fourth message's.
  const std::string text = tok.spell(session.tokens());
  EXPECT_EQ(text.rfind("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n", 0), 0u) << text;
  EXPECT_EQ(text.find("one one one"), std::string::npos) << text;
  EXPECT_NE(text.find("four four"), std::string::npos) << text;
}

TEST(ChatSession, ResetKeepsTheOpeningAndSystemReplacesIt) {
  const auto model = tiny_gpt(256);
  const sft_testing::ByteTokenizer tok = sft_testing::smollm2_like();
  const auto chat = finetune::make_template("chatml", tok);
  ChatSession session(*model, *chat);
  autograd::Generator gen(0);
  const ReplyOptions greedy{.max_tokens = 5, .sampling = {.temperature = 0.0}};
  const std::vector<int64_t> first = session.reply("Hi!", greedy, gen);
  session.reply("Again?", greedy, gen);
  session.reset();
  EXPECT_EQ(session.turns(), 0u);
  EXPECT_TRUE(session.tokens().empty());  // chatml without a system prompt opens with nothing
  EXPECT_EQ(session.reply("Hi!", greedy, gen), first);  // a new conversation: the same greedy reply

  session.set_system("Be brief.");
  EXPECT_EQ(session.turns(), 1u);  // the turns stay, read again under the new system prompt
  EXPECT_EQ(session.cached(), 0);
  EXPECT_EQ(tok.spell(session.tokens()).rfind("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!", 0), 0u);
  std::vector<std::string> none;
  session.on_context_full([&](const std::string& line) { none.push_back(line); });
  session.reply("More?", greedy, gen);
  EXPECT_TRUE(none.empty());
}

// A model whose every answer is "ok" then the end-of-turn id, chosen by the last token it read: '\n' (the end
// of every template's assistant header) gives 'o', 'o' gives 'k', 'k' gives `end_of_turn`.
class OkModel : public nn::LanguageModel {
 public:
  explicit OkModel(int64_t end_of_turn, int64_t vocab = 1005) : end_of_turn_(end_of_turn), vocab_(vocab) {}
  Tensor forward(const Tensor&) const override { throw std::logic_error("OkModel: cached only"); }
  nn::KVCache make_kv_cache(int64_t, int64_t) const override { return {}; }
  Tensor forward_cached(const Tensor& ids, nn::KVCache& cache) const override {
    cache.length += ids.size(1);
    const int64_t last = ids.to_vector<int64_t>().back();
    std::vector<float> logits(size_t(vocab_size()), 0.0f);
    logits[size_t(last == '\n' ? 'o' : last == 'o' ? 'k' : last == 'k' ? end_of_turn_ : 'x')] = 10.0f;
    return autograd::from_vector(logits, {1, vocab_size()});
  }
  int64_t context_length() const override { return 400; }
  int64_t vocab_size() const override { return vocab_; }

 private:
  int64_t end_of_turn_, vocab_;
};

// What a chat read is what training renders: the conversation's ids, turn after turn, are render()'s.
TEST(ChatSession, TheConversationReadIsTheOneTheTemplateRenders) {
  const std::vector<std::pair<std::string, sft_testing::ByteTokenizer>> cases{
      {"alpaca", sft_testing::gpt2_like()}, {"chatml", sft_testing::smollm2_like()}, {"llama3", sft_testing::llama3_like()}};
  for (const auto& [name, tok] : cases) {
    SCOPED_TRACE(name);
    const auto chat = finetune::make_template(name, tok);
    const OkModel model(chat->end_of_turn_id());
    for (const std::string system : {"", "Be brief."}) {
      ChatSession session(model, *chat, system);
      autograd::Generator gen(0);
      const ReplyOptions greedy{.max_tokens = 10, .sampling = {.temperature = 0.0}};
      session.reply("Hi!", greedy, gen);
      session.reply("Colour of the sky?", greedy, gen);
      finetune::Conversation c{{"user", "Hi!"}, {"assistant", "ok"}, {"user", "Colour of the sky?"}, {"assistant", "ok"}};
      if (!system.empty()) c.insert(c.begin(), {"system", system});
      EXPECT_EQ(tok.spell(session.tokens()), tok.spell(chat->render(c).ids));
      EXPECT_EQ(session.tokens(), chat->render(c).ids);
    }
  }
  // The Alpaca conversation: the header once, then each turn's Instruction and Response sections.
  const sft_testing::ByteTokenizer tok = sft_testing::gpt2_like();
  const auto alpaca = finetune::make_template("alpaca", tok);
  const OkModel model(alpaca->end_of_turn_id());
  ChatSession session(model, *alpaca);
  autograd::Generator gen(0);
  session.reply("Name a colour.", {.max_tokens = 10, .sampling = {.temperature = 0.0}}, gen);
  session.reply("Another.", {.max_tokens = 10, .sampling = {.temperature = 0.0}}, gen);
  EXPECT_EQ(tok.spell(session.tokens()),
            "Below is an instruction that describes a task. Write a response that appropriately completes the "
            "request.\n\n### Instruction:\nName a colour.\n\n### Response:\nok<|endoftext|>"
            "\n\n### Instruction:\nAnother.\n\n### Response:\nok<|endoftext|>");
}

TEST(ChatSession, TheReplyStopsAtTheEndOfTurnOrItsLimit) {
  const sft_testing::ByteTokenizer tok = sft_testing::smollm2_like();
  const auto chat = finetune::make_template("chatml", tok);
  const OkModel model(chat->end_of_turn_id());
  ChatSession session(model, *chat);
  autograd::Generator gen(0);
  EXPECT_EQ(tok.spell(session.reply("hi", {.max_tokens = 10, .sampling = {.temperature = 0.0}}, gen)), "ok<|im_end|>");
  // cut at its limit, the turn is still closed by the end-of-turn token
  EXPECT_EQ(tok.spell(session.reply("hi", {.max_tokens = 1, .sampling = {.temperature = 0.0}}, gen)), "o");
  EXPECT_EQ(tok.spell(session.tokens()),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nok<|im_end|>\n"
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\no<|im_end|>\n");
  // a message that cannot fit with the opening is refused, the session unchanged
  const std::vector<int64_t> before = session.tokens();
  EXPECT_THROW(session.reply(std::string(400, 'a'), {.max_tokens = 5}, gen), finetune::FinetuneError);
  EXPECT_EQ(session.tokens(), before);
  // and so is one holding a token the model has no row for (<|im_start|>, 1001, past a vocabulary of 300)
  const OkModel small(chat->end_of_turn_id(), 300);
  ChatSession other(small, *chat);
  EXPECT_THROW(other.reply("hi", {.max_tokens = 5}, gen), finetune::FinetuneError);
  EXPECT_TRUE(other.tokens().empty());
}

// ---------------------------------------------------------------- the command line

using Shell = testing_process::Shell;
using testing_process::ids_in;

const std::string kSource = SCRATCHGRAD_SOURCE_DIR;

Shell scratchgrad(const std::string& args) {
  return testing_process::shell(std::string(SCRATCHGRAD_BIN_DIR) + "/scratchgrad " + args);
}

// `scratchgrad chat ARGS` with `lines` as its standard input (a file: not a terminal).
Shell chat_with(const std::string& args, const std::string& lines) {
  static int n = 0;
  const fs::path input = testing_process::scratch("chat_input" + std::to_string(n++) + ".txt");
  std::ofstream(input, std::ios::binary) << lines;
  return scratchgrad("chat " + args + " < " + input.string());
}

void expect_refused(const Shell& r, const std::string& needle) {
  EXPECT_EQ(r.status, 2) << r.command << "\n" << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("scratchgrad: error:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
  const size_t program = r.command.find("/bin/scratchgrad ");
  std::string call = program == std::string::npos ? r.command : r.command.substr(program + 5);
  call = call.substr(0, call.find(" < "));
  testing_helpers::record_refusal(call, r.err.substr(0, r.err.find('\n')));
}

// A Llama folder of random weights over a tiny tokenizer.json of the fixtures (tiny-smollm2: chatml;
// tiny-llama3: llama3), which it carries. Its head is not tied to the embedding: a tied random model's
// greedy reply repeats the last token it read (the embedding dominates the residual stream), which would
// compare little.
fs::path llama_folder(const std::string& tokenizer_name) {
  const fs::path dir = testing_process::scratch("chat_" + tokenizer_name);
  fs::create_directories(dir);
  const std::string tok_file = kSource + "/tests/reference/fixtures/hf_tokenizer/" + tokenizer_name + ".tokenizer.json";
  fs::copy_file(tok_file, dir / "tokenizer.json", fs::copy_options::overwrite_existing);
  const int64_t vocab = tokenizer::load_hugging_face_tokenizer(tok_file).vocab_size();
  nn::LlamaConfig c;
  c.vocab_size = vocab, c.hidden_size = 32, c.intermediate_size = 64, c.num_hidden_layers = 2;
  c.num_attention_heads = 4, c.num_key_value_heads = 2, c.max_position_embeddings = 256, c.tie_word_embeddings = false;
  autograd::manual_seed(3);
  nn::LlamaModel model(c);
  nn::save_safetensors((dir / "model.safetensors").string(), model.state_dict(), {{"format", "pt"}});
  std::ofstream(dir / "config.json") << fmt::format(R"({{"architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "vocab_size": {}, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
    "hidden_act": "silu", "tie_word_embeddings": false}})", vocab);
  return dir;
}

// A GPT-2-layout file of random weights over GPT-2's whole vocabulary (its tokenizer: tests/tokenizer/gpt2).
const std::string kGpt2Tokenizer = kSource + "/tests/tokenizer/gpt2";
std::string gpt2_file() {
  const std::string path = testing_process::scratch("chat_gpt2.safetensors").string();
  if (fs::exists(path)) return path;
  autograd::manual_seed(11);
  nn::GPTModel model(nn::GPTConfig{.vocab_size = 50257, .context_length = 256, .emb_dim = 8, .n_heads = 2,
                                   .n_layers = 1, .drop_rate = 0.0, .qkv_bias = true});
  model.tie_weights();
  nn::save_safetensors(path, nn::gpt2_state_dict(model), nn::gpt2_metadata(model));
  return path;
}

std::string joined(const std::vector<int64_t>& ids) { return fmt::format("{}", fmt::join(ids, " ")); }

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// What a scripted chat writes for a reply of `ids`: its text without the end-of-turn token, one line.
std::string reply_line(const tokenizer::Tokenizer& tok, std::vector<int64_t> ids, int64_t end_of_turn) {
  if (!ids.empty() && ids.back() == end_of_turn) ids.pop_back();
  std::string text = tok.decode(std::vector<int32_t>(ids.begin(), ids.end())), line;
  for (const char c : text) line += c == '\n' ? std::string("\\n") : c == '\\' ? std::string("\\\\") : std::string(1, c);
  return line;
}

// generate's greedy reply to `prompt`, stopped at the end of turn: the reference a scripted chat must equal.
std::vector<int64_t> generated(const std::string& model_args, const std::vector<int64_t>& prompt, int64_t tokens,
                               int64_t end_of_turn) {
  const Shell g = scratchgrad(fmt::format("generate {} --prompt-ids '{}' --tokens {} --temperature 0 --ids --stop-id {}",
                                          model_args, joined(prompt), tokens, end_of_turn));
  EXPECT_EQ(g.status, 0) << g.command << "\n" << g.err;
  return ids_in(g.out);
}

// Two messages through `chat`, each reply compared with generate's greedy continuation of the conversation
// rendered by the library's template (the first reply's ids, then the template's pieces for the next turn).
void expect_chat_is_generate(const std::string& model_args, const tokenizer::Tokenizer& tok,
                             const std::string& template_name) {
  const finetune::BpeTemplateTokenizer adapter(tok);
  const auto chat = finetune::make_template(template_name, adapter);
  const int64_t eot = chat->end_of_turn_id(), tokens = 7;
  const Shell r = chat_with(model_args + fmt::format(" --tokens {}", tokens), "Hi there\nWhat is 2 + 3?\n");
  ASSERT_EQ(r.status, 0) << r.command << "\n" << r.err;
  const std::vector<std::string> lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;

  std::vector<int64_t> prompt = chat->generation_prompt({{"user", "Hi there"}});
  const std::vector<int64_t> first = generated(model_args, prompt, tokens, eot);
  EXPECT_EQ(lines[0], reply_line(tok, first, eot));

  prompt.insert(prompt.end(), first.begin(), first.end());
  if (first.back() != eot) prompt.push_back(eot);
  finetune::Pieces next = chat->after_reply();
  for (const finetune::Pieces& more : {chat->user_turn("What is 2 + 3?"), chat->assistant_header()})
    next.insert(next.end(), more.begin(), more.end());
  const std::vector<int64_t> turn = chat->tokenize(next).ids;
  prompt.insert(prompt.end(), turn.begin(), turn.end());
  EXPECT_EQ(lines[1], reply_line(tok, generated(model_args, prompt, tokens, eot), eot));
}

TEST(ChatCli, ScriptedRepliesAreGeneratesOnTheRenderedConversation) {
  for (const char* name : {"tiny-smollm2", "tiny-llama3"}) {
    SCOPED_TRACE(name);
    const fs::path dir = llama_folder(name);
    const tokenizer::Tokenizer tok = tokenizer::load_hugging_face_tokenizer((dir / "tokenizer.json").string());
    expect_chat_is_generate("--checkpoint " + dir.string(), tok,
                            std::string(name) == "tiny-smollm2" ? "chatml" : "llama3");
  }
  SCOPED_TRACE("gpt2");  // GPT-2's tokenizer has no chat markers: the book's Alpaca template
  const tokenizer::Tokenizer gpt2 = tokenizer::load_gpt2_tokenizer(kGpt2Tokenizer);
  expect_chat_is_generate("--checkpoint " + gpt2_file() + " --tokenizer-file " + kGpt2Tokenizer, gpt2, "alpaca");
}

TEST(ChatCli, ResetStartsOverAndSystemSetsTheSystemPrompt) {
  const fs::path dir = llama_folder("tiny-smollm2");
  const std::string model = "--checkpoint " + dir.string() + " --tokens 6";
  const Shell r = chat_with(model, "Hi there\n/reset\nHi there\n/system Be brief.\nHi there\n/what\n");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::vector<std::string> lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 3u) << r.out;  // one line a message, none for the commands
  EXPECT_EQ(lines[0], lines[1]);
  EXPECT_NE(r.err.find("chat: unknown command /what"), std::string::npos) << r.err;

  // After /system the turn so far is kept, read again under the system prompt: the opening, the first turn
  // (the same greedy reply R), then the new message.
  const tokenizer::Tokenizer tok = tokenizer::load_hugging_face_tokenizer((dir / "tokenizer.json").string());
  const finetune::BpeTemplateTokenizer adapter(tok);
  const auto chat = finetune::make_template("chatml", adapter);
  const int64_t eot = chat->end_of_turn_id();
  const std::vector<int64_t> first_prompt = chat->generation_prompt({{"user", "Hi there"}});
  const std::vector<int64_t> reply = generated("--checkpoint " + dir.string(), first_prompt, 6, eot);
  EXPECT_EQ(lines[0], reply_line(tok, reply, eot));
  std::vector<int64_t> prompt = chat->tokenize(chat->opening("Be brief.")).ids;
  prompt.insert(prompt.end(), first_prompt.begin(), first_prompt.end());
  prompt.insert(prompt.end(), reply.begin(), reply.end());
  if (reply.back() != eot) prompt.push_back(eot);
  finetune::Pieces next = chat->after_reply();
  for (const finetune::Pieces& more : {chat->user_turn("Hi there"), chat->assistant_header()})
    next.insert(next.end(), more.begin(), more.end());
  const std::vector<int64_t> turn = chat->tokenize(next).ids;
  prompt.insert(prompt.end(), turn.begin(), turn.end());
  EXPECT_EQ(lines[2], reply_line(tok, generated("--checkpoint " + dir.string(), prompt, 6, eot), eot));
}

// At a terminal: a greeting, a prompt before each line, the reply's text as it is (no escapes), an empty line
// skipped. run_chat is called in the test's process, the terminal being its `interactive` argument.
TEST(ChatCli, AtATerminalEachReplyFollowsAPromptAsPlainText) {
  // run_chat sets the process's numerics and threads as the command does: the tests after this one in the
  // same process get back what they had (the bit-exact ones need exact numerics).
  struct Restore {
    autograd::Numerics numerics = autograd::numerics();
    int threads = autograd::get_num_threads();
    ~Restore() {
      autograd::set_numerics(numerics);
      autograd::set_num_threads(threads);
    }
  } restore;
  const fs::path dir = llama_folder("tiny-smollm2");
  cli::ChatOptions options;
  options.checkpoint = dir.string();
  options.tokens = 6;
  std::istringstream script("Hi there\n"), typed("Hi there\n\n/reset\nHi there\n");
  std::ostringstream scripted, shown, err;
  ASSERT_EQ(cli::run_chat(options, script, scripted, err, /*interactive=*/false), 0);
  ASSERT_EQ(cli::run_chat(options, typed, shown, err, /*interactive=*/true), 0);
  std::string reply;  // the scripted line, its escapes undone
  const std::string line = scripted.str().substr(0, scripted.str().size() - 1);
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\\' && i + 1 < line.size()) reply += line[++i] == 'n' ? '\n' : line[i];
    else reply += line[i];
  }
  const std::string greeting = "chat with " + dir.string() + " (chatml template, context 256)";
  EXPECT_EQ(shown.str().rfind(greeting, 0), 0u) << shown.str();
  const std::string turn = "> " + reply + "\n";
  EXPECT_EQ(testing_process::count(shown.str(), turn), 2) << shown.str();
  EXPECT_EQ(testing_process::count(shown.str(), "> "), 5) << shown.str();  // four lines, then the end
}

TEST(ChatCli, AFullContextIsSaidOnStderrAndTheChatGoesOn) {
  const fs::path dir = llama_folder("tiny-smollm2");
  std::string lines;
  for (int i = 0; i < 12; ++i) lines += fmt::format("Message number {} of a long conversation\n", i);
  const Shell r = chat_with("--checkpoint " + dir.string() + " --tokens 16", lines);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(lines_of(r.out).size(), 12u) << r.out;
  EXPECT_NE(r.err.find("chat: the context of 256 tokens is full: dropped the oldest"), std::string::npos) << r.err;
}

TEST(ChatCli, Refusals) {
  const fs::path dir = llama_folder("tiny-smollm2");
  const std::string folder = "--checkpoint " + dir.string();
  expect_refused(chat_with(folder + " --template vicuna", "Hi\n"), "unknown template \"vicuna\"");
  expect_refused(chat_with(folder + " --template llama3", "Hi\n"),
                 "the llama3 template needs the special token <|eot_id|>");
  // (GPT-2's tokenizer copied into the scratch folder, so that the refusals' catalog reads the same anywhere)
  const fs::path gpt2_tokenizer = testing_process::scratch("chat_gpt2_tokenizer");
  fs::create_directories(gpt2_tokenizer);
  for (const char* file : {"encoder.json", "vocab.bpe"})
    fs::copy_file(kGpt2Tokenizer + "/" + file, gpt2_tokenizer / file, fs::copy_options::overwrite_existing);
  expect_refused(chat_with("--checkpoint " + gpt2_file() + " --tokenizer-file " + gpt2_tokenizer.string() +
                               " --template chatml",
                           "Hi\n"),
                 "the chatml template needs the special token <|im_end|>");
  expect_refused(chat_with("--checkpoint " + gpt2_file(), "Hi\n"), "give --tokenizer-file");
  expect_refused(chat_with(folder + " --tokenizer-file x.json", "Hi\n"), "--tokenizer-file is for");
  expect_refused(chat_with(folder + " --heads 2", "Hi\n"), "--heads");
  expect_refused(chat_with(folder + " --tokens 0", "Hi\n"), "--tokens (a reply's most tokens) must be at least 1");
  expect_refused(chat_with(folder + " --top-p 0", "Hi\n"), "--top-p must be in (0, 1]");
  // a tokenizer.json that is not the model's: the twin's smollm2 folder has 64 ids
  const fs::path small = testing_process::scratch("chat_small_vocab");
  fs::create_directories(small);
  for (const char* file : {"config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                           "model.safetensors.index.json"})
    fs::copy_file(kSource + "/tests/reference/fixtures/hf/smollm2/" + file, small / file,
                  fs::copy_options::overwrite_existing);
  fs::copy_file(kSource + "/tests/reference/fixtures/hf_tokenizer/tiny-qwen3.tokenizer.json", small / "tokenizer.json",
                fs::copy_options::overwrite_existing);
  expect_refused(chat_with("--checkpoint " + small.string(), "Hi\n"), "is outside the model's vocabulary of 64");

  // train's checkpoints: a character model has no markers; a BPE learned here has no end-of-text token
  const std::string mini = testing_process::scratch("chat_mini.safetensors").string();
  ASSERT_EQ(scratchgrad("train --steps 2 --save " + mini).status, 0);
  expect_refused(chat_with("--checkpoint " + mini, "Hi\n"), "is the workshop's character model");
  const std::string bpe = testing_process::scratch("chat_bpe.safetensors").string();
  const Shell trained = scratchgrad("train --model gpt --preset tiny --tokenizer bpe --vocab-size 280 --steps 2 "
                                    "--warmup 1 --sample 0 --text /usr/share/common-licenses/GPL-3 --save " + bpe);
  ASSERT_EQ(trained.status, 0) << trained.err;
  expect_refused(chat_with("--checkpoint " + bpe, "Hi\n"), "the alpaca template needs an end-of-text token");
  // the template a checkpoint records (train --task instruct's "template") is its default
  nn::Checkpoint ck = nn::load_safetensors(bpe);
  ck.metadata["template"] = "chatml";
  const std::string recorded = testing_process::scratch("chat_bpe_chatml.safetensors").string();
  nn::save_safetensors(recorded, ck.tensors, ck.metadata);
  expect_refused(chat_with("--checkpoint " + recorded, "Hi\n"), "(the checkpoint's template): the chatml template needs");
}

}  // namespace
