// safetensors.cpp — writing and (carefully) reading safetensors files.
#include "nn/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "nn/json_depth.h"

namespace nn {

using namespace autograd;
using json = nlohmann::json;

// The checksum lives in the metadata, so other safetensors readers see one more string and load the
// file as before; files without it (written by other tools) load unchecked.
constexpr const char* kChecksumKey = "scratchgrad.checksum";

namespace {

const char* dtype_code(DType d) {
  switch (d) {
    case DType::Float32: return "F32";
    case DType::Float64: return "F64";
    case DType::Int64: return "I64";
    case DType::Bool: return "BOOL";
    case DType::BFloat16: return "BF16";
  }
  return "?";
}

std::optional<DType> dtype_from_code(const std::string& code) {
  if (code == "F32") return DType::Float32;
  if (code == "F64") return DType::Float64;
  if (code == "I64") return DType::Int64;
  if (code == "BOOL") return DType::Bool;
  if (code == "BF16") return DType::BFloat16;  // kept as bfloat16: read and written as is
  return std::nullopt;
}

// ---- half-precision floats, widened to float32 as they are read

// The two 16-bit formats Hugging Face stores models in. bfloat16 is the top half of a float32 (8 exponent
// bits, 7 mantissa bits); IEEE half has 5 exponent bits and 10 mantissa bits. Both widen exactly.
enum class HalfFloat { none, bf16, f16 };

HalfFloat half_float_from_code(const std::string& code) {
  if (code == "BF16") return HalfFloat::bf16;
  if (code == "F16") return HalfFloat::f16;
  return HalfFloat::none;
}

float bf16_to_float(uint16_t h) { return autograd::widen(autograd::bfloat16{h}); }  // exact: the top half

float f16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  uint32_t bits;
  if (exponent == 0x1f) {  // infinity or NaN: all exponent bits set in float32 too
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent == 0) {  // zero or subnormal: mantissa · 2^-24, exact in float32
    const float magnitude = std::ldexp(float(mantissa), -24);
    return sign ? -magnitude : magnitude;
  } else {  // normal: rebias the exponent (15 → 127) and widen the mantissa
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
  throw CheckpointError(fmt::format("{}: {}", path, problem));
}

// A header field as a message quotes it: its JSON, cut to 60 characters (a crafted one may be huge).
std::string shortened_json(const json& value) {
  std::string text = value.dump();
  return text.size() <= 60 ? text : text.substr(0, 60) + "...";
}

// ---- the checksum ----
// FNV-1a over 64 bits: each step h = (h ^ byte) * prime is a bijection of h, so changing any one byte of
// the input always changes the result. That is what a flipped byte or a torn write needs; it is not a
// defence against someone forging a file.
class Fnv1a64 {
 public:
  void add(const void* bytes, size_t n) {
    const auto* p = static_cast<const unsigned char*>(bytes);
    for (size_t i = 0; i < n; ++i) h_ = (h_ ^ p[i]) * 0x100000001b3ull;
  }
  std::string str() const { return fmt::format("fnv1a64:{:016x}", h_); }

