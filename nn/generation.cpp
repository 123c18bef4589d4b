// generation.cpp — the cached forward, the sampler, and the two generation loops.
#include "nn/generation.h"

#include <algorithm>
#include <map>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

#include "autograd/cpu/runtime/buffer_cache.h"
#include "nn/llama.h"

namespace nn {

using namespace autograd;

void KVCache::check_step(const Tensor& ids, size_t blocks, const char* who) const {
  if (ids.dim() != 2 || ids.size(1) < 1)
    throw std::invalid_argument(fmt::format("{}: expected token ids [batch, tokens], got {}", who, ids.shape_str()));
  if (keys.size() != blocks || keys.empty() || keys[0].size(0) != ids.size(0))
    throw std::invalid_argument(fmt::format("{}: the cache was made for another model or batch (ids {})", who,
                                            ids.shape_str()));
  if (length + ids.size(1) > capacity())
    throw std::invalid_argument(fmt::format("{}: {} cached positions and {} new ones exceed the context of {}", who,
                                            length, ids.size(1), capacity()));
}

KVCache zeroed_kv_cache(size_t blocks, int64_t batch, int64_t kv_heads, int64_t capacity, int64_t head_dim,
                        int64_t context, const Tensor& like) {
  if (batch < 1) throw std::invalid_argument(fmt::format("make_kv_cache: batch must be at least 1, got {}", batch));
  if (capacity < 0 || capacity > context)
    throw std::invalid_argument(
        fmt::format("make_kv_cache: capacity {} is outside [0, the context of {}]", capacity, context));
  KVCache cache;
  const Shape shape{batch, kv_heads, capacity > 0 ? capacity : context, head_dim};
  for (size_t i = 0; i < blocks; ++i) {
    cache.keys.push_back(zeros(shape, like.dtype()).to(like.device()));
    cache.values.push_back(zeros(shape, like.dtype()).to(like.device()));
  }
  return cache;
}

KVCache make_kv_cache(const LanguageModel& model, int64_t batch, int64_t capacity) {
  return model.make_kv_cache(batch, capacity);
}

Tensor forward_cached(const LanguageModel& model, const Tensor& ids, KVCache& cache) {
  return model.forward_cached(ids, cache);
}

// ---- GPT's cache: every head's keys and values

KVCache GPTModel::make_kv_cache(int64_t batch, int64_t capacity) const {
  return zeroed_kv_cache(trf_blocks->size(), batch, cfg.n_heads, capacity, cfg.emb_dim / cfg.n_heads, cfg.context_length,
                         tok_emb->table());
}

namespace {

// One block for t new positions after `past` cached ones: the block's forward (TransformerBlock::forward)
// with attention over the cached keys and values plus the new ones. The new queries see every cached
// position and the new positions up to their own.
Tensor block_cached(const TransformerBlock& block, const Tensor& x_in, Tensor& keys, Tensor& values, int64_t past) {
  const MultiHeadAttention& att = *block.att;
  const int64_t b = x_in.size(0), t = x_in.size(1);
  auto split_heads = [&](const Tensor& y) { return y.view({b, t, att.num_heads, att.head_dim}).transpose(1, 2); };

  Tensor x = (*block.norm1)(x_in);
  Tensor queries = split_heads((*att.W_query)(x));
  keys.narrow(2, past, t).copy_(split_heads((*att.W_key)(x)));
  values.narrow(2, past, t).copy_(split_heads((*att.W_value)(x)));
  const Tensor all_keys = keys.narrow(2, 0, past + t), all_values = values.narrow(2, 0, past + t);

  Tensor scores = matmul(queries, all_keys.transpose(2, 3)) / std::sqrt(double(att.head_dim));
  if (t > 1)  // new position i may not see new position j > i: key past + j lies past its own, past + i
    scores = masked_fill(scores, triu(ones({t, past + t}), past + 1).to_bool().to(scores.device()),
                         -std::numeric_limits<double>::infinity());
  Tensor context = matmul(softmax(scores, -1), all_values).transpose(1, 2).contiguous().view({b, t, att.d_out});
  x = x_in + (*att.out_proj)(context);
  return x + (*block.ff)((*block.norm2)(x));
}

}  // namespace

Tensor GPTModel::forward_cached(const Tensor& ids, KVCache& cache) const {
  cache.check_step(ids, trf_blocks->size(), "forward_cached");
  const int64_t past = cache.length, t = ids.size(1);
  NoGradGuard no_grad;
  Tensor x = (*tok_emb)(ids) + (*pos_emb)(arange(past, past + t).to(ids.device()));
  for (size_t i = 0; i < trf_blocks->size(); ++i)
    x = block_cached((*trf_blocks)[i], x, cache.keys[i], cache.values[i], past);
  cache.length = past + t;
  // Only the last position's next-token logits are needed: the head (D × vocab) runs once, not t times.
  Tensor last = (*final_norm)(x.narrow(1, t - 1, 1));
  return (*out_head)(last).view({ids.size(0), cfg.vocab_size});
}

// ---- weights in bfloat16

void keep_weights_in_bfloat16(Module& model) {
  for (const Tensor& p : model.parameters())  // (a tied weight is one tensor: rounded once)
    if (p.dim() >= 2) store_in_bfloat16(p);
}

// ---- weights packed for generation

namespace {
bool packable(const Tensor& w, int64_t rows) {
  return w.defined() && w.device() == autograd::Device::cpu() &&
         (w.dtype() == DType::Float32 || w.dtype() == DType::Float64 || w.dtype() == DType::BFloat16) && rows >= 49;
}

// The Linear and Embedding modules below `module`, by the weight they hold (a head tied to its table: both).
struct Holders {
  std::vector<Linear*> layers;
  std::vector<Embedding*> tables;
};
void collect(Module& module, std::map<const autograd::TensorImpl*, Holders>& by_weight) {
  if (auto* layer = dynamic_cast<Linear*>(&module); layer && layer->weight.defined())
    by_weight[&layer->weight.impl()].layers.push_back(layer);
  if (auto* table = dynamic_cast<Embedding*>(&module); table && table->weight.defined())
    by_weight[&table->weight.impl()].tables.push_back(table);
  for (const auto& [name, child] : module.named_children()) collect(*child, by_weight);
}
}  // namespace

int64_t pack_weights_for_generation(Module& model) {
  if (autograd::numerics() != autograd::Numerics::fast) return 0;
  std::map<const autograd::TensorImpl*, Holders> by_weight;
  collect(model, by_weight);
  int64_t packed = 0;
  for (auto& [weight, holders] : by_weight) {
    if (holders.layers.size() != 1 || holders.tables.size() > 1) continue;  // shared some other way: left alone
    Linear& layer = *holders.layers[0];
    if (layer.lora || !packable(layer.weight, layer.out_features)) continue;
    if (holders.tables.empty()) {
      layer.pack_for_generation();
    } else {  // GPT-2's head, tied to wte: the table's lookups read the same panels
      holders.tables[0]->pack_for_generation();
      layer.pack_for_generation(*holders.tables[0]);
    }
    ++packed;
  }
  // A Llama's tied head multiplies by the embedding table itself (no Linear holds it)
  if (auto* llama = dynamic_cast<LlamaModel*>(&model); llama && !llama->lm_head) {
    Embedding& table = *llama->model->embed_tokens;
    if (!table.packed() && packable(table.weight, table.num_embeddings)) {
      table.pack_for_generation();
      ++packed;
    }
  }
  // The unpacked weights' buffers go back to the system, not to the CPU backend's cache of freed buffers
  // (where the largest, the token table, would stay as long as the process)
  autograd::cpu::release_cached_buffers();
  return packed;
}

// ---- sampling

void check_sampling_options(const SamplingOptions& o) {
  if (!std::isfinite(o.temperature) || o.temperature < 0)
    throw std::invalid_argument(fmt::format("temperature must be 0 (greedy) or positive, got {}", o.temperature));
  if (o.top_k < 0) throw std::invalid_argument(fmt::format("top-k must be 0 (all) or positive, got {}", o.top_k));
  if (!(o.top_p > 0 && o.top_p <= 1)) throw std::invalid_argument(fmt::format("top-p must be in (0, 1], got {}", o.top_p));
}

int64_t sample_token(const Tensor& logits, const SamplingOptions& o, Generator& gen) {
  if (logits.dim() != 1 || logits.numel() < 1)
    throw std::invalid_argument(fmt::format("sample_token: expected logits [vocab], got {}", logits.shape_str()));
  std::vector<double> scores = logits.cpu().to_vector<double>();
  if (o.temperature == 0.0) return int64_t(std::max_element(scores.begin(), scores.end()) - scores.begin());

  // softmax(scores / t), in double
  const double top = *std::max_element(scores.begin(), scores.end());
  std::vector<double> probs(scores.size());
  for (size_t i = 0; i < scores.size(); ++i) probs[i] = std::exp((scores[i] - top) / o.temperature);

  // the candidates, likeliest first; top-k and top-p cut the list, never below one token
  std::vector<int64_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return probs[size_t(a)] > probs[size_t(b)]; });
  size_t keep = order.size();
  if (o.top_k > 0) keep = std::min(keep, size_t(o.top_k));
  if (o.top_p < 1.0) {
    const double total = std::accumulate(probs.begin(), probs.end(), 0.0);
    double mass = 0;
    for (size_t n = 0; n < keep; ++n) {
      mass += probs[size_t(order[n])];
      if (mass >= o.top_p * total) {
        keep = n + 1;
        break;
      }
    }
  }
  double kept_mass = 0;
  for (size_t n = 0; n < keep; ++n) kept_mass += probs[size_t(order[n])];
  double u = 0;
  random::uniform(gen, &u, 1, 0.0, 1.0);
  u *= kept_mass;
  for (size_t n = 0; n < keep; ++n) {
    u -= probs[size_t(order[n])];
    if (u < 0) return order[n];
  }
  return order[keep - 1];  // u landed on the rounding of the last subtraction
}

