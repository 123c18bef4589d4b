// split.h — cutting text into chunks before BPE merges it, as GPT-2's and GPT-4's regular expressions do,
// written out by hand (no regex engine). Merges never cross a chunk boundary, so " dog", " dog." and "dog!"
// share the token " dog" instead of learning "dog." and "g!" as tokens.
//
// GPT-2:        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// GPT-4 cl100k: '(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+
// Llama 3:      (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// Qwen2/Qwen3:  the same with \p{N} in place of \p{N}{1,3}: each digit is a chunk of its own
// SmolLM2:      every \p{N} character a chunk of its own (Hugging Face's Digits, individual_digits), then GPT-2's
//               pattern on the text between them
//
// \p{L} (letters), \p{N} (numbers) and \s (Unicode's White_Space) come from Unicode's own tables
// (unicode_classes.h). Bytes that are not valid UTF-8 are each one character of no class (like punctuation),
// so every byte string splits, and the chunks always concatenate back to the text.
#pragma once
#include <string_view>
#include <vector>

namespace tokenizer {

enum class SplitPattern {
  none,  // the whole text is one chunk (minbpe's BasicTokenizer)
  gpt2,
  gpt4,
  llama3,       // cuts exactly where gpt4 does (the differences of spelling match the same chunks: split.cpp)
  qwen2,        // Qwen2's and Qwen3's
  gpt2_digits,  // SmolLM2's
};

std::vector<std::string_view> split_chunks(std::string_view text, SplitPattern pattern);

const char* pattern_name(SplitPattern pattern);      // "none", "gpt2", "gpt4", "llama3", "qwen2", "gpt2-digits"
SplitPattern pattern_from_name(std::string_view name);  // throws TokenizerError on any other name

}  // namespace tokenizer
