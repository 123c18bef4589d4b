// tokenizer.cpp — bench_tokenizer: how fast nn/tokenizer trains and encodes, on one core.
//   bench_tokenizer TEXT [VOCAB_SIZE=4096] [GPT2_DIR=tests/tokenizer/gpt2]
// Training: a VOCAB_SIZE vocabulary with GPT-4's split and on raw bytes (best of 3 runs each).
// Encoding: GPT-2's tokenizer, a fresh one (every chunk merged for the first time) and again (chunk cache warm).
// bench/tokenizer.sh runs it beside the Python minbpe (minbpe_train.py) and the npm encoder (npm_encode.mjs).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "nn/tokenizer/tokenizer.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_tokenizer TEXT [VOCAB_SIZE] [GPT2_DIR]\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const int vocab_size = argc > 2 ? std::atoi(argv[2]) : 4096;
  const std::string gpt2_dir = argc > 3 ? argv[3] : "tests/tokenizer/gpt2";
  std::printf("text: %s, %zu bytes\n", argv[1], text.size());

  for (tokenizer::SplitPattern pattern : {tokenizer::SplitPattern::gpt4, tokenizer::SplitPattern::none}) {
    tokenizer::TrainOptions o;
    o.vocab_size = vocab_size;
    o.pattern = pattern;
    double best = 1e30;
    size_t tokens = 0;
    for (int run = 0; run < 3; ++run) {
      const auto start = std::chrono::steady_clock::now();
      const tokenizer::Tokenizer t = tokenizer::train(text, o);
      best = std::min(best, seconds_since(start));
      tokens = t.encode(text).size();
    }
    std::printf("train %d tokens, %s split: %.3f s (best of 3); %.2f bytes per token\n", vocab_size,
                tokenizer::pattern_name(pattern), best, double(text.size()) / double(tokens));
  }

  const tokenizer::Tokenizer gpt2 = tokenizer::load_gpt2_tokenizer(gpt2_dir);
  for (const char* pass : {"first pass", "second pass"}) {
    const auto start = std::chrono::steady_clock::now();
    const size_t tokens = gpt2.encode(text).size();
    const double s = seconds_since(start);
    std::printf("gpt2 encode %s: %zu tokens, %.2f MB/s\n", pass, tokens, double(text.size()) / 1e6 / s);
  }
  return 0;
}
