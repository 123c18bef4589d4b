// limits.h — what the tokenizer's file readers accept (tokenizer.h makes them part of the public API).
#pragma once
#include <cstddef>
#include <cstdint>

namespace tokenizer {

// The largest tokenizer file read (encoder.json, vocab.bpe, tokenizer.json, a scratchgrad-bpe file): GPT-2's
// are 1 MB, Llama 3's tokenizer.json 9 MB. Anything larger is refused before it is read.
inline constexpr size_t kMaxFileBytes = size_t(64) << 20;  // 64 MiB
// How deep the JSON of a tokenizer file may nest (tokenizer.json needs about 6 levels), checked before it is
// parsed: parsing, printing and freeing a JSON tree walk its levels.
inline constexpr size_t kMaxJsonDepth = 64;

// The largest token id a tokenizer may have (today's vocabularies hold up to about 260,000 tokens): a file's
// id is checked against it before anything is sized by it.
inline constexpr int32_t kMaxTokenId = 50'000'000;

}  // namespace tokenizer
