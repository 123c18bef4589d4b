// gpt2.cpp — GPT-2's Hugging Face layout to the book's GPTModel and back.
#include "nn/gpt2.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace nn {

using namespace autograd;

namespace {

constexpr const char* kPrefix = "transformer.";

std::string without_prefix(const std::string& name) {
  return name.starts_with(kPrefix) ? name.substr(std::string(kPrefix).size()) : name;
}

// The checkpoint's tensors by their GPT-2 name, each taken at most once; what was never taken is reported.
class Gpt2Tensors {
 public:
  // Takes the checkpoint's tensors: each is dropped once copied into the model, so a load holds about one
  // model's worth of memory, not two.
  Gpt2Tensors(Checkpoint&& ck, const std::string& path) : path_(path) {
    for (auto& [name, t] : ck.tensors) by_name_[without_prefix(name)] = std::move(t);
    ck.tensors.clear();
  }

  bool has(const std::string& name) const { return by_name_.count(name) > 0; }
  Tensor find(const std::string& name) const { return has(name) ? by_name_.at(name) : Tensor(); }
  // The tensor `name` (checked by take before), which this object no longer holds.
  Tensor release(const std::string& name) { return std::exchange(by_name_.at(name), Tensor()); }

  // The tensor `name`, which must have `shape`; `why` says where the expected shape comes from.
  Tensor take(const std::string& name, const Shape& shape, const std::string& why) {
    auto it = by_name_.find(name);
    if (it == by_name_.end()) fail(fmt::format("GPT-2 tensor '{}' is missing (expected shape {})", name, shape_to_string(shape)));
    const Tensor& t = it->second;
    if (t.shape() != shape)
      fail(fmt::format("GPT-2 tensor '{}' has shape {}, expected {} ({})", name, t.shape_str(), shape_to_string(shape), why));
    if (t.dtype() != DType::Float32 && t.dtype() != DType::Float64)
      fail(fmt::format("GPT-2 tensor '{}' has dtype {}, expected floating point", name, dtype_name(t.dtype())));
    taken_.insert(name);
    return t;
  }

  // Everything not taken must be one of the tensors GPT-2 files carry beside the weights.
  void check_nothing_else() const {
    static const std::regex tolerated(R"(h\.[0-9]+\.attn\.(bias|masked_bias)|lm_head\.weight)");
    for (const auto& [name, t] : by_name_)
      if (!taken_.count(name) && !std::regex_match(name, tolerated))
        fail(fmt::format("unexpected tensor '{}' {} (not part of GPT-2)", name, t.shape_str()));
  }

  [[noreturn]] void fail(const std::string& problem) const { throw CheckpointError(fmt::format("{}: {}", path_, problem)); }

  // The block indices N of every "h.N." name.
  std::set<int64_t> block_indices() const {
    static const std::regex block(R"(h\.([0-9]{1,6})\..*)");
    std::set<int64_t> out;
    std::smatch m;
    for (const auto& [name, t] : by_name_)
      if (std::regex_match(name, m, block)) out.insert(std::stoll(m[1]));
    return out;
  }

