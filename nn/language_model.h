// language_model.h — what generation, evaluation and the command line need of a model that reads token ids
// and predicts the next one: GPT (nn/gpt.h) and Llama (nn/llama.h) both are one.
//
// The key/value cache is part of the interface because only the model knows its blocks: each block keeps
// the keys and values of the positions already seen, and a cached step runs the new positions only.
#pragma once
#include <cstdint>
#include <vector>

#include "nn/module.h"

namespace nn {

// Each block's keys and values, [batch, kv_heads, capacity, head_dim], filled for positions [0, length).
// kv_heads is the number of key/value heads: GPT's every head, a grouped-query model's fewer (its query
// heads share them), so the cache holds 2 · blocks · kv_heads · head_dim numbers a position.
struct KVCache {
  std::vector<Tensor> keys, values;
  int64_t length = 0;
  int64_t capacity() const { return keys.empty() ? 0 : keys[0].size(2); }
  // Throws std::invalid_argument unless `ids` is [batch, t ≥ 1] for this cache's batch, the cache has one
  // entry per block (`blocks`), and t more positions fit. `who` starts the message.
  void check_step(const Tensor& ids, size_t blocks, const char* who) const;
};

class LanguageModel : public Module {
 public:
  // ids: int64 [B, T], T ≤ context_length() → logits [B, T, vocab_size()]
  virtual Tensor forward(const Tensor& ids) const = 0;
  Tensor operator()(const Tensor& ids) const { return forward(ids); }

  // Zeroed room for `capacity` positions of `batch` sequences (0: the whole context; at most the context).
  virtual KVCache make_kv_cache(int64_t batch = 1, int64_t capacity = 0) const = 0;
  // Runs `ids` [batch, t] at positions cache.length .. cache.length + t − 1, appends their keys and values
  // to the cache, and returns the logits of the last of them, [batch, vocab]. No graph is recorded.
  // Throws std::invalid_argument when the cache cannot hold t more positions.
  virtual Tensor forward_cached(const Tensor& ids, KVCache& cache) const = 0;

  virtual int64_t context_length() const = 0;
  virtual int64_t vocab_size() const = 0;
};

}  // namespace nn
