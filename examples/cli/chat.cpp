// chat.cpp — `scratchgrad chat`: a conversation with a model in its chat template, the key/value cache kept
// across turns (nn/finetune/chat_session.h does the turns; this file reads the model, chooses the template
// and talks to the terminal or the script).
//
// Every check is made before the first message is read: the flags, the model and its tokenizer, the
// template and the markers it needs.
#include "chat.h"

#include <unistd.h>

#include <cmath>
#include <iostream>
#include <istream>
#include <memory>
#include <ostream>

#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "command_line.h"
#include "guards.h"
#include "model_files.h"
#include "nn/finetune/chat_session.h"
#include "nn/finetune/error.h"
#include "nn/finetune/template.h"
#include "nn/gpt2.h"
#include "nn/hf_folder.h"
#include "sampling.h"
#include "token_text.h"

namespace cli {

CLI::App* add_chat_command(CLI::App& app, ChatOptions& o) {
  CLI::App* chat = app.add_subcommand("chat", "talk with a fine-tuned model in its chat template (one message a line "
                                              "when standard input is not a terminal)");
  chat->add_option("--checkpoint", o.checkpoint,
                   "the model: a checkpoint of train, GPT-2's or llm.c's file, or a Hugging Face folder")
      ->required();
  chat->add_option("--template", o.template_name,
                   "alpaca, chatml or llama3 (default: the one the checkpoint records, else the one its tokenizer's "
                   "special tokens name: <|im_start|> chatml, <|start_header_id|> llama3, else alpaca)");
  chat->add_option("--tokens", o.tokens, "a reply's most tokens")->capture_default_str();
  chat->add_option("--temperature", o.temperature, "0 = greedy, else sample softmax(logits / t)")->capture_default_str();
  chat->add_option("--top-k", o.top_k, "sample only among the k likeliest (0 = all)")->capture_default_str();
  chat->add_option("--top-p", o.top_p, "sample only among the likeliest tokens whose probabilities sum to p, in (0, 1]")
      ->capture_default_str();
  chat->add_option("--seed", o.seed, "seed for sampling")->capture_default_str();
  chat->add_option("--tokenizer-file", o.tokenizer_file,
                   "GPT-2's tokenizer (the folder of encoder.json and vocab.bpe, or a tokenizer.json), for GPT-2's "
                   "files and runs of --tokenizer gpt2");
  chat->add_option("--heads", o.heads, "GPT-2's model.safetensors: attention heads, if the file does not say "
                                       "(default: width / 64)");
  chat->add_option("--threads", o.threads, "CPU threads")->capture_default_str();
  return chat;
}

const std::vector<FlagScope>& chat_flag_scopes() {
  static const std::vector<FlagScope> scopes{
      {"--heads", kGpt2File, "GPT-2's model.safetensors that does not say its head count"},
      {"--tokenizer-file", kGptGpt2Tokens | kGpt2File | kLlmcFile,
       "GPT-2's files and GPTs trained with --tokenizer gpt2 (any other checkpoint carries its tokenizer)"},
  };
  return scopes;
}

namespace {

void check_chat_options(const ChatOptions& o) {
  require(o.tokens >= 1, fmt::format("--tokens (a reply's most tokens) must be at least 1, got {}", o.tokens));
  require(std::isfinite(o.temperature) && o.temperature >= 0,
          fmt::format("--temperature must be 0 (greedy) or positive, got {}", o.temperature));
  require(o.top_k >= 0, fmt::format("--top-k must be non-negative (0: all), got {}", o.top_k));
  require(o.top_p > 0 && o.top_p <= 1, fmt::format("--top-p must be in (0, 1], got {}", o.top_p));
  require(o.heads >= 0, fmt::format("--heads must be positive, got {}", o.heads));
}

// A model to chat with: generate's view of it, and the template its checkpoint records ("" for none).
struct ChatModel {
  GenerationModel model;
  std::string recorded_template;
};

// A checkpoint of train: a GPT or a Llama with a BPE tokenizer (a template's markers are special tokens,
// which a character vocabulary does not have).
ChatModel open_run(const ChatOptions& o) {
  LoadedModel loaded = load_model(o.checkpoint, o.tokenizer_file);
  require(loaded.decoder() != nullptr,
          fmt::format("chat: {} is the workshop's character model, which has no chat template: chat needs a GPT or "
                      "Llama with a BPE tokenizer (train --model gpt --tokenizer bpe|gpt2, or --init a model that has one)",
                      o.checkpoint));
  require(!loaded.tokenizer.is_char(),
          fmt::format("chat: {} reads characters (--tokenizer char), which have no special tokens for a chat "
                      "template's markers: chat needs a model with a BPE tokenizer",
                      o.checkpoint));
  ChatModel m;
  m.model.kind = kind_of_run(true, loaded.tokenizer.kind).value_or(kGptBpe);
  m.model.bpe = loaded.tokenizer.bpe;
  if (loaded.gpt) m.model.lm = std::move(loaded.gpt);
  else m.model.lm = std::move(loaded.llama);
  const auto recorded = loaded.checkpoint.metadata.find("template");
  if (recorded != loaded.checkpoint.metadata.end()) m.recorded_template = recorded->second;
  return m;
}

// Any model file chat reads, opened as generate opens it.
ChatModel open_model(const ChatOptions& o) {
  GenerateOptions g;
  g.checkpoint = o.checkpoint;
  g.tokenizer_file = o.tokenizer_file;
  g.heads = o.heads;
  g.given = o.given;
  if (nn::is_hf_folder(o.checkpoint)) {
    ChatModel m{open_folder_for_generate(g), ""};
    require(m.model.bpe != nullptr,
            fmt::format("chat: {} has no tokenizer.json, which chat needs to write the conversation", o.checkpoint));
    return m;
  }
  const bool llmc = nn::is_llmc_checkpoint(o.checkpoint);
  if (llmc || nn::is_gpt2_file(o.checkpoint)) {
    ChatModel m{open_gpt2_for_generate(g, llmc ? kLlmcFile : kGpt2File), ""};
    require(m.model.bpe != nullptr, fmt::format("chat: {} needs its tokenizer to write the conversation: give "
                                                "--tokenizer-file (the folder of encoder.json and vocab.bpe, or a "
                                                "tokenizer.json)",
                                                o.checkpoint));
    return m;
  }
  return open_run(o);
}

// The template --template names, else the checkpoint's recorded one, else the one its tokenizer's special
// tokens suggest; UsageError for an unknown name or a tokenizer without the markers it needs.
std::unique_ptr<finetune::ChatTemplate> choose_template(const ChatOptions& o, const ChatModel& m,
                                                        const finetune::TemplateTokenizer& tokenizer) {
  std::string name = o.template_name, from = "--template";
  if (name.empty() && !m.recorded_template.empty()) name = m.recorded_template, from = "the checkpoint's template";
  if (name.empty()) name = finetune::template_name_for(tokenizer), from = "the tokenizer's template";
  try {
    return finetune::make_template(name, tokenizer);
  } catch (const finetune::FinetuneError& e) {
    throw UsageError(fmt::format("chat: {} ({}): {}", o.checkpoint, from, e.what()));
  }
}

// The reply's text on one line: a newline written \n, a backslash \\ (so that the line reads back exactly).
std::string escaped(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '\n') out += "\\n";
    else if (c == '\\') out += "\\\\";
    else out += c;
  }
  return out;
}

