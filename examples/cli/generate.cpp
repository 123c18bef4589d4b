// generate.cpp — `scratchgrad generate`: continue a prompt with any model the program reads (train's
// checkpoints, GPT-2's model.safetensors, llm.c's .bin, a Hugging Face folder), streaming the text (or the ids) as it is made.
//
// One path for every kind of model, with one set of checks, all made before anything is printed: the
// options, the flags the model's kind cannot take (generate_flag_scopes), the prompt (text or ids, never
// both), the stop token, the room in the context, a tokenizer that can spell every token the model makes.
// Only the loading (here and in gpt2_generate.cpp) and the way the window moves past the context
// (sampling.h's continue_prompt) differ by kind.
#include "commands.h"

#include <chrono>
#include <cmath>
#include <iostream>
#include <ostream>

#include <fmt/format.h>

#include "autograd/numerics.h"
#include "guards.h"
#include "model_files.h"
#include "nn/generation.h"
#include "nn/gpt2.h"
#include "nn/hf_folder.h"
#include "sampling.h"
#include "token_text.h"

namespace cli {

using namespace autograd;

namespace {

// --prompt-ids was given (an empty one too, which parse_token_ids refuses).
bool has_prompt_ids(const GenerateOptions& o) { return !o.prompt_ids.empty() || o.given.count("--prompt-ids"); }

// The checks on generate's own values, before any file is read.
void check_generate_options(const GenerateOptions& o) {
  require(o.tokens >= 0, fmt::format("--tokens must be non-negative, got {}", o.tokens));
  require(std::isfinite(o.temperature) && o.temperature >= 0,
          fmt::format("--temperature must be 0 (greedy) or positive, got {}", o.temperature));
  require(o.top_k >= 0, fmt::format("--top-k must be non-negative (0: all), got {}", o.top_k));
  require(o.top_p > 0 && o.top_p <= 1, fmt::format("--top-p must be in (0, 1], got {}", o.top_p));
  require(o.stop_id >= -2, fmt::format("--stop-id must be a token id, or -1 (never stop), got {}", o.stop_id));
  require(o.heads >= 0, fmt::format("--heads must be positive, got {}", o.heads));
  require(!o.prompt || !has_prompt_ids(o), "generate: give the prompt once: --prompt TEXT or --prompt-ids IDS");
  try {
    (void)nn::parse_context_full(o.context_full);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--") + e.what());  // "--context-full must be refuse or slide, ..."
  }
  try {
    if (!o.numerics.empty()) (void)parse_numerics(o.numerics, "--numerics");
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  (void)bf16_precision(o.precision, o.numerics);  // its checks, before any file is read
}

// A checkpoint of train (or of a LoRA fine-tune) opened for generate: its model, its tokenizer, the prompt of
// the sample its run printed.
GenerationModel open_checkpoint(const GenerateOptions& o) {
  LoadedModel m = load_model(o.checkpoint, o.tokenizer_file);
  GenerationModel g;
  g.kind = *kind_of_run(m.decoder() != nullptr, m.tokenizer.kind);  // (load_model knows no other tokenizer)
  g.mini = std::move(m.model);
  if (m.gpt) g.lm = std::move(m.gpt);
  else g.lm = std::move(m.llama);
  if (m.tokenizer.is_char()) {
    g.characters = m.vocab.chars();
    try {
      g.sample_prompt = m.vocab.encode(m.sample_prompt);
    } catch (const UsageError&) {  // a sample prompt outside the vocabulary: there is none to continue
    }
  } else {
    g.bpe = m.tokenizer.bpe;
    g.sample_prompt = m.sample_ids;
  }
  return g;
}

// The ids to continue: --prompt encoded, --prompt-ids read, or the run's sample's prompt; each one the
// model has a row for.
std::vector<int64_t> prompt_of(const GenerateOptions& o, const GenerationModel& m) {
  std::vector<int64_t> ids;
  if (o.prompt) {
    require(m.has_text() || m.kind != kLlamaFolder,
            fmt::format("generate: {} has no tokenizer.json to read --prompt TEXT: give the prompt as token ids with "
                        "--prompt-ids",
                        o.checkpoint));
    require(m.has_text(), "generate: a GPT-2 checkpoint needs its tokenizer to read --prompt TEXT: give --tokenizer-file "
                          "(the folder of encoder.json and vocab.bpe), or the prompt as token ids with --prompt-ids");
    require(!o.prompt->empty(), "generate: the prompt is empty (pass --prompt TEXT)");
    ids = m.encode(*o.prompt, "generate: --prompt");
  } else if (has_prompt_ids(o)) {
    ids = parse_token_ids(o.prompt_ids, "--prompt-ids");
    for (size_t i = 0; i < ids.size(); ++i)
      require(ids[i] < m.vocab(), fmt::format("--prompt-ids: prompt token {} at position {} is outside the vocabulary "
                                              "of {}",
                                              ids[i], i, m.vocab()));
  } else {
    ids = m.sample_prompt;
    require(!ids.empty() || m.has_text(), "generate: a GPT-2 checkpoint needs a prompt: --prompt TEXT with "
                                          "--tokenizer-file DIR, or --prompt-ids \"464 3290 ...\"");
  }
  require(!ids.empty(), "generate: the prompt is empty (pass --prompt TEXT or --prompt-ids IDS)");
  return ids;
}

// --stop-id's token, none (-1), or by default the model's own end-of-text tokens (a folder's eos_token_ids).
std::vector<int64_t> stop_tokens_of(const GenerateOptions& o, const GenerationModel& m) {
  if (o.stop_id == -1) return {};
  if (o.stop_id == -2) return m.end_of_text;
  require(o.stop_id < m.vocab(),
          fmt::format("--stop-id {} is outside the vocabulary of {} (-1: never stop)", o.stop_id, m.vocab()));
  return {o.stop_id};
}

// What can be known before the first token and would otherwise stop the output half-way.
void check_before_output(const GenerationModel& m, const std::vector<int64_t>& prompt, const Continuation& how,
                         bool as_text) {
  if (as_text)
    require(m.vocab() <= m.text_vocab(),
            fmt::format("generate: the model's vocabulary of {} is larger than its tokenizer's of {}: the tokens "
                        "past {} have no text (pass --ids to see ids, or give the model's own --tokenizer-file)",
                        m.vocab(), m.text_vocab(), m.text_vocab()));
  // the positions fed: the prompt and all new tokens but the last
  const int64_t needed = int64_t(prompt.size()) + std::max<int64_t>(how.tokens, 1) - 1;
  if ((m.kind & (kGpt2File | kLlmcFile | kLlamaFolder)) && m.at_context_end == nn::ContextFull::refuse)
    require(needed <= m.context(),
            fmt::format("generate: a prompt of {} tokens and {} new ones need {} positions, more than the context of "
                        "{} (ask for fewer --tokens, or --context-full slide)",
                        prompt.size(), how.tokens, needed, m.context()));
}

// Every token's logits are numbers: a model whose weights overflow says so rather than printing what a
// NaN picked.
void check_logits(const Tensor& logits, int64_t made) {
  for (double value : logits.to_vector<double>())
    if (!std::isfinite(value))
      throw UsageError(fmt::format("generate: the model's logits for token {} are not finite numbers (NaN or "
                                   "infinity): its weights are damaged or too large",
                                   made + 1));
}

}  // namespace

int run_generate(const GenerateOptions& o, std::ostream& out) {
  use_kernels(o.kernels);  // first, as in run_train
  check_generate_options(o);
  std::string note;
  const int threads = usable_threads(o.threads, note);
  if (!note.empty()) std::cerr << note << "\n";
  set_num_threads(threads);

  const ModelKind file_kind = nn::is_hf_folder(o.checkpoint)       ? kLlamaFolder  // (or GPT-2's)
                              : nn::is_llmc_checkpoint(o.checkpoint) ? kLlmcFile
                              : nn::is_gpt2_file(o.checkpoint)       ? kGpt2File
                                                                     : kCharModel;  // (or another of train's)
  const GenerationModel m = file_kind == kCharModel     ? open_checkpoint(o)
                            : file_kind == kLlamaFolder ? open_folder_for_generate(o)
                                                        : open_gpt2_for_generate(o, file_kind);
  refuse_flags_that_cannot_apply(generate_flag_scopes(), o.given, m.kind, o.checkpoint);
  use_numerics_for(m.kind == kCharModel ? "mini" : "gpt", o.numerics);
  use_precision(o.precision, o.numerics);
  // bf16: the weights kept in bfloat16, half their bytes (a folder's read so, open_folder_for_generate)
  if (bf16_precision(o.precision, o.numerics) && m.lm) nn::keep_weights_in_bfloat16(*m.lm);
  // in fast numerics: the weights laid out as a cached step reads them fastest (float32's bits unchanged)
  if (m.lm) nn::pack_weights_for_generation(*m.lm);

  const std::vector<int64_t> prompt = prompt_of(o, m);
  const Continuation how{.tokens = o.tokens,
                         .sampling = {.temperature = o.temperature, .top_k = o.top_k, .top_p = o.top_p},
                         .stop_tokens = stop_tokens_of(o, m)};
  const bool as_text = m.has_text() && !o.print_ids;
  check_before_output(m, prompt, how, as_text);

  // the prompt first, as the text it stands for; then each token as soon as it is made (a long generation
  // shows its progress), whole characters only (a token may end inside one)
  Utf8Stream text;
  if (as_text && o.prompt) out << *o.prompt << std::flush;
  else if (as_text)
    for (int64_t id : prompt) out << text.push(m.token_text(id)) << std::flush;
  int64_t made = 0;
  DurationNotice notice(o.tokens);
  const auto start = std::chrono::steady_clock::now();
  Generator gen(o.seed);
  continue_prompt(m, prompt, how, o.kv_cache, gen, [&](int64_t token, const Tensor& logits) {
    check_logits(logits, made);
    if (as_text) out << text.push(m.token_text(token)) << std::flush;
    else out << (made ? " " : "") << token << std::flush;  // --ids: the new ids only
    ++made;
    notice.token_made();
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out << text.flush() << "\n" << std::flush;
  std::cerr << fmt::format("{} tokens in {:.2f} s ({:.1f} tokens/s, prompt of {}, {} thread{})\n", made, seconds,
                           seconds > 0 ? double(made) / seconds : 0.0, prompt.size(), threads, threads == 1 ? "" : "s");
  return 0;
}

}  // namespace cli
