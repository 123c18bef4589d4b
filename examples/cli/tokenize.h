// tokenize.h — `scratchgrad tokenize` (a text as tokens and ids, or ids back to text) and `scratchgrad bpe`
// (train a byte-level BPE on a text, and watch its first merges).
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>

namespace cli {

struct TokenizeOptions {
  std::string tokenizer;       // char, bpe (a file from `scratchgrad bpe --save`) or gpt2; empty: char
  std::string tokenizer_file;  // bpe: the saved file; gpt2: encoder.json + vocab.bpe's folder, or tokenizer.json;
                               // alone (no tokenizer): a Hugging Face tokenizer.json, or the folder holding it
  std::string checkpoint;      // use this checkpoint's own tokenizer (instead of --tokenizer)
  std::string text_file;       // empty: standard input
  bool ids_only = false;       // --ids: the ids alone, space-separated
  bool decode = false;         // --decode: the input is ids (whitespace-separated); out come their bytes
};

struct BpeOptions {
  std::string text_file;
  int64_t vocab_size = 512;
  std::string pattern = "gpt4";  // none, gpt2 or gpt4
  bool explain = false;          // print the first merges as they happen
  int64_t explain_count = 20;
  std::string save;              // write the tokenizer (scratchgrad-bpe text format) here
};

// `in` to its end, refusing (UsageError naming `where`) more than `limit` bytes: tokenize reads standard input
// so, with the limit of a --text file (kMaxTextBytes), and a failed allocation names standard input too.
std::string read_bounded(std::istream& in, uint64_t limit, const std::string& where);

// Both return the exit status; bad input throws UsageError (a TokenizerError becomes one).
int run_tokenize(const TokenizeOptions& options, std::ostream& out);
int run_bpe(const BpeOptions& options, std::ostream& out);

}  // namespace cli