// One line read: the message, or a command.
enum class LineKind { message, reset, system, unknown_command };

LineKind kind_of(const std::string& line) {
  if (line == "/reset") return LineKind::reset;
  if (line == "/system" || line.starts_with("/system ")) return LineKind::system;
  if (line.starts_with("/") && !line.starts_with("//")) return LineKind::unknown_command;
  return LineKind::message;
}

// The template's own tokens (its markers and fixed text, an empty turn's worth) must be ids the model has
// rows for: a tokenizer that is not the model's is refused before the first message, not at it.
void check_template_fits_model(const finetune::ChatTemplate& chat, const GenerationModel& m, const std::string& path) {
  finetune::Pieces pieces = chat.opening("");
  for (const finetune::Pieces& more : {chat.user_turn(""), chat.assistant_header(), chat.after_reply()})
    pieces.insert(pieces.end(), more.begin(), more.end());
  std::vector<int64_t> ids = chat.tokenize(pieces).ids;
  ids.push_back(chat.end_of_turn_id());
  for (const int64_t id : ids)
    require(id < m.vocab(), fmt::format("chat: {}: the {} template's token {} ({}) is outside the model's vocabulary "
                                        "of {}: the tokenizer is not the model's",
                                        path, chat.name(), id, one_line(m.token_text(id)), m.vocab()));
}

}  // namespace

