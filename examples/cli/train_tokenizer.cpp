// train_tokenizer.cpp — see train_tokenizer.h.
#include "train_tokenizer.h"

#include <filesystem>

#include <fmt/format.h>

#include "nn/safetensors.h"
#include "token_text.h"

namespace cli {

std::map<std::string, std::string> RunTokenizer::metadata() const {
  if (kind == "bpe") return {{"tokenizer", "bpe"}, {"tokenizer.bpe", bpe->to_text()}};
  if (kind == "gpt2") return {{"tokenizer", "gpt2"}, {"tokenizer.gpt2", gpt2_path}, {"tokenizer.gpt2_hash", gpt2_hash}};
  return {};
}

std::string RunTokenizer::decode(const std::vector<int64_t>& ids) const {
  return bpe->decode(std::vector<int32_t>(ids.begin(), ids.end()));
}

RunTokenizer tokenizer_of_checkpoint(const std::map<std::string, std::string>& m, const std::string& path,
                                     const std::string& gpt2_file) {
  RunTokenizer t;
  auto kind = m.find("tokenizer");
  if (kind == m.end() || kind->second == "char") return t;
  t.kind = kind->second;
  if (t.kind == "bpe") {
    auto text = m.find("tokenizer.bpe");
    if (text == m.end()) throw nn::CheckpointError(fmt::format("{}: metadata names a bpe tokenizer but holds no 'tokenizer.bpe'", path));
    try {
      t.bpe = std::make_shared<tokenizer::Tokenizer>(tokenizer::Tokenizer::from_text(text->second, path + " (tokenizer.bpe)"));
    } catch (const tokenizer::TokenizerError& e) {
      throw nn::CheckpointError(fmt::format("{}: its tokenizer is damaged: {}", path, e.what()));
    }
    return t;
  }
  if (t.kind == "gpt2") {
    t.gpt2_path = !gpt2_file.empty() ? gpt2_file : m.count("tokenizer.gpt2") ? m.at("tokenizer.gpt2") : "";
    if (t.gpt2_path.empty()) throw nn::CheckpointError(fmt::format("{}: metadata names GPT-2's tokenizer but not its files", path));
    try {
      t.bpe = std::make_shared<tokenizer::Tokenizer>(tokenizer::load_gpt2_tokenizer(t.gpt2_path));
    } catch (const tokenizer::TokenizerError& e) {
      throw UsageError(fmt::format("{} was trained with GPT-2's tokenizer from {}, which cannot be read ({}); give "
                                   "--tokenizer-file",
                                   path, t.gpt2_path, e.what()));
    }
    t.gpt2_hash = t.bpe->fingerprint();
    auto recorded = m.find("tokenizer.gpt2_hash");
    if (recorded != m.end() && recorded->second != t.gpt2_hash) {
      const std::string now = gpt2_file.empty() ? "the files there now are" : "--tokenizer-file " + gpt2_file + " is";
      throw UsageError(fmt::format("{} was trained with GPT-2's tokenizer from {} (fingerprint {}), but {} another "
                                   "tokenizer (fingerprint {}): the model's ids would stand for other text",
                                   path, m.count("tokenizer.gpt2") ? m.at("tokenizer.gpt2") : "?", recorded->second, now,
                                   t.gpt2_hash));
    }
    return t;
  }
  throw nn::CheckpointError(fmt::format("{}: metadata 'tokenizer' is '{}' (expected char, bpe or gpt2)", path, kind->second));
}

namespace {

std::vector<uint16_t> narrow_ids(const std::vector<int32_t>& ids) { return {ids.begin(), ids.end()}; }

}  // namespace

TokenText tokenize_for_run(const std::string& text, const std::string& kind, int64_t vocab_size,
                           const std::string& tokenizer_file, const std::optional<RunTokenizer>& known,
                           int64_t min_held_out) {
  TokenText out;
  // the last tenth, moved forward to a character's first byte so that no character is cut in two
  size_t split = text.size() - text.size() / 10;
  while (split < text.size() && (static_cast<unsigned char>(text[split]) & 0xC0) == 0x80) ++split;
  const std::string_view train_part = std::string_view(text).substr(0, split), held_part = std::string_view(text).substr(split);
  try {
    if (known) {
      out.tokenizer = *known;
    } else if (kind == "bpe") {
      if (vocab_size < 256 || vocab_size > 65536)
        throw UsageError(fmt::format("--vocab-size must be in 256..65536 for --tokenizer bpe, got {}", vocab_size));
      tokenizer::TrainOptions t;
      t.vocab_size = int(vocab_size);
      out.tokenizer.kind = "bpe";
      out.tokenizer.bpe = std::make_shared<tokenizer::Tokenizer>(tokenizer::train(train_part, t));
    } else if (kind == "gpt2") {
      if (tokenizer_file.empty())
        throw UsageError("--tokenizer gpt2 needs --tokenizer-file (the folder of GPT-2's encoder.json and vocab.bpe)");
      out.tokenizer.kind = "gpt2";
      out.tokenizer.gpt2_path = std::filesystem::absolute(tokenizer_file).string();
      out.tokenizer.bpe = std::make_shared<tokenizer::Tokenizer>(load_gpt2_tokenizer_for("train", tokenizer_file));
      out.tokenizer.gpt2_hash = out.tokenizer.bpe->fingerprint();
    } else {
      throw UsageError(fmt::format("--tokenizer must be char, bpe or gpt2, got '{}'", kind));
    }
    const std::vector<int32_t> train_ids = out.tokenizer.bpe->encode(train_part);
    const std::vector<int32_t> held_ids = out.tokenizer.bpe->encode(held_part);
    out.ids = narrow_ids(train_ids);
    if (int64_t(held_ids.size()) >= min_held_out) {
      out.ids.insert(out.ids.end(), held_ids.begin(), held_ids.end());
      out.held_out_bytes = int64_t(held_part.size());
    } else {  // too little to hold out: all of it is trained on (a bpe tokenizer learned from part of it)
      const std::vector<int32_t> all = out.tokenizer.bpe->encode(text);
      out.ids = narrow_ids(all);
    }
    out.train_tokens = int64_t(out.ids.size()) - (out.held_out_bytes ? int64_t(held_ids.size()) : 0);
  } catch (const tokenizer::TokenizerError& e) {
    throw UsageError(fmt::format("train: --tokenizer {}: {}", kind, e.what()));
  }
  if (out.tokenizer.bpe->vocab_size() > 65536)
    throw UsageError(fmt::format("train: a vocabulary of {} does not fit the trainer's 2-byte ids", out.tokenizer.bpe->vocab_size()));
  return out;
}

}  // namespace cli
