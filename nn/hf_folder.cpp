// hf_folder.cpp — config.json to a model, the weights into its parameters.
#include "nn/hf_folder.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "nn/atomic_file.h"
#include "nn/generation.h"
#include "nn/gpt2.h"
#include "nn/json_depth.h"
#include "nn/tokenizer/read_file.h"

namespace nn {

using namespace autograd;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr const char* kNotFinite = "the file is damaged: a model with it computes NaN";
// A config nests 3 levels (rope_scaling is an object in the config); the index 2.
constexpr size_t kMaxConfigDepth = 16;

const std::vector<std::string> kLlamaFamily = {"LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
                                               "MistralForCausalLM"};

// A JSON file of the folder, read whole and parsed, with its fields read by name: a missing field or one of
// another type is a CheckpointError naming the file and the field, never nlohmann's exception text.
class JsonConfig {
 public:
  explicit JsonConfig(const std::string& path) : path_(path) {
    std::string text;
    try {
      text = tokenizer::read_file(path, "the model folder's JSON file");
    } catch (const tokenizer::TokenizerError& e) {  // missing, a folder, a device, too large: its message names it
      throw CheckpointError(e.what());
    }
    if (json_nesting_depth(text, kMaxConfigDepth) > kMaxConfigDepth)
      fail(fmt::format("nests JSON more than {} levels deep (a model's config needs 3)", kMaxConfigDepth));
    try {
      root_ = json::parse(text);
    } catch (const json::parse_error& e) {
      fail(fmt::format("not valid JSON (at byte {})", e.byte));
    } catch (const json::exception&) {
      fail("not valid JSON (a number or a list too large to hold)");
    }
    if (!root_.is_object()) fail("is not a JSON object");
  }

  [[noreturn]] void fail(const std::string& problem) const { throw CheckpointError(fmt::format("{}: {}", path_, problem)); }
  [[noreturn]] void fail(const std::string& field, const std::string& problem) const {
    fail(fmt::format("field '{}' {}", field, problem));
  }

  const json& root() const { return root_; }
  // Present and not null (Hugging Face writes null for a field left at its default).
  bool has(const std::string& field) const { return root_.contains(field) && !root_[field].is_null(); }
  const json& at(const std::string& field) const {
    if (!has(field)) fail(field, "is missing");
    return root_[field];
  }

  int64_t whole(const std::string& field, int64_t low = 1) const { return whole_of(at(field), field, low); }
  int64_t whole(const std::string& field, int64_t low, int64_t fallback) const {
    return has(field) ? whole(field, low) : fallback;
  }
  double real(const std::string& field, double fallback) const { return has(field) ? real_of(at(field), field) : fallback; }
  bool flag(const std::string& field, bool fallback) const {
    if (!has(field)) return fallback;
    if (!root_[field].is_boolean()) fail(field, fmt::format("is {}, expected true or false", shown(root_[field])));
    return root_[field].get<bool>();
  }
  std::string text(const std::string& field, const std::string& fallback) const {
    if (!has(field)) return fallback;
    if (!root_[field].is_string()) fail(field, fmt::format("is {}, expected a string", shown(root_[field])));
    return root_[field].get<std::string>();
  }

  // A whole number of at least `low` (and within int64), read whole: 2.0 and "2" are refused.
  int64_t whole_of(const json& value, const std::string& field, int64_t low) const {
    const bool whole_number = value.is_number_unsigned() || value.is_number_integer();
    if (!whole_number || (value.is_number_unsigned() && value.get<uint64_t>() > uint64_t(INT64_MAX)) ||
        value.get<int64_t>() < low)
      fail(field, fmt::format("is {}, expected a whole number of at least {}", shown(value), low));
    return value.get<int64_t>();
  }
  double real_of(const json& value, const std::string& field) const {
    if (!value.is_number() || !std::isfinite(value.get<double>()))
      fail(field, fmt::format("is {}, expected a number", shown(value)));
    return value.get<double>();
  }

  // A value as a message shows it: its JSON, cut to 40 characters.
  static std::string shown(const json& value) {
    const std::string text = value.dump();
    return text.size() <= 40 ? text : text.substr(0, 40) + "...";
  }

