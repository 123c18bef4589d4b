// token_text.cpp — see token_text.h.
#include "token_text.h"

#include <fmt/format.h>

#include "text.h"

namespace cli {

tokenizer::Tokenizer load_gpt2_tokenizer_for(const std::string& command, const std::string& path) {
  try {
    return tokenizer::load_gpt2_tokenizer(path);
  } catch (const tokenizer::TokenizerError& e) {
    throw UsageError(fmt::format("{}: --tokenizer-file: {}", command, e.what()));
  }
}

std::vector<int64_t> encode_for_model(const tokenizer::Tokenizer& tok, std::string_view text, int64_t model_vocab,
                                      const std::string& what) {
  const std::vector<int32_t> ids = tok.encode(text);
  std::vector<int64_t> out(ids.begin(), ids.end());
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i] >= model_vocab)
      throw UsageError(fmt::format("{}: token {} (\"{}\") at position {} is outside the model's vocabulary of {} "
                                   "(the tokenizer has {}): is --tokenizer-file the model's own tokenizer?",
                                   what, out[i], tokenizer::escape_bytes(tok.token_bytes(int32_t(out[i]))), i,
                                   model_vocab, tok.vocab_size()));
  return out;
}

namespace {

// How many bytes a UTF-8 sequence starting with `lead` has; 0 for a byte that cannot start one.
size_t sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

bool is_continuation(unsigned char b) { return (b & 0xC0) == 0x80; }

}  // namespace

std::string Utf8Stream::push(std::string_view bytes) {
  pending_.append(bytes);
  // Only the last character can be incomplete: find where it starts (at most 3 continuation bytes back).
  size_t start = pending_.size();
  for (size_t back = 0; back < 4 && start > 0; ++back) {
    --start;
    if (!is_continuation(static_cast<unsigned char>(pending_[start]))) break;
  }
  size_t keep = 0;  // bytes held back: an incomplete character that the next token may finish
  if (start < pending_.size()) {
    const size_t need = sequence_length(static_cast<unsigned char>(pending_[start]));
    const size_t have = pending_.size() - start;
    bool all_continuations = true;
    for (size_t i = start + 1; i < pending_.size(); ++i)
      all_continuations = all_continuations && is_continuation(static_cast<unsigned char>(pending_[i]));
    if (need > have && all_continuations) keep = have;
  }
  std::string ready = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return ready;
}

std::string Utf8Stream::flush() {
  std::string rest;
  rest.swap(pending_);
  return rest;
}

}  // namespace cli
