// train_tokenizer.h — `train --tokenizer char|bpe|gpt2`: the tokenizer a GPT run reads its text with, and
// that its checkpoint carries (in its metadata) so that generate, info, eval and --resume read and write
// text as the run did.
//
//   char: one id per character (text.h's Vocabulary); the checkpoint's "vocab" lists the characters.
//   bpe:  a byte-level BPE learned (nn/tokenizer's train()) from the training split alone, never the
//         held-out tenth; the checkpoint's "tokenizer.bpe" holds its text form (the merges in order).
//   gpt2: GPT-2's own tokenizer from --tokenizer-file; the checkpoint records that file's absolute path in
//         "tokenizer.gpt2" (GPT-2's files are 1.5 MB and published: they are named, not copied) and the
//         tokenizer's fingerprint in "tokenizer.gpt2_hash", so that other files at that path (another
//         model's merges) are refused instead of read as the run's.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nn/tokenizer/tokenizer.h"
#include "text.h"

namespace cli {

struct RunTokenizer {
  std::string kind = "char";                             // char, bpe or gpt2
  std::shared_ptr<const tokenizer::Tokenizer> bpe;       // bpe and gpt2
  std::string gpt2_path;                                 // gpt2: where its files are
  std::string gpt2_hash;                                 // gpt2: the tokenizer's fingerprint() when trained

  bool is_char() const { return kind == "char"; }
  // The checkpoint metadata that records it (nothing for char: "vocab" does, as before).
  std::map<std::string, std::string> metadata() const;
  // The text of `ids` (bpe and gpt2).
  std::string decode(const std::vector<int64_t>& ids) const;
};

// The tokenizer a checkpoint's metadata records; CheckpointError (naming `path`) when it is damaged. A
// checkpoint without "tokenizer" is a character model's. `gpt2_file` (when given) replaces a gpt2 run's
// recorded path, for a checkpoint moved to another machine; the tokenizer read there must have the
// recorded fingerprint (UsageError naming both otherwise; checkpoints from before it was recorded have none).
RunTokenizer tokenizer_of_checkpoint(const std::map<std::string, std::string>& metadata, const std::string& path,
                                     const std::string& gpt2_file = "");

// A text tokenized for a bpe or gpt2 run: the last tenth of its bytes (from a character boundary) held
// out when that holds at least `min_held_out` tokens; a bpe tokenizer is learned from the rest alone.
struct TokenText {
  RunTokenizer tokenizer;
  std::vector<uint16_t> ids;  // the training part's tokens, then the held-out part's
  int64_t train_tokens = 0;   // ids [0, train_tokens) are trained on
  int64_t held_out_bytes = 0;
};
// `known`: a resumed run's tokenizer, used as it is. UsageError for a vocabulary over 65,536 ids, an
// unknown kind, a missing --tokenizer-file.
TokenText tokenize_for_run(const std::string& text, const std::string& kind, int64_t vocab_size,
                           const std::string& tokenizer_file, const std::optional<RunTokenizer>& known,
                           int64_t min_held_out);

}  // namespace cli