 private:
  uint64_t h_ = 0xcbf29ce484222325ull;
};

// What the checksum covers: the header as JSON without the checksum itself (nlohmann sorts keys and adds
// no spaces, so writer and reader dump the same bytes), then every data byte.
std::string header_for_checksum(json header) {
  if (header.contains("__metadata__")) {
    header["__metadata__"].erase(kChecksumKey);
    if (header["__metadata__"].empty()) header.erase("__metadata__");
  }
  return header.dump();
}

// A file that carries a checksum must match it: a flipped byte is reported, never trained on. `computed`:
// the hash of the header (without the checksum) and of every data byte, when the file has a checksum.
void verify_checksum(const std::string& path, const json& header, const Fnv1a64* computed) {
  if (!header.contains("__metadata__")) return;
  // A flipped byte may hit the key itself: a value that is unmistakably a checksum, under another key,
  // is a damaged file too.
  static const std::regex checksum_value("fnv1a64:[0-9a-f]{16}");
  for (const auto& [key, value] : header["__metadata__"].items())
    if (key != kChecksumKey && std::regex_match(value.get<std::string>(), checksum_value))
      fail(path, fmt::format("checksum entry damaged: metadata {} holds a checksum (the file is corrupt)", quoted_name(key)));
  if (!header["__metadata__"].contains(kChecksumKey) || !computed) return;
  const std::string stored = header["__metadata__"][kChecksumKey].get<std::string>();
  if (computed->str() != stored)
    fail(path, fmt::format("checksum mismatch: the file says {} but its bytes give {} (the file is corrupt)", stored,
                           computed->str()));
}

}  // namespace

// The shared writer (nn/atomic_file.h) names the file and the problem; here that is a checkpoint's error.
template <typename Write>
void as_checkpoint_error(Write&& write) {
  try {
    write();
  } catch (const FileWriteError& e) {
    throw CheckpointError(e.what());
  }
}

void check_writable(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail(path, "is a folder, not a file to write");
  remove_stale_temp_files(path);
  as_checkpoint_error([&] { AtomicFile probe(path); });  // created, then removed by its destructor
}

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  if (metadata.count(kChecksumKey)) fail(path, fmt::format("metadata key '{}' is reserved for the checksum", kChecksumKey));
  json header = json::object();
  std::vector<Tensor> contiguous;
  size_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__") fail(path, "a tensor may not be called __metadata__");
    if (header.contains(name)) fail(path, fmt::format("tensor name {} appears twice", quoted_name(name)));
    Tensor c = t.detach().cpu().contiguous();
    size_t nbytes = size_t(c.numel()) * dtype_size(c.dtype());
    header[name] = {{"dtype", dtype_code(c.dtype())}, {"shape", c.shape()}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    contiguous.push_back(c);
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  Fnv1a64 checksum;
  const std::string covered = header.dump();
  checksum.add(covered.data(), covered.size());
  for (const Tensor& c : contiguous) checksum.add(c.raw_data(), size_t(c.numel()) * dtype_size(c.dtype()));
  header["__metadata__"][kChecksumKey] = checksum.str();
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // pad so the data starts 8-byte aligned

  remove_stale_temp_files(path);
  as_checkpoint_error([&] {
    AtomicFile out(path);
    unsigned char length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(uint64_t(text.size()) >> (8 * i));  // little-endian
    out.write(length, 8);
    out.write(text.data(), text.size());
    for (const Tensor& c : contiguous) out.write(c.raw_data(), size_t(c.numel()) * dtype_size(c.dtype()));
    out.commit();
  });
}

namespace {

// Reads exactly n bytes at the file's current position, or names what went wrong.
void read_exactly(int fd, char* into, size_t n, const std::string& path, const char* what) {
  size_t done = 0;
  while (done < n) {
    const ssize_t got = ::read(fd, into + done, std::min<size_t>(n - done, size_t(1) << 30));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail(path, fmt::format("cannot read the {} ({})", what, std::strerror(errno)));
    if (got == 0) fail(path, fmt::format("the file ended while reading the {} (it shrank while being read?)", what));
    done += size_t(got);
  }
}

struct FileDescriptor {
  int fd = -1;
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
};

// One tensor as the header declares it, checked against the file's size before any data is read.
struct TensorEntry {
  std::string name;
  DType dtype;  // in memory
  Shape shape;
  size_t begin, end;
  std::string file_dtype;
  HalfFloat half;  // stored as 16-bit floats, widened to float32 (dtype) as read
};

TensorEntry checked_entry(const std::string& path, const std::string& name, const json& entry, size_t data_size,
                          bool widen_half_floats, bool keep_bfloat16) {
  if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets"))
    fail(path, fmt::format("tensor {} lacks dtype, shape or data_offsets", quoted_name(name)));
  const std::string code = entry["dtype"].is_string() ? entry["dtype"].get<std::string>() : "";
  const bool widened = widen_half_floats && !(keep_bfloat16 && code == "BF16");
  const HalfFloat half = widened ? half_float_from_code(code) : HalfFloat::none;
  auto dtype = half != HalfFloat::none ? std::optional(DType::Float32) : dtype_from_code(code);
  if (!dtype)
    fail(path, fmt::format("tensor {} has unsupported dtype {} (the dtypes read are {})", quoted_name(name),
                           shortened_json(entry["dtype"]),
                           widen_half_floats ? "F32, F64, I64 and BOOL, and BF16 and F16 widened to F32"
                                             : "F32, F64, I64, BOOL and BF16"));
  Shape shape;
  if (!entry["shape"].is_array()) fail(path, fmt::format("tensor {} has a malformed shape", quoted_name(name)));
  for (const json& s : entry["shape"]) {
    if (!s.is_number_unsigned() || s.get<uint64_t>() > uint64_t(INT64_MAX))
      fail(path, fmt::format("tensor {} has a malformed shape {}", quoted_name(name), shortened_json(entry["shape"])));
    shape.push_back(s.get<int64_t>());
  }
  const json& off = entry["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
    fail(path, fmt::format("tensor {} has malformed data_offsets", quoted_name(name)));
  size_t begin = off[0].get<size_t>(), end = off[1].get<size_t>();
  size_t expected = 0;
  try {
    expected = checked_nbytes(shape, *dtype, "load_safetensors");  // (the float32 size: the memory it will take)
  } catch (const std::invalid_argument& e) {
    fail(path, fmt::format("tensor {}: {}", quoted_name(name), e.what()));
  }
  if (half != HalfFloat::none) expected /= 2;  // two bytes a value in the file
  if (end < begin || end - begin != expected)
    fail(path, fmt::format("tensor {} has data_offsets [{}, {}] but shape {} of {} needs {} bytes", quoted_name(name), begin, end,
                           shape_to_string(shape), half != HalfFloat::none ? code : dtype_name(*dtype), expected));
  if (end > data_size)
    fail(path, fmt::format("tensor {} ends at byte {} but the data has only {} bytes (truncated file)", quoted_name(name), end,
                           data_size));
  return {name, *dtype, std::move(shape), begin, end, code, half};
}

// Reads a half-float tensor's n bytes from the file into `into` (float32), a slice at a time: a buffer of
// the slice's 16-bit values is all that is held beside the destination. Each slice's bytes go to the
// checksum (when there is one) as they are in the file.
void read_widened(int fd, float* into, size_t n, HalfFloat half, const std::string& path, const std::string& name,
                  Fnv1a64* checksum) {
  constexpr size_t kSliceValues = size_t(1) << 16;
  std::vector<uint16_t> slice(std::min(n / 2, kSliceValues));
  for (size_t done = 0; done < n / 2;) {
    const size_t count = std::min(n / 2 - done, kSliceValues);
    read_exactly(fd, reinterpret_cast<char*>(slice.data()), 2 * count, path,
                 fmt::format("data of tensor {}", quoted_name(name)).c_str());
    if (checksum) checksum->add(slice.data(), 2 * count);
    for (size_t i = 0; i < count; ++i)
      into[done + i] = half == HalfFloat::bf16 ? bf16_to_float(slice[i]) : f16_to_float(slice[i]);
    done += count;
  }
}

// Reads a float32 tensor's n bytes into `into` (bfloat16), a slice at a time, each value rounded to the
// nearest bfloat16 (ties to even): a model kept in bfloat16 is filled from an F32 file without a float32
// copy of the tensor. The checksum sees the file's bytes.
void read_narrowed(int fd, bfloat16* into, size_t n, const std::string& path, const std::string& name,
                   Fnv1a64* checksum) {
  constexpr size_t kSliceValues = size_t(1) << 16;
  std::vector<float> slice(std::min(n / 4, kSliceValues));
  for (size_t done = 0; done < n / 4;) {
    const size_t count = std::min(n / 4 - done, kSliceValues);
    read_exactly(fd, reinterpret_cast<char*>(slice.data()), 4 * count, path,
                 fmt::format("data of tensor {}", quoted_name(name)).c_str());
    if (checksum) checksum->add(slice.data(), 4 * count);
    for (size_t i = 0; i < count; ++i) into[done + i] = round_to_bfloat16(slice[i]);
    done += count;
  }
}

}  // namespace

// The header is read and checked first — its length and nesting depth against the limits, every tensor's
// extent against the file's real size — and only then the data, which must be exactly what the tensors
// cover: a device, a pipe, or a huge sparse file with a small header is refused before anything big is read.
void read_safetensors(const std::string& path, const TensorSink& sink) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail(path, fmt::format("cannot open ({})", std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) fail(path, "is a folder, not a safetensors file");
  if (!S_ISREG(st.st_mode)) fail(path, "is not a regular file (a device, pipe or socket), not a safetensors file");
  FileDescriptor file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) fail(path, fmt::format("cannot open ({})", std::strerror(errno)));
  if (::fstat(file.fd, &st) != 0 || !S_ISREG(st.st_mode)) fail(path, "is not a regular file, not a safetensors file");
  const size_t file_size = size_t(st.st_size);
  if (file_size < 8) fail(path, fmt::format("not a safetensors file: {} bytes is too short for the header length", file_size));
  unsigned char length[8];
  read_exactly(file.fd, reinterpret_cast<char*>(length), 8, path, "header length");
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) header_len |= uint64_t(length[i]) << (8 * i);
  if (header_len > file_size - 8)
    fail(path, fmt::format("header length {} exceeds the file's {} bytes (truncated or not safetensors)", header_len,
                           file_size));
  if (header_len > kMaxHeaderBytes)
    fail(path, fmt::format("header length {} is over the limit of {} bytes (not a checkpoint this program wrote)",
                           header_len, kMaxHeaderBytes));
  std::string header_text(header_len, '\0');
  read_exactly(file.fd, header_text.data(), header_text.size(), path, "header");
  if (json_nesting_depth(header_text, kMaxHeaderDepth) > kMaxHeaderDepth)
    fail(path, fmt::format("header nests JSON more than {} levels deep (a checkpoint needs 3)", kMaxHeaderDepth));
  json header;
  try {
    header = json::parse(header_text);
  } catch (const json::exception& e) {
    fail(path, fmt::format("header is not valid JSON ({})", e.what()));
  }
  if (!header.is_object()) fail(path, "header is not a JSON object");

