// synthetic.h — training conversations a program writes itself, for the tiny assistant a learner trains on a
// CPU (no download): two-digit addition, counting a letter in a word, spelling a word backwards.
//
//   What is 23 + 58?                                  23 + 58 = 81.
//   How many times does the letter a appear in tamana?   The letter a appears 3 times in tamana.
//   Spell kemoru backwards.                           kemoru backwards is uromek.
//
// The words are made of consonant-vowel syllables (pronounceable, and many more of them than a built-in
// list would hold). The held-out questions share none with training, so a model that answers them has
// learned the task, not the examples.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "nn/finetune/template.h"

namespace finetune {

struct SyntheticExample {
  std::string task;      // "add", "count" or "reverse"
  std::string question;  // the user's message
  std::string answer;    // the whole expected reply
};

struct SyntheticOptions {
  std::vector<std::string> tasks = {"add", "count", "reverse"};
  int64_t train_per_task = 2000;
  int64_t held_out_per_task = 100;
  uint64_t seed = 1;
};

struct SyntheticData {
  std::vector<SyntheticExample> train;     // the tasks mixed, in a seeded order
  std::vector<SyntheticExample> held_out;  // task by task
};

// The same options give the same data on every platform (seeded.h). FinetuneError for an unknown task and
// for more distinct questions than a task has (two-digit addition has 90 × 90 = 8,100).
SyntheticData make_synthetic_data(const SyntheticOptions& options);

// The example as a user message and the assistant's answer.
Conversation as_conversation(const SyntheticExample& example);
// Examples as JSON Lines of {"messages": [...]}, the instruction data format data.h reads.
std::string to_jsonl(const std::vector<SyntheticExample>& examples);

// Exact-answer scoring: the reply, without the whitespace around it, is the expected answer.
bool is_exact_answer(const SyntheticExample& example, std::string_view reply);

struct TaskScore {
  int64_t correct = 0, total = 0;
  double accuracy() const { return total ? double(correct) / double(total) : 0.0; }
};
// replies[i] is the model's reply to examples[i]; the score of each task. std::invalid_argument when the
// two lists differ in length.
std::map<std::string, TaskScore> score_replies(const std::vector<SyntheticExample>& examples,
                                               const std::vector<std::string>& replies);

}  // namespace finetune