ContextFull parse_context_full(const std::string& text) {
  if (text == "refuse") return ContextFull::refuse;
  if (text == "slide") return ContextFull::slide;
  throw std::invalid_argument(fmt::format("context-full must be refuse or slide, got '{}'", text));
}

namespace {

// The checks both loops make: the options, the prompt's ids, and (refuse) the room in the context.
// Producing n tokens feeds the prompt and the first n − 1 of them: that many positions must fit.
void check_generation(const LanguageModel& model, const std::vector<int64_t>& prompt, const GenerationOptions& o) {
  check_sampling_options(o.sampling);
  if (o.max_new_tokens < 0) throw std::invalid_argument(fmt::format("generate: negative token count {}", o.max_new_tokens));
  if (prompt.empty()) throw std::invalid_argument("generate: the prompt is empty (it needs at least one token)");
  for (size_t i = 0; i < prompt.size(); ++i)
    if (prompt[i] < 0 || prompt[i] >= model.vocab_size())
      throw std::invalid_argument(fmt::format("generate: prompt token {} at position {} is outside the vocabulary of {}",
                                              prompt[i], i, model.vocab_size()));
  std::vector<int64_t> stops = o.stop_tokens;
  if (o.stop_token) stops.push_back(*o.stop_token);
  for (int64_t stop : stops)
    if (stop < 0 || stop >= model.vocab_size())
      throw std::invalid_argument(
          fmt::format("generate: stop token {} is outside the vocabulary of {}", stop, model.vocab_size()));
  const int64_t needed = int64_t(prompt.size()) + std::max<int64_t>(o.max_new_tokens, 1) - 1;
  if (o.at_context_end == ContextFull::refuse && needed > model.context_length())
    throw std::invalid_argument(fmt::format(
        "generate: a prompt of {} tokens and {} new ones need {} positions, more than the context of {} "
        "(ask for fewer tokens, or slide)",
        prompt.size(), o.max_new_tokens, needed, model.context_length()));
}

bool is_stop_token(const GenerationOptions& o, int64_t token) {
  return (o.stop_token && token == *o.stop_token) ||
         std::find(o.stop_tokens.begin(), o.stop_tokens.end(), token) != o.stop_tokens.end();
}

// The device the model's weights are on (the ids go there).
Device device_of(const LanguageModel& model) {
  const std::vector<Tensor> weights = model.parameters();
  return weights.empty() ? Device::cpu() : weights.front().device();
}

Tensor row_of(const std::vector<int64_t>& ids, size_t from) {
  return from_vector(std::vector<int64_t>(ids.begin() + std::ptrdiff_t(from), ids.end()), {1, int64_t(ids.size() - from)});
}

}  // namespace

