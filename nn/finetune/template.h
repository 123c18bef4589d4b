// template.h — chat templates: a conversation turned into token ids, with the positions training counts.
//
// A template writes each message between the markers its model family was trained with:
//
//   alpaca  (the book's chapter 7; "\n" a newline, the Input section only when the input is not empty)
//     Below is an instruction that describes a task. Write a response that appropriately completes the
//     request.\n\n### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:\n{output}<EOT>
//   chatml  (SmolLM2, Qwen)
//     <|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n
//     <|im_start|>assistant\n{reply}<|im_end|>\n
//   llama3
//     <|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n{system}<|eot_id|>
//     <|start_header_id|>user<|end_header_id|>\n\n{user}<|eot_id|>
//     <|start_header_id|>assistant<|end_header_id|>\n\n{reply}<|eot_id|>
//
// Beside the ids, render() says which positions are the assistant's: each reply's tokens and the end-of-turn
// token after it (<EOT>, <|im_end|>, <|eot_id|>). Training counts those (the model learns to answer and to
// stop) and masks the rest, the prompt, unless told to train on the prompt too (collate.h).
//
//   finetune::BpeTemplateTokenizer tok(gpt2);
//   auto chat = finetune::make_template("alpaca", tok);
//   finetune::Rendered r = chat->render(finetune::from_alpaca({"Name a colour.", "", "Blue."}, *chat));
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nn/tokenizer/tokenizer.h"

namespace finetune {

// What a template needs of a tokenizer: ordinary text to ids, and a special token's id by its text.
class TemplateTokenizer {
 public:
  virtual ~TemplateTokenizer() = default;
  // Text to ids, special-token strings inside it read as ordinary text: a user who types "<|im_end|>" must
  // not end the turn (a message's content never becomes a marker).
  virtual std::vector<int64_t> encode(std::string_view text) const = 0;
  // The id of the special token spelt `text` ("<|endoftext|>"), or nothing when the tokenizer has none.
  virtual std::optional<int64_t> special_id(std::string_view text) const = 0;
};

// The adapter for a byte-level BPE (GPT-2's, a Hugging Face tokenizer.json, one trained here).
class BpeTemplateTokenizer : public TemplateTokenizer {
 public:
  explicit BpeTemplateTokenizer(const tokenizer::Tokenizer& bpe) : bpe_(bpe) {}
  std::vector<int64_t> encode(std::string_view text) const override;
  std::optional<int64_t> special_id(std::string_view text) const override;

 private:
  const tokenizer::Tokenizer& bpe_;  // not owned: must outlive the adapter
};

struct Message {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};
// A system message, if any, comes first; then user and assistant messages (data.h checks this on reading).
using Conversation = std::vector<Message>;

// One record of the book's (and Alpaca's) data: the input may be empty.
struct AlpacaRecord {
  std::string instruction, input, output;
};

// A conversation in token form: counted[i] is 1 when ids[i] is part of an assistant's reply (its text or the
// end-of-turn token that closes it), 0 for the template's markers, the system prompt and the user's text.
struct Rendered {
  std::vector<int64_t> ids;
  std::vector<uint8_t> counted;
};

// A stretch of a rendered conversation: text, or one special token by its spelling.
struct Piece {
  std::string text;
  bool special = false;
  bool counted = false;
};
using Pieces = std::vector<Piece>;

class ChatTemplate {
 public:
  virtual ~ChatTemplate() = default;
  const std::string& name() const { return name_; }

  // The whole conversation (system, user and assistant messages) as ids, replies counted.
  Rendered render(const Conversation& conversation) const;
  // The conversation so far (ending with a user message) followed by the header that opens the assistant's
  // turn: what generation continues (a chat, or eval's --responses).
  std::vector<int64_t> generation_prompt(const Conversation& conversation) const;

  // The pieces a chat appends turn by turn, so that a key/value cache can keep what came before: a
  // conversation is opening(system) + for each turn user_turn(text) + assistant_header() + the reply +
  // end_of_turn_id() + after_reply(). render() is that sequence, tokenized.
  virtual Pieces opening(const std::string& system) const = 0;  // system "" for none
  virtual Pieces user_turn(const std::string& text) const = 0;
  virtual Pieces assistant_header() const = 0;
  virtual Pieces after_reply() const { return {}; }
  int64_t end_of_turn_id() const { return end_of_turn_id_; }
  // The id a batch is padded with: the tokenizer's end-of-text token when it has one, else the end of turn.
  int64_t padding_id() const { return padding_id_; }
  // A record's instruction and input as the user's message: the Alpaca template keeps its "### Input:"
  // section; the chat templates join the two with a blank line.
  virtual std::string user_text(const AlpacaRecord& record) const;
  // A message's content as the template writes it: as given, except that Llama 3's strips the whitespace
  // around it (Meta's encoder and the Hugging Face template both do).
  virtual std::string as_written(const std::string& content) const { return content; }

  // The pieces of a whole conversation (render() tokenizes them). FinetuneError for a role other than
  // user and assistant after the first message.
  Pieces conversation_pieces(const Conversation& conversation) const;
  // Pieces to ids and counted flags (the text between two special tokens is tokenized whole).
  Rendered tokenize(const Pieces& pieces) const;

 protected:
  // The markers are given by their spelling and looked up in `tokenizer`: FinetuneError naming the one missing.
  ChatTemplate(std::string name, const TemplateTokenizer& tokenizer, const std::string& end_of_turn,
               const std::string& padding);

 private:
  std::string name_;
  const TemplateTokenizer& tokenizer_;
  std::string end_of_turn_;  // its spelling
  int64_t end_of_turn_id_, padding_id_;
};

// An Alpaca record as a two-message conversation (user: the template's user_text, assistant: the output).
Conversation from_alpaca(const AlpacaRecord& record, const ChatTemplate& chat);

// The template called `name` ("alpaca", "chatml", "llama3"), its markers looked up in `tokenizer`.
// FinetuneError for another name (the message lists the three) and for a tokenizer that lacks a marker the
// template needs (naming the marker). The template keeps a reference to `tokenizer`.
std::unique_ptr<ChatTemplate> make_template(const std::string& name, const TemplateTokenizer& tokenizer);
// The template a tokenizer was trained for, read from its special tokens: <|im_start|> means chatml,
// <|start_header_id|> and <|eot_id|> mean llama3, anything else alpaca (the book's, for GPT-2).
std::string template_name_for(const TemplateTokenizer& tokenizer);

}  // namespace finetune