 private:
  std::string path_;
  json root_;
};

std::string in_folder(const std::string& folder, const std::string& name) { return (fs::path(folder) / name).string(); }

// config.json's architecture: architectures[0] (the list Hugging Face writes has one name).
std::string architecture_of(const JsonConfig& config) {
  const json& list = config.at("architectures");
  if (!list.is_array() || list.size() != 1 || !list[0].is_string())
    config.fail("architectures", fmt::format("is {}, expected a list of one name", JsonConfig::shown(list)));
  const std::string name = list[0].get<std::string>();
  if (name != "GPT2LMHeadModel" && std::find(kLlamaFamily.begin(), kLlamaFamily.end(), name) == kLlamaFamily.end())
    config.fail("architectures", fmt::format("is [\"{}\"]: not read (read: LlamaForCausalLM, Qwen2ForCausalLM, "
                                             "Qwen3ForCausalLM, MistralForCausalLM, GPT2LMHeadModel)",
                                             name.substr(0, 60)));
  return name;
}

// The fields of models the Llama block here does not compute, each refused by name when in use.
void refuse_what_is_not_computed(const JsonConfig& config, const std::string& architecture, int64_t max_positions) {
  for (const char* experts : {"num_experts", "num_local_experts", "num_experts_per_tok", "n_routed_experts",
                              "moe_intermediate_size", "num_shared_experts"}) {
    const bool in_use = config.has(experts) && !(config.at(experts).is_number() && config.at(experts).get<double>() == 0);
    if (in_use) config.fail(experts, "is set: a mixture of experts is not read (one MLP a block is)");
  }
  const std::string act = config.text("hidden_act", "silu");
  if (act != "silu") config.fail("hidden_act", fmt::format("is \"{}\": only silu is read (the SwiGLU MLP)", act.substr(0, 40)));
  for (const char* norm : {"layer_norm_eps", "layer_norm_epsilon", "norm_epsilon", "norm_type"})
    if (config.has(norm)) config.fail(norm, "is set: another normalisation than RMSNorm is not read");
  if (config.flag("use_sliding_window", false))
    config.fail("use_sliding_window", "is true: attention within a sliding window is not read (every position sees all before it)");
  // Mistral's window: null for none; a config without the field has Hugging Face's default of 4096.
  if (architecture == "MistralForCausalLM" && !(config.root().contains("sliding_window") && !config.has("sliding_window"))) {
    const int64_t window = config.whole("sliding_window", 1, 4096);
    if (window < max_positions)
      config.fail("sliding_window", fmt::format("is {}, below max_position_embeddings {}: a sliding window is in use, "
                                                "which is not read",
                                                window, max_positions));
  }
  if (architecture != "Qwen2ForCausalLM" && config.flag("attention_bias", false))
    config.fail("attention_bias", "is true: biases on q, k, v and o_proj are not read (only Qwen2's on q, k, v)");
  if (config.flag("mlp_bias", false)) config.fail("mlp_bias", "is true: biases on the MLP's projections are not read");
  if (config.has("partial_rotary_factor") && config.real("partial_rotary_factor", 1.0) != 1.0)
    config.fail("partial_rotary_factor", "is not 1: rotating part of each head is not read");
}

// rope_scaling (or, in newer files, rope_parameters): none, "default", or "llama3" with its four numbers.
std::optional<RopeScaling> rope_scaling_of(const JsonConfig& config, const std::string& field) {
  if (!config.has(field)) return std::nullopt;
  const json& scaling = config.at(field);
  if (!scaling.is_object()) config.fail(field, fmt::format("is {}, expected an object", JsonConfig::shown(scaling)));
  const char* type_key = scaling.contains("rope_type") ? "rope_type" : "type";
  const std::string type_field = field + "." + type_key;
  const std::string type =
      scaling.contains(type_key) && scaling[type_key].is_string() ? scaling[type_key].get<std::string>() : "";
  if (type == "default") return std::nullopt;
  if (type != "llama3")
    config.fail(type_field, fmt::format("is {}: only \"llama3\" scaling (and none) is read",
                                        scaling.contains(type_key) ? JsonConfig::shown(scaling[type_key]) : "missing"));
  auto number = [&](const char* key) {
    if (!scaling.contains(key)) config.fail(field + "." + key, "is missing");
    return config.real_of(scaling[key], field + "." + key);
  };
  RopeScaling out;
  out.type = "llama3";
  out.factor = number("factor");
  out.low_freq_factor = number("low_freq_factor");
  out.high_freq_factor = number("high_freq_factor");
  if (!scaling.contains("original_max_position_embeddings"))
    config.fail(field + ".original_max_position_embeddings", "is missing");
  out.original_max_position_embeddings =
      config.whole_of(scaling["original_max_position_embeddings"], field + ".original_max_position_embeddings", 1);
  if (!(out.factor > 0) || !(out.low_freq_factor > 0) || !(out.high_freq_factor > out.low_freq_factor))
    config.fail(field, "needs factor > 0 and high_freq_factor > low_freq_factor > 0");
  return out;
}

LlamaConfig llama_config_of(const JsonConfig& config, const std::string& architecture) {
  LlamaConfig c;
  c.vocab_size = config.whole("vocab_size");
  c.hidden_size = config.whole("hidden_size");
  c.intermediate_size = config.whole("intermediate_size");
  c.num_hidden_layers = config.whole("num_hidden_layers");
  c.num_attention_heads = config.whole("num_attention_heads");
  c.num_key_value_heads = config.whole("num_key_value_heads", 1, c.num_attention_heads);  // none: every head its own
  // without the field: width / heads, except Qwen3, whose default (Hugging Face's Qwen3Config) is 128
  c.head_dim = config.whole("head_dim", 1, architecture == "Qwen3ForCausalLM" ? 128 : 0);
  c.max_position_embeddings = config.whole("max_position_embeddings");
  c.rms_norm_eps = config.real("rms_norm_eps", 1e-6);
  c.tie_word_embeddings = config.flag("tie_word_embeddings", false);
  c.attention_bias = architecture == "Qwen2ForCausalLM";  // Qwen2's q, k, v always have biases
  c.qk_norm = architecture == "Qwen3ForCausalLM";
  c.initializer_range = config.real("initializer_range", 0.02);
  refuse_what_is_not_computed(config, architecture, c.max_position_embeddings);
  if (config.has("rope_parameters")) {  // newer files keep rope_theta and the scaling together
    const json& rope = config.at("rope_parameters");
    c.rope_scaling = rope_scaling_of(config, "rope_parameters");
    c.rope_theta = rope.is_object() && rope.contains("rope_theta") ? config.real_of(rope["rope_theta"], "rope_parameters.rope_theta")
                                                                   : 10000.0;
  } else {
    c.rope_scaling = rope_scaling_of(config, "rope_scaling");
    c.rope_theta = config.real("rope_theta", 10000.0);
  }
  try {
    c.check();
  } catch (const std::invalid_argument& e) {  // "Llama config: num_attention_heads 9 is not a multiple of ..."
    config.fail(e.what());
  }
  return c;
}

GPTConfig gpt2_config_of(const JsonConfig& config, double& layer_norm_epsilon) {
  GPTConfig c;
  c.vocab_size = config.whole("vocab_size");
  c.context_length = config.whole("n_positions");
  c.emb_dim = config.whole("n_embd");
  c.n_heads = config.whole("n_head");
  c.n_layers = config.whole("n_layer");
  c.drop_rate = 0.0;
  c.qkv_bias = true;
  layer_norm_epsilon = config.real("layer_norm_epsilon", 1e-5);
  if (!(layer_norm_epsilon > 0)) config.fail("layer_norm_epsilon", "must be positive");
  const std::string act = config.text("activation_function", "gelu_new");
  if (act != "gelu_new")
    config.fail("activation_function", fmt::format("is \"{}\": only gelu_new (GELU's tanh form, GPT-2's) is read",
                                                   act.substr(0, 40)));
  if (config.has("n_inner") && config.whole("n_inner") != 4 * c.emb_dim)
    config.fail("n_inner", fmt::format("is {}: only GPT-2's 4 · n_embd ({}) is read", config.whole("n_inner"), 4 * c.emb_dim));
  if (!config.flag("scale_attn_weights", true)) config.fail("scale_attn_weights", "is false: GPT-2's scores are scaled");
  if (config.flag("scale_attn_by_inverse_layer_idx", false))
    config.fail("scale_attn_by_inverse_layer_idx", "is true: scaling the scores by layer is not read");
  if (config.flag("add_cross_attention", false)) config.fail("add_cross_attention", "is true: cross-attention is not read");
  if (c.emb_dim % c.n_heads != 0)
    config.fail("n_head", fmt::format("is {}, which does not divide n_embd {}", c.n_heads, c.emb_dim));
  return c;
}

// eos_token_id: one id, or a list of them, each within the vocabulary; null or absent: none.
std::vector<int64_t> eos_ids_of(const JsonConfig& file, int64_t vocab) {
  std::vector<int64_t> ids;
  if (!file.has("eos_token_id")) return ids;
  const json& eos = file.at("eos_token_id");
  if (eos.is_array()) {
    for (size_t i = 0; i < eos.size(); ++i) ids.push_back(file.whole_of(eos[i], fmt::format("eos_token_id[{}]", i), 0));
  } else {
    ids.push_back(file.whole_of(eos, "eos_token_id", 0));
  }
  for (int64_t id : ids)
    if (id >= vocab) file.fail("eos_token_id", fmt::format("holds {}, outside the vocabulary of {}", id, vocab));
  return ids;
}

// Where the weights are: model.safetensors, or model.safetensors.index.json's shards (plain file names in
// the folder; a path elsewhere is refused).
void find_weight_files(HfFolder& folder) {
  std::error_code ec;
  const std::string single = in_folder(folder.path, "model.safetensors");
  const std::string index_path = in_folder(folder.path, "model.safetensors.index.json");
  if (fs::exists(single, ec)) {
    folder.weight_files = {single};
    return;
  }
  if (!fs::exists(index_path, ec))
    throw CheckpointError(fmt::format("{}: has neither model.safetensors nor model.safetensors.index.json (only "
                                      "safetensors weights are read, not pytorch_model.bin)",
                                      folder.path));
  const JsonConfig index(index_path);
  const json& map = index.at("weight_map");
  if (!map.is_object() || map.empty()) index.fail("weight_map", "is not an object naming each tensor's shard");
  std::set<std::string> shards;
  for (const auto& [tensor, shard] : map.items()) {
    if (!shard.is_string()) index.fail("weight_map", fmt::format("gives {} for '{}', expected a file name",
                                                                 JsonConfig::shown(shard), tensor.substr(0, 60)));
    const std::string name = shard.get<std::string>();
    if (name.empty() || name.find('/') != std::string::npos || name.find('\\') != std::string::npos || name == "." ||
        name == "..")
      index.fail("weight_map", fmt::format("puts '{}' in \"{}\", not a file of the folder", tensor.substr(0, 60),
                                           name.substr(0, 60)));
    folder.shard_of[tensor] = in_folder(folder.path, name);
    shards.insert(folder.shard_of[tensor]);
  }
  folder.weight_files.assign(shards.begin(), shards.end());
}

// A config whose model is larger than its weight files could hold (2 bytes a value at the least) is refused
// before the model is built: a crafted vocab_size of 10^12 must not become a 4 TB allocation. The count is
// taken in double, which cannot overflow.
void check_weights_can_hold(const HfFolder& folder, const JsonConfig& config) {
  const LlamaConfig& c = folder.llama;
  const double d = double(c.head_size()), hidden = double(c.hidden_size);
  const double block = hidden * d * (2.0 * double(c.num_attention_heads) + 2.0 * double(c.num_key_value_heads)) +
                       3.0 * hidden * double(c.intermediate_size);
  const double values = double(c.vocab_size) * hidden * (c.tie_word_embeddings ? 1 : 2) + double(c.num_hidden_layers) * block;
  double bytes = 0;
  for (const std::string& file : folder.weight_files) {
    std::error_code ec;
    const auto size = fs::file_size(file, ec);
    if (!ec) bytes += double(size);
  }
  if (2 * values > bytes)
    config.fail(fmt::format("describes a model of {:.0f} numbers, more than its weights ({:.0f} bytes) hold", values, bytes));
}

}  // namespace