std::vector<int64_t> generate(const LanguageModel& model, const std::vector<int64_t>& prompt,
                              const GenerationOptions& o, Generator& gen, const OnToken& on_token) {
  check_generation(model, prompt, o);
  const int64_t context = model.context_length();
  const Device device = device_of(model);
  std::vector<int64_t> ids = prompt, produced;
  // Under refuse the positions fed are known (check_generation counted them): the cache holds those, not the
  // whole context (at GPT-2's 1024 that is 75 MB for a short answer). Sliding needs the whole context.
  const int64_t positions = int64_t(prompt.size()) + std::max<int64_t>(o.max_new_tokens, 1) - 1;
  KVCache cache = model.make_kv_cache(1, o.at_context_end == ContextFull::refuse ? positions : context);
  // the tokens to run next: the prompt (its last `context` under slide), then one new token per step
  Tensor pending = row_of(ids, ids.size() - size_t(std::min<int64_t>(int64_t(ids.size()), context)));
  while (int64_t(produced.size()) < o.max_new_tokens) {
    const Tensor logits = model.forward_cached(pending.to(device), cache)[0].cpu();
    const int64_t token = sample_token(logits, o.sampling, gen);
    ids.push_back(token);
    produced.push_back(token);
    if (on_token) on_token(token, logits);
    if (is_stop_token(o, token)) break;
    if (cache.length < context) {
      pending = row_of(ids, ids.size() - 1);
    } else {  // slide: keep the last half of the context, recomputed at their new positions
      cache.length = 0;
      pending = row_of(ids, ids.size() - size_t(std::max<int64_t>(context / 2, 1)));
    }
  }
  return produced;
}

std::vector<int64_t> generate_uncached(const LanguageModel& model, const std::vector<int64_t>& prompt,
                                       const GenerationOptions& o, Generator& gen, const OnToken& on_token) {
  check_generation(model, prompt, o);
  NoGradGuard no_grad;
  const Device device = device_of(model);
  std::vector<int64_t> ids = prompt, produced;
  while (int64_t(produced.size()) < o.max_new_tokens) {
    const size_t start = ids.size() - size_t(std::min<int64_t>(int64_t(ids.size()), model.context_length()));
    const Tensor logits = model(row_of(ids, start).to(device)).select(1, -1)[0].cpu();
    const int64_t token = sample_token(logits, o.sampling, gen);
    ids.push_back(token);
    produced.push_back(token);
    if (on_token) on_token(token, logits);
    if (is_stop_token(o, token)) break;
  }
  return produced;
}

}  // namespace nn
