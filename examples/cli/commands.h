// commands.h — what each `scratchgrad` command does, callable from tests as well as main(): one file each
// (train.cpp, generate.cpp, eval.cpp, info.cpp, merge.cpp; tokenize.h has tokenize and bpe).
#pragma once
#include <iosfwd>
#include <string>

#include "nn/safetensors.h"
#include "options.h"

namespace cli {

// Each returns the process exit status; bad input throws UsageError or nn::CheckpointError.
int run_train(const TrainOptions& options, std::ostream& out);
// Any model the program reads: train's checkpoints, GPT-2's model.safetensors, llm.c's .bin (the text or the
// ids to `out`, the speed to stderr).
int run_generate(const GenerateOptions& options, std::ostream& out);
int run_info(const std::string& checkpoint, std::ostream& out);
// Adds the adapters into the base weights and writes a plain GPT-2 file.
int run_merge(const MergeOptions& options, std::ostream& out);
// Mean loss, perplexity and (for a text) bits per byte of a checkpoint on a whole text, sliding windows.
int run_eval(const EvalOptions& options, std::ostream& out);

}  // namespace cli