bool is_hf_folder(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::exists(fs::path(path) / "config.json", ec);
}

HfFolder read_hf_folder(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) throw CheckpointError(fmt::format("{}: not a folder", path));
  HfFolder folder;
  folder.path = path;
  const JsonConfig config(in_folder(path, "config.json"));
  folder.architecture = architecture_of(config);
  int64_t vocab = 0;
  if (folder.is_gpt2()) {
    folder.gpt2 = gpt2_config_of(config, folder.layer_norm_epsilon);
    vocab = folder.gpt2.vocab_size;
  } else {
    folder.llama = llama_config_of(config, folder.architecture);
    vocab = folder.llama.vocab_size;
  }
  folder.eos_token_ids = eos_ids_of(config, vocab);
  const std::string generation = in_folder(path, "generation_config.json");
  if (fs::exists(generation, ec)) {
    const JsonConfig generation_config(generation);
    if (generation_config.has("eos_token_id")) folder.eos_token_ids = eos_ids_of(generation_config, vocab);
  }
  find_weight_files(folder);
  if (!folder.is_gpt2()) check_weights_can_hold(folder, config);
  return folder;
}

namespace {

// Reads a Llama-family folder's tensors into the model's parameters, by name: each is checked (a name the
// model has, its shape, a floating-point dtype, the shard the index says, read once) before any data of
// its file is read, and its values once read.
class LlamaWeights {
 public:
  LlamaWeights(LlamaModel& model, const HfFolder& folder) : folder_(folder), tied_(model.cfg.tie_word_embeddings) {
    for (const auto& [name, tensor] : model.named_parameters()) parameters_.emplace(name, tensor);
    for (const auto& [name, shard] : folder.shard_of)
      if (!parameters_.count(name) && !tolerated(name))
        index_fail(fmt::format("lists tensor '{}', which a {} of this config does not have", name.substr(0, 60),
                               folder.architecture));
    if (!folder.shard_of.empty())
      for (const auto& [name, tensor] : parameters_)
        if (!folder.shard_of.count(name))
          index_fail(fmt::format("does not list tensor '{}' {}", name, shape_to_string(tensor.shape())));
  }