 private:
  std::string path_;
  std::map<std::string, Tensor> by_name_;
  std::set<std::string> taken_;
};

// dst ← src (dst's shape), without recording a graph.
void assign(const Tensor& dst, const Tensor& src) {
  NoGradGuard no_grad;
  Tensor(dst).copy_(src.to(dst.dtype()));
}

GPTConfig config_from_shapes(const Gpt2Tensors& file, const std::map<std::string, std::string>& metadata,
                             int64_t n_heads) {
  const Tensor wte = file.find("wte.weight"), wpe = file.find("wpe.weight");
  if (!wte.defined()) file.fail("not a GPT-2 checkpoint: it has no 'wte.weight' (token embedding)");
  if (!wpe.defined()) file.fail("GPT-2 tensor 'wpe.weight' (position embedding) is missing");
  if (wte.dim() != 2 || wte.size(0) < 1 || wte.size(1) < 1)
    file.fail(fmt::format("GPT-2 tensor 'wte.weight' has shape {}, expected [vocab, emb_dim]", wte.shape_str()));
  if (wpe.dim() != 2 || wpe.size(0) < 1)
    file.fail(fmt::format("GPT-2 tensor 'wpe.weight' has shape {}, expected [context, {}]", wpe.shape_str(), wte.size(1)));
  GPTConfig cfg;
  cfg.vocab_size = wte.size(0);
  cfg.emb_dim = wte.size(1);
  cfg.context_length = wpe.size(0);
  cfg.drop_rate = 0.0;
  cfg.qkv_bias = true;

  const std::set<int64_t> blocks = file.block_indices();
  if (blocks.empty()) file.fail("GPT-2 checkpoint has no transformer blocks (no 'h.0.' tensors)");
  cfg.n_layers = *blocks.rbegin() + 1;  // a gap (h.0, h.2) shows up as h.1's missing tensors

  if (n_heads <= 0) {
    auto given = metadata.find("n_head");
    if (given != metadata.end()) {
      try {
        n_heads = std::stoll(given->second);
      } catch (const std::exception&) {
        file.fail(fmt::format("metadata 'n_head' is not a number: '{}'", given->second));
      }
    } else {
      n_heads = cfg.emb_dim / kGpt2HeadDim;
    }
  }
  if (n_heads <= 0 || cfg.emb_dim % n_heads != 0)
    file.fail(fmt::format("cannot split emb_dim {} into {} heads (GPT-2's heads are {} wide; give the head count)",
                          cfg.emb_dim, n_heads, kGpt2HeadDim));
  cfg.n_heads = n_heads;
  return cfg;
}

// Every tensor of a GPT-2 of `cfg`, with its shape in the file.
std::vector<std::pair<std::string, Shape>> gpt2_layout(const GPTConfig& cfg) {
  const int64_t D = cfg.emb_dim;
  std::vector<std::pair<std::string, Shape>> out{{"wte.weight", {cfg.vocab_size, D}}, {"wpe.weight", {cfg.context_length, D}}};
  for (int64_t i = 0; i < cfg.n_layers; ++i) {
    const std::string h = fmt::format("h.{}.", i);
    for (auto [name, shape] : std::vector<std::pair<std::string, Shape>>{
             {"ln_1.weight", {D}}, {"ln_1.bias", {D}}, {"attn.c_attn.weight", {D, 3 * D}}, {"attn.c_attn.bias", {3 * D}},
             {"attn.c_proj.weight", {D, D}}, {"attn.c_proj.bias", {D}}, {"ln_2.weight", {D}}, {"ln_2.bias", {D}},
             {"mlp.c_fc.weight", {D, 4 * D}}, {"mlp.c_fc.bias", {4 * D}}, {"mlp.c_proj.weight", {4 * D, D}},
             {"mlp.c_proj.bias", {D}}})
      out.emplace_back(h + name, shape);
  }
  out.emplace_back("ln_f.weight", Shape{D});
  out.emplace_back("ln_f.bias", Shape{D});
  return out;
}

}  // namespace

bool is_gpt2_checkpoint(const Checkpoint& checkpoint) {
  for (const auto& [name, t] : checkpoint.tensors)
    if (without_prefix(name) == "wte.weight") return true;
  return false;
}

std::unique_ptr<GPTModel> gpt2_from_checkpoint(const Checkpoint& ck, const std::string& path, int64_t n_heads) {
  return gpt2_from_checkpoint(Checkpoint(ck), path, n_heads);
}

std::unique_ptr<GPTModel> gpt2_from_checkpoint(Checkpoint&& ck, const std::string& path, int64_t n_heads) {
  const std::map<std::string, std::string> metadata = ck.metadata;
  Gpt2Tensors file(std::move(ck), path);
  const GPTConfig cfg = config_from_shapes(file, metadata, n_heads);
  const int64_t D = cfg.emb_dim;
  // Every name and shape is checked before the model is built, so a bad file costs no allocation.
  const std::string from_wte = fmt::format("vocab {} and emb_dim {} from wte.weight, context {} from wpe.weight",
                                           cfg.vocab_size, D, cfg.context_length);
  for (const auto& [name, shape] : gpt2_layout(cfg)) file.take(name, shape, from_wte);
  if (file.has("lm_head.weight")) file.take("lm_head.weight", {cfg.vocab_size, D}, "tied to wte.weight");
  file.check_nothing_else();

  std::unique_ptr<GPTModel> model;
  {
    SkipInitGuard every_value_is_loaded_below;
    model = std::make_unique<GPTModel>(cfg);
  }
  assign(model->tok_emb->weight, file.release("wte.weight"));
  assign(model->pos_emb->weight, file.release("wpe.weight"));
  for (int64_t i = 0; i < cfg.n_layers; ++i) {
    TransformerBlock& block = (*model->trf_blocks)[size_t(i)];
    const std::string h = fmt::format("h.{}.", i);
    auto get = [&](const std::string& name) { return file.release(h + name); };
    assign(block.norm1->scale, get("ln_1.weight"));
    assign(block.norm1->shift, get("ln_1.bias"));
    // Conv1D keeps [in, out]: q, k, v are column blocks of c_attn, and every weight is transposed.
    const Tensor qkv = get("attn.c_attn.weight"), qkv_bias = get("attn.c_attn.bias");
    MultiHeadAttention& att = *block.att;
    const std::shared_ptr<Linear> qkv_layers[3] = {att.W_query, att.W_key, att.W_value};
    for (int64_t part = 0; part < 3; ++part) {
      assign(qkv_layers[part]->weight, qkv.narrow(1, part * D, D).t());
      assign(qkv_layers[part]->bias, qkv_bias.narrow(0, part * D, D));
    }
    assign(att.out_proj->weight, get("attn.c_proj.weight").t());
    assign(att.out_proj->bias, get("attn.c_proj.bias"));
    assign(block.norm2->scale, get("ln_2.weight"));
    assign(block.norm2->shift, get("ln_2.bias"));
    assign(block.ff->expand->weight, get("mlp.c_fc.weight").t());
    assign(block.ff->expand->bias, get("mlp.c_fc.bias"));
    assign(block.ff->contract->weight, get("mlp.c_proj.weight").t());
    assign(block.ff->contract->bias, get("mlp.c_proj.bias"));
  }
  assign(model->final_norm->scale, file.release("ln_f.weight"));
  assign(model->final_norm->shift, file.release("ln_f.bias"));
  model->tie_weights();
  model->eval();
  return model;
}

