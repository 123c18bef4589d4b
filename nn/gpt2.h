// gpt2.h — OpenAI's GPT-2 as Hugging Face publishes it (model.safetensors of gpt2, gpt2-medium,
// gpt2-large, gpt2-xl), loaded into the book's GPTModel, and written back in that layout.
//
// GPT-2 is the book's GPT with q, k and v biases and the head tied to the token embedding. Hugging Face
// keeps OpenAI's names and OpenAI's Conv1D layout: every projection's weight is stored [in, out] (y = x·W + b),
// the transpose of nn.Linear's [out, in], and q, k, v are one fused c_attn of [D, 3D]. The names map as
//   wte, wpe                   → tok_emb, pos_emb
//   h.N.ln_1 / ln_2 (weight, bias) → trf_blocks.N.norm1 / norm2 (scale, shift)
//   h.N.attn.c_attn [D, 3D]    → W_query, W_key, W_value: columns [0, D), [D, 2D), [2D, 3D), transposed
//   h.N.attn.c_proj [D, D]     → att.out_proj, transposed
//   h.N.mlp.c_fc [D, 4D]       → ff.layers.0 (expand), transposed
//   h.N.mlp.c_proj [4D, D]     → ff.layers.2 (contract), transposed
//   ln_f                       → final_norm
//   (no head)                  → out_head.weight = tok_emb.weight
// Names may carry a "transformer." prefix (GPT2LMHeadModel's state_dict). The causal-mask buffers some
// conversions keep (h.N.attn.bias, h.N.attn.masked_bias) and lm_head.weight (the tied copy) are accepted
// and not used. Every value the model takes must be a number (NaN or an infinity is refused, naming the
// tensor). Float32 and float64 tensors are read; any other dtype is refused, naming the tensor.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nn/gpt.h"
#include "nn/safetensors.h"

namespace nn {

// Every released GPT-2 has heads of 64 (768/12, 1024/16, 1280/20, 1600/25); the file's shapes do not
// say the head count, so without another source it is emb_dim / 64.
inline constexpr int64_t kGpt2HeadDim = 64;

// Whether the checkpoint holds GPT-2's tensors (a "wte.weight" or "transformer.wte.weight").
bool is_gpt2_checkpoint(const Checkpoint& checkpoint);
// The same for a safetensors file, from its header alone (no tensor data is read): decides whether to
// load_gpt2 it, which holds one model in memory, rather than load_safetensors and gpt2_from_checkpoint.
bool is_gpt2_file(const std::string& path);

// The model of a GPT-2 checkpoint, configured from its shapes: vocab and emb_dim from wte, context from wpe,
// layers from the h.N blocks (numbered h.0 up, each with all its tensors); n_heads from the metadata's
// "n_head" when the file gives it, else from the argument if positive, else emb_dim / 64. A positive
// n_heads for a file that gives another count is refused (the file knows its model). qkv_bias on, head
// tied, dropout 0, in eval mode. Every tensor is checked; a missing, unexpected, misshapen or non-finite
// one throws CheckpointError naming `path`, the tensor, and (for a shape) both shapes.
std::unique_ptr<GPTModel> gpt2_from_checkpoint(const Checkpoint& checkpoint, const std::string& path,
                                               int64_t n_heads = 0);
// The same, taking the checkpoint's tensors and dropping each once it is copied (a load then holds about
// one model's memory, not two). `checkpoint` is left without tensors.
std::unique_ptr<GPTModel> gpt2_from_checkpoint(Checkpoint&& checkpoint, const std::string& path, int64_t n_heads = 0);
// weights BFloat16 (generate --precision bf16): the model's matrices kept in bfloat16
// (keep_weights_in_bfloat16), a float32 tensor read straight into its matrix is rounded as it is read.
std::unique_ptr<GPTModel> load_gpt2(const std::string& path, int64_t n_heads = 0,
                                    autograd::DType weights = autograd::DType::Float32);

// What a GPT-2 file holds, read and checked as load_gpt2 reads it (every name, shape and value, and the
// checksum of a file that has one) but one tensor at a time and without building the model: what `info`
// shows of a file of any size. config.n_heads is the metadata's n_head, else emb_dim / 64 when that
// divides, else 0: the file cannot say, and a command needs the count given.
struct Gpt2FileInfo {
  GPTConfig config;
  bool heads_in_file = false;         // the metadata gives n_head
  int64_t parameters = 0;             // the model's numbers (lm_head and the mask buffers are not the model's)
  std::vector<TensorHeader> tensors;  // in file order
  std::map<std::string, std::string> metadata;
};
Gpt2FileInfo inspect_gpt2_file(const std::string& path);

// llm.c's checkpoint (gpt2_124M.bin, written by its train_gpt2.py): 256 int32 of header (magic 20240326,
// version 3, context, vocab, layers, heads, width, padded vocab), then float32 tensors in nn.Linear's
// [out, in] layout, each kind for all layers in turn. CheckpointError names the file and what is wrong
// (magic, version, sizes, the file's length against the one the header implies, a NaN or infinite value
// under llm.c's name for its tensor). The header gives the head count: a positive n_heads must agree.
bool is_llmc_checkpoint(const std::string& path);  // a regular file that starts with llm.c's magic number
std::unique_ptr<GPTModel> load_llmc_gpt2(const std::string& path, int64_t n_heads = 0);

// The model's tensors under GPT-2's names and layout (no prefix, no head), for save_safetensors; the
// metadata gpt2_metadata gives records n_head. The model must have q, k, v biases and a tied head.
NamedTensors gpt2_state_dict(const GPTModel& model);
std::map<std::string, std::string> gpt2_metadata(const GPTModel& model);

}  // namespace nn
