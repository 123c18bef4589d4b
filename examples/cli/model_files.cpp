// model_files.cpp — reading a checkpoint of `train` back into a model, and the metadata written with one.
#include "model_files.h"

#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "finetune.h"
#include "guards.h"
#include "nn/hf_folder.h"
#include "nn/lora.h"
#include "nn/numbers.h"
#include "options.h"

namespace cli {

using namespace autograd;

std::map<std::string, std::string> model_metadata(const nn::CharModelConfig& c, const Vocabulary& vocab,
                                                  const std::u32string& sample_prompt, int64_t steps) {
  return {{"format", "scratchgrad-char-model"},
          {"vocab", encode_utf8(vocab.chars())},
          {"dim", std::to_string(c.dim)},
          {"context", std::to_string(c.context)},
          {"heads", std::to_string(c.heads)},
          {"steps", std::to_string(steps)},
          {"sample_prompt", encode_utf8(sample_prompt)}};
}

int64_t metadata_int(const nn::Checkpoint& ck, const std::string& path, const std::string& key) {
  auto it = ck.metadata.find(key);
  if (it == ck.metadata.end()) throw nn::CheckpointError(fmt::format("{}: metadata has no '{}'", path, key));
  if (const std::optional<int64_t> v = nn::parse_whole(it->second, 1)) return *v;
  throw nn::CheckpointError(fmt::format("{}: metadata '{}' is not a positive integer: '{}'", path, key,
                                        it->second.substr(0, 40)));
}

bool head_is_tied(const nn::GPTModel& model) { return &model.out_head->weight.impl() == &model.tok_emb->weight.impl(); }

// The model's tensors for a checkpoint: a tied head is written once, as tok_emb.weight ("tied_head" = 1).
nn::NamedTensors gpt_state(const nn::GPTModel& model) {
  nn::NamedTensors out = model.state_dict();
  if (head_is_tied(model)) std::erase_if(out, [](const auto& entry) { return entry.first == "out_head.weight"; });
  return out;
}

std::map<std::string, std::string> gpt_metadata(const nn::GPTConfig& c, const Vocabulary& vocab,
                                                const std::u32string& sample_prompt, int64_t steps,
                                                bool tied_head) {
  std::map<std::string, std::string> m{{"format", "scratchgrad-gpt"},
                                       {"vocab", encode_utf8(vocab.chars())},
                                       {"layers", std::to_string(c.n_layers)},
                                       {"dim", std::to_string(c.emb_dim)},
                                       {"context", std::to_string(c.context_length)},
                                       {"heads", std::to_string(c.n_heads)},
                                       {"qkv_bias", c.qkv_bias ? "1" : "0"},
                                       {"steps", std::to_string(steps)},
                                       {"sample_prompt", encode_utf8(sample_prompt)}};
  if (tied_head) m["tied_head"] = "1";
  return m;
}

std::map<std::string, std::string> llama_metadata(const nn::LlamaConfig& c, const Vocabulary& vocab,
                                                  const std::u32string& sample_prompt, int64_t steps) {
  std::map<std::string, std::string> m = {{"format", "scratchgrad-llama"},
          {"vocab", encode_utf8(vocab.chars())},
          {"vocab_size", std::to_string(c.vocab_size)},
          {"hidden_size", std::to_string(c.hidden_size)},
          {"intermediate_size", std::to_string(c.intermediate_size)},
          {"num_hidden_layers", std::to_string(c.num_hidden_layers)},
          {"num_attention_heads", std::to_string(c.num_attention_heads)},
          {"num_key_value_heads", std::to_string(c.num_key_value_heads)},
          {"max_position_embeddings", std::to_string(c.max_position_embeddings)},
          {"rms_norm_eps", fmt::format("{:.17g}", c.rms_norm_eps)},
          {"rope_theta", fmt::format("{:.17g}", c.rope_theta)},
          {"tie_word_embeddings", c.tie_word_embeddings ? "1" : "0"},
          {"steps", std::to_string(steps)},
          {"sample_prompt", encode_utf8(sample_prompt)}};
  // What Qwen2, Qwen3 and Llama 3.1/3.2 add (a fine-tuned folder of theirs keeps it); absent, the defaults.
  if (c.head_dim > 0) m["head_dim"] = std::to_string(c.head_dim);
  if (c.attention_bias) m["attention_bias"] = "1";
  if (c.qk_norm) m["qk_norm"] = "1";
  if (const auto& r = c.rope_scaling) {
    m["rope_scaling.rope_type"] = r->type;
    m["rope_scaling.factor"] = fmt::format("{:.17g}", r->factor);
    m["rope_scaling.low_freq_factor"] = fmt::format("{:.17g}", r->low_freq_factor);
    m["rope_scaling.high_freq_factor"] = fmt::format("{:.17g}", r->high_freq_factor);
    m["rope_scaling.original_max_position_embeddings"] = std::to_string(r->original_max_position_embeddings);
  }
  return m;
}

nn::NamedTensors decoder_state(const nn::LanguageModel& model) {
  if (const auto* gpt = dynamic_cast<const nn::GPTModel*>(&model)) return gpt_state(*gpt);
  return model.state_dict();
}

nn::NamedTensors without_optimizer(const nn::NamedTensors& tensors) {
  nn::NamedTensors out;
  for (const auto& [name, t] : tensors)
    if (!name.starts_with(kOptimizerPrefix)) out.emplace_back(name, t);
  return out;
}

namespace {

// The prompt of the sample a run printed: its characters, or (bpe, gpt2) its ids.
void read_sample_prompt(LoadedModel& m, nn::Checkpoint& ck) {
  try {
    m.sample_prompt = decode_utf8(ck.metadata.count("sample_prompt") ? ck.metadata["sample_prompt"] : "");
  } catch (const UsageError&) {
  }
  if (!m.tokenizer.is_char()) {
    try {
      m.sample_ids = parse_token_ids(ck.metadata.count("sample_ids") ? ck.metadata["sample_ids"] : "", "sample_ids");
    } catch (const UsageError&) {  // no sample prompt: generate then needs --prompt
    }
    for (int64_t id : m.sample_ids)
      if (id >= m.vocab_size()) m.sample_ids.clear();
  }
}

LoadedModel load_lora_run(const std::string& path, nn::Checkpoint&& ck, const std::string& gpt2_tokenizer_file);

// The characters a char run's metadata records, checked.
std::u32string recorded_characters(nn::Checkpoint& ck, const std::string& path) {
  std::u32string chars;
  try {
    chars = decode_utf8(ck.metadata.count("vocab") ? ck.metadata["vocab"] : "");
  } catch (const UsageError&) {
    throw nn::CheckpointError(fmt::format("{}: vocabulary is not valid UTF-8", path));
  }
  if (chars.empty()) throw nn::CheckpointError(fmt::format("{}: metadata has an empty vocabulary", path));
  check_distinct_characters(chars, path);
  return chars;
}

// The metadata value `key` as a positive number, else CheckpointError naming the file and the key.
double metadata_number(const nn::Checkpoint& ck, const std::string& path, const std::string& key) {
  auto it = ck.metadata.find(key);
  if (it == ck.metadata.end()) throw nn::CheckpointError(fmt::format("{}: metadata has no '{}'", path, key));
  char* end = nullptr;
  const double value = std::strtod(it->second.c_str(), &end);
  if (end == it->second.c_str() || *end != '\0' || !std::isfinite(value) || value <= 0)
    throw nn::CheckpointError(fmt::format("{}: metadata '{}' is not a positive number: '{}'", path, key,
                                          it->second.substr(0, 40)));
  return value;
}

// A checkpoint of train --model llama: its config from the metadata (checked as a Hugging Face config is),
// every tensor's shape checked by load_state_dict against the model that config builds.
LoadedModel load_llama_run(const std::string& path, nn::Checkpoint&& ck, const std::string& gpt2_tokenizer_file) {
  LoadedModel m;
  m.tokenizer = tokenizer_of_checkpoint(ck.metadata, path, gpt2_tokenizer_file);
  m.vocab = Vocabulary(m.tokenizer.is_char() ? recorded_characters(ck, path) : std::u32string());
  check_finite_parameters(without_optimizer(ck.tensors), path);
  nn::LlamaConfig c;
  c.vocab_size = metadata_int(ck, path, "vocab_size");
  if (c.vocab_size != m.vocab_size())
    throw nn::CheckpointError(fmt::format("{}: metadata 'vocab_size' {} is not its tokenizer's {} tokens", path,
                                          c.vocab_size, m.vocab_size()));
  c.hidden_size = metadata_int(ck, path, "hidden_size");
  c.intermediate_size = metadata_int(ck, path, "intermediate_size");
  c.num_hidden_layers = metadata_int(ck, path, "num_hidden_layers");
  c.num_attention_heads = metadata_int(ck, path, "num_attention_heads");
  c.num_key_value_heads = metadata_int(ck, path, "num_key_value_heads");
  c.max_position_embeddings = metadata_int(ck, path, "max_position_embeddings");
  c.rms_norm_eps = metadata_number(ck, path, "rms_norm_eps");
  c.rope_theta = metadata_number(ck, path, "rope_theta");
  c.tie_word_embeddings = ck.metadata["tie_word_embeddings"] == "1";
  if (ck.metadata.count("head_dim")) c.head_dim = metadata_int(ck, path, "head_dim");
  c.attention_bias = ck.metadata["attention_bias"] == "1";
  c.qk_norm = ck.metadata["qk_norm"] == "1";
  if (ck.metadata.count("rope_scaling.rope_type")) {
    nn::RopeScaling r;
    r.type = ck.metadata["rope_scaling.rope_type"];
    r.factor = metadata_number(ck, path, "rope_scaling.factor");
    r.low_freq_factor = metadata_number(ck, path, "rope_scaling.low_freq_factor");
    r.high_freq_factor = metadata_number(ck, path, "rope_scaling.high_freq_factor");
    r.original_max_position_embeddings = metadata_int(ck, path, "rope_scaling.original_max_position_embeddings");
    c.rope_scaling = r;
  }
  try {
    c.check();
  } catch (const std::invalid_argument& e) {
    throw nn::CheckpointError(fmt::format("{}: metadata: {}", path, e.what()));
  }
  // the sizes must be those of the tensors the file holds before a model that big is built
  const Shape embedding{c.vocab_size, c.hidden_size};
  for (const auto& [name, t] : ck.tensors)
    if (name == "model.embed_tokens.weight" && t.shape() != embedding)
      throw nn::CheckpointError(fmt::format("{}: size mismatch for {}: the metadata (vocab_size {}, hidden_size {}) "
                                            "needs {}, the file's is {}",
                                            path, name, c.vocab_size, c.hidden_size, shape_to_string(embedding),
                                            t.shape_str()));
  try {
    nn::SkipInitGuard from_the_file;  // every value comes from the file
    m.llama = std::make_unique<nn::LlamaModel>(c);
    m.llama->load_state_dict(without_optimizer(ck.tensors));
    m.llama->eval();
  } catch (const std::invalid_argument& e) {
    throw nn::CheckpointError(fmt::format("{}: {}", path, e.what()));
  }
  read_sample_prompt(m, ck);
  m.checkpoint = std::move(ck);
  return m;
}

}  // namespace

LoadedModel load_model(const std::string& path, const std::string& gpt2_tokenizer_file) {
  nn::Checkpoint ck = nn::load_safetensors(path);
  if (ck.metadata.count("format") && ck.metadata["format"] == "scratchgrad-classifier")
    throw UsageError(fmt::format("{}: a classifier (train --task classify): read it with scratchgrad classify or eval "
                                 "--task classify",
                                 path));
  return load_model(path, std::move(ck), gpt2_tokenizer_file);
}

LoadedModel load_model(const std::string& path, nn::Checkpoint&& ck, const std::string& gpt2_tokenizer_file) {
  auto format = ck.metadata.find("format");
  if (format != ck.metadata.end() && format->second == "scratchgrad-lora")
    return load_lora_run(path, std::move(ck), gpt2_tokenizer_file);
  if (format != ck.metadata.end() && format->second == "scratchgrad-llama")
    return load_llama_run(path, std::move(ck), gpt2_tokenizer_file);
  const bool gpt = format != ck.metadata.end() && format->second == "scratchgrad-gpt";
  if (format == ck.metadata.end() || (format->second != "scratchgrad-char-model" && !gpt))
    throw nn::CheckpointError(fmt::format("{}: not a scratchgrad checkpoint (metadata 'format' missing)", path));
  const RunTokenizer tok = gpt ? tokenizer_of_checkpoint(ck.metadata, path, gpt2_tokenizer_file) : RunTokenizer();
  const std::u32string chars = tok.is_char() ? recorded_characters(ck, path) : std::u32string();
  check_finite_parameters(without_optimizer(ck.tensors), path);
  const int64_t dim = metadata_int(ck, path, "dim"), context = metadata_int(ck, path, "context"),
                heads = metadata_int(ck, path, "heads");
  if (dim % heads != 0)
    throw nn::CheckpointError(fmt::format("{}: dim {} is not divisible by heads {}", path, dim, heads));
  // The sizes the metadata gives must be those of tensors the file holds, before a model that big is built
  // (a lying "dim" would otherwise ask the allocator for terabytes: found by tests/fuzz/fuzz_checkpoint.cpp).
  const int64_t vocab = tok.is_char() ? int64_t(chars.size()) : tok.bpe->vocab_size();
  const int64_t layers = gpt ? metadata_int(ck, path, "layers") : 0;
  auto expect_shape = [&](const std::string& name, const Shape& want) {
    for (const auto& [n, t] : ck.tensors)
      if (n == name) {
        if (t.shape() != want)
          throw nn::CheckpointError(fmt::format("{}: size mismatch for {}: the metadata (vocab {}, dim {}, context {}{}) "
                                                "needs shape {}, the file's is {}",
                                                path, name, vocab, dim, context,
                                                gpt ? fmt::format(", layers {}", layers) : "", shape_to_string(want),
                                                t.shape_str()));
        return;
      }
    throw nn::CheckpointError(fmt::format("{}: the metadata's model needs a tensor {}, which the file lacks", path, name));
  };
  if (gpt) {
    expect_shape("tok_emb.weight", {vocab, dim});
    expect_shape("pos_emb.weight", {context, dim});
    expect_shape(fmt::format("trf_blocks.{}.att.W_key.weight", layers - 1), {dim, dim});
  } else {
    expect_shape("head.weight", {vocab, dim});
    expect_shape("pos.weight", {context, dim});
    expect_shape("k.weight", {dim, dim});
  }
  LoadedModel m;
  try {
    if (gpt) {
      nn::GPTConfig config{.vocab_size = vocab, .context_length = context, .emb_dim = dim,
                           .n_heads = heads, .n_layers = layers, .drop_rate = 0.0,
                           .qkv_bias = ck.metadata["qkv_bias"] == "1"};
      m.gpt = std::make_unique<nn::GPTModel>(config);
      nn::NamedTensors state = without_optimizer(ck.tensors);
      if (ck.metadata["tied_head"] == "1") {  // the head is the embedding: one tensor, saved once
        m.gpt->tie_weights();
        for (const auto& [name, t] : ck.tensors)
          if (name == "tok_emb.weight") state.emplace_back("out_head.weight", t);
      }
      m.gpt->load_state_dict(state);
      m.gpt->eval();
    } else {
      m.model = std::make_unique<nn::MiniSelfAttention>(nn::CharModelConfig{int64_t(chars.size()), dim, context, heads});
      m.model->load_state_dict(without_optimizer(ck.tensors));
      m.model->eval();
    }
  } catch (const std::invalid_argument& e) {
    throw nn::CheckpointError(fmt::format("{}: {}", path, e.what()));
  }
  m.vocab = Vocabulary(chars);
  m.tokenizer = tok;
  read_sample_prompt(m, ck);
  m.checkpoint = std::move(ck);
  return m;
}

std::unique_ptr<nn::LanguageModel> lora_model(const nn::LoraCheckpoint& adapters, const std::string& lora_path,
                                              int64_t heads, const std::string& gpt2_tokenizer_file) {
  const std::string& base = adapters.base_path;
  if (heads == 0 && adapters.checkpoint.metadata.count("heads")) heads = metadata_int(adapters.checkpoint, lora_path, "heads");
  std::unique_ptr<nn::LanguageModel> model;
  if (nn::is_hf_folder(base)) model = nn::load_hf_folder(base);
  else model = load_gpt2_weights(base, heads);
  if (!model) {  // a GPT or Llama of ours (a LoRA run's base may itself be a LoRA run: it goes on from its merged weights)
    LoadedModel ours = load_model(base, gpt2_tokenizer_file);
    if (ours.gpt) model = std::move(ours.gpt);
    else if (ours.llama) model = std::move(ours.llama);
    else throw nn::CheckpointError(fmt::format("{}: its base {} is not a GPT or a Llama", lora_path, base));
    if (!nn::lora_parameters(*model).empty()) nn::merge_lora(*model);
  }
  nn::apply_lora(*model, adapters, lora_path);
  model->eval();
  return model;
}

namespace {

// A LoRA run's base may be a LoRA run in turn, and so on; a file whose base is itself (or two that name
// each other) would go round until the stack overflowed. The fingerprint a file records rules that out
// (no file can hold its own hash), but files from before it was recorded have none.
constexpr int kMaxLoraChain = 16;

class LoraChainLink {
 public:
  explicit LoraChainLink(const std::string& path) {
    if (depth_ == kMaxLoraChain)
      throw nn::CheckpointError(fmt::format("{}: more than {} LoRA files, each the base of the one before (does a base "
                                            "name a file that names it?)",
                                            path, kMaxLoraChain));
    ++depth_;
  }
  ~LoraChainLink() { --depth_; }
  LoraChainLink(const LoraChainLink&) = delete;
  LoraChainLink& operator=(const LoraChainLink&) = delete;