std::unique_ptr<GPTModel> load_gpt2(const std::string& path, int64_t n_heads) {
  return gpt2_from_checkpoint(load_safetensors(path), path, n_heads);  // the rvalue overload: one model's memory
}

// ---- llm.c's format

namespace {

constexpr int32_t kLlmcMagic = 20240326, kLlmcVersion = 3;

}  // namespace

bool is_llmc_checkpoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  int32_t magic = 0;
  return in.read(reinterpret_cast<char*>(&magic), sizeof magic) && magic == kLlmcMagic;
}

std::unique_ptr<GPTModel> load_llmc_gpt2(const std::string& path) {
  auto fail = [&](const std::string& problem) -> void { throw CheckpointError(fmt::format("{}: {}", path, problem)); };
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(fmt::format("cannot open ({})", std::strerror(errno)));
  int32_t header[256];
  if (!in.read(reinterpret_cast<char*>(header), sizeof header))
    fail("not an llm.c checkpoint: shorter than its 1024-byte header");
  if (header[0] != kLlmcMagic) fail(fmt::format("not an llm.c checkpoint: magic {}, expected {}", header[0], kLlmcMagic));
  if (header[1] != kLlmcVersion)
    fail(fmt::format("llm.c checkpoint version {}; only version {} (float32) is read", header[1], kLlmcVersion));
  const int64_t T = header[2], V = header[3], L = header[4], H = header[5], C = header[6], Vp = header[7];
  if (T < 1 || V < 1 || L < 1 || H < 1 || C < 1 || Vp < V || C % H != 0)
    fail(fmt::format("llm.c header is inconsistent: context {}, vocab {}, layers {}, heads {}, width {}, padded vocab {}",
                     T, V, L, H, C, Vp));
  // The file's length must be what the header implies, before anything that size is allocated.
  const unsigned __int128 floats = (unsigned __int128)Vp * C + (unsigned __int128)T * C +
                                   (unsigned __int128)L * (12 * (unsigned __int128)C * C + 13 * (unsigned __int128)C) +
                                   2 * (unsigned __int128)C;
  in.seekg(0, std::ios::end);
  const auto file_size = (unsigned __int128)std::max<std::streamoff>(in.tellg(), 0);
  if (file_size != sizeof header + 4 * floats)
    fail(fmt::format("the llm.c header (context {}, vocab {}, padded {}, layers {}, width {}) implies {} bytes, the file has {}",
                     T, V, Vp, L, C, uint64_t(sizeof header + 4 * floats), uint64_t(file_size)));
  in.seekg(sizeof header, std::ios::beg);
  auto read = [&](const Shape& shape) {
    Tensor t = empty(shape);
    if (!in.read(static_cast<char*>(t.raw_data()), std::streamsize(t.numel() * 4))) fail("read failed");
    return t;
  };

  GPTConfig cfg{.vocab_size = V, .context_length = T, .emb_dim = C, .n_heads = H, .n_layers = L, .drop_rate = 0.0,
                .qkv_bias = true};
  std::unique_ptr<GPTModel> model;
  {
    SkipInitGuard every_value_is_loaded_below;
    model = std::make_unique<GPTModel>(cfg);
  }
  assign(model->tok_emb->weight, read({Vp, C}).narrow(0, 0, V));  // the padding rows are dropped
  assign(model->pos_emb->weight, read({T, C}));
  auto block = [&](int64_t i) -> TransformerBlock& { return (*model->trf_blocks)[size_t(i)]; };
  // each kind of tensor for every layer in turn, in nn.Linear's layout: no transposes
  const Tensor ln1w = read({L, C}), ln1b = read({L, C}), qkvw = read({L, 3 * C, C}), qkvb = read({L, 3 * C});
  for (int64_t i = 0; i < L; ++i) {
    assign(block(i).norm1->scale, ln1w[i]);
    assign(block(i).norm1->shift, ln1b[i]);
    MultiHeadAttention& att = *block(i).att;
    const std::shared_ptr<Linear> qkv_layers[3] = {att.W_query, att.W_key, att.W_value};
    for (int64_t part = 0; part < 3; ++part) {
      assign(qkv_layers[part]->weight, qkvw[i].narrow(0, part * C, C));
      assign(qkv_layers[part]->bias, qkvb[i].narrow(0, part * C, C));
    }
  }
  const Tensor projw = read({L, C, C}), projb = read({L, C}), ln2w = read({L, C}), ln2b = read({L, C});
  for (int64_t i = 0; i < L; ++i) {
    assign(block(i).att->out_proj->weight, projw[i]);
    assign(block(i).att->out_proj->bias, projb[i]);
    assign(block(i).norm2->scale, ln2w[i]);
    assign(block(i).norm2->shift, ln2b[i]);
  }
  const Tensor fcw = read({L, 4 * C, C}), fcb = read({L, 4 * C}), fcprojw = read({L, C, 4 * C}), fcprojb = read({L, C});
  for (int64_t i = 0; i < L; ++i) {
    assign(block(i).ff->expand->weight, fcw[i]);
    assign(block(i).ff->expand->bias, fcb[i]);
    assign(block(i).ff->contract->weight, fcprojw[i]);
    assign(block(i).ff->contract->bias, fcprojb[i]);
  }
  assign(model->final_norm->scale, read({C}));
  assign(model->final_norm->shift, read({C}));
  model->tie_weights();
  model->eval();
  return model;
}

