// template.cpp — see template.h.
#include "nn/finetune/template.h"

#include <stdexcept>

#include "nn/finetune/error.h"

namespace finetune {

std::vector<int64_t> BpeTemplateTokenizer::encode(std::string_view text) const {
  const std::vector<int32_t> ids = bpe_.encode_ordinary(text);
  return std::vector<int64_t>(ids.begin(), ids.end());
}

std::optional<int64_t> BpeTemplateTokenizer::special_id(std::string_view text) const {
  const auto found = bpe_.specials().find(std::string(text));
  if (found == bpe_.specials().end()) return std::nullopt;
  return found->second;
}

namespace {

Piece text(std::string t, bool counted = false) { return Piece{std::move(t), false, counted}; }
Piece special(std::string spelling, bool counted = false) { return Piece{std::move(spelling), true, counted}; }

void append(Pieces& to, const Pieces& more) { to.insert(to.end(), more.begin(), more.end()); }

// The id of a marker the template needs; FinetuneError naming it when the tokenizer lacks it.
int64_t needed_id(const TemplateTokenizer& tokenizer, const std::string& template_name, const std::string& spelling) {
  const std::optional<int64_t> id = tokenizer.special_id(spelling);
  if (!id)
    throw FinetuneError("the " + template_name + " template needs the special token " + spelling +
                        ", which the tokenizer does not have");
  return *id;
}

// `spelling` when the tokenizer has it, else `fallback`.
std::string if_present(const TemplateTokenizer& tokenizer, const std::string& spelling, const std::string& fallback) {
  return tokenizer.special_id(spelling) ? spelling : fallback;
}

// ---- the book's Alpaca prompt ----

const char* const kAlpacaHeader =
    "Below is an instruction that describes a task. Write a response that appropriately completes the request.";

// The end-of-text token: GPT-2's and SmolLM2's spelling, else Llama 3's.
std::string alpaca_end_of_text(const TemplateTokenizer& tokenizer) {
  for (const char* spelling : {"<|endoftext|>", "<|end_of_text|>"})
    if (tokenizer.special_id(spelling)) return spelling;
  throw FinetuneError("the alpaca template needs an end-of-text token (<|endoftext|> or <|end_of_text|>), "
                      "which the tokenizer does not have");
}

class AlpacaTemplate : public ChatTemplate {
 public:
  explicit AlpacaTemplate(const TemplateTokenizer& tokenizer)
      : ChatTemplate("alpaca", tokenizer, alpaca_end_of_text(tokenizer), alpaca_end_of_text(tokenizer)) {}
  // A system message takes the place of the header sentence (which is the Alpaca prompt's system prompt).
  Pieces opening(const std::string& system) const override { return {text(system.empty() ? kAlpacaHeader : system)}; }
  Pieces user_turn(const std::string& t) const override { return {text("\n\n### Instruction:\n" + t)}; }
  Pieces assistant_header() const override { return {text("\n\n### Response:\n")}; }
  std::string user_text(const AlpacaRecord& r) const override {
    return r.input.empty() ? r.instruction : r.instruction + "\n\n### Input:\n" + r.input;
  }
};

// ---- ChatML ----

class ChatMlTemplate : public ChatTemplate {
 public:
  explicit ChatMlTemplate(const TemplateTokenizer& tokenizer)
      : ChatTemplate("chatml", tokenizer, "<|im_end|>", if_present(tokenizer, "<|endoftext|>", "<|im_end|>")) {
    needed_id(tokenizer, "chatml", "<|im_start|>");
  }
  Pieces opening(const std::string& system) const override {
    if (system.empty()) return {};
    return message("system", system);
  }
  Pieces user_turn(const std::string& t) const override { return message("user", t); }
  Pieces assistant_header() const override { return {special("<|im_start|>"), text("assistant\n")}; }
  Pieces after_reply() const override { return {text("\n")}; }

