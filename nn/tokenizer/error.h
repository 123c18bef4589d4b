// error.h — the tokenizer's one exception type, in its own header so that every part of nn/tokenizer/ (the
// split patterns, the loaders, the trainer) can throw it without including the others.
#pragma once
#include <stdexcept>

namespace tokenizer {

// A bad input (a file that is not what it claims, an id out of range, a vocabulary size the text cannot
// give): the message is one line naming the file, field or value at fault.
class TokenizerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tokenizer
