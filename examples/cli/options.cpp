// options.cpp — the checks every command makes on its options, and the settings they share (numerics,
// kernels, device).
#include "options.h"

#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include <fmt/format.h>

#include "autograd/autocast.h"
#include "autograd/backend.h"
#include "autograd/cpu/runtime/runtime.h"
#include "autograd/random/generator.h"
#include "guards.h"
#include "nn/numbers.h"

namespace cli {

using namespace autograd;

void require(bool ok, const std::string& message) {
  if (!ok) throw UsageError(message);
}

namespace {

// --kv-heads and --ffn-dim shape a Llama only; with --model llama, the query heads must split into groups
// of the key/value heads, and each head's width must be even (RoPE rotates pairs of its dimensions).
void check_llama_options(const TrainOptions& o) {
  for (const char* flag : {"--kv-heads", "--ffn-dim"})
    require(!o.given.count(flag) || o.model == "llama",
            fmt::format("{} is for --model llama (a Llama block's key/value heads and SwiGLU width); this run is "
                        "--model {}: leave it out",
                        flag, o.model));
  require(o.model != "llama" || o.dropout == 0,
          fmt::format("--dropout {} is for --model gpt: a Llama has no dropout layers (Llama, Qwen and SmolLM2 are "
                      "trained without them): leave it out",
                      o.dropout));
  if (o.model != "llama" || !o.init.empty()) return;
  require(o.kv_heads >= 1 && o.heads % o.kv_heads == 0,
          fmt::format("--kv-heads must be at least 1 and divide --heads {}, got {}", o.heads, o.kv_heads));
  require(o.ffn_dim >= 1, fmt::format("--ffn-dim must be at least 1, got {}", o.ffn_dim));
  require(o.heads >= 1 && o.dim % o.heads == 0 && (o.dim / o.heads) % 2 == 0,
          fmt::format("--model llama: --dim {} over --heads {} must give an even head width (RoPE rotates pairs of "
                      "dimensions)",
                      o.dim, o.heads));
}

}  // namespace

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
  require(o.model == "mini" || o.model == "gpt" || o.model == "llama",
          fmt::format("--model must be mini, gpt or llama, got '{}'", o.model));
  check_llama_options(o);
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
  require(o.tokenizer == "char" || o.model != "mini",
          fmt::format("--tokenizer {} trains --model gpt or llama (the workshop's model reads characters)", o.tokenizer));
  // (a fine-tune's --init file decides its tokenizer: apply_finetune_options checks its flags)
  if (const std::optional<ModelKind> kind = kind_of_run(o.model != "mini", o.tokenizer))
    refuse_flags_that_cannot_apply(train_flag_scopes(), o.given, *kind, "this run");
  require(o.model == "mini" || o.warmup < o.steps,
          fmt::format("--warmup {} must be below --steps {} (the cosine decay needs steps after it)", o.warmup, o.steps));
}

std::string model_kind_name(ModelKind kind) {
  switch (kind) {
    case kCharModel: return "the workshop's character model (--model mini)";
    case kGptChars: return "a GPT that reads characters (--tokenizer char)";
    case kGptBpe: return "a GPT with its own BPE tokenizer (--tokenizer bpe)";
    case kGptGpt2Tokens: return "a GPT that reads GPT-2's tokens (--tokenizer gpt2)";
    case kGpt2File: return "GPT-2's model.safetensors";
    case kLlmcFile: return "llm.c's .bin";
    case kLlamaFolder: return "a Hugging Face folder of the Llama family";
    default: return "a model";
  }
}

std::optional<ModelKind> kind_of_run(bool gpt, const std::string& tokenizer) {
  if (!gpt) return kCharModel;
  if (tokenizer == "char") return kGptChars;
  if (tokenizer == "bpe") return kGptBpe;
  if (tokenizer == "gpt2") return kGptGpt2Tokens;
  return std::nullopt;
}

