// tokenize.cpp — `scratchgrad tokenize` and `scratchgrad bpe`.
#include "tokenize.h"

#include <unistd.h>

#include <chrono>
#include <iostream>
#include <iterator>
#include <memory>
#include <ostream>

#include <fmt/format.h>

#include "nn/tokenizer/tokenizer.h"
#include "text.h"

namespace cli {

namespace {

// The text to read: the file, or standard input. An empty text is refused: it has no tokens to show.
std::string read_input(const std::string& path) {
  std::string text = path.empty() ? std::string(std::istreambuf_iterator<char>(std::cin), {}) : read_text_file(path);
  if (text.empty()) throw UsageError("the text " + (path.empty() ? std::string("on standard input") : path) + " is empty");
  return text;
}

// A token for reading in a terminal or a listing: quoted, control characters and bad UTF-8 escaped.
std::string shown(const std::string& bytes) { return "\"" + tokenizer::escape_bytes(bytes) + "\""; }

// Shows UTF-8 as itself but escapes what a terminal would act on (line breaks, tabs, escape codes).
std::string printable_token(const std::string& bytes) {
  std::string out;
  for (char c : bytes) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) out += fmt::format("\\x{:02x}", int(static_cast<unsigned char>(c)));
    else out += c;
  }
  return out;
}

struct Tokens {
  std::vector<int32_t> ids;
  std::vector<std::string> pieces;  // what each id stands for, as bytes
};

Tokens tokenize(const TokenizeOptions& o, const std::string& text) {
  Tokens t;
  if (o.tokenizer == "char") {
    const std::u32string chars = decode_utf8(text);
    const Vocabulary vocab = Vocabulary::from_text(chars);
    for (int64_t id : vocab.encode(chars)) {
      t.ids.push_back(int32_t(id));
      t.pieces.push_back(encode_utf8(vocab.chars()[size_t(id)]));
    }
    return t;
  }
  if (o.tokenizer != "bpe" && o.tokenizer != "gpt2")
    throw UsageError("tokenize: unknown --tokenizer '" + o.tokenizer + "' (expected char, bpe or gpt2)");
  if (o.tokenizer_file.empty())
    throw UsageError("tokenize: --tokenizer " + o.tokenizer + " needs --tokenizer-file (" +
                     (o.tokenizer == "bpe" ? "a file from `scratchgrad bpe --save`)"
                                           : "the folder of GPT-2's encoder.json and vocab.bpe, or a tokenizer.json)"));
  const tokenizer::Tokenizer tok = o.tokenizer == "bpe" ? tokenizer::Tokenizer::load(o.tokenizer_file)
                                                        : tokenizer::load_gpt2_tokenizer(o.tokenizer_file);
  t.ids = tok.encode(text);
  for (int32_t id : t.ids) t.pieces.push_back(tok.token_bytes(id));
  return t;
}

}  // namespace

int run_tokenize(const TokenizeOptions& o, std::ostream& out) {
  try {
    const std::string text = read_input(o.text_file);
    const Tokens t = tokenize(o, text);
    if (o.ids_only) {
      for (size_t i = 0; i < t.ids.size(); ++i) out << (i ? " " : "") << t.ids[i];
      out << "\n";
      return 0;
    }
    if (&out == &std::cout && ::isatty(STDOUT_FILENO)) {
      // As the tiktokenizer page shows it: the text itself, each token on its own background colour.
      static const int kColours[] = {44, 42, 45, 43, 46, 41};
      for (size_t i = 0; i < t.pieces.size(); ++i)
        out << "\x1b[30;" << kColours[i % 6] << "m" << printable_token(t.pieces[i]) << "\x1b[0m";
      out << "\n\n";
      for (size_t i = 0; i < t.ids.size(); ++i) out << (i ? " " : "") << "\x1b[" << (kColours[i % 6] - 10) << "m" << t.ids[i] << "\x1b[0m";
      out << "\n";
    } else {
      for (size_t i = 0; i < t.ids.size(); ++i) out << fmt::format("{:>6} {}\n", t.ids[i], shown(t.pieces[i]));
    }
    out << fmt::format("{} tokens for {} bytes ({:.2f} bytes per token)\n", t.ids.size(), text.size(),
                       double(text.size()) / double(t.ids.size()));
    return 0;
  } catch (const tokenizer::TokenizerError& e) {
    throw UsageError(std::string("tokenize: ") + e.what());
  }
}

int run_bpe(const BpeOptions& o, std::ostream& out) {
  try {
    if (o.text_file.empty()) throw UsageError("bpe: --text is required (the text to learn the merges from)");
    const std::string text = read_text_file(o.text_file);
    tokenizer::TrainOptions t;
    if (o.vocab_size > 10'000'000) throw UsageError("bpe: --vocab-size " + std::to_string(o.vocab_size) + " is too large");
    t.vocab_size = int(o.vocab_size);
    t.pattern = tokenizer::pattern_from_name(o.pattern);
    if (o.explain) {
      out << "the first merges, as they happen: the most frequent pair of adjacent tokens becomes a new token\n";
      // What each token spells, built up merge by merge: the 256 bytes, then each merge's two parts joined.
      auto pieces = std::make_shared<std::vector<std::string>>();
      for (int b = 0; b < 256; ++b) pieces->push_back(std::string(1, char(b)));
      t.on_merge = [&out, pieces, count = o.explain_count](const tokenizer::MergeStep& s) {
        pieces->push_back((*pieces)[s.merge.left] + (*pieces)[s.merge.right]);
        if (s.rank >= count) return;
        out << fmt::format("merge {:>4}: {} + {} -> token {} {} ({} times)\n", s.rank + 1, shown((*pieces)[s.merge.left]),
                           shown((*pieces)[s.merge.right]), s.merge.result, shown(pieces->back()), s.count)
            << std::flush;
      };
    }
    const auto start = std::chrono::steady_clock::now();
    const tokenizer::Tokenizer tok = tokenizer::train(text, t);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const size_t tokens = tok.encode(text).size();
    out << fmt::format("learned {} merges ({} split) from {} bytes in {:.2f} s: vocabulary {}\n", tok.merges().size(),
                       o.pattern, text.size(), seconds, tok.vocab_size());
    out << fmt::format("the text is {} tokens: {:.2f} bytes per token\n", tokens, double(text.size()) / double(tokens));
    if (!o.save.empty()) {
      tok.save(o.save);
      out << "saved " << o.save << "\n";
    }
    return 0;
  } catch (const tokenizer::TokenizerError& e) {
    const std::string what = e.what();
    throw UsageError(what.rfind("bpe:", 0) == 0 ? what : "bpe: " + what);
  }
}

}  // namespace cli
