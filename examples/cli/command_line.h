// command_line.h — `scratchgrad train | generate | info` as functions: parse the command line (CLI11) into
// a Command, then run it. main.cpp is the two calls; the fuzz target tests/fuzz/fuzz_cli.cpp parses
// arbitrary command lines and checks the options without training for long.
#pragma once
#include <iosfwd>
#include <string>
#include <string_view>

#include "chat.h"
#include "classify.h"
#include "commands.h"
#include "tokenize.h"

namespace cli {

struct Command {
  enum class Kind { train, generate, info, tokenize, bpe, eval, merge, classify, chat, done } kind = Kind::done;
  int status = 0;  // Kind::done: the exit status (--help printed: 0; a parse error printed: 2)
  TrainOptions train;
  GenerateOptions generate;
  std::string info_checkpoint;
  TokenizeOptions tokenize;
  BpeOptions bpe;
  EvalOptions eval;
  MergeOptions merge;
  ClassifyOptions classify;
  ChatOptions chat;
};

// Parses argv, and fills in the GPT preset for `train --model gpt` (which can throw UsageError). --help
// goes to `out`; a parse error is one line on `err`; both give Kind::done.
Command parse_command_line(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

// Runs a parsed command; bad input throws UsageError or nn::CheckpointError.
int run_command(const Command& command, std::ostream& out);

// `message` with its line breaks and other control characters written as \n, \r, \x01: what is printed
// stays one line even when it quotes an argument or a file name that holds a line break.
std::string one_line(std::string_view message);

// Both, turning every bad input into one line on `err` and exit status 2 (anything else: "internal error", 1).
int run_command_line(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace cli