const std::vector<FlagScope>& train_flag_scopes() {
  static const std::vector<FlagScope> scopes{
      {"--preset", kOurGpts, "--model gpt or llama"},
      {"--layers", kOurGpts, "--model gpt or llama"},
      {"--dropout", kOurGpts, "--model gpt or llama"},
      {"--warmup", kOurGpts, "--model gpt or llama"},
      {"--weight-decay", kOurGpts, "--model gpt or llama"},
      {"--clip", kOurGpts, "--model gpt or llama"},
      {"--accumulate", kOurGpts, "--model gpt or llama"},
      {"--save-every", kOurGpts, "--model gpt or llama"},
      {"--vocab-size", kGptBpe, "--tokenizer bpe (the BPE's vocabulary)"},
      {"--tokenizer-file", kGptGpt2Tokens, "--tokenizer gpt2 (GPT-2's files)"},
  };
  return scopes;
}

const std::vector<FlagScope>& generate_flag_scopes() {
  static const std::vector<FlagScope> scopes{
      {"--heads", kGpt2File, "GPT-2's model.safetensors that does not say its head count"},
      {"--context-full", kGpt2File | kLlmcFile | kLlamaFolder,
       "GPT-2's and llm.c's files and Hugging Face folders (a checkpoint of train slides its window a token at a time, "
       "as its sample did)"},
      {"--tokenizer-file", kGptGpt2Tokens | kGpt2File | kLlmcFile,
       "GPT-2's files and GPTs trained with --tokenizer gpt2 (any other checkpoint carries its tokenizer)"},
      {"--no-kv-cache", kAnyDecoder, "GPT and Llama models (the workshop's model has no cache)"},
  };
  return scopes;
}

const std::vector<FlagScope>& eval_flag_scopes() {
  static const std::vector<FlagScope> scopes{
      {"--heads", kGpt2File, "GPT-2's model.safetensors that does not say its head count"},
      {"--tokenizer-file", kGptGpt2Tokens | kGpt2File,
       "GPT-2's files and GPTs trained with --tokenizer gpt2 (any other checkpoint carries its tokenizer)"},
      {"--ids-file", kGpt2File | kLlamaFolder,
       "GPT-2's model.safetensors and Hugging Face folders (give a checkpoint of train its --text FILE)"},
  };
  return scopes;
}

void refuse_flags_that_cannot_apply(const std::vector<FlagScope>& scopes, const GivenFlags& given, ModelKind kind,
                                    const std::string& subject) {
  for (const FlagScope& scope : scopes)
    if (given.count(scope.flag) && !(scope.kinds & kind))
      throw UsageError(fmt::format("{} is for {}; {} is {}: leave it out", scope.flag, scope.is_for, subject,
                                   model_kind_name(kind)));
}