 private:
  static Pieces message(const std::string& role, const std::string& content) {
    return {special("<|im_start|>"), text(role + "\n" + content), special("<|im_end|>"), text("\n")};
  }
};

// ---- Llama 3 ----

class Llama3Template : public ChatTemplate {
 public:
  explicit Llama3Template(const TemplateTokenizer& tokenizer)
      : ChatTemplate("llama3", tokenizer, "<|eot_id|>", if_present(tokenizer, "<|end_of_text|>", "<|eot_id|>")) {
    for (const char* marker : {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>"})
      needed_id(tokenizer, "llama3", marker);
  }
  Pieces opening(const std::string& system) const override {
    Pieces pieces{special("<|begin_of_text|>")};
    if (!system.empty()) append(pieces, message("system", as_written(system)));
    return pieces;
  }
  Pieces user_turn(const std::string& t) const override { return message("user", as_written(t)); }
  Pieces assistant_header() const override { return header("assistant"); }
  std::string as_written(const std::string& content) const override {
    const size_t first = content.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) return "";
    return content.substr(first, content.find_last_not_of(" \t\r\n") - first + 1);
  }

 private:
  static Pieces header(const std::string& role) {
    return {special("<|start_header_id|>"), text(role), special("<|end_header_id|>"), text("\n\n")};
  }
  static Pieces message(const std::string& role, const std::string& content) {
    Pieces pieces = header(role);
    pieces.back().text += content;
    pieces.push_back(special("<|eot_id|>"));
    return pieces;
  }
};

}  // namespace

ChatTemplate::ChatTemplate(std::string name, const TemplateTokenizer& tokenizer, const std::string& end_of_turn,
                           const std::string& padding)
    : name_(std::move(name)),
      tokenizer_(tokenizer),
      end_of_turn_(end_of_turn),
      end_of_turn_id_(needed_id(tokenizer, name_, end_of_turn)),
      padding_id_(needed_id(tokenizer, name_, padding)) {}

// The pieces of a conversation: the opening with its system prompt, then each message.
Pieces ChatTemplate::conversation_pieces(const Conversation& conversation) const {
  const ChatTemplate& chat = *this;
  const bool has_system = !conversation.empty() && conversation.front().role == "system";
  Pieces pieces = chat.opening(has_system ? conversation.front().content : "");
  for (size_t i = has_system ? 1 : 0; i < conversation.size(); ++i) {
    const Message& m = conversation[i];
    if (m.role == "user") {
      append(pieces, chat.user_turn(m.content));
    } else if (m.role == "assistant") {
      append(pieces, chat.assistant_header());
      pieces.push_back(text(chat.as_written(m.content), /*counted=*/true));
      pieces.push_back(special(end_of_turn_, /*counted=*/true));
      append(pieces, chat.after_reply());
    } else {
      throw FinetuneError("message " + std::to_string(i) + " has the role \"" + m.role +
                          "\": expected user or assistant (a system message comes only first)");
    }
  }
  return pieces;
}

namespace {

size_t common_prefix(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

}  // namespace

std::string ChatTemplate::user_text(const AlpacaRecord& r) const {
  return r.input.empty() ? r.instruction : r.instruction + "\n\n" + r.input;
}

// The text between two special tokens is tokenized whole, as the model saw such text in pretraining (the
// book tokenizes its whole prompt and response at once). Its counted pieces (a reply) always come last in
// it, so the counted tokens are those from where the prompt's own tokens stop matching the whole's: a token
// that a merge made across the boundary holds reply bytes, and counts.
Rendered ChatTemplate::tokenize(const Pieces& pieces) const {
  Rendered out;
  std::string prompt, whole;
  bool in_reply = false;
  const auto flush = [&] {
    const std::vector<int64_t> ids = tokenizer_.encode(whole);
    const size_t prompt_tokens = in_reply ? common_prefix(tokenizer_.encode(prompt), ids) : ids.size();
    for (size_t i = 0; i < ids.size(); ++i) {
      out.ids.push_back(ids[i]);
      out.counted.push_back(i >= prompt_tokens ? 1 : 0);
    }
    prompt.clear(), whole.clear(), in_reply = false;
  };
  for (const Piece& piece : pieces) {
    if (piece.special) {
      flush();
      out.ids.push_back(needed_id(tokenizer_, name_, piece.text));
      out.counted.push_back(piece.counted ? 1 : 0);
      continue;
    }
    if (!piece.counted && in_reply) throw std::logic_error("ChatTemplate: prompt text after a reply in one run");
    if (piece.counted) in_reply = true;
    if (!in_reply) prompt += piece.text;
    whole += piece.text;
  }
  flush();
  return out;
}

Rendered ChatTemplate::render(const Conversation& conversation) const {
  return tokenize(conversation_pieces(conversation));
}

std::vector<int64_t> ChatTemplate::generation_prompt(const Conversation& conversation) const {
  Pieces pieces = conversation_pieces(conversation);
  append(pieces, assistant_header());
  return tokenize(pieces).ids;
}

Conversation from_alpaca(const AlpacaRecord& record, const ChatTemplate& chat) {
  return {{"user", chat.user_text(record)}, {"assistant", record.output}};
}

std::unique_ptr<ChatTemplate> make_template(const std::string& name, const TemplateTokenizer& tokenizer) {
  if (name == "alpaca") return std::make_unique<AlpacaTemplate>(tokenizer);
  if (name == "chatml") return std::make_unique<ChatMlTemplate>(tokenizer);
  if (name == "llama3") return std::make_unique<Llama3Template>(tokenizer);
  throw FinetuneError("unknown template \"" + name + "\": expected alpaca, chatml or llama3");
}

std::string template_name_for(const TemplateTokenizer& tokenizer) {
  if (tokenizer.special_id("<|im_start|>")) return "chatml";
  if (tokenizer.special_id("<|start_header_id|>") && tokenizer.special_id("<|eot_id|>")) return "llama3";
  return "alpaca";
}

}  // namespace finetune
