// fuzz_safetensors.cpp — nn::load_safetensors on any bytes.
//
// Checks: a file is either refused with a one-line nn::CheckpointError naming the path, or loaded; a
// loaded file's tensors are readable to their last byte, and saving them and loading that again gives the
// same names, shapes, dtypes, bytes and metadata. Corpus: corpus/safetensors/ (real checkpoints of both
// models, and headers that lie).
#include <cstring>

#include "autograd/autograd.h"
#include "fuzz_common.h"
#include "nn/safetensors.h"

using namespace autograd;

namespace {

std::string bytes_of(const Tensor& t) {
  const size_t n = size_t(t.numel()) * dtype_size(t.dtype());
  return std::string(static_cast<const char*>(t.raw_data()), n);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_scratch("input.safetensors", data, size);
  nn::Checkpoint ck;
  try {
    ck = nn::load_safetensors(path);
  } catch (const nn::CheckpointError& e) {
    fuzz::check_message(e, "CheckpointError");
    fuzz::expect(std::string(e.what()).find(path) != std::string::npos,
                 std::string("the refusal does not name the file: ") + e.what());
    return 0;
  } catch (const std::exception& e) {
    fuzz::fail(std::string("load_safetensors threw something other than CheckpointError: ") + e.what());
  }
  for (const auto& [name, t] : ck.tensors) {
    fuzz::expect(t.is_contiguous(), "tensor '" + name + "' is not contiguous");
    (void)t.to(DType::Float64).sum().item();  // reads every element (a bool must be 0 or 1 to be read)
  }
  const std::string again = (fuzz::scratch_dir() / "again.safetensors").string();
  try {
    nn::save_safetensors(again, ck.tensors, ck.metadata);
  } catch (const nn::CheckpointError& e) {
    fuzz::fail(std::string("a loaded checkpoint cannot be saved again: ") + e.what());
  }
  nn::Checkpoint back = nn::load_safetensors(again);
  fuzz::expect(back.metadata == ck.metadata, "the metadata changed in a save and load");
  fuzz::expect(back.tensors.size() == ck.tensors.size(), "the number of tensors changed in a save and load");
  for (size_t i = 0; i < ck.tensors.size(); ++i) {
    const auto& [name, t] = ck.tensors[i];
    const auto& [name2, t2] = back.tensors[i];
    fuzz::expect(name == name2, "tensor order changed in a save and load: '" + name + "' became '" + name2 + "'");
    fuzz::expect(t.shape() == t2.shape() && t.dtype() == t2.dtype(), "tensor '" + name + "' changed shape or dtype");
    fuzz::expect(bytes_of(t) == bytes_of(t2), "tensor '" + name + "' changed bytes in a save and load");
  }
  return 0;
}
