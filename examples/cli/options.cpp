// options.cpp — the checks every command makes on its options, and the settings they share (numerics,
// kernels, device).
#include "options.h"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "autograd/backend.h"

namespace cli {

using namespace autograd;

void require(bool ok, const std::string& message) {
  if (!ok) throw UsageError(message);
}

void check_train_options(const TrainOptions& o) {
  require(o.steps >= 1, fmt::format("--steps must be at least 1, got {}", o.steps));
  require(o.batch >= 1, fmt::format("--batch must be at least 1, got {}", o.batch));
  require(o.context >= 1, fmt::format("--context must be at least 1, got {}", o.context));
  require(o.dim >= 1, fmt::format("--dim must be at least 1, got {}", o.dim));
  require(o.heads >= 1 && o.dim % o.heads == 0,
          fmt::format("--heads must be at least 1 and divide --dim {}, got {}", o.dim, o.heads));
  require(std::isfinite(o.lr) && o.lr > 0, fmt::format("--lr must be a positive number, got {}", o.lr));
  require(o.threads >= 1, fmt::format("--threads must be at least 1, got {}", o.threads));
  require(o.eval_every >= 1, fmt::format("--eval-every must be at least 1, got {}", o.eval_every));
  require(o.sample_tokens >= 0, fmt::format("--sample must be non-negative, got {}", o.sample_tokens));
  require(o.model == "mini" || o.model == "gpt", fmt::format("--model must be mini or gpt, got '{}'", o.model));
  require(o.layers >= 1, fmt::format("--layers must be at least 1, got {}", o.layers));
  require(std::isfinite(o.dropout) && o.dropout >= 0 && o.dropout < 1,
          fmt::format("--dropout must be in [0, 1), got {}", o.dropout));
  require(o.warmup >= 0, fmt::format("--warmup must be non-negative, got {}", o.warmup));
  require(std::isfinite(o.weight_decay) && o.weight_decay >= 0,
          fmt::format("--weight-decay must be non-negative, got {}", o.weight_decay));
  require(std::isfinite(o.clip) && o.clip >= 0, fmt::format("--clip must be non-negative (0: none), got {}", o.clip));
  require(o.accumulate >= 1, fmt::format("--accumulate must be at least 1, got {}", o.accumulate));
  require(o.save_every >= 0, fmt::format("--save-every must be non-negative, got {}", o.save_every));
  require(o.save_every == 0 || !o.save.empty(), "--save-every needs --save PATH");
  require(o.reduce_shards >= 0, fmt::format("--reduce-shards must be non-negative, got {}", o.reduce_shards));
  require(o.reduce_shards == 0 || o.deterministic_reduce, "--reduce-shards needs --deterministic-reduce");
  require(o.reduce_shards == 0 || o.batch % o.reduce_shards == 0,
          fmt::format("--reduce-shards {} must divide --batch {}", o.reduce_shards, o.batch));
  require(o.check_every >= 1, fmt::format("--check-every must be at least 1, got {}", o.check_every));
  require(o.tokenizer == "char" || o.tokenizer == "bpe" || o.tokenizer == "gpt2" || (o.tokenizer.empty() && !o.init.empty()),
          fmt::format("--tokenizer must be char, bpe or gpt2, got '{}'", o.tokenizer));
  require(o.tokenizer == "char" || o.model == "gpt",
          fmt::format("--tokenizer {} trains --model gpt (the workshop's model reads characters)", o.tokenizer));
  require(o.tokenizer == "gpt2" || o.tokenizer_file.empty() || !o.resume.empty() || !o.init.empty(),
          "--tokenizer-file is for --tokenizer gpt2 (GPT-2's files)");
  require(o.model != "gpt" || o.warmup < o.steps,
          fmt::format("--warmup {} must be below --steps {} (the cosine decay needs steps after it)", o.warmup, o.steps));
}

Device checked_device(const std::string& name) {
  Device d;
  try {
    d = parse_device(name);
  } catch (const std::invalid_argument&) {
    throw UsageError(fmt::format("--device must be cpu or cuda, got '{}'", name));
  }
  try {
    (void)backend(d);  // a build without CUDA, or no usable GPU: the reason, and exit status 2
  } catch (const std::runtime_error& e) {
    throw UsageError(fmt::format("--device {}: {}", name, e.what()));
  }
  return d;
}

void apply_gpt_preset(TrainOptions& o, const std::string& preset, const std::function<bool(const char*)>& is_set) {
  struct Preset {
    int64_t layers, dim, heads, context, batch, steps;
  };
  Preset p;
  if (preset == "tiny") p = {2, 48, 4, 32, 16, 1000};
  else if (preset == "small") p = {3, 96, 4, 64, 16, 3000};
  else throw UsageError(fmt::format("--preset must be tiny or small, got '{}'", preset));
  auto fill = [&](const char* flag, auto& field, auto value) {
    if (!is_set(flag)) field = value;
  };
  fill("--layers", o.layers, p.layers);
  fill("--dim", o.dim, p.dim);
  fill("--heads", o.heads, p.heads);
  fill("--context", o.context, p.context);
  fill("--batch", o.batch, p.batch);
  fill("--steps", o.steps, p.steps);
  fill("--lr", o.lr, 3e-3);
  fill("--eval-every", o.eval_every, p.steps / 10);
  fill("--sample", o.sample_tokens, int64_t(200));
}

autograd::Numerics use_numerics_for(const std::string& model, const std::string& requested) {
  Numerics mode = model == "gpt" ? Numerics::fast : Numerics::exact;
  try {
    if (!requested.empty()) mode = parse_numerics(requested, "--numerics");
    else if (auto from_env = numerics_from_environment()) mode = *from_env;
    set_numerics(mode);  // (its first use also reads SCRATCHGRAD_NUMERICS, which may be bad)
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  return mode;
}

void use_kernels(const std::string& requested) {
  try {
    if (!requested.empty()) set_kernels(parse_kernels(requested, "--kernels"));
    else kernels_from_environment();  // a bad SCRATCHGRAD_KERNELS is the user's mistake, said as such
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
}

}  // namespace cli