int run_chat(const ChatOptions& o, std::istream& in, std::ostream& out, std::ostream& err, bool interactive) {
  use_kernels("");
  check_chat_options(o);
  std::string note;
  const int threads = usable_threads(o.threads, note);
  if (!note.empty()) err << note << "\n";
  autograd::set_num_threads(threads);

  const ChatModel m = open_model(o);
  refuse_flags_that_cannot_apply(chat_flag_scopes(), o.given, m.model.kind, o.checkpoint);
  use_numerics_for("gpt", "");
  require(m.model.vocab() <= m.model.text_vocab(),
          fmt::format("chat: the model's vocabulary of {} is larger than its tokenizer's of {}: the tokens past {} "
                      "have no text (give the model's own --tokenizer-file)",
                      m.model.vocab(), m.model.text_vocab(), m.model.text_vocab()));
  const finetune::BpeTemplateTokenizer tokenizer(*m.model.bpe);
  const std::unique_ptr<finetune::ChatTemplate> chat = choose_template(o, m, tokenizer);
  check_template_fits_model(*chat, m.model, o.checkpoint);

  nn::pack_weights_for_generation(*m.model.lm);  // the layout a cached step reads fastest (the same bits)
  finetune::ChatSession session(*m.model.lm, *chat);
  session.on_context_full([&](const std::string& line) { err << "chat: " << line << "\n" << std::flush; });
  const finetune::ReplyOptions reply_options{
      .max_tokens = o.tokens, .sampling = {.temperature = o.temperature, .top_k = o.top_k, .top_p = o.top_p}};
  autograd::Generator gen(o.seed);
  if (interactive)
    out << fmt::format("chat with {} ({} template, context {}): /reset forgets the turns, /system TEXT sets the "
                       "system prompt, Ctrl-D ends\n",
                       o.checkpoint, chat->name(), m.model.context());

  std::string line;
  while ((interactive && out << "> " << std::flush), std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    switch (kind_of(line)) {
      case LineKind::reset: session.reset(); continue;
      case LineKind::system: session.set_system(line.size() > 8 ? line.substr(8) : ""); continue;
      case LineKind::unknown_command:
        err << "chat: unknown command " << one_line(line.substr(0, line.find(' ')))
            << " (commands: /reset, /system TEXT; start a message with // to send one that begins with /)\n";
        continue;
      case LineKind::message: break;
    }
    if (line.starts_with("//")) line.erase(0, 1);
    if (interactive && line.empty()) continue;
    Utf8Stream text;
    const auto write = [&](const std::string& bytes) { out << (interactive ? bytes : escaped(bytes)) << std::flush; };
    std::vector<int64_t> reply;
    try {
      reply = session.reply(line, reply_options, gen, [&](int64_t token, const autograd::Tensor& logits) {
        for (const double value : logits.to_vector<double>())
          if (!std::isfinite(value))
            throw UsageError("chat: the model's logits are not finite numbers (NaN or infinity): its weights are "
                             "damaged or too large");
        if (token != chat->end_of_turn_id()) write(text.push(m.model.token_text(token)));
      });
    } catch (const finetune::FinetuneError& e) {  // a message too long for the context: the next one may fit
      err << "chat: " << one_line(e.what()) << "\n" << std::flush;
    }
    write(text.flush());
    out << "\n" << std::flush;
    if (interactive && int64_t(reply.size()) == o.tokens && reply.back() != chat->end_of_turn_id())
      err << fmt::format("(chat: the reply stopped at --tokens {} before its end of turn)\n", o.tokens) << std::flush;
  }
  if (interactive) out << "\n";
  return 0;
}

int run_chat(const ChatOptions& o, std::ostream& out) {
  return run_chat(o, std::cin, out, std::cerr, ::isatty(STDIN_FILENO) == 1);
}

}  // namespace cli
