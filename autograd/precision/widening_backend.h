// precision/widening_backend.h — bfloat16 tensors on the CPU: every kernel entry computes in float32 and rounds once.
//
// PyTorch's CPU kernels treat a bfloat16 tensor the same way: each element is widened to float32 (exact),
// the op's float32 arithmetic runs, and the result is rounded to bfloat16 once. So instead of a bfloat16
// instantiation of every kernel, one wrapper stands in front of a backend (the fast CPU one and the
// reference one alike): an entry that meets no bfloat16 tensor goes straight through; one that does
// gets float32 copies of its bfloat16 inputs, float32 scratch for its bfloat16 outputs, and rounds the
// scratch into those outputs after the float32 entry has run.
//
// Two things are not a plain widening:
//  - a scalar a unary entry combines with a bfloat16 tensor (x·0.1, x + s) is first rounded to bfloat16,
//    as PyTorch casts a Python number to the tensor's dtype before the op;
//  - matrix products with bfloat16 operands call `product` (bfloat16 operands, float32 sums): the
//    AVX512_BF16 kernel or the portable path on the fast backend, the plain loop on the reference one.
#pragma once
#include "autograd/backend.h"

namespace autograd {

// out (float32 or bfloat16, contiguous or not) = a @ b for bfloat16 a [..., M, K] and b [..., K, N] with
// identical batch dims: every product of two bfloat16 numbers (exact in float32) added into a float32 sum,
// plus the bias and rounded as `how` says (backend.h: ProductStore), with no float32 copy of the whole
// output in between.
using BFloat16Product = void (*)(const Tensor& a, const Tensor& b, const Tensor& out, const ProductStore& how);

// A backend that runs `inner`'s entries on bfloat16 tensors as described above. Never destroyed
// (the backends are process-wide).
// out [1, N] (float32) = a (bfloat16, one row) times bfloat16 panels (ops/panels.cpp), or false where it
// cannot (the general way is then taken: the weight unpacked, and `product`).
using BFloat16RowPanels = bool (*)(const Tensor& a, const Tensor& panels, const Tensor& out);
// A backend's own loops for the conversions along one run of memory (a tensor and its converted copy laid
// out alike): each element converted as round_to_bfloat16 and widen do, so only the speed differs from the
// plain loop here (nullptr), which the reference backend keeps. The CPU's: cpu/kernels/bfloat16_runs.h.
struct BFloat16Runs {
  void (*round)(const float* from, bfloat16* to, int64_t n) = nullptr;
  void (*widen)(const bfloat16* from, float* to, int64_t n) = nullptr;
  // The same along `rows` runs of `length` values, run r at from + from_at[r] and to + to_at[r]: a view whose
  // rows are contiguous but not the whole tensor (attention's heads, [B, H, T, d] of [B, T, H·d]).
  void (*round_rows)(const float* from, const int64_t* from_at, bfloat16* to, const int64_t* to_at, int64_t rows,
                     int64_t length) = nullptr;
  void (*widen_rows)(const bfloat16* from, const int64_t* from_at, float* to, const int64_t* to_at, int64_t rows,
                     int64_t length) = nullptr;
};
Backend& widening_backend(Backend& inner, BFloat16Product product, BFloat16RowPanels row_panels = nullptr,
                          BFloat16Runs runs = {});

// dst (bfloat16, any strides) = src (float32, same shape) rounded to the nearest, ties to even; `runs`, where
// given, convert where both lie in memory in one order, or row by row.
void round_into_bfloat16(const Tensor& src, const Tensor& dst, const BFloat16Runs& runs = {});
// dst (float32, any strides) = src (bfloat16, same shape): exact.
void widen_into_float32(const Tensor& src, const Tensor& dst, const BFloat16Runs& runs = {});
// A contiguous float32 copy of t (bfloat16, any strides): exact.
Tensor widen_to_float32(const Tensor& t, const BFloat16Runs& runs = {});

}  // namespace autograd
