// limits.h — what the tokenizer's file readers accept (tokenizer.h makes them part of the public API).
#pragma once
#include <cstddef>

namespace tokenizer {

// The largest tokenizer file read (encoder.json, vocab.bpe, tokenizer.json, a scratchgrad-bpe file): GPT-2's
// are 1 MB, Llama 3's tokenizer.json 9 MB. Anything larger is refused before it is read.
inline constexpr size_t kMaxFileBytes = size_t(64) << 20;  // 64 MiB
// How deep the JSON of a tokenizer file may nest (tokenizer.json needs about 6 levels), checked before it is
// parsed: parsing, printing and freeing a JSON tree walk its levels.
inline constexpr size_t kMaxJsonDepth = 64;

}  // namespace tokenizer