NamedTensors gpt2_state_dict(const GPTModel& model) {
  if (!model.cfg.qkv_bias || &model.out_head->weight.impl() != &model.tok_emb->weight.impl())
    throw std::invalid_argument("gpt2_state_dict: GPT-2's layout needs q, k, v biases and the head tied to tok_emb");
  NoGradGuard no_grad;
  auto conv1d = [](const Tensor& linear_weight) { return linear_weight.detach().t().contiguous(); };
  NamedTensors out{{"wte.weight", model.tok_emb->weight.detach()}, {"wpe.weight", model.pos_emb->weight.detach()}};
  for (int64_t i = 0; i < model.cfg.n_layers; ++i) {
    const TransformerBlock& block = (*model.trf_blocks)[size_t(i)];
    const MultiHeadAttention& att = *block.att;
    const std::string h = fmt::format("h.{}.", i);
    out.emplace_back(h + "ln_1.weight", block.norm1->scale.detach());
    out.emplace_back(h + "ln_1.bias", block.norm1->shift.detach());
    out.emplace_back(h + "attn.c_attn.weight",
                     cat({conv1d(att.W_query->weight), conv1d(att.W_key->weight), conv1d(att.W_value->weight)}, 1));
    out.emplace_back(h + "attn.c_attn.bias", cat({att.W_query->bias.detach(), att.W_key->bias.detach(),
                                                  att.W_value->bias.detach()}, 0));
    out.emplace_back(h + "attn.c_proj.weight", conv1d(att.out_proj->weight));
    out.emplace_back(h + "attn.c_proj.bias", att.out_proj->bias.detach());
    out.emplace_back(h + "ln_2.weight", block.norm2->scale.detach());
    out.emplace_back(h + "ln_2.bias", block.norm2->shift.detach());
    out.emplace_back(h + "mlp.c_fc.weight", conv1d(block.ff->expand->weight));
    out.emplace_back(h + "mlp.c_fc.bias", block.ff->expand->bias.detach());
    out.emplace_back(h + "mlp.c_proj.weight", conv1d(block.ff->contract->weight));
    out.emplace_back(h + "mlp.c_proj.bias", block.ff->contract->bias.detach());
  }
  out.emplace_back("ln_f.weight", model.final_norm->scale.detach());
  out.emplace_back("ln_f.bias", model.final_norm->shift.detach());
  return out;
}

std::map<std::string, std::string> gpt2_metadata(const GPTModel& model) {
  return {{"format", "pt"}, {"n_head", std::to_string(model.cfg.n_heads)}};
}

}  // namespace nn
