// fuzz_checkpoint.cpp — a checkpoint's metadata and the model built from it, for both models (the
// workshop's character model and the GPT): `scratchgrad info` and `scratchgrad generate` on any bytes.
//
// Checks: every bad file is refused with a one-line nn::CheckpointError or cli::UsageError (never another
// exception: the command line would print "internal error"); a good one is described and generates
// text whose characters are all in its vocabulary. Corpus: corpus/checkpoint/ (real checkpoints of both
// models, written by `scratchgrad train --save`, and ones with broken metadata).
#include <sstream>

#include "fuzz_common.h"
#include "nn/safetensors.h"
#include "text.h"
#include "commands.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_scratch("input.safetensors", data, size);
  std::ostringstream out;
  try {
    cli::run_info(path, out);
  } catch (const nn::CheckpointError& e) {
    fuzz::check_message(e, "CheckpointError");
    return 0;
  } catch (const cli::UsageError& e) {
    fuzz::check_message(e, "UsageError");
    return 0;
  } catch (const std::exception& e) {
    fuzz::fail(std::string("info: an error the command line calls internal: ") + e.what());
  }
  // It loaded: generating from it, greedy and sampled, must work or be refused cleanly too.
  for (double temperature : {0.0, 0.8}) {
    std::ostringstream text;
    cli::GenerateOptions g;
    g.checkpoint = path;
    g.tokens = 6;
    g.temperature = temperature;
    g.top_k = temperature > 0 ? 3 : 0;
    try {
      cli::run_generate(g, text);
    } catch (const nn::CheckpointError& e) {
      fuzz::check_message(e, "CheckpointError");
      continue;
    } catch (const cli::UsageError& e) {
      fuzz::check_message(e, "UsageError");
      continue;
    } catch (const std::exception& e) {
      fuzz::fail(std::string("generate: an error the command line calls internal: ") + e.what());
    }
    fuzz::expect(!text.str().empty(), "generate printed nothing");
  }
  return 0;
}
