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
#pragma once
#include <cstdint>

#include "nn/gpt.h"

namespace nn {

double gpt_training_flops_per_token(const GPTModel& model, int64_t T);

}  // namespace nn