  // keep_bfloat16: a model whose matrices are bfloat16 (keep_weights_in_bfloat16) reads BF16 tensors as they
  // are stored; F16 ones are widened, then rounded into such a matrix.
  void read(const std::string& file, bool keep_bfloat16) {
    read_safetensors(file, {.on_header = [&](const std::vector<TensorHeader>& headers,
                                             const std::map<std::string, std::string>&) { check(file, headers); },
                            .destination = [&](const TensorHeader& h) { return destination(h); },
                            .on_tensor = [&](const TensorHeader& h, const Tensor& t) { put(file, h, t); },
                            .widen_half_floats = true,
                            .keep_bfloat16 = keep_bfloat16});
  }

  void check_every_tensor_read() const {
    for (const auto& [name, tensor] : parameters_)
      if (!read_.count(name))
        throw CheckpointError(fmt::format("{}: tensor '{}' {} is missing (config.json describes a {} that has it)",
                                          folder_.weight_files.size() == 1 ? folder_.weight_files[0] : folder_.path, name,
                                          shape_to_string(tensor.shape()), folder_.architecture));
  }

 private:
  // Tensors some files carry that the model does not use: the tied head's copy, RoPE's inverse frequencies
  // (computed from the config here).
  bool tolerated(const std::string& name) const {
    return (tied_ && name == "lm_head.weight") || name.ends_with(".rotary_emb.inv_freq");
  }