  const size_t data_size = file_size - 8 - header_len;
  std::map<std::string, std::string> metadata;
  std::vector<TensorEntry> entries;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail(path, "__metadata__ is not an object");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) fail(path, fmt::format("metadata value for {} is not a string", quoted_name(k)));
        if (k != kChecksumKey) metadata[k] = v.get<std::string>();
      }
      continue;
    }
    entries.push_back(checked_entry(path, name, entry, data_size, sink.widen_half_floats, sink.keep_bfloat16));
  }
  // in file order (json iterates keys alphabetically; the writer lays tensors out one after another)
  std::stable_sort(entries.begin(), entries.end(), [](const TensorEntry& a, const TensorEntry& b) {
    return std::pair(a.begin, a.end) < std::pair(b.begin, b.end);
  });
  size_t covered = 0;
  for (const TensorEntry& e : entries) {
    if (e.begin < covered) fail(path, "tensor data ranges overlap");
    covered = std::max(covered, e.end);
  }
  if (covered < data_size)
    fail(path, fmt::format("{} bytes follow the last tensor's data (the header covers {} of the file's {} data bytes)",
                           data_size - covered, covered, data_size));

  if (sink.on_header) {
    std::vector<TensorHeader> headers;
    for (const TensorEntry& e : entries) headers.push_back({e.name, e.dtype, e.shape, e.file_dtype});
    sink.on_header(headers, metadata);
  }

  // The data, in file order, in one pass: each tensor's bytes straight into its storage (a 124M-parameter
  // GPT-2 is 500 MB: no second copy of it is held), and whatever lies between tensors (nothing, in a file a
  // writer made) only into the checksum.
  const bool checksummed = header.contains("__metadata__") && header["__metadata__"].contains(kChecksumKey);
  Fnv1a64 checksum;
  if (checksummed) {
    const std::string covered_header = header_for_checksum(header);
    checksum.add(covered_header.data(), covered_header.size());
  }
  std::vector<char> between;
  size_t position = 0;
  for (const TensorEntry& e : entries) {
    if (e.begin > position) {
      between.resize(e.begin - position);
      read_exactly(file.fd, between.data(), between.size(), path, "data between tensors");
      if (checksummed) checksum.add(between.data(), between.size());
    }
    const TensorHeader header{e.name, e.dtype, e.shape, e.file_dtype};
    Tensor t = sink.destination ? sink.destination(header) : Tensor();
    // a float32 tensor read into a bfloat16 destination is rounded as it is read
    const bool narrowed = t.defined() && e.dtype == DType::Float32 && e.half == HalfFloat::none &&
                          t.dtype() == DType::BFloat16;
    if (!t.defined()) {
      t = empty(e.shape, e.dtype);
    } else if (t.shape() != e.shape || (t.dtype() != e.dtype && !narrowed) || !t.is_contiguous() ||
               t.device() != Device::cpu()) {
      throw std::logic_error(fmt::format("read_safetensors: the destination of '{}' is not a contiguous CPU {} {}", e.name,
                                         dtype_name(e.dtype), shape_to_string(e.shape)));
    }
    char* bytes = static_cast<char*>(t.raw_data());
    const size_t n = e.end - e.begin;
    if (e.half != HalfFloat::none) {
      read_widened(file.fd, reinterpret_cast<float*>(bytes), n, e.half, path, e.name, checksummed ? &checksum : nullptr);
    } else if (narrowed) {
      read_narrowed(file.fd, reinterpret_cast<bfloat16*>(bytes), n, path, e.name, checksummed ? &checksum : nullptr);
    } else {
      if (n > 0) read_exactly(file.fd, bytes, n, path, fmt::format("data of tensor {}", quoted_name(e.name)).c_str());
      if (checksummed) checksum.add(bytes, n);
    }
    if (e.dtype == DType::Bool)  // a C++ bool holds 0 or 1; any other byte would be read as neither
      for (size_t i = 0; i < n; ++i)
        if (static_cast<unsigned char>(bytes[i]) > 1)
          fail(path, fmt::format("tensor {} of dtype BOOL holds the byte {} at element {} (a bool is 0 or 1)", quoted_name(e.name),
                                 int(static_cast<unsigned char>(bytes[i])), i));
    if (sink.on_tensor) sink.on_tensor(header, t);
    position = e.end;
  }
  verify_checksum(path, header, checksummed ? &checksum : nullptr);
}

