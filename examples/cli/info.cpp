// info.cpp — `scratchgrad info`: what a file that the other commands read holds. A checkpoint of ours (its
// model, tokenizer, parameters and tensors), a LoRA run's adapters (their base, rank, alpha and targets),
// GPT-2's model.safetensors or llm.c's .bin (blocks, width, heads, vocabulary and context). Each file is
// read and checked as the commands that use it read it.
#include "commands.h"

#include <ostream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "folders.h"
#include "guards.h"
#include "model_files.h"
#include "nn/gpt2.h"
#include "nn/lora.h"

namespace cli {

using namespace autograd;

namespace {

void print_tensors(const std::vector<nn::TensorHeader>& tensors, std::ostream& out) {
  for (const nn::TensorHeader& t : tensors)
    out << fmt::format("  {:<16} {:<10} {}\n", t.name, shape_to_string(t.shape), dtype_name(t.dtype));
}

std::vector<nn::TensorHeader> headers_of(const nn::NamedTensors& tensors) {
  std::vector<nn::TensorHeader> out;
  for (const auto& [name, t] : tensors) out.push_back({name, t.dtype(), t.shape()});
  return out;
}

// GPT-2's model.safetensors, read one tensor at a time (every value checked): a file of any size.
void describe_gpt2(const std::string& path, std::ostream& out) {
  const nn::Gpt2FileInfo file = nn::inspect_gpt2_file(path);
  const nn::GPTConfig& c = file.config;
  const std::string heads =
      file.heads_in_file ? fmt::format("heads {} (its metadata's n_head)", c.n_heads)
      : c.n_heads > 0    ? fmt::format("heads {} (not in the file: width / {}, as in every released GPT-2)", c.n_heads,
                                       nn::kGpt2HeadDim)
                         : fmt::format("heads not in the file (and width {} is not a multiple of {}: give --heads)",
                                       c.emb_dim, nn::kGpt2HeadDim);
  out << fmt::format("model: GPT-2 (Hugging Face's layout), {} blocks, vocab {} dim {} context {} {}\n", c.n_layers,
                     c.vocab_size, c.emb_dim, c.context_length, heads);
  out << "tokenizer: not in the file (GPT-2's weights read GPT-2's tokens: --tokenizer-file DIR)\n";
  out << fmt::format("parameters: {}\n", file.parameters);
  print_tensors(file.tensors, out);
}

// llm.c's .bin: loaded as the commands load it (its header gives every size, the head count included).
void describe_llmc(const std::string& path, std::ostream& out) {
  const std::unique_ptr<nn::GPTModel> model = nn::load_llmc_gpt2(path);
  const nn::GPTConfig& c = model->cfg;
  out << fmt::format("model: GPT-2 (llm.c's format, version 3), {} blocks, vocab {} dim {} context {} heads {}\n",
                     c.n_layers, c.vocab_size, c.emb_dim, c.context_length, c.n_heads);
  out << "tokenizer: not in the file (GPT-2's weights read GPT-2's tokens: --tokenizer-file DIR)\n";
  out << fmt::format("parameters: {}\n", model->num_parameters());
}

// A LoRA run's adapters: the file checked as every command reads it, and whether the base it names is
// still the file they were trained on (said, not refused: info describes).
void describe_lora(const std::string& path, nn::Checkpoint&& ck, std::ostream& out) {
  const nn::LoraCheckpoint adapters = nn::read_lora(std::move(ck), path);
  const nn::LoraConfig& c = adapters.config;
  const auto& meta = adapters.checkpoint.metadata;
  out << fmt::format("LoRA adapters: rank {} alpha {} (scale alpha / rank = {:.4g}) on {}{}\n", c.rank, c.alpha,
                     c.alpha / double(c.rank), fmt::join(c.targets, ","),
                     meta.count("run.steps_done") ? fmt::format(", trained {} steps", meta.at("run.steps_done")) : "");
  std::string base = adapters.base_path.empty() ? "not named" : adapters.base_path;
  if (adapters.base_file) {
    base += fmt::format(" ({} bytes, hash {})", adapters.base_file->bytes, adapters.base_file->hash);
    try {
      nn::check_lora_base(adapters, path, adapters.base_path);
      base += ": the file there is that one";
    } catch (const nn::CheckpointError& e) {
      base += fmt::format(": refused by generate, eval and merge ({})", e.what());
    }
  } else if (!adapters.base_path.empty()) {
    base += " (its size and hash are not recorded: any file there is taken)";
  }
  out << "base: " << base << "\n";
  if (meta.count("tokenizer")) out << fmt::format("tokenizer: {} (the run's)\n", meta.at("tokenizer"));
  int64_t numbers = 0;
  for (const auto& [name, t] : adapters.checkpoint.tensors)
    if (name.find(".lora.") != std::string::npos) numbers += t.numel();
  out << fmt::format("parameters: {} in the adapters\n", numbers);
  print_tensors(headers_of(adapters.checkpoint.tensors), out);
}

// "vocab 49152 dim 576 layers 30 heads 9 kv-heads 3 head-dim 64 ffn 1536 context 8192 ...": a Llama's shape.
std::string llama_shape(const nn::LlamaConfig& c) {
  return fmt::format("{} blocks, vocab {} dim {} heads {} kv-heads {} head-dim {} ffn {} context {}, rope theta {}{}, "
                     "rms eps {}, {} head{}{}",
                     c.num_hidden_layers, c.vocab_size, c.hidden_size, c.num_attention_heads, c.num_key_value_heads,
                     c.head_size(), c.intermediate_size, c.max_position_embeddings, c.rope_theta,
                     c.rope_scaling ? fmt::format(" (rope_scaling {} factor {})", c.rope_scaling->type, c.rope_scaling->factor)
                                    : "",
                     c.rms_norm_eps, c.tie_word_embeddings ? "tied" : "untied", c.attention_bias ? ", q/k/v biases" : "",
                     c.qk_norm ? ", q/k norms" : "");
}

// A Hugging Face folder: read as generate and eval read it (every weight checked).
void describe_folder(const std::string& dir, std::ostream& out) {
  const FolderModel m = open_folder(dir, "info", false);
  const nn::HfFolder& f = m.folder;
  if (f.is_gpt2()) {
    const nn::GPTConfig& c = f.gpt2;
    out << fmt::format("model: {} (Hugging Face folder), {} blocks, vocab {} dim {} context {} heads {}\n", f.architecture,
                       c.n_layers, c.vocab_size, c.emb_dim, c.context_length, c.n_heads);
  } else {
    out << fmt::format("model: {} (Hugging Face folder), {}\n", f.architecture, llama_shape(f.llama));
  }
  out << fmt::format("weights: {}\n", fmt::join(f.weight_files, ", "));
  out << fmt::format("end of sequence: {}\n", f.eos_token_ids.empty() ? std::string("none given")
                                                                      : fmt::format("{}", fmt::join(f.eos_token_ids, " ")));
  if (m.tokenizer)
    out << fmt::format("tokenizer: tokenizer.json, {} tokens ({} merges, {} special or added)\n", m.tokenizer->vocab_size(),
                       m.tokenizer->merges().size(), m.tokenizer->specials().size());
  else out << "tokenizer: none in the folder (prompts and texts as ids: --prompt-ids, --ids-file)\n";
  out << fmt::format("parameters: {}\n", m.model->num_parameters());
  print_tensors(headers_of(m.model->named_parameters()), out);
}

}  // namespace

int run_info(const std::string& path, std::ostream& out) {
  use_kernels("");  // SCRATCHGRAD_KERNELS checked as every command checks it
  if (nn::is_hf_folder(path)) {
    out << fmt::format("checkpoint: {}\n", path);
    describe_folder(path, out);
    return 0;
  }
  if (nn::is_llmc_checkpoint(path)) {
    out << fmt::format("checkpoint: {}\n", path);
    describe_llmc(path, out);
    return 0;
  }
  if (nn::is_gpt2_file(path)) {
    out << fmt::format("checkpoint: {}\n", path);
    describe_gpt2(path, out);
    return 0;
  }
  nn::Checkpoint ck = nn::load_safetensors(path);
  if (ck.metadata.count("format") && ck.metadata.at("format") == "scratchgrad-lora") {
    out << fmt::format("checkpoint: {}\n", path);
    describe_lora(path, std::move(ck), out);
    return 0;
  }
  LoadedModel m = load_model(path);
  out << fmt::format("checkpoint: {}\n", path);
  if (m.gpt) {
    const nn::GPTConfig& c = m.gpt->cfg;
    out << fmt::format("model: GPT, {} blocks, vocab {} dim {} context {} heads {}, trained {} steps\n", c.n_layers,
                       c.vocab_size, c.emb_dim, c.context_length, c.n_heads, m.checkpoint.metadata["steps"]);
  } else if (m.llama) {
    out << fmt::format("model: Llama, {}, trained {} steps\n", llama_shape(m.llama->cfg), m.checkpoint.metadata["steps"]);
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
  out << fmt::format("parameters: {}\n", m.decoder() ? m.decoder()->num_parameters() : m.model->num_parameters());
  print_tensors(headers_of(m.checkpoint.tensors), out);
  return 0;
}

}  // namespace cli
