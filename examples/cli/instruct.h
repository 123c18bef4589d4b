// instruct.h — `train --task instruct` and `eval --task instruct`: instruction fine-tuning (chapter 7 of
// "Build a Large Language Model (From Scratch)") on the command line, with nn/finetune/'s templates, data
// and masks.
//
//   scratchgrad train --task instruct --data data.json --init gpt2/model.safetensors --tokenizer-file gpt2
//       --save sft.safetensors          (one command line)
//   scratchgrad eval --task instruct --data test.json --checkpoint sft.safetensors --responses replies.jsonl
//
// The model is GPT-2's file, a Hugging Face folder of the Llama family (or GPT-2's), a GPT or Llama of ours
// (--init), or a new one (--model gpt|llama, a preset, --dim ...). Each record is rendered in a chat template
// (--template alpaca|chatml|llama3; default: a checkpoint's own, else the one its tokenizer's special tokens
// name), batched with collate_instruct's −100 masks, and trained on the mean cross-entropy over the targets
// that count: the replies and their end-of-turn tokens (the prompt too with --train-on-prompt).
//
// A new model needs a tokenizer with the template's markers: a character tokenizer has none, so a new model
// reads bytes (a byte-level BPE, --tokenizer bpe) with the template's special tokens added, and no merges
// unless --vocab-size asks for them: each character of an ASCII text is one token, as a character model's,
// so a tiny model sees the digits of a sum and the letters of a word one by one.
//
// The checkpoint is an ordinary GPT or Llama checkpoint of ours (generate, eval and info read it), with the
// template's name under the metadata key "template" (the chat command's default) and "task" = "instruct".
#pragma once
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "options.h"

namespace cli {

// The metadata key that names a checkpoint's chat template (chat reads it for its default --template).
inline constexpr const char* kTemplateKey = "template";

// Parse time, `train`: the flags of --task instruct (--data, --template, --train-on-prompt, --max-length)
// refused without it, and with it the flags that cannot apply (--text, --resume, LoRA, ...); a new model's
// defaults (--model gpt, --tokenizer bpe: bytes and the template's special tokens). UsageError names the flag.
void apply_instruct_options(TrainOptions& options, const std::function<bool(const char*)>& given);

// The special tokens a new model's tokenizer gets for `template_name` (bytes and these: the template's
// markers and an end-of-text token to pad with). FinetuneError for an unknown name.
std::vector<std::string> template_special_tokens(const std::string& template_name);

int run_train_instruct(const TrainOptions& options, std::ostream& out);
// Mean loss and perplexity over the counted targets of --data, token-weighted over the whole set; with
// --responses, each example's greedy reply beside its reference, as JSON Lines, and the exact answers.
int run_eval_instruct(const EvalOptions& options, std::ostream& out);
// Whether eval was given --task or a flag of --task instruct (run_eval hands such a command to run_eval_instruct,
// which refuses the flags without --task instruct).
bool is_instruct_eval(const EvalOptions& options);

}  // namespace cli
