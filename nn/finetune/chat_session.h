// chat_session.h — a conversation with a language model in its chat template, turn by turn, keeping the
// key/value cache between turns.
//
// A conversation in a template is opening(system) followed, for each turn, by
//   user_turn(text) + assistant_header() + the reply + end_of_turn + after_reply()
// (template.h). The cache holds the keys and values of every position already read, so a new turn reads
// only what is new: the end-of-turn token that closed the last reply (sampled but never fed), the
// template's text after it, the user's message and the assistant's header. Then the reply is sampled a
// token at a time, each fed as the next one is chosen, until the end-of-turn token or the reply's limit.
//
// When the conversation outgrows the model's context, the oldest turns are dropped and what remains (the
// opening, the later turns, the turn under way) is read again from an empty cache: positions are absolute,
// so keys cached at the old positions cannot be reused at new ones.
//
//   finetune::BpeTemplateTokenizer tok(*bpe);
//   auto chat = finetune::make_template("chatml", tok);
//   finetune::ChatSession session(model, *chat);
//   autograd::Generator gen(0);
//   std::vector<int64_t> reply = session.reply("What is 2 + 3?", {.max_tokens = 40}, gen);
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "autograd/random/generator.h"
#include "nn/finetune/template.h"
#include "nn/generation.h"
#include "nn/language_model.h"

namespace finetune {

struct ReplyOptions {
  int64_t max_tokens = 100;        // a reply's most tokens (the end-of-turn token included)
  nn::SamplingOptions sampling{};  // as generate's: temperature (0 greedy), top-k, top-p
};

class ChatSession {
 public:
  // `model` and `chat` must outlive the session. The cache holds the model's whole context.
  ChatSession(const nn::LanguageModel& model, const ChatTemplate& chat, std::string system = "");

  // The user's message, then the reply sampled after it. `on_token` sees each new token and the logits it
  // was chosen from as it is made (the end-of-turn token too, when reached). Returns the reply's tokens,
  // the end-of-turn token included when the model chose it. FinetuneError (the session unchanged) when the
  // opening and this message alone do not fit in the context, or hold a token the model has no row for.
  std::vector<int64_t> reply(const std::string& user_text, const ReplyOptions& options, autograd::Generator& gen,
                             const nn::OnToken& on_token = {});

  // Forgets the turns (the system prompt stays).
  void reset();
  // A new system prompt ("" for the template's default); the turns so far are kept and read again under it
  // at the next message.
  void set_system(const std::string& system);

  // Told once each time turns are dropped to make room, with a line saying how many.
  void on_context_full(std::function<void(const std::string&)> notice) { notice_ = std::move(notice); }

  // Every token of the conversation so far, in order: the opening, each finished turn (its reply closed by
  // the end-of-turn token even when the reply was cut at its limit) and the turn under way.
  std::vector<int64_t> tokens() const;
  // How many of tokens() the cache holds (the rest are read at the next step).
  int64_t cached() const { return cache_.length; }
  size_t turns() const { return turns_.size(); }
  int64_t context() const { return model_.context_length(); }

 private:
  // Reads every token not yet in the cache and returns the logits [vocab] after the last; first drops the
  // oldest turns when the conversation no longer fits, keeping `room` positions free after it where it can.
  // FinetuneError when even the opening and the turn under way do not fit.
  autograd::Tensor read_new_tokens(int64_t room);
  void drop_oldest_turns(int64_t room);

  const nn::LanguageModel& model_;
  const ChatTemplate& chat_;
  std::vector<int64_t> opening_;             // opening(system), tokenized
  std::vector<std::vector<int64_t>> turns_;  // finished turns, each from its user_turn to its after_reply
  std::vector<int64_t> current_;             // the turn under way: its prompt and the reply so far
  nn::KVCache cache_;
  std::function<void(const std::string&)> notice_;
};

}  // namespace finetune
