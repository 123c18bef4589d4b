// gpt2.cpp — GPT-2's Hugging Face layout to the book's GPTModel and back.
#include "nn/gpt2.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "nn/generation.h"
#include "nn/numbers.h"

namespace nn {

using namespace autograd;

namespace {

constexpr const char* kPrefix = "transformer.";
// GPT-2's longest name is 34 characters ("transformer.h.47.mlp.c_proj.weight"); a longer one is not GPT-2's.
constexpr size_t kMaxNameLength = 128;
// What a load says of a tensor holding NaN or an infinity.
constexpr const char* kNotFinite = "the file is damaged: a model with it computes NaN";

std::string without_prefix(const std::string& name) {
  return name.starts_with(kPrefix) ? name.substr(std::string(kPrefix).size()) : name;
}

// "h.<N>.<rest>": block N's tensor `rest`. N is written plainly (digits, no leading zero, within int64);
// anything else is not a block's name. Read by hand in one pass: std::regex matched these names by
// recursion, one call per character, and a 300,000-character name overflowed the stack.
struct BlockName {
  int64_t block;
  std::string_view rest;
};
std::optional<BlockName> block_name(std::string_view name) {
  if (!name.starts_with("h.")) return std::nullopt;
  name.remove_prefix(2);
  const size_t dot = name.find('.');
  if (dot == std::string_view::npos || (dot > 1 && name[0] == '0')) return std::nullopt;
  const std::optional<int64_t> block = parse_whole(name.substr(0, dot), 0);
  if (!block) return std::nullopt;
  return BlockName{*block, name.substr(dot + 1)};
}

// The tensors GPT-2 files carry beside the weights, which the model does not use: lm_head.weight (the
// tied copy of wte) and the causal-mask buffers of some conversions.
bool is_tolerated(const std::string& name) {
  if (name == "lm_head.weight") return true;
  const std::optional<BlockName> in_block = block_name(name);
  return in_block && (in_block->rest == "attn.bias" || in_block->rest == "attn.masked_bias");
}

// The checkpoint's tensors by their GPT-2 name, each taken at most once; what was never taken is reported.
// The checks need only names, shapes and dtypes: the data may still be in the file (load_gpt2 checks the
// header before a byte of data is read) or in memory (a Checkpoint).
class Gpt2Tensors {
 public:
  struct Entry {
    Shape shape;
    DType dtype;
  };
  Gpt2Tensors(const std::vector<TensorHeader>& headers, const std::string& path) : path_(path) {
    for (const TensorHeader& h : headers) {
      if (h.name.size() > kMaxNameLength)
        fail(fmt::format("unexpected tensor {} (not part of GPT-2, whose names are at most {} characters)",
                         quoted_name(h.name), kMaxNameLength));
      if (!by_name_.emplace(without_prefix(h.name), Entry{h.shape, h.dtype}).second)
        fail(fmt::format("GPT-2 tensor '{}' appears twice (with and without the prefix '{}')", without_prefix(h.name),
                         kPrefix));
    }
  }

  bool has(const std::string& name) const { return by_name_.count(name) > 0; }
  const Entry* find(const std::string& name) const { return has(name) ? &by_name_.at(name) : nullptr; }

  // Checks that the tensor `name` exists with `shape`; `why` says where the expected shape comes from.
  void take(const std::string& name, const Shape& shape, const std::string& why) {
    auto it = by_name_.find(name);
    if (it == by_name_.end()) fail(fmt::format("GPT-2 tensor '{}' is missing (expected shape {})", name, shape_to_string(shape)));
    const Entry& t = it->second;
    if (t.shape != shape)
      fail(fmt::format("GPT-2 tensor '{}' has shape {}, expected {} ({})", name, shape_to_string(t.shape),
                       shape_to_string(shape), why));
    if (!is_floating(t.dtype))  // (bfloat16 widened into the float32 parameter)
      fail(fmt::format("GPT-2 tensor '{}' has dtype {}, expected floating point", name, dtype_name(t.dtype)));
    taken_.insert(name);
  }

  // Everything not taken must be one of the tensors GPT-2 files carry beside the weights.
  void check_nothing_else() const {
    for (const auto& [name, t] : by_name_)
      if (!taken_.count(name) && !is_tolerated(name))
        fail(fmt::format("unexpected tensor {} {} (not part of GPT-2)", quoted_name(name), shape_to_string(t.shape)));
  }

