// finetune.h — `scratchgrad train --init FILE`: a GPT run that starts from trained weights instead of random
// ones, and trains all of them (a full fine-tune) or only LoRA adapters added to them (--lora-rank).
//
// The file decides the model's shape: Hugging Face's GPT-2 model.safetensors, llm.c's gpt2_124M.bin, or a
// checkpoint of `train --model gpt`. Everything else is the trainer's own loop (train.cpp): schedule,
// clipping, accumulation, --save / --resume, mpirun. What is particular to a fine-tune lives here: its
// flags and their defaults, the file's kind, the adapters, and what a run of that model needs in memory.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "nn/gpt.h"
#include "nn/lora.h"
#include "options.h"

namespace cli {

// Parse time, `train --init FILE` without --resume: refuses the flags that would set the model's shape
// (--dim, --layers, --preset, --vocab-size, --model other than gpt) and gives the recipe flags the command
// line left unset a fine-tune's values (B 4, 200 steps, 20 warm-up, lr 1e-4, or 1e-3 with LoRA). --heads
// becomes init_heads: the head count of a GPT-2 file that does not give its own (a file that does must
// agree with it). `given(flag)` says whether the command line gave that flag. The --lora-* flags without
// --init are refused too. UsageError names the flag.
void apply_finetune_options(TrainOptions& options, const std::function<bool(const char*)>& given);

// GPT-2's weights from --init's file (or a LoRA file's base): Hugging Face's safetensors (nn::load_gpt2's
// checks) or llm.c's .bin, with `heads` heads if the file does not give its count (0: width / 64; a file
// that gives one must agree). Null when the file is a safetensors file without GPT-2's tensors (it may be
// a checkpoint of ours).
std::unique_ptr<nn::GPTModel> load_gpt2_weights(const std::string& path, int64_t heads = 0);

// A head count given for a checkpoint of ours, which records its own: refused (UsageError) unless they agree.
void check_heads_agree(int64_t given, const nn::GPTModel& model, const std::string& path);

// Sets every dropout of the model (embeddings, attention weights, residual branches) to p: a model read
// from a file comes with none.
void set_dropout(nn::LanguageModel& model, double p);

// --lora-rank, --lora-alpha, --lora-targets as a configuration, checked against the model: a rank of at
// least 1 and at most the smaller side of every targeted layer, a finite positive alpha, known targets
// (UsageError naming the flag).
nn::LoraConfig lora_config(const TrainOptions& options, const nn::LanguageModel& model);

// The training window a fine-tune uses: --context if given (at most the model's context), else the
// smaller of 64 and the model's context.
int64_t finetune_context(const TrainOptions& options, const nn::LanguageModel& model, const std::string& path);

// The model reads the text's tokens by their ids, so its vocabulary and the tokenizer's must be the same
// size: UsageError naming both and what to do otherwise.
void check_same_vocabulary(const nn::LanguageModel& model, const std::string& path, int64_t tokenizer_vocab,
                           const std::string& tokenizer);

// What a fine-tune needs at the least, in bytes: every weight (float32), gradients and both Adam moments
// of the `trained` parameters, and one micro-batch's logits several times over (the softmax and its
// gradient) beside the blocks' activations.
double finetune_bytes(const nn::LanguageModel& model, int64_t trained, const TrainOptions& options);

}  // namespace cli
