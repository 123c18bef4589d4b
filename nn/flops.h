// flops.h — the model FLOPs of a GPT training step, for model-FLOPs utilisation (MFU): the FLOPs the
// model needs, over the elapsed time, over the peak (autograd::core_peak_flops() times the threads).
//
// Per token, PaLM's count (Chowdhery et al. 2022, appendix B) with the head and with frozen weights:
//   6·N_trained + 4·N_frozen + 12·L·D·T
// N: the parameters a token's products multiply by — every block's (weights, biases, LayerNorms, LoRA
// adapters), the final LayerNorm's, and the head's V·D (tok_emb's matrix when it is tied); the embedding
// lookups do no arithmetic and are not counted. A trained parameter costs 6 FLOPs a token (2 forward, 2
// for the input's gradient, 2 for its own); a frozen one 4 (no gradient of its own: LoRA's base weights).
// 12·L·D·T: attention's two products (q·kᵀ and the weights times v) over the T positions of the window,
// 4·D·T forward and twice that backward in each of the L blocks (PaLM's 12·L·H·Q·T, as H heads of width
// Q make D). T counts every position, as PaLM does: the causal half that is masked away counts too.
//
// A Llama (nn/llama.h) by the same count: N every block's projections, norms and adapters, the final norm
// and the head's V·D (embed_tokens' matrix when tied: untied, the embedding is a lookup); its attention
// 12·L·(heads·head_dim)·T, since every query head multiplies by the keys and values it reads, whether or
// not it shares them with other query heads (grouped-query attention saves memory, not these FLOPs).
#pragma once
#include <cstdint>

#include "nn/gpt.h"
#include "nn/llama.h"

namespace nn {

double gpt_training_flops_per_token(const GPTModel& model, int64_t T);
double llama_training_flops_per_token(const LlamaModel& model, int64_t T);

}  // namespace nn
