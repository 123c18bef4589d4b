// info.cpp — `scratchgrad info`: what a checkpoint holds (its model, tokenizer, parameters and tensors).
#include "commands.h"

#include <ostream>

#include <fmt/format.h>

#include "guards.h"
#include "model_files.h"

namespace cli {

using namespace autograd;

int run_info(const std::string& path, std::ostream& out) {
  LoadedModel m = load_model(path);
  out << fmt::format("checkpoint: {}\n", path);
  if (m.gpt) {
    const nn::GPTConfig& c = m.gpt->cfg;
    out << fmt::format("model: GPT, {} blocks, vocab {} dim {} context {} heads {}, trained {} steps\n", c.n_layers,
                       c.vocab_size, c.emb_dim, c.context_length, c.n_heads, m.checkpoint.metadata["steps"]);
  } else {
    const nn::CharModelConfig& c = m.model->config;
    out << fmt::format("model: character self-attention, vocab {} dim {} context {} heads {}, trained {} steps\n",
                       c.vocab, c.dim, c.context, c.heads, m.checkpoint.metadata["steps"]);
  }
  if (m.tokenizer.is_char()) {
    std::string shown;
    for (char32_t ch : m.vocab.chars()) shown += (shown.empty() ? "" : " ") + printable(ch);
    out << "vocabulary: " << shown << "\n";
  } else {
    const tokenizer::Tokenizer& tok = *m.tokenizer.bpe;
    out << fmt::format("tokenizer: {}, {} tokens ({} merges{}{})\n", m.tokenizer.kind, tok.vocab_size(), tok.merges().size(),
                       tok.specials().empty() ? "" : fmt::format(", {} special", tok.specials().size()),
                       m.tokenizer.kind == "gpt2" ? ", from " + m.tokenizer.gpt2_path : "");
  }
  out << fmt::format("parameters: {}\n", m.gpt ? m.gpt->num_parameters() : m.model->num_parameters());
  for (const auto& [name, t] : m.checkpoint.tensors)
    out << fmt::format("  {:<16} {:<10} {}\n", name, shape_to_string(t.shape()), dtype_name(t.dtype()));
  return 0;
}

}  // namespace cli
