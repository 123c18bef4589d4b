// hf_json.h — the tokenizer.json that Hugging Face publishes with a model, for the byte-level BPE models of
// today: Llama 3, Qwen2 and Qwen3, SmolLM2 (and GPT-2). The tokenizer it gives encodes and decodes as
// Hugging Face's tokenizers library does: the same ids for every text.
//
//   tokenizer::Tokenizer qwen = tokenizer::load_tokenizer_json("Qwen3-0.6B/tokenizer.json");
//   qwen.encode("<|im_start|>user\nHi<|im_end|>");  // {151644, 872, 198, 13048, 151645}
//   qwen.token_id("<|im_end|>");                     // 151645
//
// What is read (docs/tokenizer.md lists it with the files it fits):
//   model           type "BPE": vocab, merges ("a b" or ["a", "b"]), ignore_merges; byte_fallback, dropout,
//                   continuing_subword_prefix and end_of_word_suffix must be off
//   added_tokens    each with its lstrip, rstrip, single_word and normalized flags
//   normalizer      null or NFC
//   pre_tokenizer   ByteLevel (GPT-2's pattern); Sequence [Split (Llama 3's or Qwen's pattern, Isolated),
//                   ByteLevel without its pattern]; Sequence [Digits (individual_digits), ByteLevel] (SmolLM2)
//   decoder         ByteLevel
//   post_processor  null, ByteLevel, TemplateProcessing or RobertaProcessing, or a Sequence of them: the tokens
//                   it puts around a text are recorded (HuggingFaceRules::post_prefix), never added by encode
// Anything else (a Unigram, WordPiece or WordLevel model; SentencePiece's BPE with byte_fallback or Metaspace,
// as Llama 2 and TinyLlama use; a split pattern not listed) is a TokenizerError naming the file and field.
#pragma once
#include <string>

#include "nn/tokenizer/tokenizer.h"

namespace tokenizer {

Tokenizer load_tokenizer_json(const std::string& path);

// The split patterns of tokenizer.json files that load_tokenizer_json knows, exactly as the files write them.
extern const char* const kLlama3SplitRegex;
extern const char* const kQwen2SplitRegex;

}  // namespace tokenizer
