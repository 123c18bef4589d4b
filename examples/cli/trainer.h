// trainer.h — what `scratchgrad train | generate | info` do, callable from tests as well as main().
#pragma once
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>

#include "text.h"

namespace cli {

// The workshop's program, exactly: its text, D 24, T 8, B 16, lr 0.01, 301 steps, seed 7.
inline const char* kWorkshopText = "aditi likes warm dosa ";

struct TrainOptions {
  std::string text_file;  // empty: the workshop's text
  int64_t steps = 301, batch = 16, context = 8, dim = 24, heads = 1;
  double lr = 0.01;
  uint64_t seed = 7;
  std::string device = "cpu";
  int threads = 1;
  int64_t eval_every = 100;
  int64_t sample_tokens = 14;  // length of the greedy sample printed at the end
  std::string save;            // checkpoint path (safetensors); empty: don't save
  std::string graph;           // write the step's autograd graph as Graphviz DOT here
  std::string plot;            // write the loss curve as SVG here
};

struct GenerateOptions {
  std::string checkpoint;
  std::optional<std::string> prompt;  // default: the first T characters of the training text
  int64_t tokens = 100;
  double temperature = 0.0;  // 0: greedy
  int64_t top_k = 0;         // 0: no limit
  uint64_t seed = 0;
};

// Each returns the process exit status; bad input throws UsageError or nn::CheckpointError.
int run_train(const TrainOptions& options, std::ostream& out);
int run_generate(const GenerateOptions& options, std::ostream& out);
int run_info(const std::string& checkpoint, std::ostream& out);

}  // namespace cli
