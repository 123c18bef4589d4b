// corpus.cpp — reading a run's text into token ids, and drawing its batches.
#include "corpus.h"

#include <fmt/format.h>

#include "guards.h"
#include "nn/safetensors.h"

namespace cli {

using namespace autograd;

namespace {

// How many bytes the characters `ids` take in UTF-8.
int64_t utf8_bytes(std::span<const uint16_t> ids, const Vocabulary& vocab) {
  int64_t bytes = 0;
  for (uint16_t id : ids) {
    const char32_t c = vocab.chars()[id];
    bytes += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
  }
  return bytes;
}

// --tokenizer bpe or gpt2: the text's bytes as that tokenizer's ids (a bpe learned from the training part
// only); a resumed run reads its text with the tokenizer its checkpoint carries.
Corpus load_token_corpus(const TrainOptions& o, const std::optional<RunTokenizer>& base_tokenizer) {
  require(o.model != "mini",
          fmt::format("--tokenizer {} trains --model gpt or llama (the workshop's model reads characters)", o.tokenizer));
  Corpus c;
  if (!o.text_file.empty()) {
    c.source = absolute_path(o.text_file);
    c.source_is_pipe = is_pipe(o.text_file);  // asked first: once read, a named pipe may be gone
  }
  const std::string text = o.text_file.empty() ? std::string(kWorkshopText) : read_text_file(o.text_file);
  const std::string where = o.text_file.empty() ? "the built-in text" : o.text_file;
  require(!text.empty(), fmt::format("{} is empty", where));
  c.text = tokenize_text(text, where);  // its size and hash, which a resume compares
  std::optional<RunTokenizer> known;
  if (!o.resume.empty()) known = tokenizer_of_checkpoint(nn::load_safetensors(o.resume).metadata, o.resume, o.tokenizer_file);
  else if (base_tokenizer) known = base_tokenizer;  // a fine-tune of our own GPT reads as it did
  TokenText tokens = tokenize_for_run(text, o.tokenizer, o.vocab_size, o.tokenizer_file, known, o.context + 2);
  require(int64_t(tokens.ids.size()) >= o.context + 2,
          fmt::format("{} is {} tokens; --context {} needs at least {}", where, tokens.ids.size(), o.context, o.context + 2));
  c.text.ids = std::move(tokens.ids);
  c.text.vocab = Vocabulary(std::u32string());
  c.train_size = tokens.train_tokens;
  c.held_out_bytes = tokens.held_out_bytes;
  c.tokenizer = std::move(tokens.tokenizer);
  return c;
}

}  // namespace

Corpus load_corpus(const TrainOptions& o, const std::optional<RunTokenizer>& base_tokenizer) {
  if (o.tokenizer != "char") return load_token_corpus(o, base_tokenizer);
  Corpus c;
  if (o.text_file.empty()) {
    c.text = tokenize_text(kWorkshopText, "the built-in text");
  } else {
    c.source_is_pipe = is_pipe(o.text_file);  // asked first: once read, a named pipe may be gone
    c.text = read_tokenized_text(o.text_file);
    c.source = absolute_path(o.text_file);
  }
  const std::string where = o.text_file.empty() ? "the built-in text" : o.text_file;
  require(c.characters() > 0, fmt::format("{} is empty", where));
  // a training window needs T inputs plus the next character, and randint needs a non-empty range
  require(c.characters() >= o.context + 2,
          fmt::format("{} has {} characters; --context {} needs at least {}", where, c.characters(), o.context,
                      o.context + 2));
  const int64_t held_out = c.characters() / 10;
  c.train_size = held_out >= o.context + 2 ? c.characters() - held_out : c.characters();  // one held-out window at least
  c.held_out_bytes = utf8_bytes(c.val(), c.vocab());
  return c;
}

// The workshop's batch() over token ids: the draw of nn::random_windows (randint(len(data) - T - 1, (B,))),
// gathered straight from the 2-byte ids into int64 rows.
std::pair<Tensor, Tensor> random_windows(std::span<const uint16_t> data, int64_t batch, int64_t T) {
  const std::vector<int64_t> starts = randint(0, int64_t(data.size()) - T - 1, {batch}).to_vector<int64_t>();
  std::vector<int64_t> x(size_t(batch * T)), y(size_t(batch * T));
  for (size_t b = 0; b < starts.size(); ++b)
    for (size_t t = 0; t < size_t(T); ++t) {
      x[b * size_t(T) + t] = data[size_t(starts[b]) + t];
      y[b * size_t(T) + t] = data[size_t(starts[b]) + t + 1];
    }
  return {from_vector(x, {batch, T}), from_vector(y, {batch, T})};
}

}  // namespace cli
