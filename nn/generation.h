// generation.h — sampling from a language model (GPT, Llama: nn/language_model.h) with a key/value cache.
//
// Without a cache, every new token runs the whole window through the model again: at position t that is
// t positions' worth of projections and feed-forwards, of which only the last is new. The keys and values
// of the earlier positions do not change (causal attention: position i sees only 0..i), so the cache keeps
// them per block, and each step runs one position: a prefill of the prompt, then one token at a time.
// docs/gpt2.md counts what that saves.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "autograd/random/generator.h"
#include "nn/gpt.h"
#include "nn/language_model.h"

namespace nn {

// model.make_kv_cache and model.forward_cached (nn/language_model.h), as functions.
KVCache make_kv_cache(const LanguageModel& model, int64_t batch = 1, int64_t capacity = 0);
Tensor forward_cached(const LanguageModel& model, const Tensor& ids, KVCache& cache);

// The cache a model's make_kv_cache returns: for each of `blocks` blocks, zeroed keys and values
// [batch, kv_heads, capacity, head_dim] of `like`'s dtype and device (capacity 0: the whole `context`).
// Throws std::invalid_argument for a batch below 1 or a capacity outside [0, context].
KVCache zeroed_kv_cache(size_t blocks, int64_t batch, int64_t kv_heads, int64_t capacity, int64_t head_dim,
                        int64_t context, const Tensor& like);

// Generation on weights kept in bfloat16 (generate --precision bf16): every parameter of two or more dims
// (the Linear weights, the embedding tables, a tied head once) rounded to bfloat16 in place
// (autograd::store_in_bfloat16), half their bytes; the norms' weights and the biases stay float32. Run it
// under autocast (set_autocast or AutocastGuard(BFloat16)): each product then rounds its float32 activations
// to bfloat16 and sums in float32; the embeddings' rows are handed on widened (Embedding::forward).
void keep_weights_in_bfloat16(Module& model);

// Generation on weights packed for it (generate, chat and the benchmarks, in fast numerics): each Linear's
// float32 weight moves into the layout that one row times it reads fastest (Linear::pack_for_generation,
// autograd::pack_panels): every cached step's products then read each weight as runs of memory, with the same
// bits. The memory stays the same (each packed copy replaces its weight). A head tied to the token embedding
// (GPT-2's, a tied Llama's) is packed too, and the table's lookups read their rows from the panels. Left as
// they are: layers under 49 outputs (their products run the exact kernels, which gain nothing), bfloat16
// weights, weights with a LoRA adapter, weights on a GPU, and everything in exact numerics (whose one-row
// products follow PyTorch's order in W's own layout). Afterwards the model only generates: no gradient
// reaches a packed weight, and its parameters named "weight" hold the panels. Returns how many weights
// (a tied head and its table: one) it packed.
int64_t pack_weights_for_generation(Module& model);

struct SamplingOptions {
  double temperature = 1.0;  // 0: greedy (the likeliest token)
  int64_t top_k = 0;         // sample among the k likeliest only; 0: all
  double top_p = 1.0;        // sample among the likeliest whose probabilities sum to at least p; 1: all
};

// Throws std::invalid_argument naming the option when one is out of range.
void check_sampling_options(const SamplingOptions& options);

// One token from `logits` [vocab]: the argmax at temperature 0, else a draw from softmax(logits / t)
// restricted by top_k and top_p (one uniform number from `gen`).
int64_t sample_token(const Tensor& logits, const SamplingOptions& options, autograd::Generator& gen);

// What to do when the context is full and more tokens are asked for.
enum class ContextFull {
  refuse,  // throw before generating anything when prompt + new tokens exceed the context
  slide,   // keep going: the cache restarts from the last half of the context (one prefill of those tokens)
};
ContextFull parse_context_full(const std::string& text);  // "refuse" or "slide", else std::invalid_argument

struct GenerationOptions {
  int64_t max_new_tokens = 100;
  SamplingOptions sampling;
  std::optional<int64_t> stop_token;  // stop after generating this token (e.g. GPT-2's <|endoftext|>, 50256)
  std::vector<int64_t> stop_tokens;   // and after any of these (a model's end-of-sequence ids, one or several)
  ContextFull at_context_end = ContextFull::refuse;
};

// Called once per new token with the token and the logits [vocab] it was chosen from.
using OnToken = std::function<void(int64_t token, const Tensor& logits)>;

// Continues `prompt` (at least one id, each below the vocabulary) with a prefill and one cached step per
// token; returns the new tokens (the stop token included, when reached).
std::vector<int64_t> generate(const LanguageModel& model, const std::vector<int64_t>& prompt, const GenerationOptions& options,
                              autograd::Generator& gen, const OnToken& on_token = {});

// The same without a cache: every step runs the whole window (the last `context` tokens) through
// model.forward. The reference the cache is tested against.
std::vector<int64_t> generate_uncached(const LanguageModel& model, const std::vector<int64_t>& prompt,
                                       const GenerationOptions& options, autograd::Generator& gen,
                                       const OnToken& on_token = {});

}  // namespace nn