  void check(const std::string& file, const std::vector<TensorHeader>& headers) {
    auto fail = [&](const std::string& problem) { throw CheckpointError(fmt::format("{}: {}", file, problem)); };
    for (const TensorHeader& h : headers) {
      const auto it = parameters_.find(h.name);
      if (it == parameters_.end()) {
        if (tolerated(h.name)) continue;
        fail(fmt::format("unexpected tensor {} {} (a {} of config.json's shape has no such tensor)", quoted_name(h.name),
                         shape_to_string(h.shape), folder_.architecture));
      }
      if (h.shape != it->second.shape())
        fail(fmt::format("tensor '{}' has shape {}, expected {} (from config.json)", h.name, shape_to_string(h.shape),
                         shape_to_string(it->second.shape())));
      if (!is_floating(h.dtype))
        fail(fmt::format("tensor '{}' has dtype {}, expected floating point (BF16, F16, F32)", h.name, h.file_dtype));
      if (!folder_.shard_of.empty() && folder_.shard_of.at(h.name) != file)
        fail(fmt::format("holds tensor '{}', which the index puts in {}", h.name, folder_.shard_of.at(h.name)));
      if (read_.count(h.name)) fail(fmt::format("tensor '{}' was read already from another file", h.name));
    }
  }

  // A tensor of its parameter's dtype (float32, BF16 and F16 widened; or bfloat16 into a bfloat16 matrix)
  // goes straight into the parameter; any other into a buffer of its own, converted by put.
  Tensor destination(const TensorHeader& h) const {
    const auto it = parameters_.find(h.name);
    return it != parameters_.end() && h.dtype == it->second.dtype() ? it->second : Tensor();
  }

