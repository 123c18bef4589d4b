// tokenizer.h — byte-level BPE: text (any bytes) to token ids and back, trained here or read from GPT-2's files.
//
// A token is a byte string. Ids 0..255 of a trained tokenizer are the 256 single bytes, so every input has an
// encoding and decode(encode(x)) == x for every byte string (invalid UTF-8 and NULs included). Each merge
// joins two tokens into a new one; encoding applies the merges in the order they were learned (by rank).
// Before merging, text is cut into chunks (split.h: GPT-2's or GPT-4's pattern, or none), and merges never
// cross a chunk boundary. Special tokens (such as GPT-2's <|endoftext|>) are whole strings with their own ids.
//
//   tokenizer::Tokenizer gpt2 = tokenizer::load_gpt2_tokenizer("tests/tokenizer/gpt2");  // encoder.json + vocab.bpe
//   std::vector<int32_t> ids = gpt2.encode("Hello world<|endoftext|>");           // {15496, 995, 50256}
//   std::string text = gpt2.decode(ids);
//
// Every bad input (a file that is not what it claims, an id out of range, a vocabulary size the text cannot
// give) throws tokenizer::TokenizerError with a message that names the file or value at fault.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "nn/tokenizer/error.h"
#include "nn/tokenizer/limits.h"
#include "nn/tokenizer/split.h"

namespace tokenizer {

// One learned merge: tokens `left` and `right`, side by side inside a chunk, become token `result`.
struct Merge {
  int32_t left, right, result;
};

// What training reports for each merge it makes (scratchgrad bpe --explain prints the first ones).
struct MergeStep {
  int rank;             // 0 for the first merge
  Merge merge;
  int64_t count;        // how often the pair occurred when it was chosen
};

struct TrainOptions {
  int vocab_size = 512;                    // 256 bytes + merges + specials
  SplitPattern pattern = SplitPattern::gpt4;
  std::vector<std::string> specials;       // their ids follow the merges; training never merges across them
  std::function<void(const MergeStep&)> on_merge;  // called after each merge (optional)
};

// A token of a Hugging Face tokenizer.json's added_tokens (<|eot_id|>, <|im_end|>): found in the text before
// it is split, longest first where two start at the same place, as Hugging Face's AddedVocabulary finds them.
struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;      // only recorded: decoding writes every token
  bool lstrip = false;       // it takes the whitespace before it
  bool rstrip = false;       // it takes the whitespace after it
  bool single_word = false;  // it counts only where no letter or digit touches it on either side
  bool normalized = false;   // it is looked for in the normalized text (else in the text as given)
};

// What a Hugging Face tokenizer.json adds to a byte-level BPE (hf_json.h reads it; hf_tokenizer.cpp encodes).
struct HuggingFaceRules {
  std::vector<AddedToken> added;
  std::map<int32_t, std::string> vocabulary;  // model.vocab (bytes and merge results too): id -> bytes
  bool ignore_merges = false;  // a chunk that is itself a token of model.vocab is that token (Llama 3)
  bool nfc = false;            // the normalizer is NFC (Qwen): text is normalized before it is split
  // The ids the post-processor puts before and after a text (Llama 3's <|begin_of_text|>). encode() never
  // adds them: a caller that wants the model's framing asks post_prefix() and adds it.
  std::vector<int32_t> post_prefix, post_suffix;
};

class Tokenizer {
 public:
  Tokenizer();  // bytes only: 256 tokens, no merges, GPT-4 split

  // Assembles a tokenizer: `byte_ids[b]` is the id of the one-byte token b; merges in rank order; every id in
  // 0..vocab_size-1 belongs to exactly one byte, merge result or special. Throws TokenizerError otherwise.
  Tokenizer(std::vector<int32_t> byte_ids, std::vector<Merge> merges, std::map<std::string, int32_t> specials,
            SplitPattern pattern);

  // A Hugging Face tokenizer.json's tokenizer (hf_json.h builds it): the bytes, merges and split pattern as
  // above, with `rules` for its added tokens, normalizer and ignore_merges. Ids must run from 0 without a gap.
  static Tokenizer hugging_face(std::vector<int32_t> byte_ids, std::vector<Merge> merges, HuggingFaceRules rules,
                                SplitPattern pattern) {
    return Tokenizer(std::move(rules), std::move(byte_ids), std::move(merges), pattern);
  }

