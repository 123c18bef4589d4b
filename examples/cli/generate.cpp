// generate.cpp — `scratchgrad generate`: continue a prompt with a checkpoint's model, streaming the text (or
// the ids) as it is made. GPT-2's and llm.c's files go through gpt2_generate.cpp.
#include "commands.h"

#include <cmath>
#include <iostream>
#include <ostream>

#include <fmt/format.h>

#include "nn/gpt2.h"
#include "model_files.h"
#include "sampling.h"
#include "token_text.h"

namespace cli {

using namespace autograd;

namespace {

// `generate` on a GPT trained with --tokenizer bpe or gpt2: the prompt encoded with the checkpoint's
// tokenizer, the continuation streamed as whole characters (token_text.h), or the ids with --ids.
int generate_with_tokenizer(const GenerateOptions& o, LoadedModel& m, std::ostream& out) {
  const tokenizer::Tokenizer& tok = *m.tokenizer.bpe;
  std::vector<int64_t> ids = o.prompt ? encode_for_model(tok, *o.prompt, m.vocab_size(), "generate: --prompt") : m.sample_ids;
  require(!ids.empty(), "the prompt is empty (pass --prompt TEXT)");
  Generator gen(o.seed);
  const int64_t T = m.gpt->cfg.context_length;
  DurationNotice notice(o.tokens);
  if (o.print_ids) {
    for (size_t i = 0; i < ids.size(); ++i) out << (i ? " " : "") << ids[i];
    out << std::flush;
    continue_for_generate(o, *m.gpt, T, ids, gen, [&](int64_t id) {
      out << " " << id << std::flush;
      notice.token_made();
    });
    out << "\n";
    return 0;
  }
  Utf8Stream text;
  out << text.push(m.tokenizer.decode(ids)) << std::flush;
  continue_for_generate(o, *m.gpt, T, ids, gen, [&](int64_t id) {
    out << text.push(tok.token_bytes(int32_t(id))) << std::flush;
    notice.token_made();
  });
  out << text.flush() << "\n";
  return 0;
}

}  // namespace

int run_generate(const GenerateOptions& o, std::ostream& out) {
  use_kernels(o.kernels);  // first, as in run_train
  require(o.tokens >= 0, fmt::format("--tokens must be non-negative, got {}", o.tokens));
  require(std::isfinite(o.temperature) && o.temperature >= 0,
          fmt::format("--temperature must be 0 (greedy) or positive, got {}", o.temperature));
  require(o.top_k >= 0, fmt::format("--top-k must be non-negative, got {}", o.top_k));
  if (nn::is_llmc_checkpoint(o.checkpoint) || nn::is_gpt2_file(o.checkpoint))
    return run_generate_gpt2(o, o.checkpoint, nn::Checkpoint(), out, std::cerr);
  LoadedModel m = load_model(o.checkpoint, o.tokenizer_file);
  use_numerics_for(m.gpt ? "gpt" : "mini", o.numerics);
  if (!m.tokenizer.is_char()) return generate_with_tokenizer(o, m, out);
  std::u32string prompt = o.prompt ? decode_utf8(*o.prompt) : m.sample_prompt;
  require(!prompt.empty(), "the prompt is empty (pass --prompt TEXT)");
  std::vector<int64_t> ids = m.vocab.encode(prompt);
  Generator gen(o.seed);
  DurationNotice notice(o.tokens);
  if (o.print_ids) {  // the ids, the prompt's included, space-separated (for scripts), each as it is made
    for (size_t i = 0; i < ids.size(); ++i) out << (i ? " " : "") << ids[i];
    out << std::flush;
    auto print_id = [&](int64_t id) {
      out << " " << id << std::flush;
      notice.token_made();
    };
    if (m.gpt) continue_for_generate(o, *m.gpt, m.gpt->cfg.context_length, ids, gen, print_id);
    else continue_for_generate(o, *m.model, m.model->config.context, ids, gen, print_id);
    out << "\n";
    return 0;
  }
  // each character is printed as soon as it is made: a long generation shows its progress
  out << encode_utf8(prompt) << std::flush;
  auto print = [&](int64_t id) {
    out << encode_utf8(m.vocab.chars()[size_t(id)]) << std::flush;
    notice.token_made();
  };
  if (m.gpt) continue_for_generate(o, *m.gpt, m.gpt->cfg.context_length, ids, gen, print);
  else continue_for_generate(o, *m.model, m.model->config.context, ids, gen, print);
  out << "\n";
  return 0;
}

}  // namespace cli