  void put(const std::string& file, const TensorHeader& h, const Tensor& t) {
    const auto it = parameters_.find(h.name);
    if (it == parameters_.end()) return;  // tolerated, dropped
    if (!t.same(it->second)) {
      NoGradGuard no_grad;
      Tensor(it->second).copy_(t.to(it->second.dtype()));
    }
    check_finite(file, h.name, it->second, kNotFinite);
    read_.insert(h.name);
  }

  [[noreturn]] void index_fail(const std::string& problem) const {
    throw CheckpointError(fmt::format("{}: {}", in_folder(folder_.path, "model.safetensors.index.json"), problem));
  }

  const HfFolder& folder_;
  bool tied_;
  std::map<std::string, Tensor> parameters_;
  std::set<std::string> read_;
};

}  // namespace

std::unique_ptr<LlamaModel> load_llama_folder(const HfFolder& folder, DType weights_dtype) {
  if (folder.is_gpt2()) throw std::invalid_argument("load_llama_folder: the folder holds GPT-2 (load_gpt2_folder)");
  if (weights_dtype != DType::Float32 && weights_dtype != DType::BFloat16)
    throw std::invalid_argument("load_llama_folder: the weights are kept in float32 or bfloat16");
  std::unique_ptr<LlamaModel> model;
  {
    SkipInitGuard every_value_is_read_below;
    model = std::make_unique<LlamaModel>(folder.llama);
  }
  const bool bf16 = weights_dtype == DType::BFloat16;
  if (bf16) keep_weights_in_bfloat16(*model);  // before reading: no float32 copy of the matrices is filled
  LlamaWeights weights(*model, folder);
  for (const std::string& file : folder.weight_files) weights.read(file, bf16);
  weights.check_every_tensor_read();
  model->eval();
  return model;
}

std::unique_ptr<GPTModel> load_gpt2_folder(const HfFolder& folder) {
  if (!folder.is_gpt2()) throw std::invalid_argument("load_gpt2_folder: the folder does not hold GPT-2");
  if (!folder.shard_of.empty())
    throw CheckpointError(fmt::format("{}: a GPT-2 in shards is not read (only one model.safetensors)", folder.path));
  const std::string file = folder.weight_files.at(0);
  std::unique_ptr<GPTModel> model = load_gpt2(file, folder.gpt2.n_heads);
  const std::string config = in_folder(folder.path, "config.json");
  auto agree = [&](const char* field, int64_t in_config, int64_t in_file) {
    if (in_config != in_file)
      throw CheckpointError(fmt::format("{}: field '{}' is {}, but {} holds {}", config, field, in_config, file, in_file));
  };
  agree("vocab_size", folder.gpt2.vocab_size, model->cfg.vocab_size);
  agree("n_positions", folder.gpt2.context_length, model->cfg.context_length);
  agree("n_embd", folder.gpt2.emb_dim, model->cfg.emb_dim);
  agree("n_layer", folder.gpt2.n_layers, model->cfg.n_layers);
  model->final_norm->eps = folder.layer_norm_epsilon;
  for (const auto& block : *model->trf_blocks) block->norm1->eps = block->norm2->eps = folder.layer_norm_epsilon;
  return model;
}