  [[noreturn]] void fail(const std::string& problem) const { throw CheckpointError(fmt::format("{}: {}", path_, problem)); }

  // The block numbers N of every "h.N." name.
  std::set<int64_t> block_numbers() const {
    std::set<int64_t> out;
    for (const auto& [name, t] : by_name_)
      if (const std::optional<BlockName> in_block = block_name(name)) out.insert(in_block->block);
    return out;
  }

 private:
  std::string path_;
  std::map<std::string, Entry> by_name_;
  std::set<std::string> taken_;
};

// dst ← src (dst's shape), without recording a graph.
void assign(const Tensor& dst, const Tensor& src) {
  NoGradGuard no_grad;
  Tensor(dst).copy_(src.to(dst.dtype()));
}

// The sizes the file's shapes give: vocab and emb_dim from wte, context from wpe, layers from the h.N blocks
// (n_heads is left to head_count).
GPTConfig config_from_shapes(const Gpt2Tensors& file) {
  const Gpt2Tensors::Entry *wte = file.find("wte.weight"), *wpe = file.find("wpe.weight");
  if (!wte) file.fail("not a GPT-2 checkpoint: it has no 'wte.weight' (token embedding)");
  if (!wpe) file.fail("GPT-2 tensor 'wpe.weight' (position embedding) is missing");
  if (wte->shape.size() != 2 || wte->shape[0] < 1 || wte->shape[1] < 1)
    file.fail(fmt::format("GPT-2 tensor 'wte.weight' has shape {}, expected [vocab, emb_dim]", shape_to_string(wte->shape)));
  if (wpe->shape.size() != 2 || wpe->shape[0] < 1)
    file.fail(fmt::format("GPT-2 tensor 'wpe.weight' has shape {}, expected [context, {}]", shape_to_string(wpe->shape),
                          wte->shape[1]));
  GPTConfig cfg;
  cfg.vocab_size = wte->shape[0];
  cfg.emb_dim = wte->shape[1];
  cfg.context_length = wpe->shape[0];
  cfg.drop_rate = 0.0;
  cfg.qkv_bias = true;

  // The blocks must be h.0 to h.(n-1), n the number of blocks the file names: a stray h.999999 is a
  // missing h.2, never a model (or a list of expected names) a million blocks long. Each block's twelve
  // tensors and shapes are checked after this, before anything of that size is built.
  const std::set<int64_t> blocks = file.block_numbers();
  if (blocks.empty()) file.fail("GPT-2 checkpoint has no transformer blocks (no 'h.0.' tensors)");
  int64_t n = 0;
  for (int64_t block : blocks) {
    if (block != n)
      file.fail(fmt::format("GPT-2 block h.{} is missing: the blocks are numbered h.0 up, and the file has h.{}", n, block));
    ++n;
  }
  cfg.n_layers = n;
  return cfg;
}

// The metadata's "n_head", if the file gives it: a whole number of at least 1.
std::optional<int64_t> heads_in_metadata(const Gpt2Tensors& file, const std::map<std::string, std::string>& metadata) {
  auto given = metadata.find("n_head");
  if (given == metadata.end()) return std::nullopt;
  const std::optional<int64_t> heads = parse_whole(given->second, 1);
  if (!heads) file.fail(fmt::format("metadata 'n_head' is not a number of heads: '{}'", given->second.substr(0, 40)));
  return heads;
}

// The head count: the file's own (its metadata's n_head), which a `given` count must agree with; else
// `given`; else emb_dim / 64, as in every released GPT-2. It must divide emb_dim.
int64_t head_count(const Gpt2Tensors& file, const std::map<std::string, std::string>& metadata, int64_t emb_dim,
                   int64_t given) {
  const std::optional<int64_t> in_file = heads_in_metadata(file, metadata);
  if (in_file && given > 0 && given != *in_file)
    file.fail(fmt::format("its metadata gives n_head {}, not the {} heads asked for (a head count is for a file that "
                          "does not give its own)",
                          *in_file, given));
  const int64_t heads = in_file ? *in_file : given > 0 ? given : emb_dim / kGpt2HeadDim;
  if (heads <= 0 || emb_dim % heads != 0)
    file.fail(fmt::format("cannot split emb_dim {} into {} heads ({})", emb_dim, heads,
                          in_file     ? "its metadata's n_head"
                          : given > 0 ? "the head count asked for"
                                      : fmt::format("the file does not give its head count, and GPT-2's heads are {} "
                                                    "wide: give the head count, scratchgrad's --heads",
                                                    kGpt2HeadDim)));
  return heads;
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

bool is_gpt2_file(const std::string& path) {
  struct HeaderRead {};  // thrown to stop before the data: the header is all this needs
  bool gpt2 = false;
  try {
    TensorSink sink;  // the header is all it reads (set by name: GCC 12 warns when a designated initializer leaves members out)
    sink.on_header = [&](const std::vector<TensorHeader>& headers, const std::map<std::string, std::string>&) {
      for (const TensorHeader& h : headers) gpt2 = gpt2 || without_prefix(h.name) == "wte.weight";
      throw HeaderRead{};
    };
    read_safetensors(path, sink);
  } catch (const HeaderRead&) {
  }
  return gpt2;
}

std::unique_ptr<GPTModel> gpt2_from_checkpoint(const Checkpoint& ck, const std::string& path, int64_t n_heads) {
  return gpt2_from_checkpoint(Checkpoint(ck), path, n_heads);
}

namespace {

// The file's tensors checked against GPT-2's layout, from its names and shapes alone: the configuration
// they describe (n_heads left to head_count).
GPTConfig checked_layout(Gpt2Tensors& file) {
  const GPTConfig cfg = config_from_shapes(file);
  const int64_t D = cfg.emb_dim;
  const std::string from_wte = fmt::format("vocab {} and emb_dim {} from wte.weight, context {} from wpe.weight",
                                           cfg.vocab_size, D, cfg.context_length);
  for (const auto& [name, shape] : gpt2_layout(cfg)) file.take(name, shape, from_wte);
  if (file.has("lm_head.weight")) file.take("lm_head.weight", {cfg.vocab_size, D}, "tied to wte.weight");
  file.check_nothing_else();
  return cfg;
}

// The file's headers checked against GPT-2's layout, and the model they describe, its head tied to wte and
// its values not yet loaded (each is about to be overwritten: nothing is drawn).
std::unique_ptr<GPTModel> checked_empty_model(const std::vector<TensorHeader>& headers,
                                              const std::map<std::string, std::string>& metadata,
                                              const std::string& path, int64_t n_heads) {
  Gpt2Tensors file(headers, path);
  // Every name and shape is checked before the model is built, so a bad file costs no allocation.
  GPTConfig cfg = checked_layout(file);
  cfg.n_heads = head_count(file, metadata, cfg.emb_dim, n_heads);
  SkipInitGuard every_value_is_loaded_below;
  auto model = std::make_unique<GPTModel>(cfg);
  model->tie_weights();  // at once: the head's own matrix (vocab x D, never written) is let go before the load
  model->eval();
  return model;
}

// Where the file's tensor `name` (checked, prefix removed) goes in the model: `same` is the parameter that
// holds it as it is (the embeddings, LayerNorms and the biases but c_attn's), or `parts` the parameters it
// is cut into (c_attn's q, k, v), each Conv1D weight transposed. Neither: a tensor GPT-2 files carry that the
// model does not use (lm_head.weight, the attention masks).
struct Place {
  Tensor same;
  std::vector<Tensor> parts;
  bool transposed;
};
Place as_is(const Tensor& parameter) { return {parameter, {}, false}; }

Place place_of(GPTModel& model, const std::string& name) {
  if (name == "wte.weight") return as_is(model.tok_emb->weight);
  if (name == "wpe.weight") return as_is(model.pos_emb->weight);
  if (name == "ln_f.weight") return as_is(model.final_norm->scale);
  if (name == "ln_f.bias") return as_is(model.final_norm->shift);
  const std::optional<BlockName> in_block = block_name(name);
  if (!in_block || in_block->block >= int64_t(model.trf_blocks->size())) return as_is(Tensor());
  TransformerBlock& block = (*model.trf_blocks)[size_t(in_block->block)];
  MultiHeadAttention& att = *block.att;
  const std::string_view what = in_block->rest;
  if (what == "ln_1.weight") return as_is(block.norm1->scale);
  if (what == "ln_1.bias") return as_is(block.norm1->shift);
  if (what == "ln_2.weight") return as_is(block.norm2->scale);
  if (what == "ln_2.bias") return as_is(block.norm2->shift);
  // Conv1D keeps [in, out]: q, k, v are column blocks of c_attn, and every weight is transposed.
  if (what == "attn.c_attn.weight") return {{}, {att.W_query->weight, att.W_key->weight, att.W_value->weight}, true};
  if (what == "attn.c_attn.bias") return {{}, {att.W_query->bias, att.W_key->bias, att.W_value->bias}, false};
  if (what == "attn.c_proj.weight") return {{}, {att.out_proj->weight}, true};
  if (what == "attn.c_proj.bias") return as_is(att.out_proj->bias);
  if (what == "mlp.c_fc.weight") return {{}, {block.ff->expand->weight}, true};
  if (what == "mlp.c_fc.bias") return as_is(block.ff->expand->bias);
  if (what == "mlp.c_proj.weight") return {{}, {block.ff->contract->weight}, true};
  if (what == "mlp.c_proj.bias") return as_is(block.ff->contract->bias);
  return as_is(Tensor());
}

// The file's tensor `name` into its place (a no-op for one read there directly), once its values are
// checked: each is a number (a tensor the model does not use is not looked at).
void put(GPTModel& model, const std::string& name, const Tensor& t, const std::string& path) {
  const Place place = place_of(model, name);
  if (place.same.defined() || !place.parts.empty()) check_finite(path, name, t, kNotFinite);
  if (place.same.defined()) {
    if (&place.same.impl() != &t.impl()) assign(place.same, t);
    return;
  }
  const int64_t D = model.cfg.emb_dim, parts = int64_t(place.parts.size());
  for (int64_t part = 0; part < parts; ++part) {
    const Tensor piece = parts == 1 ? t : t.narrow(t.dim() - 1, part * D, D);
    assign(place.parts[size_t(part)], place.transposed ? piece.t() : piece);
  }
}

}  // namespace

std::unique_ptr<GPTModel> gpt2_from_checkpoint(Checkpoint&& ck, const std::string& path, int64_t n_heads) {
  std::vector<TensorHeader> headers;
  for (const auto& [name, t] : ck.tensors) headers.push_back({name, t.dtype(), t.shape()});
  std::unique_ptr<GPTModel> model = checked_empty_model(headers, ck.metadata, path, n_heads);
  for (auto& [name, t] : ck.tensors) put(*model, without_prefix(name), std::exchange(t, Tensor()), path);  // dropped once copied
  ck.tensors.clear();
  return model;
}

// The file's header is checked and the model built first; then each tensor's bytes are read straight into
// the parameter that keeps them (a float32 tensor GPT-2 stores as the model does), or into a buffer of
// that one tensor that is copied (transposed, cut, converted) into place and dropped. The load holds one
// model's memory and one tensor more.
std::unique_ptr<GPTModel> load_gpt2(const std::string& path, int64_t n_heads, DType weights) {
  if (weights != DType::Float32 && weights != DType::BFloat16)
    throw std::invalid_argument("load_gpt2: the weights are kept in float32 or bfloat16");
  std::unique_ptr<GPTModel> model;
  auto readable_into = [](const Tensor& place, DType file) {  // the reader rounds float32 into bfloat16
    return place.dtype() == file || (place.dtype() == DType::BFloat16 && file == DType::Float32);
  };
  read_safetensors(path, {.on_header =
                              [&](const std::vector<TensorHeader>& headers, const std::map<std::string, std::string>& metadata) {
                                model = checked_empty_model(headers, metadata, path, n_heads);
                                if (weights == DType::BFloat16) keep_weights_in_bfloat16(*model);
                              },
                          .destination =
                              [&](const TensorHeader& h) {
                                const Tensor same = place_of(*model, without_prefix(h.name)).same;
                                return same.defined() && readable_into(same, h.dtype) && same.is_contiguous() ? same : Tensor();
                              },
                          .on_tensor = [&](const TensorHeader& h, const Tensor& t) { put(*model, without_prefix(h.name), t, path); }});
  return model;
}

Gpt2FileInfo inspect_gpt2_file(const std::string& path) {
  Gpt2FileInfo info;
  read_safetensors(path, {.on_header =
                              [&](const std::vector<TensorHeader>& headers, const std::map<std::string, std::string>& metadata) {
                                Gpt2Tensors file(headers, path);
                                info.config = checked_layout(file);
                                const int64_t D = info.config.emb_dim;
                                info.heads_in_file = heads_in_metadata(file, metadata).has_value();
                                info.config.n_heads = 0;  // unknown, unless the file or the width says
                                if (info.heads_in_file || D % kGpt2HeadDim == 0) info.config.n_heads = head_count(file, metadata, D, 0);
                                info.tensors = headers;
                                info.metadata = metadata;
                              },
                          .destination = {},  // each tensor in a buffer of its own, dropped once checked
                          .on_tensor =
                              [&](const TensorHeader& h, const Tensor& t) {
                                const std::string name = without_prefix(h.name);
                                if (is_tolerated(name)) return;
                                check_finite(path, name, t, kNotFinite);
                                info.parameters += t.numel();
                              }});
  return info;
}

// ---- llm.c's format

namespace {

constexpr int32_t kLlmcMagic = 20240326, kLlmcVersion = 3;

}  // namespace

bool is_llmc_checkpoint(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;  // a FIFO would block the read below
  std::ifstream in(path, std::ios::binary);
  int32_t magic = 0;
  return in.read(reinterpret_cast<char*>(&magic), sizeof magic) && magic == kLlmcMagic;
}

std::unique_ptr<GPTModel> load_llmc_gpt2(const std::string& path, int64_t n_heads) {
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
  if (n_heads > 0 && n_heads != H)
    fail(fmt::format("its header gives {} heads, not the {} asked for (a head count is for a file that does not give "
                     "its own)",
                     H, n_heads));
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
  // each tensor under llm.c's name for it, its values checked once read
  auto read = [&](const char* name, const Shape& shape) {
    Tensor t = empty(shape);
    if (!in.read(static_cast<char*>(t.raw_data()), std::streamsize(t.numel() * 4))) fail("read failed");
    check_finite(path, name, t, kNotFinite);
    return t;
  };

  GPTConfig cfg{.vocab_size = V, .context_length = T, .emb_dim = C, .n_heads = H, .n_layers = L, .drop_rate = 0.0,
                .qkv_bias = true};
  std::unique_ptr<GPTModel> model;
  {
    SkipInitGuard every_value_is_loaded_below;
    model = std::make_unique<GPTModel>(cfg);
  }
  assign(model->tok_emb->weight, read("wte", {Vp, C}).narrow(0, 0, V));  // the padding rows are dropped
  assign(model->pos_emb->weight, read("wpe", {T, C}));
  auto block = [&](int64_t i) -> TransformerBlock& { return (*model->trf_blocks)[size_t(i)]; };
  // each kind of tensor for every layer in turn, in nn.Linear's layout: no transposes
  const Tensor ln1w = read("ln1w", {L, C}), ln1b = read("ln1b", {L, C}), qkvw = read("qkvw", {L, 3 * C, C}),
               qkvb = read("qkvb", {L, 3 * C});
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
  const Tensor projw = read("attprojw", {L, C, C}), projb = read("attprojb", {L, C}), ln2w = read("ln2w", {L, C}),
               ln2b = read("ln2b", {L, C});
  for (int64_t i = 0; i < L; ++i) {
    assign(block(i).att->out_proj->weight, projw[i]);
    assign(block(i).att->out_proj->bias, projb[i]);
    assign(block(i).norm2->scale, ln2w[i]);
    assign(block(i).norm2->shift, ln2b[i]);
  }
  const Tensor fcw = read("fcw", {L, 4 * C, C}), fcb = read("fcb", {L, 4 * C}), fcprojw = read("fcprojw", {L, C, 4 * C}),
               fcprojb = read("fcprojb", {L, C});
  for (int64_t i = 0; i < L; ++i) {
    assign(block(i).ff->expand->weight, fcw[i]);
    assign(block(i).ff->expand->bias, fcb[i]);
    assign(block(i).ff->contract->weight, fcprojw[i]);
    assign(block(i).ff->contract->bias, fcprojb[i]);
  }
  assign(model->final_norm->scale, read("lnfw", {C}));
  assign(model->final_norm->shift, read("lnfb", {C}));
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
