// classify.h — text classification on the command line, chapter 6 of "Build a Large Language Model (From
// Scratch)":
//
//   scratchgrad train --task classify --data spam.csv --init gpt2/model.safetensors --tokenizer-file gpt2
//                     --epochs 5 --save spam.safetensors        (one command line)
//   scratchgrad classify --checkpoint spam.safetensors --prompt "You won a prize! Reply to claim."
//   scratchgrad eval --task classify --checkpoint spam.safetensors --data held_out.csv
//
// train reads labelled texts (nn/finetune/data.h: CSV, TSV or JSONL), splits them into training, validation
// and test parts (--split), replaces the model's next-token head by a Linear(width, classes) read at each
// text's last real token (nn/finetune/classifier.h), trains the head, the final norm and the last
// --train-blocks blocks (or all, or LoRA adapters), and prints accuracy and loss on each part as it goes.
// Its checkpoint ("format" scratchgrad-classifier) holds the whole model, the head and the labels.
#pragma once
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>

#include "options.h"

namespace cli {

struct ClassifyOptions {
  std::string checkpoint;             // a checkpoint of train --task classify
  std::optional<std::string> prompt;  // one text to classify
  std::string text_file;              // or a file of texts, one a line
  std::string tokenizer_file;         // a run of --tokenizer gpt2 moved: where GPT-2's files are now
  int threads = 1;
  std::string numerics;
  GivenFlags given;
};

// Parse time, train: checks --task (text or classify) and the flags that belong to one task only (UsageError
// naming the flag), and gives a classification run its defaults where the command line left them: with
// --init, batch 8 and lr 5e-5 (the book's; 1e-3 with LoRA); from scratch, the preset's. `given(flag)` says
// whether the command line gave that flag.
void apply_task_options(TrainOptions& options, const std::function<bool(const char*)>& given);

// train --task classify (run_train calls it): reads --data, builds or loads the model, trains, reports,
// saves. Bad input throws UsageError or nn::CheckpointError.
int train_classifier(TrainOptions options, std::ostream& out);

// scratchgrad classify: each label with its probability, most likely first, one line a text.
int run_classify(const ClassifyOptions& options, std::ostream& out);

// info on a classifier's checkpoint: its labels, model, what trained and its accuracies.
int describe_classifier(const std::string& path, std::ostream& out);

// eval --task classify --data FILE: accuracy, mean loss, per-class precision and recall, the confusion
// matrix (run_eval calls it).
int eval_classifier(const EvalOptions& options, std::ostream& out);

}  // namespace cli
