// hf_tokenizer.cpp — encoding with a Hugging Face tokenizer.json's rules (tokenizer.h's HuggingFaceRules), in
// the order Hugging Face's tokenizers library applies them:
//
//   1. the added tokens that are not `normalized` are found in the text as given;
//   2. the text between them is normalized (NFC, where the file asks for it), and the added tokens that are
//      `normalized` are found in that;
//   3. the text left between those is split into chunks (split.h) and each chunk merged (ignore_merges: a
//      chunk that is a token of the vocabulary is that token).
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "nn/tokenizer/normalize.h"
#include "nn/tokenizer/tokenizer.h"
#include "nn/tokenizer/unicode_classes.h"

namespace tokenizer {

namespace {

// Rust's char::is_alphanumeric, which single_word tests, read as \p{L} or \p{N}.
bool is_word_char(char32_t c) { return c != kInvalidByte && (is_letter(c) || is_number(c)); }

// The last character of text[0, end) (a UTF-8 sequence ends there; step back over its continuation bytes).
char32_t char_before(std::string_view text, size_t end) {
  if (end == 0) return kInvalidByte;
  size_t start = end - 1;
  while (start > 0 && end - start < 4 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  const Utf8Char c = next_utf8_char(text, start);
  return start + c.length == end ? c.code : kInvalidByte;
}

// Where the whitespace that ends text[0, end) begins (lstrip takes it).
size_t start_of_trailing_space(std::string_view text, size_t end) {
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && end - start < 4 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    const Utf8Char c = next_utf8_char(text, start);
    if (start + c.length != end || c.code == kInvalidByte || !is_whitespace(c.code)) break;
    end = start;
  }
  return end;
}

// Where the whitespace that starts text[begin, ...) ends (rstrip takes it).
size_t end_of_leading_space(std::string_view text, size_t begin) {
  while (begin < text.size()) {
    const Utf8Char c = next_utf8_char(text, begin);
    if (c.code == kInvalidByte || !is_whitespace(c.code)) break;
    begin += c.length;
  }
  return begin;
}

struct Found {
  size_t start, end;
  const AddedToken* token;
};

// The added tokens of one kind (normalized or not) in `text`, as Hugging Face finds them: the leftmost match
// first, the longest where several start at one place, the search going on after its end. A single_word
// token touching a letter or digit is passed over (and still ends its match); lstrip and rstrip widen a match
// over the whitespace beside it. The text is read once: only where a byte that starts a token stands are the
// tokens compared (Llama 3's 256 all start with '<').
std::vector<Found> find_added(std::string_view text, const std::vector<const AddedToken*>& tokens) {
  std::array<bool, 256> starts_a_token{};
  for (const AddedToken* t : tokens) starts_a_token[static_cast<unsigned char>(t->content[0])] = true;
  std::vector<Found> found;
  size_t kept_up_to = 0;  // the end of the last match kept
  for (size_t at = 0; at < text.size();) {
    const AddedToken* best = nullptr;
    if (starts_a_token[static_cast<unsigned char>(text[at])])
      for (const AddedToken* t : tokens)
        if (text.substr(at).starts_with(t->content) && (!best || t->content.size() > best->content.size())) best = t;
    if (!best) {
      ++at;
      continue;
    }
    size_t start = at, end = at + best->content.size();
    at = end;
    if (best->single_word && (is_word_char(char_before(text, start)) ||
                              (end < text.size() && is_word_char(next_utf8_char(text, end).code))))
      continue;
    if (start < kept_up_to) continue;  // inside the whitespace an rstrip before it took
    if (best->lstrip) start = std::max(start_of_trailing_space(text, start), kept_up_to);
    if (best->rstrip) end = end_of_leading_space(text, end);
    found.push_back({start, end, best});
    kept_up_to = end;
  }
  return found;
}

}  // namespace

void Tokenizer::encode_hugging_face(std::string_view text, std::vector<int32_t>& out) const {
  encode_between_added(text, false, out);
}

// Finds the added tokens of one kind in `text`; the text between them goes on to the next step: the
// normalized tokens after normalizing (when `normalized` is false), else splitting and merging.
void Tokenizer::encode_between_added(std::string_view text, bool normalized, std::vector<int32_t>& out) const {
  std::vector<const AddedToken*> tokens;
  for (const AddedToken& t : hugging_face_->added)
    if (t.normalized == normalized) tokens.push_back(&t);
  const auto next_step = [&](std::string_view between) {
    if (between.empty()) return;
    if (normalized) return encode_chunks(between, out);
    if (!hugging_face_->nfc) return encode_between_added(between, true, out);
    const std::string normal = nfc(between);
    encode_between_added(normal, true, out);
  };
  size_t done = 0;
  for (const Found& f : find_added(text, tokens)) {
    next_step(text.substr(done, f.start - done));
    out.push_back(f.token->id);
    done = f.end;
  }
  next_step(text.substr(done));
}

}  // namespace tokenizer