  // Special tokens of the text become their ids; everything else is split into chunks and merged. (A Hugging
  // Face tokenizer: its added tokens are found as its flags say, the rest normalized, split and merged.)
  std::vector<int32_t> encode(std::string_view text) const;
  // As OpenAI's encoder.py: special-token strings are ordinary text.
  std::vector<int32_t> encode_ordinary(std::string_view text) const;
  // The bytes of the tokens, concatenated. Throws TokenizerError on an id outside 0..vocab_size-1.
  std::string decode(const std::vector<int32_t>& ids) const;

  int vocab_size() const { return int(token_bytes_.size()); }
  const std::string& token_bytes(int32_t id) const;  // the bytes one token stands for
  const std::vector<Merge>& merges() const { return merges_; }
  const std::map<std::string, int32_t>& specials() const { return specials_; }
  SplitPattern pattern() const { return pattern_; }
  bool is_special(int32_t id) const;
  // The id of a special or added token by its text ("<|eot_id|>", "<|im_end|>"); nullopt if there is none.
  std::optional<int32_t> token_id(std::string_view content) const;
  // A Hugging Face tokenizer's rules (nullptr for the others).
  const HuggingFaceRules* hugging_face() const { return hugging_face_.get(); }

  // The text format of docs/tokenizer.md ("scratchgrad-bpe 1"): the merges in order, a person can read it.
  // Only tokenizers whose byte ids are 0..255 and whose merges make ids 256, 257, ... in order (the ones
  // train() makes) have this form; others throw TokenizerError.
  std::string to_text() const;
  static Tokenizer from_text(std::string_view text, const std::string& source_name);
  // save() writes a temporary file and renames it over `path`, so a failed save keeps the previous file.
  void save(const std::string& path) const;
  static Tokenizer load(const std::string& path);

  // 16 hex digits (FNV-1a 64) of everything that decides the ids: the split pattern, the byte ids, the
  // merges and the special tokens. Two tokenizers with the same fingerprint encode every text alike,
  // whichever files they were read from (encoder.json + vocab.bpe or tokenizer.json).
  std::string fingerprint() const;

 private:
  Tokenizer(HuggingFaceRules rules, std::vector<int32_t> byte_ids, std::vector<Merge> merges, SplitPattern pattern);
  void define_tokens(const std::vector<std::pair<int32_t, std::string>>& extra, const std::vector<std::string>& extra_names,
                     bool extra_first);
  std::vector<int32_t> merge_chunk(std::string_view chunk) const;
  void encode_chunks(std::string_view text, std::vector<int32_t>& out) const;
  void encode_hugging_face(std::string_view text, std::vector<int32_t>& out) const;  // hf_tokenizer.cpp
  void encode_between_added(std::string_view text, bool normalized, std::vector<int32_t>& out) const;

  std::vector<int32_t> byte_ids_;                          // 256 entries
  std::vector<Merge> merges_;                              // in rank order
  std::unordered_map<uint64_t, int32_t> rank_of_pair_;     // (left << 32 | right) -> rank
  std::vector<std::string> token_bytes_;                   // id -> bytes
  std::map<std::string, int32_t> specials_;
  SplitPattern pattern_;
  std::shared_ptr<const HuggingFaceRules> hugging_face_;
  std::unordered_map<std::string, int32_t> whole_tokens_;  // ignore_merges: model.vocab's bytes -> id

  // Chunks repeat (words, spaces, punctuation): each distinct chunk is merged once and remembered.
  struct ChunkCache;
  std::shared_ptr<ChunkCache> cache_;
};

// Learns a vocabulary from `text` (minbpe's algorithm: repeatedly merge the most frequent adjacent pair; a tie
// goes to the pair with the smallest ids). Throws TokenizerError for an empty text, a vocab_size below
// 256 + specials, or one larger than the text allows (fewer distinct pairs left than merges asked for).
Tokenizer train(std::string_view text, const TrainOptions& options);

// GPT-2's tokenizer from the files OpenAI and Hugging Face publish: `path` is a folder holding encoder.json and
// vocab.bpe (or tokenizer.json), or a tokenizer.json file. Ids are GPT-2's; <|endoftext|> is 50256.
Tokenizer load_gpt2_tokenizer(const std::string& path);
Tokenizer load_gpt2_tokenizer(const std::string& encoder_json, const std::string& vocab_bpe);
Tokenizer load_hugging_face_tokenizer(const std::string& tokenizer_json);

// GPT-2's byte-to-unicode table: the printable character GPT-2's files write for each byte (as UTF-8).
const std::vector<std::string>& gpt2_byte_to_unicode();

// A byte string as a person can read it: printable ASCII as is, \n \t \\ \" and \xHH for the rest.
std::string escape_bytes(std::string_view bytes);

}  // namespace tokenizer
