// char_model.h — the workshop's tiny character-level self-attention model (mini_self_attention.py),
// generalised to several heads for the trainer: token + position embeddings, one causal self-attention
// layer, a linear head that predicts the next character.
#pragma once
#include "nn/attention.h"
#include "nn/layers.h"

namespace nn {

struct CharModelConfig {
  int64_t vocab = 0;    // V: number of distinct characters
  int64_t dim = 24;     // D: embedding size
  int64_t context = 8;  // T: longest input the position table covers
  int64_t heads = 1;    // > 1 splits q/k/v into heads of dim/heads (causal multi-head attention)
};

class MiniSelfAttention : public Module {
 public:
  explicit MiniSelfAttention(const CharModelConfig& config);
  // idx: int64 [B, t] with t <= context → logits [B, t, V]
  Tensor forward(const Tensor& idx) const;
  Tensor operator()(const Tensor& idx) const { return forward(idx); }

  CharModelConfig config;
  // Above kSkipMaskedHalfAbove positions (CPU), forward() skips the masked half of the attention products
  // with causal_scores / tril_matmul; false runs the workshop's dense ops at every length. The results
  // are the same bits either way. (Short contexts keep the workshop's ops: nothing to gain there, and
  // their graphs and traces read like the Python.)
  static constexpr int64_t kSkipMaskedHalfAbove = 32;
  bool skip_masked_half = true;
  // Which attention runs: automatic takes scaled_dot_product_attention (the flash op: O(t·d) memory, not
  // the composed ops' bits) past kFlashAttentionAbove positions under fast numerics on the CPU, and the
  // composed ops above otherwise; composed never takes it, flash always does (nn/attention.h).
  AttentionKernel attention = AttentionKernel::automatic;
  std::shared_ptr<Embedding> tok, pos;
  std::shared_ptr<Linear> q, k, v, head;
  Tensor mask;  // buffer: tril(ones(T, T)), 1 = allowed

 private:
  Tensor attend_skipping_masked_half(const Tensor& x) const;  // the rest of forward(), for long contexts
  Tensor attend_flash(const Tensor& x) const;                 // the same through the flash op
};

// The workshop's batch(): `batch` random windows of `context` token ids from the 1-D `data`, and the same
// windows shifted by one (the next-character targets). Draws the start positions with randint exactly as
// the Python does, so a seeded run sees the same batches.
std::pair<Tensor, Tensor> random_windows(const Tensor& data, int64_t batch, int64_t context);

}  // namespace nn
