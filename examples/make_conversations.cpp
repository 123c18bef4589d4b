// make_conversations.cpp — the tiny assistant's training and held-out conversations (`make assistant`,
// docs/finetuning.md), written by the program itself: two-digit addition, counting a letter in a word,
// spelling a word backwards (nn/finetune/synthetic.h). No download.
//
//   build/bin/make_conversations OUT_DIR [train per task] [held out per task] [seed]
//
// writes OUT_DIR/train.jsonl (the tasks mixed) and OUT_DIR/held-out-<task>.jsonl for each task, as the
// {"messages": [...]} records `scratchgrad train --task instruct --data FILE` reads, and
// OUT_DIR/questions-<task>.txt: the held-out questions, one a line (what a chat is asked). No held-out
// question is in the training file.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "nn/finetune/error.h"
#include "nn/finetune/synthetic.h"
#include "nn/numbers.h"

namespace {

bool write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (out) return true;
  std::cerr << "make_conversations: cannot write " << path.string() << "\n";
  return false;
}

// argv[i] as a whole number in [low, high], else `fallback` when absent; nullopt (said) when malformed.
std::optional<int64_t> number_argument(int argc, char** argv, int i, int64_t fallback, int64_t low, int64_t high,
                                       const char* what) {
  if (argc <= i) return fallback;
  const std::optional<int64_t> value = nn::parse_whole(argv[i], low, high);
  if (!value) std::cerr << "make_conversations: " << what << " must be a whole number from " << low << " to " << high
                        << ", got '" << argv[i] << "'\n";
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 5) {
    std::cerr << "usage: make_conversations OUT_DIR [train per task (2000)] [held out per task (100)] [seed (1)]\n";
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  const auto train = number_argument(argc, argv, 2, 2000, 1, 1000000, "the training examples per task");
  const auto held_out = number_argument(argc, argv, 3, 100, 1, 100000, "the held-out examples per task");
  const auto seed = number_argument(argc, argv, 4, 1, 0, INT64_MAX, "the seed");
  if (!train || !held_out || !seed) return 2;
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    std::cerr << "make_conversations: cannot make the folder " << dir.string() << ": " << error.message() << "\n";
    return 2;
  }
  finetune::SyntheticData data;
  finetune::SyntheticOptions options;
  options.train_per_task = *train, options.held_out_per_task = *held_out, options.seed = uint64_t(*seed);
  try {
    data = finetune::make_synthetic_data(options);
  } catch (const finetune::FinetuneError& e) {
    std::cerr << "make_conversations: " << e.what() << "\n";
    return 2;
  }
  if (!write_file(dir / "train.jsonl", finetune::to_jsonl(data.train))) return 2;
  for (const std::string& task : options.tasks) {
    std::vector<finetune::SyntheticExample> examples;
    std::string questions;
    for (const finetune::SyntheticExample& e : data.held_out)
      if (e.task == task) examples.push_back(e), questions += e.question + "\n";
    if (!write_file(dir / ("held-out-" + task + ".jsonl"), finetune::to_jsonl(examples))) return 2;
    if (!write_file(dir / ("questions-" + task + ".txt"), questions)) return 2;
  }
  std::cout << "wrote " << data.train.size() << " training conversations and " << data.held_out.size()
            << " held-out ones (" << *held_out << " a task) to " << dir.string() << "\n";
  return 0;
}
