// safetensors.h — checkpoints in the safetensors format, readable by `safetensors.torch.load_file`.
//
// Layout: 8-byte little-endian header length N, then N bytes of JSON
//   {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ..., "__metadata__": {...}}
// then the raw little-endian tensor bytes; offsets count from the first byte after the header.
#pragma once
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "nn/atomic_file.h"
#include "nn/module.h"

namespace nn {

// Every problem with a checkpoint file: the message is one line naming the file and the problem.
class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Checkpoint {
  NamedTensors tensors;                        // in file order
  std::map<std::string, std::string> metadata;  // "__metadata__": string → string
};

// Writes to a temporary file next to `path` ("<path>.tmp-<pid>-<random>"), fsyncs it, then renames it
// over `path`: a crash or kill -9 at any moment leaves the previous file whole, and a failed write (a full
// disk) throws and keeps it. Temporary files of processes that are gone are removed by the next save.
// The metadata gains "scratchgrad.checksum" (FNV-1a of the header and the data), which the loader checks.
// Tensors are written contiguous, on the CPU.
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Limits on the header, checked before it is parsed: its length (the safetensors crate's own limit) and
// how deep its JSON nests (a checkpoint needs 3 levels: the header, a tensor entry, its shape).
inline constexpr size_t kMaxHeaderBytes = 100'000'000;
inline constexpr size_t kMaxHeaderDepth = 64;

// Reads and checks everything: a regular file, header length and depth against the limits above, JSON,
// dtypes, shapes, offsets inside the file's real size, overlaps, bytes no tensor covers, truncation, and
// the checksum when the file has one (files from other tools have none and load as they are); only then
// the data is read. The checksum is not returned in `metadata`. Throws CheckpointError.
// widen_half_floats: BF16 and F16 tensors are read as float32 (see TensorSink below) instead of refused.
Checkpoint load_safetensors(const std::string& path, bool widen_half_floats = false);

// load_safetensors in steps, for a caller that puts each tensor's data where it belongs as it is read
// (nn/gpt2.cpp reads GPT-2's 500 MB straight into a model's parameters, never holding a second copy). The
// same checks run in the same order; the sink is told, in turn:
//   on_header    the checked header: every tensor (file order) and the metadata, before any data is read;
//   destination  where one tensor's bytes go: a contiguous CPU tensor of its dtype and shape, written in
//                place (for a float32 tensor, also a bfloat16 one: each value rounded as it is read), or
//                an undefined Tensor for a new one;
//   on_tensor    the tensor once its data is read (the destination, or the new one).
// The checksum covers every byte, so it is checked after the last on_tensor: a corrupt file throws then.
//
// Half-precision files (Hugging Face's BF16 and F16 models) are read only by a sink that sets
// widen_half_floats: each value is widened to float32 as it is read (exactly: every BF16 and F16 value is a
// float32 value), straight into the destination, so a BF16 model never exists in memory as 16-bit numbers
// and no float32 copy of the whole file is made either. Such a tensor's header says dtype Float32 and
// file_dtype "BF16" or "F16". Without the flag they are refused as before, naming the tensor and its dtype.
struct TensorHeader {
  std::string name;
  autograd::DType dtype;  // the tensor's dtype once read
  autograd::Shape shape;
  std::string file_dtype = {};  // the file's code for it: "F32", "F64", "I64", "BOOL", "BF16", "F16"
};
struct TensorSink {
  std::function<void(const std::vector<TensorHeader>&, const std::map<std::string, std::string>& metadata)> on_header;
  std::function<Tensor(const TensorHeader&)> destination;
  std::function<void(const TensorHeader&, const Tensor&)> on_tensor;
  bool widen_half_floats = false;  // read BF16 and F16 tensors as float32 instead of refusing them
  // With widen_half_floats: BF16 tensors are read as bfloat16, as they are stored (a model kept in bfloat16,
  // generate --precision bf16), and only F16 ones widened. Their header then says dtype BFloat16.
  bool keep_bfloat16 = false;
};
void read_safetensors(const std::string& path, const TensorSink& sink);

// (nn::remove_stale_temp_files, from nn/atomic_file.h, removes what a killed save of `path` left;
// save_safetensors and check_writable call it, and so does a run that resumes from `path`.)

// Throws CheckpointError if a file could not be created in the folder of `path` (checked before a long
// training run, so a bad --save path fails at once).
void check_writable(const std::string& path);

// Refuses (CheckpointError) a floating-point tensor that holds NaN or an infinity, naming the file, the
// tensor and how many of its values; `why` follows in parentheses (what it means, what to do). Every
// loader of weights runs it: a model with one NaN weight computes NaN logits, and those sample as token 0
// ("0 0 0 ..."), a silent wrong answer. Other dtypes pass.
void check_finite(const std::string& path, const std::string& name, const Tensor& tensor, const std::string& why);

// A tensor's name as a message quotes it: in quotes, and cut to its first 60 characters with its length
// when longer (a crafted file's name may be 300,000 characters, and an error is one line).
std::string quoted_name(std::string_view name);

}  // namespace nn
