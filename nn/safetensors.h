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
Checkpoint load_safetensors(const std::string& path);

// load_safetensors in steps, for a caller that puts each tensor's data where it belongs as it is read
// (nn/gpt2.cpp reads GPT-2's 500 MB straight into a model's parameters, never holding a second copy). The
// same checks run in the same order; the sink is told, in turn:
//   on_header    the checked header: every tensor (file order) and the metadata, before any data is read;
//   destination  where one tensor's bytes go: a contiguous CPU tensor of its dtype and shape, written in
//                place, or an undefined Tensor for a new one;
//   on_tensor    the tensor once its data is read (the destination, or the new one).
// The checksum covers every byte, so it is checked after the last on_tensor: a corrupt file throws then.
struct TensorHeader {
  std::string name;
  autograd::DType dtype;
  autograd::Shape shape;
};
struct TensorSink {
  std::function<void(const std::vector<TensorHeader>&, const std::map<std::string, std::string>& metadata)> on_header;
  std::function<Tensor(const TensorHeader&)> destination;
  std::function<void(const TensorHeader&, const Tensor&)> on_tensor;
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