std::unique_ptr<LanguageModel> load_hf_folder(const std::string& path) {
  const HfFolder folder = read_hf_folder(path);
  if (folder.is_gpt2()) return load_gpt2_folder(folder);
  return load_llama_folder(folder);
}

// ---- writing a folder

namespace {

// config.json as Hugging Face writes it for these architectures: the fields read_hf_folder reads.
json config_json(const LlamaConfig& c, const std::string& architecture) {
  static const std::map<std::string, std::string> model_type = {{"LlamaForCausalLM", "llama"},
                                                                {"Qwen2ForCausalLM", "qwen2"},
                                                                {"Qwen3ForCausalLM", "qwen3"},
                                                                {"MistralForCausalLM", "mistral"}};
  json config = {{"architectures", {architecture}}, {"model_type", model_type.at(architecture)},
                 {"vocab_size", c.vocab_size}, {"hidden_size", c.hidden_size},
                 {"intermediate_size", c.intermediate_size}, {"num_hidden_layers", c.num_hidden_layers},
                 {"num_attention_heads", c.num_attention_heads}, {"num_key_value_heads", c.num_key_value_heads},
                 {"head_dim", c.head_size()}, {"max_position_embeddings", c.max_position_embeddings},
                 {"rms_norm_eps", c.rms_norm_eps}, {"rope_theta", c.rope_theta}, {"hidden_act", "silu"},
                 {"tie_word_embeddings", c.tie_word_embeddings}, {"initializer_range", c.initializer_range},
                 {"torch_dtype", "float32"}, {"rope_scaling", nullptr}};
  if (c.rope_scaling)
    config["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", c.rope_scaling->factor},
                              {"low_freq_factor", c.rope_scaling->low_freq_factor},
                              {"high_freq_factor", c.rope_scaling->high_freq_factor},
                              {"original_max_position_embeddings", c.rope_scaling->original_max_position_embeddings}};
  if (architecture == "Qwen2ForCausalLM" || architecture == "Qwen3ForCausalLM") config["use_sliding_window"] = false;
  return config;
}

void write_json_file(const std::string& path, const json& value) {
  try {
    write_file_atomically(path, value.dump(2) + "\n");
  } catch (const FileWriteError& e) {
    throw CheckpointError(e.what());
  }
}

}  // namespace

void save_llama_folder(const LlamaModel& model, const std::string& path, const std::string& architecture,
                       const std::vector<int64_t>& eos_token_ids) {
  if (std::find(kLlamaFamily.begin(), kLlamaFamily.end(), architecture) == kLlamaFamily.end())
    throw std::invalid_argument(fmt::format("save_llama_folder: '{}' is not an architecture of the Llama family", architecture));
  // What each architecture implies must be what the model computes, or the folder would read back as another.
  const LlamaConfig& c = model.cfg;
  if (c.attention_bias != (architecture == "Qwen2ForCausalLM") || c.qk_norm != (architecture == "Qwen3ForCausalLM"))
    throw std::invalid_argument(fmt::format("save_llama_folder: a model with{} q/k/v biases and with{} q/k norms is not a {}",
                                            c.attention_bias ? "" : "out", c.qk_norm ? "" : "out", architecture));
  std::error_code ec;
  fs::create_directories(path, ec);
  if (!fs::is_directory(path, ec)) throw CheckpointError(fmt::format("{}: cannot create the folder", path));
  NamedTensors weights;
  for (const auto& [name, tensor] : model.named_parameters()) {
    if (name.find(".lora.") != std::string::npos)
      throw std::invalid_argument(fmt::format("save_llama_folder: the model has LoRA adapters ({}): merge them first", name));
    weights.emplace_back(name, tensor.detach());
  }
  save_safetensors(in_folder(path, "model.safetensors"), weights, {{"format", "pt"}});
  write_json_file(in_folder(path, "config.json"), config_json(c, architecture));
  if (!eos_token_ids.empty())
    write_json_file(in_folder(path, "generation_config.json"),
                    {{"eos_token_id", eos_token_ids.size() == 1 ? json(eos_token_ids[0]) : json(eos_token_ids)}});
}

}  // namespace nn