Checkpoint load_safetensors(const std::string& path, bool widen_half_floats) {
  Checkpoint ck;
  read_safetensors(path, {.on_header = [&](const std::vector<TensorHeader>&,
                                           const std::map<std::string, std::string>& metadata) { ck.metadata = metadata; },
                          .destination = {},
                          .on_tensor = [&](const TensorHeader& h, const Tensor& t) { ck.tensors.emplace_back(h.name, t); },
                          .widen_half_floats = widen_half_floats});
  return ck;
}

// ---- checks on what a file holds

std::string quoted_name(std::string_view name) {
  constexpr size_t kShown = 60;
  if (name.size() <= kShown) return fmt::format("'{}'", name);
  return fmt::format("'{}...' ({} characters)", name.substr(0, kShown), name.size());
}

namespace {

// How many of `n` values are NaN or infinite.
template <typename T>
int64_t count_not_finite(const T* values, int64_t n) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) bad += !std::isfinite(values[i]);
  return bad;
}

// bfloat16 as it is (a matrix kept in bfloat16 is not widened to be checked): all 8 exponent bits set.
int64_t count_not_finite(const autograd::bfloat16* values, int64_t n) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) bad += (values[i].bits & 0x7F80) == 0x7F80;
  return bad;
}

}  // namespace

void check_finite(const std::string& path, const std::string& name, const Tensor& tensor, const std::string& why) {
  if (!is_floating(tensor.dtype())) return;
  const Tensor values = tensor.cpu().contiguous();
  const int64_t n = values.numel();
  const int64_t bad = values.dtype() == DType::Float32  ? count_not_finite(static_cast<const float*>(values.raw_data()), n)
                      : values.dtype() == DType::Float64 ? count_not_finite(static_cast<const double*>(values.raw_data()), n)
                                                        : count_not_finite(static_cast<const bfloat16*>(values.raw_data()), n);
  if (bad > 0)
    throw CheckpointError(fmt::format("{}: tensor {} holds {} NaN or infinite values of {}{}", path, quoted_name(name), bad,
                                      n, why.empty() ? "" : " (" + why + ")"));
}

}  // namespace nn
