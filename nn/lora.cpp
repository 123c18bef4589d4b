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

// The Linear layers that `targets` name, in block order.
std::vector<Linear*> targeted_layers(const GPTModel& model, const std::vector<std::string>& targets) {
  std::vector<Linear*> out;
  for (const auto& block : *model.trf_blocks)
    for (const std::string& target : targets) {
      if (target == "attn")
        for (Linear* l : {block->att->W_query.get(), block->att->W_key.get(), block->att->W_value.get(),
                          block->att->out_proj.get()})
          out.push_back(l);
      else if (target == "mlp")
        for (Linear* l : {block->ff->expand.get(), block->ff->contract.get()}) out.push_back(l);
    }
  return out;
}

constexpr const char* kFormat = "scratchgrad-lora";
constexpr const char* kRunStatePrefix = "optimizer.";  // a training run's optimizer state, beside the adapters

}  // namespace

std::vector<std::string> parse_lora_targets(const std::string& text) {
  std::vector<std::string> targets;
  std::istringstream words(text);
  for (std::string word; std::getline(words, word, ',');) {
    if (word != "attn" && word != "mlp")
      throw std::invalid_argument(fmt::format("lora targets: '{}' is not a target (attn, mlp, or attn,mlp)", word));
    if (std::find(targets.begin(), targets.end(), word) == targets.end()) targets.push_back(word);
  }
  if (targets.empty()) throw std::invalid_argument("lora targets: none given (attn, mlp, or attn,mlp)");
  return targets;
}

NamedTensors add_lora(GPTModel& model, const LoraConfig& config) {
  for (const std::string& target : config.targets) parse_lora_targets(target);  // each a known name
  for (Tensor& p : model.parameters()) p.requires_grad_(false);
  for (Linear* layer : targeted_layers(model, config.targets)) layer->add_lora(config.rank, config.alpha);
  return lora_parameters(model);
}

NamedTensors lora_parameters(const Module& model) {
  NamedTensors out;
  for (const auto& [name, t] : model.named_parameters())
    if (name.find(".lora.") != std::string::npos) out.emplace_back(name, t);
  return out;
}

LoraAdapters::LoraAdapters(const GPTModel& model) {
  const char* attn[] = {"W_query", "W_key", "W_value", "out_proj"};
  for (size_t i = 0; i < model.trf_blocks->size(); ++i) {
    const TransformerBlock& block = (*model.trf_blocks)[i];
    const Linear* layers[] = {block.att->W_query.get(), block.att->W_key.get(), block.att->W_value.get(),
                              block.att->out_proj.get(), block.ff->expand.get(), block.ff->contract.get()};
    for (size_t k = 0; k < 6; ++k) {
      if (!layers[k]->lora) continue;
      const std::string path = k < 4 ? fmt::format("trf_blocks.{}.att.{}", i, attn[k])
                                     : fmt::format("trf_blocks.{}.ff.layers.{}", i, k == 4 ? 0 : 2);
      register_module(path + ".lora", layers[k]->lora);
    }
  }
}

// ---- the base's fingerprint

FileFingerprint fingerprint_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw CheckpointError(fmt::format("{}: cannot open ({})", path, std::strerror(errno)));
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

void save_lora(const std::string& path, const GPTModel& model, const LoraConfig& config, const LoraBase& base,
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

void apply_lora(GPTModel& model, const LoraCheckpoint& adapters, const std::string& path) {
  // every adapted layer is D → D, D → 4D or 4D → D: a rank above D is no adapter of this model (and a
  // crafted rank would otherwise size the adapters add_lora allocates below)
  if (adapters.config.rank > model.cfg.emb_dim)
    throw CheckpointError(fmt::format("{}: LoRA rank {} is larger than the adapted layers of its base (width {})", path,
                                      adapters.config.rank, model.cfg.emb_dim));
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

void merge_lora(GPTModel& model) {
  for (Linear* layer : targeted_layers(model, {"attn", "mlp"}))
    if (layer->lora) layer->merge_lora();
}

}  // namespace nn