namespace {

// Why `value` is not one a SCRATCHGRAD_ variable accepts ("" when it is). One function a variable.
using SettingProblem = std::string (*)(const std::string& value);

std::string named_choice(const std::string& value, std::initializer_list<const char*> choices, const char* said) {
  for (const char* choice : choices)
    if (value == choice) return "";
  return fmt::format("expected {}", said);
}

std::string thrown_by(const std::function<void()>& parse) {
  try {
    parse();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

struct Setting {
  const char* variable;
  SettingProblem problem;
};

// (the command line and the CPU runtime, which cannot include nn/numbers.h, accept the same thread counts)
static_assert(kMaxThreads == autograd::cpu::kMaxThreadsSetting);

// Every SCRATCHGRAD_ variable with a value to read (those that are only set or not, such as
// SCRATCHGRAD_NO_AVX512, take any value).
const std::vector<Setting>& settings() {
  static const std::vector<Setting> table{
      {"SCRATCHGRAD_NUMERICS", [](const std::string&) { return thrown_by([] { (void)numerics_from_environment(); }); }},
      {"SCRATCHGRAD_KERNELS", [](const std::string&) { return thrown_by([] { (void)kernels_from_environment(); }); }},
      {"SCRATCHGRAD_CPU_KERNELS",
       [](const std::string&) { return thrown_by([] { (void)random::cpu_kernels_from_environment(); }); }},
      {"SCRATCHGRAD_THREADS",
       [](const std::string& v) {
         return nn::parse_whole(v, 1, kMaxThreads) ? std::string()
                                                   : fmt::format("expected a whole number of threads from 1 to {}", kMaxThreads);
       }},
      {"SCRATCHGRAD_DIST_TIMEOUT",
       [](const std::string& v) {
         const std::optional<double> seconds = nn::parse_finite(v);
         return seconds && *seconds > 0 ? std::string() : std::string("give a number of seconds above 0");
       }},
      {"SCRATCHGRAD_MATMUL", [](const std::string& v) { return named_choice(v, {"blis", "blis-all"}, "blis or blis-all"); }},
      {"SCRATCHGRAD_TRACE",
       [](const std::string& v) {
         return nn::parse_whole(v, 0) || v == "all" || v == "first"
                    ? std::string()
                    : std::string("expected 0 (off), 1 or all (every pass), first, or a number of passes");
       }},
      {"SCRATCHGRAD_DENORMALS", [](const std::string& v) { return named_choice(v, {"keep"}, "keep (or leave it unset)"); }},
  };
  return table;
}

}  // namespace

void check_environment() {
  for (const Setting& setting : settings()) {
    const char* value = std::getenv(setting.variable);
    if (value == nullptr || *value == '\0') continue;
    const std::string problem = setting.problem(value);
    if (problem.empty()) continue;
    const std::string shown = std::string(value).substr(0, 60);
    // the parsers of numerics and kernels name the variable and the value themselves
    if (problem.starts_with(setting.variable)) throw UsageError(problem);
    throw UsageError(fmt::format("{}={}: {}", setting.variable, shown, problem));
  }
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

void apply_llama_preset(TrainOptions& o, const std::string& preset, const std::function<bool(const char*)>& is_set) {
  apply_gpt_preset(o, preset, is_set);  // (refuses another name)
  const bool tiny = preset == "tiny";
  if (!is_set("--kv-heads")) o.kv_heads = 2;
  if (!is_set("--ffn-dim")) o.ffn_dim = tiny ? 128 : 256;
}

int64_t default_ffn_dim(int64_t dim) { return (8 * dim / 3 + 7) / 8 * 8; }

autograd::Numerics use_numerics_for(const std::string& model, const std::string& requested) {
  Numerics mode = model == "mini" ? Numerics::exact : Numerics::fast;
  try {
    if (!requested.empty()) mode = parse_numerics(requested, "--numerics");
    else if (auto from_env = numerics_from_environment()) mode = *from_env;
    set_numerics(mode);  // (its first use also reads SCRATCHGRAD_NUMERICS, which may be bad)
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  return mode;
}

bool bf16_precision(const std::string& precision, const std::string& numerics_flag) {
  if (precision.empty()) return false;  // (train's default, unless a resumed run recorded bf16)
  if (precision != "fp32" && precision != "bf16")
    throw UsageError("--precision: expected fp32 or bf16, got '" + precision + "'");
  if (precision == "fp32") return false;
  const bool exact_asked = numerics_flag.empty() ? numerics_from_environment() == Numerics::exact : numerics_flag == "exact";
  if (exact_asked)
    throw UsageError("--precision bf16 runs in fast numerics: --numerics exact (or SCRATCHGRAD_NUMERICS=exact) promises "
                     "PyTorch's float32 bits, which bfloat16 products cannot give");
  return true;
}

void use_precision(const std::string& precision, const std::string& numerics_flag) {
  if (!bf16_precision(precision, numerics_flag)) return set_autocast(DType::Float32);
  set_numerics(Numerics::fast);
  set_autocast(DType::BFloat16);
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
