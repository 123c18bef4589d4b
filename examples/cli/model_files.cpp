// model_files.cpp — reading a checkpoint of `train` back into a model, and the metadata written with one.
#include "model_files.h"

#include <fmt/format.h>

#include "finetune.h"
#include "guards.h"
#include "nn/lora.h"
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
  try {
    size_t used = 0;
    int64_t v = std::stoll(it->second, &used);
    if (used == it->second.size() && v > 0) return v;
  } catch (const std::exception&) {
  }
  throw nn::CheckpointError(fmt::format("{}: metadata '{}' is not a positive integer: '{}'", path, key, it->second));
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

}  // namespace

LoadedModel load_model(const std::string& path, const std::string& gpt2_tokenizer_file) {
  nn::Checkpoint ck = nn::load_safetensors(path);
  auto format = ck.metadata.find("format");
  if (format != ck.metadata.end() && format->second == "scratchgrad-lora")
    return load_lora_run(path, std::move(ck), gpt2_tokenizer_file);
  const bool gpt = format != ck.metadata.end() && format->second == "scratchgrad-gpt";
  if (format == ck.metadata.end() || (format->second != "scratchgrad-char-model" && !gpt))
    throw nn::CheckpointError(fmt::format("{}: not a scratchgrad checkpoint (metadata 'format' missing)", path));
  const RunTokenizer tok = gpt ? tokenizer_of_checkpoint(ck.metadata, path, gpt2_tokenizer_file) : RunTokenizer();
  std::u32string chars;
  if (tok.is_char()) {
    try {
      chars = decode_utf8(ck.metadata.count("vocab") ? ck.metadata["vocab"] : "");
    } catch (const UsageError&) {
      throw nn::CheckpointError(fmt::format("{}: vocabulary is not valid UTF-8", path));
    }
    if (chars.empty()) throw nn::CheckpointError(fmt::format("{}: metadata has an empty vocabulary", path));
    check_distinct_characters(chars, path);
  }
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

namespace {

// A LoRA fine-tune's checkpoint: the base file it names, loaded, with its adapters on; the run's tokenizer
// and sample prompt as its metadata records them.
LoadedModel load_lora_run(const std::string& path, nn::Checkpoint&& ck, const std::string& gpt2_tokenizer_file) {
  const nn::LoraCheckpoint adapters = nn::load_lora(path);
  std::unique_ptr<nn::GPTModel> model = load_gpt2_weights(adapters.base_path);
  if (!model) model = std::move(load_model(adapters.base_path, gpt2_tokenizer_file).gpt);
  if (!model) throw nn::CheckpointError(fmt::format("{}: its base {} is not a GPT", path, adapters.base_path));
  nn::apply_lora(*model, adapters, path);
  model->eval();
  LoadedModel m;
  m.tokenizer = tokenizer_of_checkpoint(ck.metadata, path, gpt2_tokenizer_file);
  if (m.tokenizer.is_char()) {
    try {
      m.vocab = Vocabulary(decode_utf8(ck.metadata.count("vocab") ? ck.metadata["vocab"] : ""));
    } catch (const UsageError&) {
      throw nn::CheckpointError(fmt::format("{}: vocabulary is not valid UTF-8", path));
    }
  }
  if (m.vocab_size() != model->cfg.vocab_size)
    throw nn::CheckpointError(fmt::format("{}: the run's tokenizer has {} tokens, its base {} a vocabulary of {}", path,
                                          m.vocab_size(), adapters.base_path, model->cfg.vocab_size));
  m.gpt = std::move(model);
  read_sample_prompt(m, ck);
  m.checkpoint = std::move(ck);
  return m;
}

}  // namespace

}  // namespace cli
