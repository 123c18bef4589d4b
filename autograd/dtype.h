// dtype.h — the five element types a Tensor can hold, and small helpers about them.
#pragma once
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "autograd/compat.h"  // bit_cast (the WebAssembly build's library has no std::bit_cast)

namespace autograd {

// float32 is the training dtype, float64 exists for gradcheck, int64 holds indices, bool holds masks,
// bfloat16 halves the bytes of weights and product operands (docs/precision.md).
enum class DType : uint8_t { Float32, Float64, Int64, Bool, BFloat16 };

// bfloat16 is the top half of a float32: the same sign and 8 exponent bits, 7 of the 23 mantissa bits.
// A tensor stores its 16 bits; every computation widens them to float32 (exact) and rounds the result.
struct bfloat16 {
  uint16_t bits;
};

// Exact: the 16 bits become the top half of a float32 whose low half is zero.
inline float widen(bfloat16 x) { return compat::bit_cast<float>(uint32_t(x.bits) << 16); }

// float32 → bfloat16, rounding to the nearest and to the even one on a tie, as PyTorch's CPU kernels
// round. Adding 0x7FFF plus the lowest kept bit to the 32 bits carries into the kept half exactly when
// the dropped half is above one half, or equal to it with the kept half odd. A NaN stays a NaN, the quiet
// 0x7FC0 that c10::BFloat16 and PyTorch's portable kernels write (its AVX-512 kernels write 0xFFFF).
// (A choice, not a branch: a loop of these becomes vector instructions.)
inline bfloat16 round_to_bfloat16(float x) {
  const uint32_t bits = compat::bit_cast<uint32_t>(x);
  const auto rounded = uint16_t((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
  return {std::isnan(x) ? uint16_t(0x7FC0) : rounded};
}

constexpr std::string_view dtype_name(DType d) {
  switch (d) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int64: return "int64";
    case DType::Bool: return "bool";
    case DType::BFloat16: return "bfloat16";
  }
  return "?";
}

constexpr size_t dtype_size(DType d) {
  switch (d) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int64: return 8;
    case DType::Bool: return 1;
    case DType::BFloat16: return 2;
  }
  return 0;
}

constexpr bool is_floating(DType d) { return d == DType::Float32 || d == DType::Float64 || d == DType::BFloat16; }

// Maps a C++ element type to its DType (used by templated kernels and constructors).
template <typename T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };
template <> struct dtype_of<bfloat16> { static constexpr DType value = DType::BFloat16; };

// Kernels are written for float32 and float64 only: bfloat16 tensors reach them widened to float32
// (widening_backend.h), so a bfloat16 tensor here is a bug in the caller, refused by name.
[[noreturn]] inline void refuse_unwidened(const char* where) {
  throw std::logic_error(std::string(where) + ": a bfloat16 tensor reached a kernel unwidened");
}

// Calls f(T{}) with T the C++ type of `dtype`: how a kernel written once as a template runs for every
// dtype (used by the CPU and the CUDA backends alike).
template <typename F> decltype(auto) dispatch(DType dtype, F&& f) {
  switch (dtype) {
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
    case DType::Int64: return f(int64_t{});
    case DType::Bool: return f(bool{});
    case DType::BFloat16: refuse_unwidened("dispatch");
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
