// token_text.h — what the commands share to read and write text through a BPE tokenizer: loading one named
// on the command line, encoding a text for a model whose vocabulary may be smaller, and streaming decoded
// tokens to a terminal without cutting a character in half.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "nn/tokenizer/tokenizer.h"

namespace cli {

// GPT-2's tokenizer from --tokenizer-file (the folder of encoder.json and vocab.bpe, or a tokenizer.json):
// a file that is missing or not what it claims is the user's to fix, so it becomes a UsageError naming
// `command`.
tokenizer::Tokenizer load_gpt2_tokenizer_for(const std::string& command, const std::string& path);

// `text` as token ids for a model of `model_vocab` ids: an id the model has no row for (a tokenizer that is
// not the model's, or a model trained on a smaller vocabulary) is a UsageError naming the token, its
// position and both vocabulary sizes.
std::vector<int64_t> encode_for_model(const tokenizer::Tokenizer& tok, std::string_view text, int64_t model_vocab,
                                      const std::string& what);

// Decoded bytes, released only as whole UTF-8 characters. A byte-level BPE token may end inside a
// character (GPT-2 spells many an emoji or CJK character in two or three tokens); written as they come,
// a terminal would show a replacement mark for each piece. So the bytes of a character that is still
// incomplete wait for the next token; anything that can never become a character (a stray continuation
// byte, a lead byte followed by a non-continuation) is released as is, since bytes are never lost.
class Utf8Stream {
 public:
  // Appends `bytes`; returns what can be written now.
  std::string push(std::string_view bytes);
  // The bytes still held back (at the end of the output): returns them and forgets them.
  std::string flush();

 private:
  std::string pending_;
};

}  // namespace cli
