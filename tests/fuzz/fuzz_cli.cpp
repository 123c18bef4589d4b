// fuzz_cli.cpp — the command line: the input, split at NUL bytes, is argv after "scratchgrad".
//
// Every command line is parsed (cli::parse_command_line, the code main() runs) and its training options
// are checked (cli::check_train_options). Commands that are cheap are then run in a scratch folder that
// holds a real checkpoint of each model (mini.safetensors, gpt.safetensors) and a text (text.txt): a
// train of at most a few thousand multiply-adds a step, a generate of at most 64 characters, any info.
// Checks: no crash; every refusal is a cli::UsageError or nn::CheckpointError with a message (never the
// "internal error" of another exception), printed as one line (cli::one_line writes a line break that an
// argument holds as \n); a parse error or --help gives exit status 2 or 0, a parse error one line.
// Corpus: corpus/cli/, with the flags in cli.dict.
#include <unistd.h>

#include <cstring>
#include <sstream>
#include <vector>

#include "command_line.h"
#include "fuzz_common.h"
#include "nn/safetensors.h"

namespace {

bool plain_name(const std::string& path) {  // files the command may write stay in the scratch folder
  return path.empty() || (path.find('/') == std::string::npos && path != "." && path != "..");
}

// Small enough to run each time: the product of the sizes bounds a step's work.
bool cheap(const cli::TrainOptions& o) {
  auto le = [](int64_t v, int64_t max) { return v >= 0 && v <= max; };
  if (!le(o.steps, 3) || !le(o.batch, 4) || !le(o.context, 8) || !le(o.dim, 16) || !le(o.layers, 2) ||
      !le(o.accumulate, 2) || !le(o.sample_tokens, 16) || !le(o.heads, 16) || o.threads > 2)
    return false;
  if (!o.resume.empty()) return false;  // a resumed run takes its sizes from the checkpoint
  return plain_name(o.save) && plain_name(o.graph) && plain_name(o.plot);
}

void make_scratch_files() {
  const auto& dir = fuzz::scratch_dir();
  if (chdir(dir.c_str()) != 0) fuzz::fail("cannot enter the scratch folder");
  const std::string text = "the quick brown fox jumps over the lazy dog, again and again.\n";
  fuzz::write_scratch("text.txt", reinterpret_cast<const uint8_t*>(text.data()), text.size());
  std::ostringstream out;
  cli::TrainOptions mini;
  mini.text_file = "text.txt", mini.steps = 2, mini.batch = 2, mini.context = 4, mini.dim = 4, mini.eval_every = 1;
  mini.save = "mini.safetensors";
  cli::run_train(mini, out);
  cli::TrainOptions gpt = mini;
  gpt.model = "gpt", gpt.layers = 1, gpt.heads = 2, gpt.warmup = 1, gpt.save = "gpt.safetensors";
  cli::run_train(gpt, out);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  // The commands run in the scratch folder: the inputs and folders named on our own command line are
  // made absolute first, so libFuzzer (or the replay) still finds them.
  for (int i = 1; i < *argc; ++i)
    if ((*argv)[i][0] != '-') (*argv)[i] = strdup(std::filesystem::absolute((*argv)[i]).c_str());
  make_scratch_files();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 512) return 0;
  std::vector<std::string> args{"scratchgrad"};
  std::string current;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      args.push_back(current);
      current.clear();
    } else {
      current += char(data[i]);
    }
  }
  if (!current.empty()) args.push_back(current);
  if (args.size() > 24) return 0;
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  argv.push_back(nullptr);

  std::ostringstream out, err;
  try {
    cli::Command c = cli::parse_command_line(int(args.size()), argv.data(), out, err);
    if (c.kind == cli::Command::Kind::done) {
      fuzz::expect(c.status == 0 || c.status == 2, "a parse error with exit status " + std::to_string(c.status));
      if (c.status == 2) {
        const std::string e = err.str();
        fuzz::expect(!e.empty() && e.find('\n') == e.size() - 1, "a parse error not printed as one line: " + e);
      }
      return 0;
    }
    if (c.kind == cli::Command::Kind::train) {
      if (c.train.resume.empty()) cli::check_train_options(c.train);
      if (!cheap(c.train)) return 0;
    }
    if (c.kind == cli::Command::Kind::generate && c.generate.tokens > 64) return 0;
    if (c.kind == cli::Command::Kind::tokenize && c.tokenize.text_file.empty()) return 0;  // would read stdin
    if (c.kind == cli::Command::Kind::chat) return 0;  // reads its messages from stdin
    cli::run_command(c, out);
  } catch (const cli::UsageError& e) {  // printed through cli::one_line, as run_command_line does
    fuzz::check_message(std::runtime_error(cli::one_line(e.what())), "UsageError");
  } catch (const nn::CheckpointError& e) {
    fuzz::check_message(std::runtime_error(cli::one_line(e.what())), "CheckpointError");
  } catch (const std::exception& e) {
    fuzz::fail(std::string("an error the command line calls internal: ") + e.what());
  }
  return 0;
}
