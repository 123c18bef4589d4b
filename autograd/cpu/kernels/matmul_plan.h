// cpu/kernels/matmul_plan.h — what the exact kernels (matmul.cpp) and the fast ones (matmul_fast.cpp) share:
// how one call is told what to compute, which terms of a structured product can be skipped, and how A's
// rows reach the register tiles (copies only: no arithmetic here, so both files' instruction choices
// leave these alone).
#pragma once
#include <algorithm>
#include <cmath>
#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "autograd/backend.h"

namespace autograd::cpu {

// Both kernels add each output's terms in blocks of kKc consecutive p (BLIS's KC for its reference
// kernels, float and double): the exact kernels because PyTorch's BLIS does, the fast ones because a
// block of packed B then stays in the L2 cache.
constexpr int64_t kKc = 256;

// Causal scores' last step (ops/attention.cpp's causal_product): C[i, j] / divisor on and below the
// diagonal, `above` past it. The fast kernels do it to each tile's rows as soon as they are complete, while
// they are still in the cache; otherwise it is a pass of its own (causal_scale, attention.cpp).
struct ScaleBelowDiagonal {
  double divisor, above;
};

// One row of that: d[j] = x[j] / divisor for j <= last, `above` past it (d may be x).
template <typename T> struct CausalRowScale {
  T divisor, inverse, fill;
  bool by_inverse;  // 1/divisor is exact (a power of two: √64 = 8, or 1), so x · (1/s) rounds as x / s does
  explicit CausalRowScale(ScaleBelowDiagonal s)
      : divisor(T(s.divisor)), inverse(T(1) / T(s.divisor)), fill(T(s.above)) {
    int exponent = 0;
    by_inverse = std::frexp(s.divisor, &exponent) == 0.5;
  }
  // Plain loops over the row's two parts, so each runs on vectors (a multiply costs a fraction of a divide).
  // (ivdep: d is x or does not overlap it, so no entry depends on another one written before it.)
  [[gnu::always_inline]] inline void operator()(T* d, const T* x, int64_t n, int64_t last) const {
    const int64_t kept = std::clamp<int64_t>(last + 1, 0, n);
    if (by_inverse) {
#pragma GCC ivdep
      for (int64_t j = 0; j < kept; ++j) d[j] = x[j] * inverse;
    } else {
#pragma GCC ivdep
      for (int64_t j = 0; j < kept; ++j) d[j] = x[j] / divisor;
    }
    for (int64_t j = kept; j < n; ++j) d[j] = fill;
  }
};

// How one call computes its product: which zeros it may skip and where the rows it is given start in
// the whole matrix (a thread may get rows r0.. of it; see tile_work below), and whether C already holds
// the sum's starting value (addmm's bias: every block's chain is then added to C, the first one too).
struct ProductOptions {
  MatmulStructure structure = MatmulStructure::dense;
  int64_t row0 = 0;
  bool add_to_c = false;
  // With add_to_c: the sum's starting value is this row (of T, n values), the same for every row of C,
  // read in place of C by the first block (addmm's bias, without first copying it down C).
  const void* start_row = nullptr;
  // With lower_c and a row-major C (column stride 1): scale and fill each row of C once it is complete
  // (fast kernels only; the caller does it afterwards for the others).
  const ScaleBelowDiagonal* scale_below = nullptr;
};

// ---- products that know where their zeros are (MatmulStructure in cpu.h; used by ops/attention.cpp)
// What one tile of rows [i, i + mr) (rows of the whole matrix) computes within the block [p0, p0 + kc):
// a chain may skip terms that are products with an exact zero at its end (lower_a) or its start
// (upper_a) without changing a bit, and lower_c skips column panels that lie wholly above the diagonal.
struct TileWork {
  int64_t p_begin, p_end;  // the terms of this block that can be nonzero for these rows
  bool first;              // the first block these rows add up: stored, not added to C
  int64_t panels;          // column panels to compute
};

inline TileWork tile_work(MatmulStructure structure, int64_t i, int64_t mr, int64_t p0, int64_t kc,
                          int64_t n_panels, int64_t nr) {
  TileWork w{p0, p0 + kc, p0 == 0, n_panels};
  switch (structure) {
    case MatmulStructure::dense: break;
    case MatmulStructure::lower_c: w.panels = std::min(n_panels, (i + mr - 1) / nr + 1); break;
    case MatmulStructure::lower_a: w.p_end = std::min(w.p_end, i + mr); break;  // A[r, p] = 0 for p > r
    case MatmulStructure::upper_a:  // A[r, p] = 0 for p < r: blocks before the one holding i are all zeros
      w.p_begin = std::max(p0, i);
      w.first = p0 == i / kKc * kKc;
      break;
  }
  return w;
}

// ---- packing a transposed A (a weight gradient's dYᵀ or xᵀ: ars == 1, each column of A is a row of the
// matrix it transposes, along memory). Both kernels pack A as MR-row panels, p-major: panel t holds
// out[t][p][r] = A[t·MR + r, p]. Panel by panel, each term's MR values came from a different cache line,
// a whole row of the transposed matrix away (4 KiB for 1024 columns): every line in the same L1 set and
// a TLB entry per term, re-read for every panel. Here kTilesPerBlockOfA panels are packed together, one
// term at a time, so each term's values are one run along memory.
constexpr int64_t kTilesPerBlockOfA = 16;

// The panels of rows [0, rows) of A (at most MR · kTilesPerBlockOfA), for kc terms; A[r, p] = a[r + p · acs].
// Rows past `rows` in the last panel are zeros (their results are never stored).
template <typename T, int64_t MR>
void pack_transposed_a(int64_t kc, int64_t rows, const T* a, int64_t acs, T* out) {
  const int64_t whole_tiles = rows / MR, left = rows - whole_tiles * MR;
  for (int64_t p = 0; p < kc; ++p) {
    const T* src = a + p * acs;
    for (int64_t t = 0; t < whole_tiles; ++t) std::memcpy(out + (t * kc + p) * MR, src + t * MR, MR * sizeof(T));
    if (left == 0) continue;
    T* dst = out + (whole_tiles * kc + p) * MR;  // the last tile, partial
    for (int64_t r = 0; r < left; ++r) dst[r] = src[whole_tiles * MR + r];
    for (int64_t r = left; r < MR; ++r) dst[r] = T(0);
  }
}

// A's tile of MR rows and kc terms, where the micro-kernels (both kernels') will read it, when A is not
// packed with its neighbours (pack_transposed_a, above). Mostly in place (A's MR rows are MR streams along
// memory; an A of at most MR rows, transposed, has MR values per term along memory). Copied in two cases,
// rows past mr then zeros (their results are never stored):
//   rows whose stride is a multiple of 4 KiB (k = 1024 floats: the contracting product and the input
//     gradient of a 4x-wide feed-forward layer): in place they all fall in the same L1 cache set, and 12
//     streams in an 8-way cache evict one another at every step. The copy puts the rows kc + 16 apart.
//     (Only these: copying every tile costs more than reading in place saves.)
//   a last, partial tile: out[p][r], MR values per term, so that the micro-kernel has its MR rows.
// The tile's value for row r, term p is data[r * rs + p * ps].
struct PackedA {
  const void* data;
  int64_t rs, ps;
};
template <typename T, int64_t MR>
PackedA pack_a(int64_t kc, int64_t mr, const T* a, int64_t ars, int64_t acs, std::vector<T>& buffer) {
  if (acs == 1 && ars * int64_t(sizeof(T)) % 4096 == 0) {  // rows that share L1 sets
    const int64_t stride = kc + 16;
    buffer.resize(size_t(MR * stride));
    T* out = buffer.data();
    for (int64_t r = 0; r < mr; ++r) std::memcpy(out + r * stride, a + r * ars, size_t(kc) * sizeof(T));
    for (int64_t r = mr; r < MR; ++r) std::fill_n(out + r * stride, kc, T(0));
    return {out, stride, 1};
  }
  if (mr == MR) return {a, ars, acs};
  buffer.resize(size_t(MR * kc));
  T* out = buffer.data();
  for (int64_t r = 0; r < mr; ++r)
    for (int64_t p = 0; p < kc; ++p) out[p * MR + r] = a[r * ars + p * acs];
  for (int64_t p = 0; p < kc; ++p)
    for (int64_t r = mr; r < MR; ++r) out[p * MR + r] = T(0);
  return {out, 1, MR};
}

// Where one product's C, A and B start (element offsets): a batched product runs a list of them through
// one call of the kernel compiled for this CPU, rather than one call (and one dispatch) per batch item.
using ItemOffsets = std::array<int64_t, 3>;
using Items = std::span<const ItemOffsets>;
inline constexpr ItemOffsets kOneItem[1] = {{0, 0, 0}};

// matmul_fast.cpp: C = A·B for every item, with fused multiply-adds (Numerics::fast). Same contract as
// the exact kernel: any strides, the options' structure, start row and add_to_c; the result of an entry
// depends only on its row of A, its column of B and k (never on m, the item count or the thread).
template <typename T>
void fast_gemm(int64_t m, int64_t n, int64_t k, const T* a, int64_t ars, int64_t acs, const T* b, int64_t brs,
               int64_t bcs, T* c, int64_t crs, int64_t ccs, ProductOptions options, Items items = kOneItem);
// Rows of C in one register tile of the FMA kernel this CPU runs (12 with AVX-512, 6 otherwise).
int64_t fast_gemm_tile_rows();

// matmul_fast.cpp: out[j] for the columns j of panels [first, last) of one row a [k] times a packed weight
// (n columns in all; the last panel's columns past n are padding, never written): each entry the chain of
// fast_gemm with bias (optional, [n]) as its start row, so the bits of linear(a, W, bias) in fast numerics.
template <typename T>
void fast_row_times_panels(int64_t first, int64_t last, int64_t k, int64_t n, const T* a, const T* panels,
                           const T* bias, T* out);

}  // namespace autograd::cpu
