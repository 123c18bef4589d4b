// safetensors.cpp — writing and (carefully) reading safetensors files.
#include "nn/safetensors.h"

#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace nn {

using namespace autograd;
using json = nlohmann::json;

namespace {

const char* dtype_code(DType d) {
  switch (d) {
    case DType::Float32: return "F32";
    case DType::Float64: return "F64";
    case DType::Int64: return "I64";
    case DType::Bool: return "BOOL";
  }
  return "?";
}

std::optional<DType> dtype_from_code(const std::string& code) {
  if (code == "F32") return DType::Float32;
  if (code == "F64") return DType::Float64;
  if (code == "I64") return DType::Int64;
  if (code == "BOOL") return DType::Bool;
  return std::nullopt;
}

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
  throw CheckpointError(fmt::format("{}: {}", path, problem));
}

std::string temp_path_for(const std::string& path) {
  std::random_device rd;
  return fmt::format("{}.tmp-{:08x}", path, rd());
}

}  // namespace

void check_writable(const std::string& path) {
  std::string probe = temp_path_for(path);
  std::ofstream out(probe, std::ios::binary);
  if (!out) fail(path, fmt::format("cannot write here ({})", std::strerror(errno)));
  out.close();
  std::filesystem::remove(probe);
}

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  std::vector<Tensor> contiguous;
  size_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__") fail(path, "a tensor may not be called __metadata__");
    if (header.contains(name)) fail(path, fmt::format("tensor name '{}' appears twice", name));
    Tensor c = t.detach().cpu().contiguous();
    size_t nbytes = size_t(c.numel()) * dtype_size(c.dtype());
    header[name] = {{"dtype", dtype_code(c.dtype())}, {"shape", c.shape()}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    contiguous.push_back(c);
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // pad so the data starts 8-byte aligned

  const std::string temp = temp_path_for(path);
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) fail(path, fmt::format("cannot create {} ({})", temp, std::strerror(errno)));
    uint64_t n = text.size();
    unsigned char length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(n >> (8 * i));  // little-endian
    out.write(reinterpret_cast<const char*>(length), 8);
    out.write(text.data(), std::streamsize(text.size()));
    for (const Tensor& c : contiguous)
      out.write(static_cast<const char*>(c.raw_data()), std::streamsize(size_t(c.numel()) * dtype_size(c.dtype())));
    out.flush();
    if (!out) {
      out.close();
      std::filesystem::remove(temp);
      fail(path, "write failed (disk full?)");
    }
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  if (ec) {
    std::filesystem::remove(temp);
    fail(path, fmt::format("cannot rename the finished file into place ({})", ec.message()));
  }
}

Checkpoint load_safetensors(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail(path, "is a folder, not a safetensors file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, fmt::format("cannot open ({})", std::strerror(errno)));
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 8) fail(path, fmt::format("not a safetensors file: {} bytes is too short for the header length", bytes.size()));
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) header_len |= uint64_t(static_cast<unsigned char>(bytes[size_t(i)])) << (8 * i);
  if (header_len > bytes.size() - 8)
    fail(path, fmt::format("header length {} exceeds the file's {} bytes (truncated or not safetensors)", header_len,
                           bytes.size()));
  json header;
  try {
    header = json::parse(bytes.begin() + 8, bytes.begin() + 8 + std::ptrdiff_t(header_len));
  } catch (const json::exception& e) {
    fail(path, fmt::format("header is not valid JSON ({})", e.what()));
  }
  if (!header.is_object()) fail(path, "header is not a JSON object");

  const char* data = bytes.data() + 8 + header_len;
  const size_t data_size = bytes.size() - 8 - header_len;
  Checkpoint ck;
  std::vector<std::pair<size_t, size_t>> ranges;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail(path, "__metadata__ is not an object");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) fail(path, fmt::format("metadata value for '{}' is not a string", k));
        ck.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets"))
      fail(path, fmt::format("tensor '{}' lacks dtype, shape or data_offsets", name));
    auto dtype = entry["dtype"].is_string() ? dtype_from_code(entry["dtype"].get<std::string>()) : std::nullopt;
    if (!dtype) fail(path, fmt::format("tensor '{}' has unsupported dtype {}", name, entry["dtype"].dump()));
    Shape shape;
    if (!entry["shape"].is_array()) fail(path, fmt::format("tensor '{}' has a malformed shape", name));
    for (const json& s : entry["shape"]) {
      if (!s.is_number_unsigned() || s.get<uint64_t>() > uint64_t(INT64_MAX))
        fail(path, fmt::format("tensor '{}' has a malformed shape {}", name, entry["shape"].dump()));
      shape.push_back(s.get<int64_t>());
    }
    const json& off = entry["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      fail(path, fmt::format("tensor '{}' has malformed data_offsets", name));
    size_t begin = off[0].get<size_t>(), end = off[1].get<size_t>();
    size_t expected = 0;
    try {
      expected = checked_nbytes(shape, *dtype, "load_safetensors");
    } catch (const std::invalid_argument& e) {
      fail(path, fmt::format("tensor '{}': {}", name, e.what()));
    }
    if (end < begin || end - begin != expected)
      fail(path, fmt::format("tensor '{}' has data_offsets [{}, {}] but shape {} of {} needs {} bytes", name, begin, end,
                             shape_to_string(shape), dtype_name(*dtype), expected));
    if (end > data_size)
      fail(path, fmt::format("tensor '{}' ends at byte {} but the data has only {} bytes (truncated file)", name, end,
                             data_size));
    ranges.emplace_back(begin, end);
    if (*dtype == DType::Bool)  // a C++ bool holds 0 or 1; any other byte would be read as neither
      for (size_t i = begin; i < end; ++i)
        if (static_cast<unsigned char>(data[i]) > 1)
          fail(path, fmt::format("tensor '{}' of dtype BOOL holds the byte {} at element {} (a bool is 0 or 1)", name,
                                 int(static_cast<unsigned char>(data[i])), i - begin));
    Tensor t = empty(shape, *dtype);
    if (expected) std::memcpy(t.raw_data(), data + begin, expected);
    ck.tensors.emplace_back(name, t);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) fail(path, "tensor data ranges overlap");
  // keep file order (json iterates keys alphabetically; order by offset like the writer laid them out)
  std::stable_sort(ck.tensors.begin(), ck.tensors.end(), [&](const auto& a, const auto& b) {
    return header[a.first]["data_offsets"][0].template get<size_t>() < header[b.first]["data_offsets"][0].template get<size_t>();
  });
  return ck;
}

}  // namespace nn
