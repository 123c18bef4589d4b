// tokenize.cpp — `scratchgrad tokenize`: a text as tokens and ids, or ids back to text (bpe.cpp learns a BPE).
#include "tokenize.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <new>
#include <optional>
#include <ostream>

#include <fmt/format.h>

#include "guards.h"
#include "model_files.h"
#include "nn/gpt2.h"
#include "nn/numbers.h"
#include "nn/safetensors.h"
#include "nn/tokenizer/hf_json.h"
#include "nn/tokenizer/tokenizer.h"
#include "text.h"

namespace cli {

std::string read_bounded(std::istream& in, uint64_t limit, const std::string& where) {
  std::string text;
  std::vector<char> chunk(size_t(1) << 20);
  while (in.read(chunk.data(), std::streamsize(chunk.size())) || in.gcount() > 0) {
    const size_t got = size_t(in.gcount());
    if (text.size() + got > limit)
      throw UsageError(fmt::format("tokenize: {} holds more than {} bytes, the most tokenize reads", where, limit));
    text.append(chunk.data(), got);
  }
  if (in.bad()) throw UsageError(fmt::format("tokenize: cannot read {}", where));
  return text;
}

namespace {

// At most the first 40 bytes of a word a message quotes.
std::string clipped(std::string_view word) {
  return word.size() <= 40 ? std::string(word) : std::string(word.substr(0, 40)) + "...";
}

// The input (a text, or ids for --decode): the --text file, or standard input. An empty one is refused: it
// has nothing to show.
std::string read_input(const std::string& path, const std::string& where) {
  std::string text;
  try {
    // An endless stream (`yes | scratchgrad tokenize`) stops at the limit of a --text file, not when the
    // memory runs out.
    text = path.empty() ? read_bounded(std::cin, kMaxTextBytes, where) : read_text_file(path);
  } catch (const std::bad_alloc&) {
    throw UsageError(fmt::format("tokenize: out of memory reading {}", where));
  }
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

// What tokenize reads and writes text with: a character vocabulary (a checkpoint's, or the text's own
// characters) or a byte-level BPE.
struct Codec {
  std::optional<Vocabulary> chars;                  // char
  std::shared_ptr<const tokenizer::Tokenizer> bpe;  // bpe and gpt2

  int64_t size() const { return bpe ? bpe->vocab_size() : chars->size(); }
  std::string piece(int64_t id) const {  // the bytes one token stands for
    return bpe ? bpe->token_bytes(int32_t(id)) : encode_utf8(chars->chars()[size_t(id)]);
  }
  std::vector<int64_t> encode(const std::string& text) const {
    if (!bpe) return chars->encode(decode_utf8(text));
    const std::vector<int32_t> ids = bpe->encode(text);
    return {ids.begin(), ids.end()};
  }
  std::string decode(const std::vector<int64_t>& ids) const {
    if (!bpe) return encode_utf8(chars->decode(ids));
    return bpe->decode(std::vector<int32_t>(ids.begin(), ids.end()));
  }
};

// A Hugging Face tokenizer.json (hf_json.h), or the model folder that holds one.
std::shared_ptr<const tokenizer::Tokenizer> tokenizer_json(const std::string& path) {
  std::error_code ec;
  const bool folder = std::filesystem::is_directory(path, ec);
  return std::make_shared<tokenizer::Tokenizer>(
      tokenizer::load_tokenizer_json(folder ? (std::filesystem::path(path) / "tokenizer.json").string() : path));
}

// The tokenizer the flags name. A char one without a checkpoint has no characters yet: the text gives them.
// --tokenizer-file alone is a Hugging Face tokenizer.json.
Codec named_codec(const TokenizeOptions& o) {
  if (o.tokenizer.empty() && !o.tokenizer_file.empty()) return {std::nullopt, tokenizer_json(o.tokenizer_file)};
  const std::string kind = o.tokenizer.empty() ? "char" : o.tokenizer;
  if (kind == "char") {
    if (!o.tokenizer_file.empty())
      throw UsageError("tokenize: --tokenizer-file is for --tokenizer bpe or gpt2, or alone for a tokenizer.json");
    if (o.decode)
      throw UsageError("tokenize --decode: --tokenizer char has no alphabet to decode with (a character model's ids "
                       "number the characters of its own text): give --checkpoint of that model, or --tokenizer bpe "
                       "or gpt2 with --tokenizer-file");
    return {};
  }
  if (kind != "bpe" && kind != "gpt2") throw UsageError("tokenize: unknown --tokenizer '" + kind + "' (expected char, bpe or gpt2)");
  if (o.tokenizer_file.empty())
    throw UsageError("tokenize: --tokenizer " + kind + " needs --tokenizer-file (" +
                     (kind == "bpe" ? "a file from `scratchgrad bpe --save`)"
                                    : "the folder of GPT-2's encoder.json and vocab.bpe, or a tokenizer.json)"));
  Codec c;
  c.bpe = std::make_shared<tokenizer::Tokenizer>(kind == "bpe" ? tokenizer::Tokenizer::load(o.tokenizer_file)
                                                               : tokenizer::load_gpt2_tokenizer(o.tokenizer_file));
  return c;
}

// The tokenizer a checkpoint of ours carries (model_files.h reads it as generate does: a gpt2 run's files
// from its recorded path, or from --tokenizer-file where they have moved).
Codec checkpoint_codec(const TokenizeOptions& o) {
  if (!o.tokenizer.empty())
    throw UsageError("tokenize: --tokenizer cannot be given with --checkpoint (the checkpoint's own tokenizer is used)");
  if (nn::is_gpt2_file(o.checkpoint) || nn::is_llmc_checkpoint(o.checkpoint))
    throw UsageError("tokenize: --checkpoint " + o.checkpoint + " is a GPT-2 (or llm.c) file, which holds no tokenizer: "
                     "give --tokenizer gpt2 --tokenizer-file with GPT-2's encoder.json and vocab.bpe");
  const LoadedModel m = load_model(o.checkpoint, o.tokenizer_file);
  if (!o.tokenizer_file.empty() && m.tokenizer.kind != "gpt2")
    throw UsageError("tokenize: --tokenizer-file is for a checkpoint trained with --tokenizer gpt2; " + o.checkpoint +
                     " carries its own " + m.tokenizer.kind + " tokenizer");
  Codec c;
  if (m.tokenizer.is_char()) c.chars = m.vocab;
  else c.bpe = m.tokenizer.bpe;
  return c;
}

// --decode's input: whitespace-separated whole numbers, each an id of the vocabulary.
std::vector<int64_t> parse_ids(const std::string& text, int64_t vocab_size, const std::string& where) {
  std::vector<int64_t> ids;
  const auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; };
  for (size_t at = 0; at < text.size();) {
    if (is_space(text[at])) {
      ++at;
      continue;
    }
    size_t end = at;
    while (end < text.size() && !is_space(text[end])) ++end;
    const std::string_view word(text.data() + at, end - at);
    const std::optional<int64_t> id = nn::parse_whole(word, 0, vocab_size - 1);
    if (!id)
      throw UsageError(fmt::format("tokenize --decode: {}: '{}' (word {}) is not a token id, a whole number from 0 to {}",
                                   where, tokenizer::escape_bytes(clipped(word)), ids.size() + 1, vocab_size - 1));
    ids.push_back(*id);
    at = end;
  }
  if (ids.empty()) throw UsageError(fmt::format("tokenize --decode: {} holds no ids", where));
  return ids;
}

// A tokenizer.json whose post-processor frames a text (Llama 3.1's <|begin_of_text|>): the listing shows the
// text's own tokens, and says what the model's framing would add.
void note_post_processor(const Codec& codec, std::ostream& out) {
  const tokenizer::HuggingFaceRules* hf = codec.bpe ? codec.bpe->hugging_face() : nullptr;
  if (!hf || (hf->post_prefix.empty() && hf->post_suffix.empty())) return;
  const auto listed = [&](const std::vector<int32_t>& ids) {
    std::string s;
    for (int32_t id : ids) s += fmt::format("{}{} {}", s.empty() ? "" : ", ", id, shown(codec.piece(id)));
    return s.empty() ? std::string("nothing") : s;
  };
  out << fmt::format("(the tokenizer.json's post-processor puts {} before a text and {} after it; not added here)\n",
                     listed(hf->post_prefix), listed(hf->post_suffix));
}

void print_tokens(const Codec& codec, const std::vector<int64_t>& ids, size_t text_bytes, bool ids_only, std::ostream& out) {
  if (ids_only) {
    for (size_t i = 0; i < ids.size(); ++i) out << (i ? " " : "") << ids[i];
    out << "\n";
    return;
  }
  if (&out == &std::cout && ::isatty(STDOUT_FILENO)) {
    // As the tiktokenizer page shows it: the text itself, each token on its own background colour.
    static const int kColours[] = {44, 42, 45, 43, 46, 41};
    for (size_t i = 0; i < ids.size(); ++i)
      out << "\x1b[30;" << kColours[i % 6] << "m" << printable_token(codec.piece(ids[i])) << "\x1b[0m";
    out << "\n\n";
    for (size_t i = 0; i < ids.size(); ++i) out << (i ? " " : "") << "\x1b[" << (kColours[i % 6] - 10) << "m" << ids[i] << "\x1b[0m";
    out << "\n";
  } else {
    for (int64_t id : ids) out << fmt::format("{:>6} {}\n", id, shown(codec.piece(id)));
  }
  out << fmt::format("{} tokens for {} bytes ({:.2f} bytes per token)\n", ids.size(), text_bytes,
                     double(text_bytes) / double(ids.size()));
  note_post_processor(codec, out);
}

}  // namespace

int run_tokenize(const TokenizeOptions& o, std::ostream& out) {
  try {
    if (o.decode && o.ids_only) throw UsageError("tokenize: --ids shows a text's ids; --decode reads ids");
    const std::string where = o.text_file.empty() ? "standard input" : o.text_file;
    Codec codec = o.checkpoint.empty() ? named_codec(o) : checkpoint_codec(o);
    const std::string input = read_input(o.text_file, where);
    if (o.decode) {
      out << codec.decode(parse_ids(input, codec.size(), where)) << std::flush;
      return 0;
    }
    std::vector<int64_t> ids;
    try {
      if (!codec.bpe && !codec.chars) codec.chars = Vocabulary::from_text(decode_utf8(input));
      ids = codec.encode(input);
    } catch (const std::bad_alloc&) {
      throw UsageError(fmt::format("tokenize: out of memory tokenizing {} ({} bytes)", where, input.size()));
    } catch (const UsageError& e) {  // not UTF-8, or a character the checkpoint's vocabulary lacks
      throw UsageError(fmt::format("tokenize: {}: {}", where, e.what()));
    }
    print_tokens(codec, ids, input.size(), o.ids_only, out);
    return 0;
  } catch (const tokenizer::TokenizerError& e) {
    throw UsageError(std::string("tokenize: ") + e.what());
  }
}

}  // namespace cli
