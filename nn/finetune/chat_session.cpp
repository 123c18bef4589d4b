// chat_session.cpp — see chat_session.h.
#include "nn/finetune/chat_session.h"

#include <algorithm>
#include <string>

#include "autograd/autograd.h"
#include "nn/finetune/error.h"

namespace finetune {

using autograd::Tensor;

namespace {

void append(std::vector<int64_t>& to, const std::vector<int64_t>& more) { to.insert(to.end(), more.begin(), more.end()); }

std::string turns_word(size_t n) { return n == 1 ? "turn" : "turns"; }

}  // namespace

ChatSession::ChatSession(const nn::LanguageModel& model, const ChatTemplate& chat, std::string system)
    : model_(model), chat_(chat), cache_(model.make_kv_cache()) {
  set_system(system);
}

std::vector<int64_t> ChatSession::tokens() const {
  std::vector<int64_t> all = opening_;
  for (const std::vector<int64_t>& turn : turns_) append(all, turn);
  append(all, current_);
  return all;
}

void ChatSession::reset() {
  turns_.clear();
  current_.clear();
  // the opening's keys and values stay valid: they sit at the same positions in the next conversation
  cache_.length = std::min<int64_t>(cache_.length, int64_t(opening_.size()));
}

void ChatSession::set_system(const std::string& system) {
  opening_ = chat_.tokenize(chat_.opening(system)).ids;
  cache_.length = 0;  // every later position moves when the opening changes length
}

void ChatSession::drop_oldest_turns(int64_t room) {
  const int64_t kept = int64_t(opening_.size() + current_.size());
  room = std::max<int64_t>(0, std::min(room, context() - kept));  // what can be kept free at best
  size_t dropped = 0;
  while (!turns_.empty() && int64_t(tokens().size()) + room > context()) {
    turns_.erase(turns_.begin());
    ++dropped;
  }
  cache_.length = std::min<int64_t>(cache_.length, int64_t(opening_.size()));  // the rest moved: read again
  if (notice_)
    notice_("the context of " + std::to_string(context()) + " tokens is full: dropped the oldest " +
            std::to_string(dropped) + " " + turns_word(dropped) + ", " + std::to_string(turns_.size()) + " " +
            turns_word(turns_.size()) + " kept");
}

Tensor ChatSession::read_new_tokens(int64_t room) {
  if (int64_t(tokens().size()) > context()) drop_oldest_turns(room);
  const std::vector<int64_t> all = tokens();
  if (int64_t(all.size()) > context())
    throw FinetuneError("the conversation's " + std::to_string(all.size()) + " tokens do not fit in the context of " +
                        std::to_string(context()));
  const std::vector<int64_t> fresh(all.begin() + cache_.length, all.end());
  const Tensor ids = autograd::from_vector(fresh, {1, int64_t(fresh.size())});
  return model_.forward_cached(ids, cache_)[0].cpu();
}

std::vector<int64_t> ChatSession::reply(const std::string& user_text, const ReplyOptions& options,
                                        autograd::Generator& gen, const nn::OnToken& on_token) {
  nn::check_sampling_options(options.sampling);
  Pieces prompt = chat_.user_turn(user_text);
  for (const Piece& piece : chat_.assistant_header()) prompt.push_back(piece);
  current_ = chat_.tokenize(prompt).ids;
  const int64_t alone = int64_t(opening_.size() + current_.size());
  if (alone > context()) {
    current_.clear();
    throw FinetuneError("the message takes " + std::to_string(alone) + " tokens with the template's opening, more " +
                        "than the context of " + std::to_string(context()) + ": it was not read");
  }
  for (const std::vector<int64_t>* ids : {&opening_, &current_})
    for (const int64_t id : *ids)
      if (id < 0 || id >= model_.vocab_size()) {
        current_.clear();
        throw FinetuneError("token " + std::to_string(id) + " of the conversation is outside the model's vocabulary of " +
                            std::to_string(model_.vocab_size()) + " (the tokenizer is not the model's): the message "
                            "was not read");
      }

  // Where the conversation must be cut, leave room for half a context of reply at most (not a token a drop).
  const int64_t reply_room = std::min<int64_t>(options.max_tokens, context() / 2);
  Tensor logits = read_new_tokens(reply_room);
  std::vector<int64_t> reply;
  for (int64_t n = 0; n < options.max_tokens; ++n) {
    const int64_t token = nn::sample_token(logits, options.sampling, gen);
    reply.push_back(token);
    current_.push_back(token);
    if (on_token) on_token(token, logits);
    if (token == chat_.end_of_turn_id() || n + 1 == options.max_tokens) break;
    if (int64_t(opening_.size() + current_.size()) > context()) {  // no earlier turn left to drop would do
      if (notice_) notice_("the context of " + std::to_string(context()) + " tokens is full: the reply stops here");
      break;
    }
    logits = read_new_tokens(std::min<int64_t>(options.max_tokens - n - 1, context() / 2));
  }

  // The turn as the template writes it: the reply closed by the end-of-turn token, then the text after it.
  // Both are read with the next message.
  if (current_.back() != chat_.end_of_turn_id()) current_.push_back(chat_.end_of_turn_id());
  append(current_, chat_.tokenize(chat_.after_reply()).ids);
  turns_.push_back(std::move(current_));
  current_.clear();
  return reply;
}

}  // namespace finetune
