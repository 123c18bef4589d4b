// lora.cpp — choosing the adapted layers, and the adapters' checkpoints.
#include "nn/lora.h"

#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "nn/numbers.h"

namespace nn {

using namespace autograd;

namespace {

// The role of a Linear layer by the end of its path: GPT's names and Hugging Face's Llama names alike.
// "" for a layer LoRA does not adapt (the output head).
struct Role {
  const char* suffix;
  const char* role;
};
constexpr Role kRoles[] = {
    {".att.W_query", "q"},       {".att.W_key", "k"},         {".att.W_value", "v"},    {".att.out_proj", "o"},
    {".ff.layers.0", "up"},      {".ff.layers.2", "down"},  // GPT's expand and contract
    {".self_attn.q_proj", "q"},  {".self_attn.k_proj", "k"},  {".self_attn.v_proj", "v"}, {".self_attn.o_proj", "o"},
    {".mlp.gate_proj", "gate"},  {".mlp.up_proj", "up"},      {".mlp.down_proj", "down"},
};
const std::vector<std::string> kAttn = {"q", "k", "v", "o"}, kMlp = {"gate", "up", "down"};

std::string role_of(const std::string& path) {
  for (const Role& r : kRoles)
    if (path.ends_with(r.suffix)) return r.role;
  return "";
}

// Every Linear layer under `module` with its path ("model.layers.0.self_attn.q_proj"), in registration order.
void collect_linears(const Module& module, const std::string& path, std::vector<std::pair<std::string, Linear*>>& out) {
  for (const auto& [name, child] : module.named_children()) {
    const std::string at = path.empty() ? name : path + "." + name;
    if (auto* linear = dynamic_cast<Linear*>(child.get())) out.emplace_back(at, linear);
    else collect_linears(*child, at, out);
  }
}

// Whether `targets` (attn, mlp, or single roles) name the role.
bool targeted(const std::string& role, const std::vector<std::string>& targets) {
  for (const std::string& t : targets) {
    const bool group = (t == "attn" && std::count(kAttn.begin(), kAttn.end(), role)) ||
                       (t == "mlp" && std::count(kMlp.begin(), kMlp.end(), role));
    if (group || t == role) return true;
  }
  return false;
}

// The Linear layers that `targets` name, with their paths, in the model's order.
std::vector<std::pair<std::string, Linear*>> targeted_layers(const Module& model, const std::vector<std::string>& targets) {
  std::vector<std::pair<std::string, Linear*>> all, out;
  collect_linears(model, "", all);
  for (const auto& entry : all)
    if (const std::string role = role_of(entry.first); !role.empty() && targeted(role, targets)) out.push_back(entry);
  return out;
}

constexpr const char* kFormat = "scratchgrad-lora";
constexpr const char* kRunStatePrefix = "optimizer.";  // a training run's optimizer state, beside the adapters

}  // namespace

std::vector<std::string> parse_lora_targets(const std::string& text) {
  std::vector<std::string> targets;
  std::istringstream words(text);
  for (std::string word; std::getline(words, word, ',');) {
    const bool known = word == "attn" || word == "mlp" || std::count(kAttn.begin(), kAttn.end(), word) ||
                       std::count(kMlp.begin(), kMlp.end(), word);
    if (!known)
      throw std::invalid_argument(fmt::format("lora targets: '{}' is not a target (attn, mlp, or attn,mlp; or any of "
                                              "q,k,v,o,gate,up,down)",
                                              word));
    if (std::find(targets.begin(), targets.end(), word) == targets.end()) targets.push_back(word);
  }
  if (targets.empty()) throw std::invalid_argument("lora targets: none given (attn, mlp, or attn,mlp)");
  return targets;
}

NamedTensors add_lora(Module& model, const LoraConfig& config) {
  for (const std::string& target : config.targets) parse_lora_targets(target);  // each a known name
  const auto layers = targeted_layers(model, config.targets);
  if (layers.empty())
    throw std::invalid_argument(fmt::format("lora targets: the model has no {} layers", fmt::join(config.targets, ",")));
  for (Tensor& p : model.parameters()) p.requires_grad_(false);
  for (const auto& [path, layer] : layers) layer->add_lora(config.rank, config.alpha);
  return lora_parameters(model);
}

int64_t lora_rank_limit(const Module& model, const std::vector<std::string>& targets) {
  int64_t limit = 0;
  for (const auto& [path, layer] : targeted_layers(model, targets)) {
    const int64_t side = std::min(layer->weight.size(0), layer->weight.size(1));
    limit = limit == 0 ? side : std::min(limit, side);
  }
  return limit;
}

NamedTensors lora_parameters(const Module& model) {
  NamedTensors out;
  for (const auto& [name, t] : model.named_parameters())
    if (name.find(".lora.") != std::string::npos) out.emplace_back(name, t);
  return out;
}

LoraAdapters::LoraAdapters(const Module& model) {
  std::vector<std::pair<std::string, Linear*>> layers;
  collect_linears(model, "", layers);
  for (const auto& [path, layer] : layers)
    if (layer->lora) register_module(path + ".lora", layer->lora);
}

// ---- the base's fingerprint

FileFingerprint fingerprint_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw CheckpointError(fmt::format("{}: cannot open ({})", path, std::strerror(errno)));
  if (S_ISDIR(st.st_mode))  // a Hugging Face folder: its weights (one file, or the index that lists the shards)
    for (const char* weights : {"/model.safetensors", "/model.safetensors.index.json"})
      if (struct stat file {}; ::stat((path + weights).c_str(), &file) == 0) return fingerprint_file(path + weights);
  if (!S_ISREG(st.st_mode)) throw CheckpointError(fmt::format("{}: is not a regular file", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CheckpointError(fmt::format("{}: cannot open ({})", path, std::strerror(errno)));
  constexpr uint64_t kPrime = 0x100000001b3ull;
  uint64_t h = 0xcbf29ce484222325ull, bytes = 0;
  std::vector<char> chunk(size_t(1) << 20);  // a multiple of 8: only the file's last chunk has a tail
  while (in) {
    in.read(chunk.data(), std::streamsize(chunk.size()));
    const size_t got = size_t(in.gcount()), words = got / 8;
    for (size_t i = 0; i < words; ++i) {
      uint64_t w;
      std::memcpy(&w, chunk.data() + 8 * i, 8);
      if constexpr (std::endian::native == std::endian::big) w = __builtin_bswap64(w);  // the words are little-endian
      h = (h ^ w) * kPrime;
    }
    for (size_t i = 8 * words; i < got; ++i) h = (h ^ static_cast<unsigned char>(chunk[i])) * kPrime;
    bytes += got;
  }
  if (in.bad()) throw CheckpointError(fmt::format("{}: read failed", path));
  return {bytes, fmt::format("{:016x}", h)};
}

LoraBase lora_base(const std::string& path) { return {path, fingerprint_file(path)}; }

// ---- the adapters' checkpoint

void save_lora(const std::string& path, const Module& model, const LoraConfig& config, const LoraBase& base,
               const std::map<std::string, std::string>& run_metadata, const NamedTensors& run_tensors) {
  NamedTensors tensors = lora_parameters(model);
  if (tensors.empty()) throw std::invalid_argument("save_lora: the model has no adapters");
  tensors.insert(tensors.end(), run_tensors.begin(), run_tensors.end());
  std::map<std::string, std::string> metadata = run_metadata;
  metadata["format"] = kFormat;
  metadata["base"] = base.path;
  metadata["base_bytes"] = std::to_string(base.file.bytes);
  metadata["base_hash"] = base.file.hash;
  metadata["rank"] = std::to_string(config.rank);
  metadata["alpha"] = fmt::format("{:.17g}", config.alpha);
  metadata["targets"] = fmt::format("{}", fmt::join(config.targets, ","));
  save_safetensors(path, tensors, metadata);
}

namespace {

// The metadata field `key` of the adapters file `path` (CheckpointError if it has none).
const std::string& field(const Checkpoint& ck, const std::string& path, const std::string& key) {
  auto it = ck.metadata.find(key);
  if (it == ck.metadata.end()) throw CheckpointError(fmt::format("{}: LoRA metadata has no '{}'", path, key));
  return it->second;
}

// A field's value as a message quotes it: at most 40 characters of it.
std::string shown(const std::string& value) { return value.size() <= 40 ? value : value.substr(0, 40) + "..."; }

LoraConfig config_of(const Checkpoint& ck, const std::string& path) {
  LoraConfig config;
  const std::string &rank = field(ck, path, "rank"), &alpha = field(ck, path, "alpha");
  const std::optional<int64_t> r = parse_whole(rank, 1);
  if (!r) throw CheckpointError(fmt::format("{}: LoRA metadata 'rank' is '{}', not a whole number of at least 1", path, shown(rank)));
  const std::optional<double> a = parse_finite(alpha);
  if (!a || *a <= 0)  // as train's --lora-alpha: a scale of 0 or below undoes or flips the adapters' update
    throw CheckpointError(fmt::format("{}: LoRA metadata 'alpha' is '{}', not a number above 0 (the update is scaled "
                                      "by alpha / rank)",
                                      path, shown(alpha)));
  config.rank = *r, config.alpha = *a;
  try {
    config.targets = parse_lora_targets(field(ck, path, "targets"));
  } catch (const std::invalid_argument& e) {
    throw CheckpointError(fmt::format("{}: LoRA metadata 'targets': {}", path, e.what()));
  }
  return config;
}

// The base's fingerprint as save_lora recorded it; none in a file written before it was recorded.
std::optional<FileFingerprint> base_file_of(const Checkpoint& ck, const std::string& path) {
  const bool has_bytes = ck.metadata.count("base_bytes"), has_hash = ck.metadata.count("base_hash");
  if (!has_bytes && !has_hash) return std::nullopt;
  const std::string &bytes = field(ck, path, "base_bytes"), &hash = field(ck, path, "base_hash");
  const std::optional<int64_t> size = parse_whole(bytes, 0);
  const bool hex = hash.size() == 16 && hash.find_first_not_of("0123456789abcdef") == std::string::npos;
  if (!size || !hex)
    throw CheckpointError(fmt::format("{}: LoRA metadata 'base_bytes' '{}' and 'base_hash' '{}' are not a size and 16 "
                                      "hex digits (the file is damaged or was edited)",
                                      path, shown(bytes), shown(hash)));
  return FileFingerprint{uint64_t(*size), hash};
}

}  // namespace

LoraCheckpoint read_lora(Checkpoint&& ck, const std::string& path) {
  auto format = ck.metadata.find("format");
  if (format == ck.metadata.end() || format->second != kFormat)
    throw CheckpointError(fmt::format("{}: not a LoRA adapters file (metadata 'format' is not {})", path, kFormat));
  LoraCheckpoint out;
  out.config = config_of(ck, path);
  out.base_file = base_file_of(ck, path);
  out.base_path = ck.metadata.count("base") ? ck.metadata.at("base") : "";
  for (const auto& [name, t] : ck.tensors)
    if (!name.starts_with(kRunStatePrefix))
      check_finite(path, name, t, "the run that saved it diverged; retrain with a smaller --lr");
  out.checkpoint = std::move(ck);
  return out;
}

void check_lora_base(const LoraCheckpoint& adapters, const std::string& lora_path, const std::string& base_path) {
  if (!adapters.base_file) return;
  FileFingerprint now;
  try {
    now = fingerprint_file(base_path);
  } catch (const CheckpointError& e) {
    throw CheckpointError(fmt::format("{}: its base {}", lora_path, e.what()));
  }
  const FileFingerprint& then = *adapters.base_file;
  if (now != then)
    throw CheckpointError(fmt::format("{}: its base {} is not the file the adapters were trained on: that one had {} "
                                      "bytes and hash {}, this one has {} bytes and hash {}",
                                      lora_path, base_path, then.bytes, then.hash, now.bytes, now.hash));
}

LoraCheckpoint load_lora(Checkpoint&& ck, const std::string& path, const std::string& base) {
  LoraCheckpoint out = read_lora(std::move(ck), path);
  if (!base.empty()) out.base_path = base;
  if (!out.base_path.empty()) check_lora_base(out, path, out.base_path);
  return out;
}

LoraCheckpoint load_lora(const std::string& path, const std::string& base) {
  return load_lora(load_safetensors(path), path, base);
}

void apply_lora(Module& model, const LoraCheckpoint& adapters, const std::string& path) {
  // a rank above the smaller side of an adapted layer (GPT's: its width D) is no adapter of this model (and
  // a crafted rank would otherwise size the adapters add_lora allocates below)
  const int64_t limit = lora_rank_limit(model, adapters.config.targets);
  if (adapters.config.rank > limit)
    throw CheckpointError(fmt::format("{}: LoRA rank {} is larger than the adapted layers of its base (width {})", path,
                                      adapters.config.rank, limit));
  try {
    add_lora(model, adapters.config);
  } catch (const std::invalid_argument& e) {
    throw CheckpointError(fmt::format("{}: {}", path, e.what()));
  }
  std::map<std::string, Tensor> given;
  for (const auto& [name, t] : adapters.checkpoint.tensors)
    if (!name.starts_with(kRunStatePrefix)) given.emplace(name, t);
  NoGradGuard no_grad;
  for (auto& [name, target] : lora_parameters(model)) {
    auto it = given.find(name);
    if (it == given.end()) throw CheckpointError(fmt::format("{}: adapter tensor '{}' is missing", path, name));
    if (it->second.shape() != target.shape())
      throw CheckpointError(fmt::format("{}: adapter tensor '{}' has shape {}, the base model needs {}", path, name,
                                        it->second.shape_str(), target.shape_str()));
    Tensor(target).copy_(it->second.to(target.dtype()));
    given.erase(it);
  }
  if (!given.empty())
    throw CheckpointError(fmt::format("{}: unexpected tensor '{}' (not an adapter of this model)", path, given.begin()->first));
}

void merge_lora(Module& model) {
  for (const auto& [path, layer] : targeted_layers(model, {"attn", "mlp"}))
    if (layer->lora) layer->merge_lora();
}

}  // namespace nn
