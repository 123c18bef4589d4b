// dtype.h — the four element types a Tensor can hold, and small helpers about them.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace autograd {

// float32 is the training dtype, float64 exists for gradcheck, int64 holds indices, bool holds masks.
enum class DType : uint8_t { Float32, Float64, Int64, Bool };

constexpr std::string_view dtype_name(DType d) {
  switch (d) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int64: return "int64";
    case DType::Bool: return "bool";
  }
  return "?";
}

constexpr size_t dtype_size(DType d) {
  switch (d) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int64: return 8;
    case DType::Bool: return 1;
  }
  return 0;
}

constexpr bool is_floating(DType d) { return d == DType::Float32 || d == DType::Float64; }

// Maps a C++ element type to its DType (used by templated kernels and constructors).
template <typename T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };

// Calls f(T{}) with T the C++ type of `dtype`: how a kernel written once as a template runs for every
// dtype (used by the CPU and the CUDA backends alike).
template <typename F> decltype(auto) dispatch(DType dtype, F&& f) {
  switch (dtype) {
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
    case DType::Int64: return f(int64_t{});
    case DType::Bool: return f(bool{});
  }
  return f(float{});
}

// The same for kernels that only make sense on floating point numbers; other dtypes are refused by name.
template <typename F> decltype(auto) dispatch_floating(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
    default: break;
  }
  throw std::invalid_argument(std::string(op) + ": expected a floating point tensor, got " +
                              std::string(dtype_name(dtype)));
}

}  // namespace autograd