 private:
  static thread_local inline int depth_ = 0;
};

// A LoRA fine-tune's checkpoint: its base, checked and loaded, with its adapters on; the run's tokenizer
// and sample prompt as its metadata records them.
LoadedModel load_lora_run(const std::string& path, nn::Checkpoint&& ck, const std::string& gpt2_tokenizer_file) {
  const LoraChainLink link(path);
  nn::LoraCheckpoint adapters = nn::load_lora(std::move(ck), path);
  if (adapters.base_path.empty()) throw nn::CheckpointError(fmt::format("{}: LoRA metadata has no 'base'", path));
  std::unique_ptr<nn::LanguageModel> model = lora_model(adapters, path, 0, gpt2_tokenizer_file);
  nn::Checkpoint& run = adapters.checkpoint;
  LoadedModel m;
  m.tokenizer = tokenizer_of_checkpoint(run.metadata, path, gpt2_tokenizer_file);
  if (m.tokenizer.is_char()) {
    try {
      m.vocab = Vocabulary(decode_utf8(run.metadata.count("vocab") ? run.metadata["vocab"] : ""));
    } catch (const UsageError&) {
      throw nn::CheckpointError(fmt::format("{}: vocabulary is not valid UTF-8", path));
    }
  }
  if (m.vocab_size() != model->vocab_size())
    throw nn::CheckpointError(fmt::format("{}: the run's tokenizer has {} tokens, its base {} a vocabulary of {}", path,
                                          m.vocab_size(), adapters.base_path, model->vocab_size()));
  if (dynamic_cast<nn::GPTModel*>(model.get())) m.gpt.reset(static_cast<nn::GPTModel*>(model.release()));
  else m.llama.reset(static_cast<nn::LlamaModel*>(model.release()));
  read_sample_prompt(m, run);
  m.checkpoint = std::move(run);
  return m;
}

}  // namespace

}  // namespace cli
