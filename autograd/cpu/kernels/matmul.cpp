// cpu/kernels/matmul.cpp — matrix products, added up in the order PyTorch 1.13's CPU matmul adds them.
//
// PyTorch hands float/double products to the BLAS it was built with; Debian's build uses BLIS 0.9,
// and on this project's machines BLIS runs its portable reference ("generic") kernels. Their order,
// measured against torch (see docs/parity.md), is simple: every output element is one chain
//     acc = 0;  for p in block: acc = acc + a[i, p] * b[p, j]     (product rounded, then sum rounded)
// over blocks of kKc = 256 consecutive p. The first block's chain is stored; each later block's chain
// is added to what is there (C = chain + C). No fused multiply-add anywhere. PyTorch's small batched
// products (bmm below 400 multiply-adds) use a plain loop with the same chain. Products with a single
// output row or column are the exception: BLIS computes them as dot products (blis_dot below).
// addmm starts the sum from the bias: C holds it, and every block's chain is added (add_to_c).
// These kernels reproduce those orders exactly, whatever the tiling, so results are bit-identical to
// torch.matmul / mm / bmm / addmm (docs/parity.md lists what is not covered). They can also skip work
// known to be zeros (MatmulStructure, for causal attention) without changing a bit.
//
// SCRATCHGRAD_MATMUL=blis switches products above kSmallMatmulFlops to BLIS's optimised kernels
// (AVX-512/AVX2 with FMA): faster on big matrices, but no longer bit-identical. =blis-all sends every
// product PyTorch hands to BLIS there: PyTorch's forward bits on a machine whose BLIS picks the same
// sub-configuration as the one PyTorch ran on.
#if __has_include(<blis.h>)  // optional: the WebAssembly build (examples/lab/) has only the exact kernels
#include <blis.h>
#define SCRATCHGRAD_HAVE_BLIS 1
#endif
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "autograd/cpu/kernels.h"
#include "autograd/cpu/kernels/lanes.h"
#include "autograd/cpu/kernels/loops.h"
#include "autograd/cpu/kernels/matmul_plan.h"
#include "autograd/cpu/runtime/runtime.h"

// Every function here that takes or returns a GCC vector is always inlined into the AVX2 / AVX-512 kernels
// (as lanes.h's are), so no vector crosses a call boundary and GCC's warning about such calls' ABI does not
// apply.
#pragma GCC diagnostic ignored "-Wpsabi"
#include "autograd/cpu/runtime/product_tally.h"
#include "autograd/numerics.h"

// The AVX2 and AVX-512 kernels pass vectors between inline functions compiled for their target; GCC notes
// that such a function's ABI would differ from the baseline build's, which matters only to calls across
// translation units: none here. (A GCC warning: clang, which the fuzz and WebAssembly builds use, has none.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace autograd::cpu {

namespace {


// ---------------------------------------------------------------- the exact kernel

// Register tile: MR rows by NR columns of C are accumulated together, so each packed value of B
// is loaded once per MR rows. NR fills two vectors of VB bytes: 256-bit (16 floats) with AVX2, 512-bit
// (32 floats) with AVX-512 — the width changes how many entries run side by side, never an entry's order.
// Rows per register tile: kMr<VB> x 2 vectors of accumulators (8 x 2 of the 32 registers with AVX-512,
// 6 x 2 of 16 with AVX2; the baseline build, SSE2 or WebAssembly, compiles the AVX2 code's 32-byte vectors
// as pairs). More rows per tile means each loaded vector of B serves more rows, until the accumulators,
// B's two vectors and a broadcast no longer fit the registers: 8 rows of 32 registers, 6 of 16.
template <int VB> constexpr int64_t kMr = VB == 64 ? 8 : 6;

template <typename T, int VB = 32> constexpr int64_t kNr = 2 * VB / int64_t(sizeof(T));

// Operands for one block of at most kKc values of p:
//   A's MR = kMr<VB> rows: mostly read in place, else packed (pack_a and pack_transposed_a, matmul_plan.h);
//   B panels: kNr columns each, p-major  (bp[p * kNr + c] = b[p0 + p, j0 + c]), zero past the last column.
// The padding only feeds tile entries that are never written back, so it cannot change a result.
template <typename T> struct Packed {
  std::vector<T> a, b, block_a;
};

template <typename T> Packed<T>& packing_buffers() {
  thread_local Packed<T> buffers;  // reused across calls: no allocation per product once warm
  return buffers;
}

template <typename T, int VB>
void pack_b(int64_t kc, int64_t n, const T* b, int64_t brs, int64_t bcs, T* out) {
  constexpr int64_t NR = kNr<T, VB>;
  for (int64_t j0 = 0; j0 < n; j0 += NR, out += kc * NR) {
    const int64_t nr = std::min(NR, n - j0);
    for (int64_t p = 0; p < kc; ++p) {
      const T* row = b + p * brs + j0 * bcs;
      T* dst = out + p * NR;
      for (int64_t c = 0; c < nr; ++c) dst[c] = row[c * bcs];
      for (int64_t c = nr; c < NR; ++c) dst[c] = T(0);
    }
  }
}


// 32 bytes of T as one GCC vector: + and * on it act lane by lane, each lane rounded like the scalar op
// (one AVX register in the AVX2 build, two SSE registers in the baseline build).
template <typename T, int VB = 32> struct Vector32;  // VB bytes of T as one GCC vector
template <int VB> struct Vector32<float, VB> { typedef float type __attribute__((vector_size(VB))); };
template <int VB> struct Vector32<double, VB> { typedef double type __attribute__((vector_size(VB))); };

// One MR x NR tile over one block: each entry is its own chain acc = acc + a * b, in p order (the
// vector lanes are different entries, so nothing is reordered). Then C = acc (first block) or acc + C.

// One vector of a row of C: stored (first), or added to the start row or to what C holds.
template <typename V, typename T>
[[gnu::always_inline]] inline void write_vector(T* c, V acc, bool first, const T* start) {
  if (!first) acc = acc + load_vector<V>(start ? start : c);
  __builtin_memcpy(c, &acc, sizeof(V));
}

template <typename T, int VB>
[[gnu::always_inline]] inline void tile(int64_t kc, const T* ap, int64_t a_rs, int64_t a_ps, const T* bp, bool first,
                                        const T* start, int64_t mr, int64_t nr, T* c, int64_t crs, int64_t ccs) {
  using V = typename Vector32<T, VB>::type;
  constexpr int64_t NR = kNr<T, VB>, VL = int64_t(sizeof(V) / sizeof(T));
  static_assert(NR == 2 * VL);
  constexpr int64_t MR = kMr<VB>;
  V acc[MR][2];
  // zeroed one register at a time: an `= {}` here was compiled to a `rep stos` of the whole tile in memory
  // (~30 cycles of start-up per call, a visible share of the small products)
#pragma GCC unroll 16
  for (int64_t r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = V{};
  for (int64_t p = 0; p < kc; ++p) {
    const V b0 = load_vector<V>(bp + p * NR), b1 = load_vector<V>(bp + p * NR + VL);
#pragma GCC unroll 16
    for (int64_t r = 0; r < MR; ++r) {  // unrolled: the accumulators stay in registers (see row_block)
      const T a = ap[r * a_rs + p * a_ps];
      acc[r][0] = acc[r][0] + b0 * a;
      acc[r][1] = acc[r][1] + b1 * a;
    }
  }
  if (ccs == 1 && nr == NR) {  // whole vectors in and out of a row-major C
    for (int64_t r = 0; r < mr; ++r) {
      write_vector(c + r * crs, acc[r][0], first, start);
      write_vector(c + r * crs + VL, acc[r][1], first, start ? start + VL : nullptr);
    }
    return;
  }
  for (int64_t r = 0; r < mr; ++r) {
    T row[NR];
    __builtin_memcpy(row, &acc[r][0], sizeof(V));
    __builtin_memcpy(row + VL, &acc[r][1], sizeof(V));
    for (int64_t col = 0; col < nr; ++col) {  // store, or add to what C holds (or to the start row)
      T& out = c[r * crs + col * ccs];
      out = first ? row[col] : row[col] + (start ? start[col] : out);
    }
  }
}

// ---- packing B = Kᵀ (q @ kᵀ, x @ Wᵀ): transposing 8 x 8 tiles in registers
// Eight rows of K, as eight vectors, become eight rows of B: r[j][i] = K[i][j] afterwards. Three
// rounds of shuffles (pairs of floats, then pairs of pairs, then halves), the classic AVX transpose
// written with GCC's portable __builtin_shuffle. (Clang has no __builtin_shuffle: there, as in the
// WebAssembly build, a plain loop moves the same values.)
#if defined(__clang__)
[[gnu::always_inline]] inline void transpose_8x8(Vector32<float>::type r[8]) {
  float m[8][8];
  __builtin_memcpy(m, r, sizeof m);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) r[j][i] = m[i][j];
}
#else
[[gnu::always_inline]] inline void transpose_8x8(Vector32<float>::type r[8]) {
  using V = Vector32<float>::type;
  typedef int M __attribute__((vector_size(32)));
  const M lo = {0, 8, 1, 9, 4, 12, 5, 13}, hi = {2, 10, 3, 11, 6, 14, 7, 15};
  const M lo2 = {0, 1, 8, 9, 4, 5, 12, 13}, hi2 = {2, 3, 10, 11, 6, 7, 14, 15};
  const M first_halves = {0, 1, 2, 3, 8, 9, 10, 11}, second_halves = {4, 5, 6, 7, 12, 13, 14, 15};
  V t[8], u[8];  // (the loops unrolled, so that the 8 rows stay in registers, not in a stack array)
#pragma GCC unroll 8
  for (int i = 0; i < 8; i += 2) {
    t[i] = __builtin_shuffle(r[i], r[i + 1], lo);
    t[i + 1] = __builtin_shuffle(r[i], r[i + 1], hi);
  }
#pragma GCC unroll 8
  for (int i = 0; i < 8; i += 4) {
    u[i] = __builtin_shuffle(t[i], t[i + 2], lo2);
    u[i + 1] = __builtin_shuffle(t[i], t[i + 2], hi2);
    u[i + 2] = __builtin_shuffle(t[i + 1], t[i + 3], lo2);
    u[i + 3] = __builtin_shuffle(t[i + 1], t[i + 3], hi2);
  }
#pragma GCC unroll 8
  for (int j = 0; j < 4; ++j) {
    r[j] = __builtin_shuffle(u[j], u[j + 4], first_halves);
    r[j + 4] = __builtin_shuffle(u[j], u[j + 4], second_halves);
  }
}
#endif

// dst (kc rows of W values, zero past column n) = rows [0, kc) of B, where B[p, col] = b[p + col * bcs]
// (B is the transpose of a row-major K with row stride bcs). Floats go 8 x 8 tiles at a time; the
// edges, and doubles, value by value.
template <typename T, int64_t W>
[[gnu::always_inline]] inline void pack_transposed(int64_t kc, int64_t n, const T* b, int64_t bcs, T* dst) {
  int64_t full_cols = 0;
  if constexpr (std::is_same_v<T, float>) {
    using V = Vector32<float>::type;
    full_cols = n / 8 * 8;
    const int64_t full_rows = kc / 8 * 8;
    for (int64_t col = 0; col < full_cols; col += 8) {
      for (int64_t p = 0; p < full_rows; p += 8) {
        V r[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i) __builtin_memcpy(&r[i], b + (col + i) * bcs + p, sizeof(V));
        transpose_8x8(r);
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) __builtin_memcpy(dst + (p + j) * W + col, &r[j], sizeof(V));
      }
      for (int64_t p = full_rows; p < kc; ++p)
        for (int64_t i = 0; i < 8; ++i) dst[p * W + col + i] = b[(col + i) * bcs + p];
    }
  }
  if (full_cols == W) return;  // (no edge: n a whole number of 8-float tiles and no padding)
  for (int64_t p = 0; p < kc; ++p) {
    for (int64_t col = full_cols; col < n; ++col) dst[p * W + col] = b[col * bcs + p];
    for (int64_t col = n; col < W; ++col) dst[p * W + col] = T(0);
  }
}

// ---- narrow products: a few rows of C at a time
// When a row of C fits in registers (n ≤ 48 floats or 24 doubles), rows are computed directly from A's rows
// and a row-major copy of B: acc[col] = acc[col] + B[p, col] · a[i, p] for p in order — every entry the
// same chain, with the same roundings, as in tile(), but without packing A or padding n up to 16 columns.
// A row is W = n rounded up to 32 bytes: W values of B per term (used in place when B's rows are already
// contiguous and W wide) and W accumulators, as NV vectors of VB bytes and, when W is not a whole number of
// them, one of half that: with AVX-512 a row of 24 floats is one 16-float vector and one 8-float one, two
// multiplies and two adds per term where 8-float vectors took three of each. Rows of at most 8 floats
// stay one 8-float vector.
// R rows go together so that R·(NV + NT) independent chains are in flight: one row alone would wait on
// its adds' latency at every p (4 cycles), with the CPU's two add units mostly idle.
// With AVX-512 compiled in there are 32 vector registers instead of 16, so more rows (up to 28 registers
// in use): each loaded vector of B then serves more rows. With 16, rows of 3 vectors go 3 at a time: 4 rows
// made 12 accumulators, 3 vectors of B, a broadcast and a product, one register too many, and GCC kept an
// accumulator on the stack (a store and a load in its chain at every p).
constexpr int64_t kNarrowBytes = 6 * 32;
template <int NV, int NT, int VB> constexpr int kRowsTogether =
    VB == 64 ? 8 : (NV == 1 ? 8 : NV == 2 ? 4 : NV <= 4 ? 3 : 2);

template <typename T, int VB, int NV, int NT, int R, bool Whole>
[[gnu::always_inline]] inline void row_block(int64_t kc, const T* a_rows, int64_t ars, int64_t acs, const T* b,
                                             int64_t b_stride, bool first, const T* start, int64_t n, T* c_rows,
                                             int64_t crs, int64_t ccs) {
  using V = typename Vector32<T, VB>::type;  // NV of these per row,
  using H = typename Vector32<T, VB / 2>::type;  // and NT (0 or 1) of these after them
  constexpr int64_t VL = int64_t(sizeof(V) / sizeof(T)), HL = VL / 2, W = NV * VL + NT * HL;
  V acc[R][NV];
  H tail[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[r][v] = V{};  // register by register (see tile())
    if constexpr (NT == 1) tail[r] = H{};
  }
  // Two terms per trip: the loop's own instructions (pointer steps, compare, branch) are a tenth of a
  // trip, and on AVX2 cores these loops are bound by how fast the front end issues instructions, not by
  // the FP pipes, so every instruction saved is time saved.
#pragma GCC unroll 2
  for (int64_t p = 0; p < kc; ++p) {
    const T* b_row = b + p * b_stride;
    V bv[NV];
    H bt{};
    // Fully unrolled, so that every accumulator lives in a register: left to itself, GCC keeps this tile
    // in memory in the AVX2 build (a load and a store per add) and that build ran 1.6x slower.
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bv[v] = load_vector<V>(b_row + v * VL);
    if constexpr (NT == 1) bt = load_vector<H>(b_row + NV * VL);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const T a = a_rows[r * ars + p * acs];
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] = acc[r][v] + bv[v] * a;
      if constexpr (NT == 1) tail[r] = tail[r] + bt * a;
    }
  }
  if constexpr (Whole) {  // rows of C contiguous and exactly W wide: every vector straight from its register
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      T* c_row = c_rows + r * crs;
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) write_vector(c_row + v * VL, acc[r][v], first, start ? start + v * VL : nullptr);
      if constexpr (NT == 1) write_vector(c_row + NV * VL, tail[r], first, start ? start + NV * VL : nullptr);
    }
    return;
  }
  for (int r = 0; r < R; ++r) {
    T* c_row = c_rows + r * crs;
    int64_t done = 0;  // columns written straight from the registers, as whole vectors
    if (ccs == 1) {  // the common case, a contiguous row of C
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v)
        if (done + VL <= n) {
          write_vector(c_row + done, acc[r][v], first, start ? start + done : nullptr);
          done += VL;
        }
      if constexpr (NT == 1)
        if (done + HL <= n) {
          write_vector(c_row + done, tail[r], first, start ? start + done : nullptr);
          done += HL;
        }
    }
    if (done == n) continue;
    T row[W];  // the rest value by value (the same add, one lane at a time)
    __builtin_memcpy(row, acc[r], NV * sizeof(V));
    if constexpr (NT == 1) __builtin_memcpy(row + NV * VL, &tail[r], sizeof(H));
    for (int64_t col = done; col < n; ++col) {
      T& out = c_row[col * ccs];
      out = first ? row[col] : row[col] + (start ? start[col] : out);
    }
  }
}

// All m rows of C for one block of B: R rows at a time, then 4, then one by one.
template <typename T, int VB, int NV, int NT, bool Whole>
[[gnu::always_inline]] inline void row_blocks(int64_t m, int64_t kc, const T* a_block, int64_t ars, int64_t acs,
                                              const T* bp, int64_t b_stride, bool first, const T* start, int64_t n,
                                              T* c_item, int64_t crs, int64_t ccs) {
  constexpr int R = kRowsTogether<NV, NT, VB>;
  int64_t i = 0;
  for (; i + R <= m; i += R)
    row_block<T, VB, NV, NT, R, Whole>(kc, a_block + i * ars, ars, acs, bp, b_stride, first, start, n,
                                       c_item + i * crs, crs, ccs);
  if constexpr (R > 4)  // what is left, 4 rows at a time where it can
    for (; i + 4 <= m; i += 4)
      row_block<T, VB, NV, NT, 4, Whole>(kc, a_block + i * ars, ars, acs, bp, b_stride, first, start, n,
                                         c_item + i * crs, crs, ccs);
  for (; i < m; ++i)
    row_block<T, VB, NV, NT, 1, Whole>(kc, a_block + i * ars, ars, acs, bp, b_stride, first, start, n,
                                       c_item + i * crs, crs, ccs);
}

// Every item's product, row block by row block. The items loop sits inside, below the choice of row
// layout and the set-up of the buffer, so a batch of tiny items (the attention's 8 x 24 x 8) pays for
// those once per call, not once per item.
template <typename T, int VB, int NV, int NT>
[[gnu::always_inline]] inline void exact_gemm_rows(Items items, int64_t m, int64_t n, int64_t k, const T* a,
                                                   int64_t ars, int64_t acs, const T* b, int64_t brs, int64_t bcs,
                                                   T* c, int64_t crs, int64_t ccs, bool add_to_c, const T* start_row) {
  constexpr int64_t W = (NV * VB + NT * VB / 2) / int64_t(sizeof(T));
  Packed<T>& buf = packing_buffers<T>();
  const bool in_place = bcs == 1 && n == W;
  const bool whole = ccs == 1 && n == W;  // (row_block's write-back needs no value-by-value fallback)
  if (!in_place) buf.b.resize(size_t(std::min(k, kKc) * W));
  for (const auto& [oc, oa, ob] : items) {
    const T* a_item = a + oa;
    T* c_item = c + oc;
    for (int64_t p0 = 0; p0 < k; p0 += kKc) {
      const int64_t kc = std::min(kKc, k - p0);
      const T* bp = b + ob + p0 * brs;
      int64_t b_stride = brs;
      if (!in_place) {  // a zero-padded row-major copy of this block of B
        if (brs == 1) {
          pack_transposed<T, W>(kc, n, bp, bcs, buf.b.data());
        } else {
          T* dst = buf.b.data();
          for (int64_t p = 0; p < kc; ++p, dst += W) {
            const T* src = bp + p * brs;
            for (int64_t col = 0; col < n; ++col) dst[col] = src[col * bcs];
            for (int64_t col = n; col < W; ++col) dst[col] = T(0);
          }
        }
        bp = buf.b.data();
        b_stride = W;
      }
      const bool first = p0 == 0 && !add_to_c;  // store this block's chains, or add them to C
      const T* start = p0 == 0 ? start_row : nullptr;
      const T* a_block = a_item + p0 * acs;
      if (whole)
        row_blocks<T, VB, NV, NT, true>(m, kc, a_block, ars, acs, bp, b_stride, first, start, n, c_item, crs, ccs);
      else
        row_blocks<T, VB, NV, NT, false>(m, kc, a_block, ars, acs, bp, b_stride, first, start, n, c_item, crs, ccs);
    }
  }
}

// A narrow product (n ≤ kNarrowBytes of T) row by row: its rows rounded up to 32 bytes (W32 32-byte
// vectors' worth), as VB-byte vectors and a half one (see row_block). False: too wide for that.
template <typename T, int VB>
[[gnu::always_inline]] inline bool exact_gemm_narrow(Items items, int64_t m, int64_t n, int64_t k, const T* a, int64_t ars,
                                                     int64_t acs, const T* b, int64_t brs, int64_t bcs, T* c,
                                                     int64_t crs, int64_t ccs, bool add_to_c, const T* start) {
  constexpr int64_t L32 = 32 / int64_t(sizeof(T));
  if (n > kNarrowBytes / int64_t(sizeof(T))) return false;
  const int64_t w32 = (n + L32 - 1) / L32;
  // (a macro, not a table of function pointers or a lambda: each case must be inlined here, where it is
  // compiled for this function's instruction set)
#define SCRATCHGRAD_ROWS(VB_, NV, NT) \
  return exact_gemm_rows<T, VB_, NV, NT>(items, m, n, k, a, ars, acs, b, brs, bcs, c, crs, ccs, add_to_c, start), true
  if constexpr (VB == 64) {
    switch (w32) {
      case 1: SCRATCHGRAD_ROWS(32, 1, 0);  // as in the AVX2 kernels (an 8-float half of the wide kernel: 3-10% slower)
      case 2: SCRATCHGRAD_ROWS(VB, 1, 0);
      case 3: SCRATCHGRAD_ROWS(VB, 1, 1);
      case 4: SCRATCHGRAD_ROWS(VB, 2, 0);
      case 5: SCRATCHGRAD_ROWS(VB, 2, 1);
      case 6: SCRATCHGRAD_ROWS(VB, 3, 0);
    }
  } else {
    switch (w32) {
      case 1: SCRATCHGRAD_ROWS(VB, 1, 0);
      case 2: SCRATCHGRAD_ROWS(VB, 2, 0);
      case 3: SCRATCHGRAD_ROWS(VB, 3, 0);
      case 4: SCRATCHGRAD_ROWS(VB, 4, 0);
      case 5: SCRATCHGRAD_ROWS(VB, 5, 0);
      case 6: SCRATCHGRAD_ROWS(VB, 6, 0);
    }
  }
#undef SCRATCHGRAD_ROWS
  return false;
}

// C (m x n) = A (m x k) @ B (k x n), any strides, in PyTorch's order (see the top of the file).
template <typename T, int VB = 32>
[[gnu::always_inline]] inline void exact_gemm_impl(int64_t m, int64_t n, int64_t k, const T* a, int64_t ars,
                                                   int64_t acs, const T* b, int64_t brs, int64_t bcs, T* c,
                                                   int64_t crs, int64_t ccs, ProductOptions options) {
  constexpr int64_t NR = kNr<T, VB>;
  const T* start = static_cast<const T*>(options.start_row);
  Packed<T>& buf = packing_buffers<T>();
  const int64_t n_panels = (n + NR - 1) / NR;
  buf.b.resize(size_t(std::min(k, kKc) * n_panels * NR));
  constexpr int64_t MR = kMr<VB>;
  const bool transposed_a = ars == 1 && acs != 1 && m > MR;  // packed kTilesPerBlockOfA tiles at a time
  if (transposed_a) buf.block_a.resize(size_t(std::min(k, kKc) * MR * kTilesPerBlockOfA));
  for (int64_t p0 = 0; p0 < k; p0 += kKc) {
    const int64_t kc = std::min(kKc, k - p0);
    pack_b<T, VB>(kc, n, b + p0 * brs, brs, bcs, buf.b.data());
    for (int64_t i0 = 0; i0 < m; i0 += MR) {
      const int64_t mr = std::min(MR, m - i0);
      const int64_t tile_in_block = i0 / MR % kTilesPerBlockOfA;
      if (transposed_a && tile_in_block == 0)
        pack_transposed_a<T, MR>(kc, std::min(MR * kTilesPerBlockOfA, m - i0), a + i0 + p0 * acs, acs, buf.block_a.data());
      TileWork w = tile_work(options.structure, options.row0 + i0, mr, p0, kc, n_panels, NR);
      if (options.add_to_c) w.first = false;
      if (w.p_begin >= w.p_end) continue;  // nothing but zeros for these rows in this block
      const int64_t kw = w.p_end - w.p_begin;
      const PackedA tile_a = transposed_a ? PackedA{buf.block_a.data() + (tile_in_block * kc + w.p_begin - p0) * MR, 1, MR}
                                          : pack_a<T, MR>(kw, mr, a + i0 * ars + w.p_begin * acs, ars, acs, buf.a);
      const T* a_tile = static_cast<const T*>(tile_a.data);
      for (int64_t jp = 0; jp < w.panels; ++jp) {
        const int64_t j0 = jp * NR;
        // the start row stands in for C in the first block these rows add up
        const T* start_here = start && p0 == 0 ? start + j0 : nullptr;
        tile<T, VB>(kw, a_tile, tile_a.rs, tile_a.ps, buf.b.data() + jp * kc * NR + (w.p_begin - p0) * NR, w.first, start_here, mr,
                    std::min(NR, n - j0), c + i0 * crs + j0 * ccs, crs, ccs);
      }
    }
  }
}

template <typename T, int VB = 32>
[[gnu::always_inline]] inline void exact_gemm_items(Items items, int64_t m, int64_t n, int64_t k, const T* a,
                                                    int64_t ars, int64_t acs, const T* b, int64_t brs, int64_t bcs,
                                                    T* c, int64_t crs, int64_t ccs, ProductOptions options) {
  if (exact_gemm_narrow<T, VB>(items, m, n, k, a, ars, acs, b, brs, bcs, c, crs, ccs, options.add_to_c,
                               static_cast<const T*>(options.start_row)))
    return;
  for (const auto& [oc, oa, ob] : items)
    exact_gemm_impl<T, VB>(m, n, k, a + oa, ars, acs, b + ob, brs, bcs, c + oc, crs, ccs, options);
}

// The same code compiled twice: for the baseline x86-64 target (SSE2) and, chosen at run time, with
// 256-bit AVX2 vectors. Neither enables FMA instructions, so `acc + a * b` can only be compiled as a
// multiply and an add, each rounded (the CMake build must not add -mfma/-march=native without
// -ffp-contract=off).
template <typename T>
void exact_gemm_baseline(Items items, int64_t m, int64_t n, int64_t k, const T* a, int64_t ars, int64_t acs, const T* b,
                         int64_t brs, int64_t bcs, T* c, int64_t crs, int64_t ccs, ProductOptions options) {
  exact_gemm_items<T>(items, m, n, k, a, ars, acs, b, brs, bcs, c, crs, ccs, options);
}

#if defined(__x86_64__) && defined(__GNUC__)
template <typename T>
[[gnu::target("avx2")]] void exact_gemm_avx2(Items items, int64_t m, int64_t n, int64_t k, const T* a, int64_t ars, int64_t acs,
                                             const T* b, int64_t brs, int64_t bcs, T* c, int64_t crs, int64_t ccs,
                                             ProductOptions options) {
  exact_gemm_items<T>(items, m, n, k, a, ars, acs, b, brs, bcs, c, crs, ccs, options);
}
// Wide tiles where the CPU has AVX-512: twice the entries per instruction (still no FMA: the build has
// -ffp-contract=off, so `acc + b * a` stays a rounded multiply and a rounded add). AVX-512VL lets the
// 256-bit narrow kernels fold some broadcasts of A into their multiplies.
template <typename T>
[[gnu::target("avx512f,avx512vl")]] void exact_gemm_avx512(Items items, int64_t m, int64_t n, int64_t k, const T* a, int64_t ars,
                                                  int64_t acs, const T* b, int64_t brs, int64_t bcs, T* c,
                                                  int64_t crs, int64_t ccs, ProductOptions options) {
  exact_gemm_items<T, 64>(items, m, n, k, a, ars, acs, b, brs, bcs, c, crs, ccs, options);
}
#endif

// The product C = A·B of every item in `items` (one item at offsets 0: a plain product).
template <typename T>
void exact_gemm(int64_t m, int64_t n, int64_t k, const T* a, int64_t ars, int64_t acs, const T* b, int64_t brs,
                int64_t bcs, T* c, int64_t crs, int64_t ccs, ProductOptions options, Items items = kOneItem) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (avx512_kernels()) return exact_gemm_avx512(items, m, n, k, a, ars, acs, b, brs, bcs, c, crs, ccs, options);
  if (has_avx2()) return exact_gemm_avx2(items, m, n, k, a, ars, acs, b, brs, bcs, c, crs, ccs, options);
#endif
  exact_gemm_baseline(items, m, n, k, a, ars, acs, b, brs, bcs, c, crs, ccs, options);
}

// In fast numerics, products at most 48 columns wide keep the exact kernels: their narrow-row path reads
// B in place and pads nothing, where the FMA tiles would pad every row of C to 32 columns and pack B for
// each batch item: at 8 or 24 columns (the seed's products) that padding and packing cost far more than
// the fused multiply-adds save. The choice depends on n alone, so an
// entry's bits never depend on how many rows or items share its product.
constexpr int64_t kNarrowestFastProduct = 49;

// Rows of C in one register tile of the kernel that will run. A last, partial tile costs as much as a
// whole one, so threads split a product's rows on whole tiles.
int64_t tile_rows(bool fast) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (fast) return fast_gemm_tile_rows();
  return avx512_kernels() ? kMr<64> : kMr<32>;
#else
  return fast ? fast_gemm_tile_rows() : kMr<32>;
#endif
}

// The exact kernel or, in fast numerics, the FMA one (matmul_fast.cpp): same arguments, same contract.
template <typename T>
void gemm_kernel(bool fast, int64_t m, int64_t n, int64_t k, const T* a, int64_t ars, int64_t acs, const T* b,
                 int64_t brs, int64_t bcs, T* c, int64_t crs, int64_t ccs, ProductOptions options,
                 Items items = kOneItem) {
  if (fast) return fast_gemm(m, n, k, a, ars, acs, b, brs, bcs, c, crs, ccs, options, items);
  exact_gemm(m, n, k, a, ars, acs, b, brs, bcs, c, crs, ccs, options, items);
}

// ---------------------------------------------------------------- products with one output row or column

// A product with a single output row or column goes, in PyTorch's BLIS, through its vector kernels
// rather than gemm. When the operand that is a matrix runs contiguously along K (A row-major for one
// output column, B column-major for one output row, and any dot product), each output is a dot
// product from the reference dotv kernel, which the compiler vectorised into 16-byte SSE lanes: lane l
// adds the products of positions l, l + L, l + 2L, ... (L = 4 floats or 2 doubles) below L·⌊K/L⌋,
// the lanes are combined halves first ((l0 + l2) + (l1 + l3) for floats), then the remaining products
// are added one by one. No 256-deep blocks. (When that operand runs the other way, BLIS uses fused
// axpy kernels whose order we have not reproduced: those products take the gemm order above.)
template <typename T> T blis_dot(int64_t k, const T* x, int64_t xs, const T* y, int64_t ys) {
  constexpr int64_t L = 16 / int64_t(sizeof(T));
  T lanes[L] = {};
  const int64_t full = k / L * L;
  for (int64_t i = 0; i < full; i += L)
    for (int64_t l = 0; l < L; ++l) lanes[l] = lanes[l] + x[(i + l) * xs] * y[(i + l) * ys];
  for (int64_t half = L / 2; half > 0; half /= 2)
    for (int64_t l = 0; l < half; ++l) lanes[l] = lanes[l] + lanes[l + half];
  T sum = lanes[0];
  for (int64_t i = full; i < k; ++i) sum = sum + x[i * xs] * y[i * ys];
  return sum;
}

// PyTorch's bmm adds products below 400 multiply-adds (m·n·k) in a plain loop, in gemm order; 2-D
// products and larger batched ones go to BLIS, where one output row or column becomes dot products.
bool uses_blis_dot(bool batched, int64_t m, int64_t n, int64_t k, int64_t acs, int64_t brs) {
  if (batched && m * n * k < 400) return false;
  return (m == 1 && n == 1) || (n == 1 && acs == 1) || (m == 1 && brs == 1);
}

// Below this much work (over all batch items) a product stays on one thread: threads cost a few
// microseconds to start. The work is its multiply-adds, or, for a product of few rows, reading B, which
// then takes longer than the arithmetic (a cached generation step's x·Wᵀ is one row against a weight
// read from memory): each element of B counts as kReadWork multiply-adds.
constexpr double kParallelMatmulWork = 1 << 20;
constexpr double kReadWork = 8;
double product_work(int64_t n_items, int64_t m, int64_t n, int64_t k) {
  return double(n_items) * std::max(double(m) * double(n) * double(k), kReadWork * double(n) * double(k));
}
// When threads split a product's columns, they do so in multiples of this many: whole register tiles
// (32 floats or 16 doubles wide) in either kernel.
constexpr int64_t kColumnsPerShare = 64;

// ---------------------------------------------------------------- BLIS (opt-in, not bit-exact)

// SCRATCHGRAD_MATMUL: "blis" sends large products to BLIS; "blis-all" every product PyTorch would
// send there (set_matmul_mode overrides it at run time).
MatmulMode& matmul_mode_setting() {
  static MatmulMode mode = [] {
    const char* env = std::getenv("SCRATCHGRAD_MATMUL");
    if (env && std::strcmp(env, "blis") == 0) return MatmulMode::blis_large;
    if (env && std::strcmp(env, "blis-all") == 0) return MatmulMode::blis_all;
    return MatmulMode::exact;
  }();
  return mode;
}

bool use_blis_for_large_products() { return matmul_mode_setting() != MatmulMode::exact; }

// Whether a product of this size goes to BLIS: above kSmallMatmulFlops in "blis" mode; in "blis-all"
// mode wherever PyTorch calls BLIS (all but batched products under bmm's 400 multiply-adds).
bool blis_takes(bool batched, int64_t m, int64_t n, int64_t k) {
  if (matmul_mode_setting() == MatmulMode::blis_all) return !(batched && m * n * k < 400);
  return m * n * k > kSmallMatmulFlops;
}

// BLIS rejects some stride pairs for dims of size 1 or stride 0; give those dims a harmless stride.
void normalise_strides(int64_t rows, int64_t cols, int64_t& rs, int64_t& cs) {
  if (rows == 1) rs = cols * std::max<int64_t>(cs, 1);
  if (cols == 1) cs = 1;
  if (rows == 1 && cols == 1) rs = cs = 1;
}

template <typename T>
void blis_gemm(int64_t m, int64_t n, int64_t k, const T* a, int64_t ars, int64_t acs, const T* b, int64_t brs,
               int64_t bcs, T* c, int64_t crs, int64_t ccs, bool add_to_c) {
  normalise_strides(m, k, ars, acs);
  normalise_strides(k, n, brs, bcs);
  normalise_strides(m, n, crs, ccs);
#ifdef SCRATCHGRAD_HAVE_BLIS
  T one = 1, beta = add_to_c ? 1 : 0;
  if constexpr (std::is_same_v<T, float>)
    bli_sgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, m, n, k, &one, const_cast<T*>(a), ars, acs, const_cast<T*>(b),
              brs, bcs, &beta, c, crs, ccs);
  else
    bli_dgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, m, n, k, &one, const_cast<T*>(a), ars, acs, const_cast<T*>(b),
              brs, bcs, &beta, c, crs, ccs);
#else
  (void)a, (void)b, (void)c, (void)crs, (void)ccs, (void)add_to_c;
  throw std::runtime_error(fmt::format("matmul: SCRATCHGRAD_MATMUL={} needs BLIS, and this build has none (the exact "
                                       "kernels need no BLIS: use the default)",
                                       matmul_mode_setting() == MatmulMode::blis_all ? "blis-all" : "blis"));
#endif
}

}  // namespace

void set_matmul_mode(MatmulMode mode) {
#ifndef SCRATCHGRAD_HAVE_BLIS
  if (mode != MatmulMode::exact)
    throw std::invalid_argument("set_matmul_mode: BLIS modes need BLIS, and this build has none (only the exact kernels)");
#endif
  matmul_mode_setting() = mode;
}
MatmulMode matmul_mode() { return matmul_mode_setting(); }

namespace {

// Numerics::fast: the FMA kernels (matmul_fast.cpp) for products wider than kNarrowestFastProduct - 1
// columns; SCRATCHGRAD_MATMUL applies to the exact ones.
bool uses_fast_kernels(const Tensor& out) {
  return numerics() == Numerics::fast && out.dim() >= 1 && out.size(-1) >= kNarrowestFastProduct;
}

// batched_matmul, and causal_product's product: with scale_below (lower_c, fast kernels, row-major C
// and k > 0: see causal_product) the kernels scale each tile's rows when they are complete.
void product(const Tensor& a_in, const Tensor& b_in, const Tensor& out, MatmulStructure structure, bool add_to_out,
             const Tensor& start_row, const ScaleBelowDiagonal* scale_below) {
  init_cpu_runtime();
  const bool fast = uses_fast_kernels(out);
  const bool blis = !fast && use_blis_for_large_products();
  // A stride of 0 inside a matrix (an expanded row/column) is legal for us but not for BLIS: copy those.
  auto matrix_ok = [](const Tensor& t) { return t.strides()[t.dim() - 1] != 0 && t.strides()[t.dim() - 2] != 0; };
  Tensor a_copy, b_copy;  // only when BLIS needs them
  const Tensor& a = !blis || matrix_ok(a_in) || a_in.numel() == 0 ? a_in : (a_copy = a_in.clone());
  const Tensor& b = !blis || matrix_ok(b_in) || b_in.numel() == 0 ? b_in : (b_copy = b_in.clone());
  const int64_t nd = out.dim();
  const int64_t m = out.shape()[size_t(nd - 2)], n = out.shape()[size_t(nd - 1)], k = a.shape()[size_t(nd - 1)];
  Shape batch(out.shape().begin(), out.shape().end() - 2);
  Shape sa(a.strides().begin(), a.strides().end() - 2), sb(b.strides().begin(), b.strides().end() - 2),
      so(out.strides().begin(), out.strides().end() - 2);
  const int64_t ars = a.strides()[size_t(nd - 2)], acs = a.strides()[size_t(nd - 1)];
  const int64_t brs = b.strides()[size_t(nd - 2)], bcs = b.strides()[size_t(nd - 1)];
  const int64_t crs = out.strides()[size_t(nd - 2)], ccs = out.strides()[size_t(nd - 1)];
  if (structure == MatmulStructure::lower_a || structure == MatmulStructure::upper_a) {
    if (m != k) throw std::logic_error(fmt::format("matmul: a triangular A must be square, got {} x {}", m, k));
  }
  const ProductTimer timer(2.0 * double(shape_numel(batch)) * double(m) * double(n) * double(k));
  const bool large = blis_takes(!batch.empty(), m, n, k);
  const bool dots = !fast && uses_blis_dot(!batch.empty(), m, n, k, acs, brs);
  dispatch_floating(out.dtype(), "matmul", [&](auto tag) {
    using T = decltype(tag);
    const T* pa = ptr<T>(a);
    const T* pb = ptr<T>(b);
    T* pc = ptr<T>(out);
    if (m * n == 0) return;
    // The exact kernels read a start row in place of C; BLIS, the dot products and an empty sum read
    // the starting value from C: for those, copy it down C first.
    const T* start = nullptr;
    if (start_row.defined()) {
      if (k > 0 && !(blis && large) && !dots) {
        start = ptr<T>(start_row);
      } else {
        backend(out.device()).copy(start_row.expand(out.shape()), out);
        add_to_out = true;
      }
    }
    // The product of rows r0..r1 of one batch item: every output entry depends only on its row of A
    // and its column of B, so splitting the work by rows (or items) cannot change a single bit.
    auto rows = [&](const T* ai, const T* bi, T* ci, int64_t r0, int64_t r1) {
      const int64_t mr = r1 - r0;
      ai += r0 * ars;
      ci += r0 * crs;
      if (k == 0) {  // an empty sum is zero (or leaves the starting value)
        if (!add_to_out)
          for (int64_t r = 0; r < mr; ++r)
            for (int64_t c = 0; c < n; ++c) ci[r * crs + c * ccs] = T(0);
      } else if (blis && large) {
        blis_gemm(mr, n, k, ai, ars, acs, bi, brs, bcs, ci, crs, ccs, add_to_out);
      } else if (dots) {
        for (int64_t r = 0; r < mr; ++r)
          for (int64_t c = 0; c < n; ++c) {
            T& entry = ci[r * crs + c * ccs];
            const T dot = blis_dot(k, ai + r * ars, acs, bi + c * bcs, brs);
            entry = add_to_out ? entry + dot : dot;
          }
      } else {
        gemm_kernel(fast, mr, n, k, ai, ars, acs, bi, brs, bcs, ci, crs, ccs,
                   ProductOptions{structure, r0, add_to_out || start, start, scale_below});
      }
    };
    // Element offsets of (C, A, B) for each batch item; the buffer is kept between calls.
    // (A reference, so the OpenMP threads below read this thread's list, not their own empty one.)
    thread_local std::vector<std::array<int64_t, 3>> item_buffer;
    std::vector<std::array<int64_t, 3>>& items = item_buffer;
    items.clear();
    auto plan = make_plan<3>(batch, {&so, &sa, &sb});
    for_each_run(plan, shape_numel(batch), [&](const auto& off, int64_t count, const auto& st) {
      for (int64_t i = 0; i < count; ++i) items.push_back({off[0] + i * st[0], off[1] + i * st[1], off[2] + i * st[2]});
    });
    const int64_t n_items = int64_t(items.size());
    // Threads only pay off on big products; BLIS runs its own threads.
    const int threads =
        (blis && large) || product_work(n_items, m, n, k) < kParallelMatmulWork ? 1 : get_num_threads();
    // Each item's rows in chunks of whole register tiles, as even as the tiles allow (m = 256 on 2 threads
    // in fast numerics' 12-row tiles: 11 tiles each, where 4 chunks of 64 rows made 12 tiles' work of 22)
    const int64_t tile = tile_rows(fast), tiles = (m + tile - 1) / tile;
    const int64_t chunks_per_item = threads == 1 ? 1 : std::clamp<int64_t>(2 * threads / n_items, 1, tiles);
    const int64_t pieces = n_items * chunks_per_item;
    auto run_piece = [&](int64_t piece) {
      const auto& [oc, oa, ob] = items[size_t(piece / chunks_per_item)];
      const int64_t chunk = piece % chunks_per_item;
      const int64_t r0 = std::min(m, tiles * chunk / chunks_per_item * tile);
      const int64_t r1 = std::min(m, tiles * (chunk + 1) / chunks_per_item * tile);
      if (r0 < r1) rows(pa + oa, pb + ob, pc + oc, r0, r1);
    };
    if (threads == 1 && k > 0 && !(blis && large) && !dots) {  // the exact kernel: every item in one call
      gemm_kernel(fast, m, n, k, pa, ars, acs, pb, brs, bcs, pc, crs, ccs,
                  ProductOptions{structure, 0, add_to_out || start, start, scale_below},
                 items);
      return;
    }
    if (threads > 1 && n_items == 1 && n >= m && structure == MatmulStructure::dense && k > 0 && !(blis && large) &&
        !dots) {
      // One product at least as wide as it is tall (a weight gradient gᵀ·x with at least as many outputs as
      // inputs): the threads split its columns, so each packs only its share of B, where split by rows each
      // would pack all of it. Square ones too: GPT-2's 768 x 768 weight gradients ran 251-265 GFLOP/s on
      // two threads split by rows (each thread packing all of B, the layer's input), 306-323 split by
      // columns (each packing all of A, the gradient, as large). An entry's chain does not depend on the
      // columns beside it, so no bit moves. Dense only: lower_c counts panels from column 0.
      // (plain variables, not a structured binding: clang 14 cannot name one inside the OpenMP region)
      const int64_t oc = items[0][0], oa = items[0][1], ob = items[0][2];
      const int64_t units = (n + kColumnsPerShare - 1) / kColumnsPerShare;
#pragma omp parallel for num_threads(threads) schedule(static)
      for (int t = 0; t < threads; ++t) {
        const int64_t c0 = std::min(n, units * t / threads * kColumnsPerShare);
        const int64_t c1 = std::min(n, units * (t + 1) / threads * kColumnsPerShare);
        if (c0 < c1)
          gemm_kernel(fast, m, c1 - c0, k, pa + oa, ars, acs, pb + ob + c0 * bcs, brs, bcs, pc + oc + c0 * ccs, crs, ccs,
                      ProductOptions{structure, 0, add_to_out || start, start ? start + c0 : nullptr});
      }
      return;
    }
    // No OpenMP region at all for one thread, or for one piece (a row of BLIS dot products): entering one
    // costs more than a small product, and a lone piece has nothing to share.
    if (threads == 1 || pieces == 1) {
      for (int64_t piece = 0; piece < pieces; ++piece) run_piece(piece);
      return;
    }
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t piece = 0; piece < pieces; ++piece) run_piece(piece);
  });
}

// Whether out is laid out as the transpose of a row-major stack of matrices (a gradient kept in its input's
// layout: ops/matmul.cpp), with more than one row and one column.
bool column_major(const Tensor& out) {
  return out.dim() >= 2 && out.size(-2) > 1 && out.size(-1) > 1 && !out.is_contiguous() &&
         out.detach().mT().is_contiguous();
}

}  // namespace

void batched_matmul(const Tensor& a, const Tensor& b, const Tensor& out, MatmulStructure structure, bool add_to_out,
                    const Tensor& start_row) {
  // A column-major C is computed as Cᵀ = Bᵀ·Aᵀ into its row-major memory, as PyTorch's BLAS computes such a
  // gradient: each entry is the same chain of products either way, the kernels write rows fastest, and the
  // BLIS modes then take PyTorch's order. (Not a single row or column, where BLIS's dot-product order would
  // differ between the two forms: column_major leaves those alone.)
  if (column_major(out) && structure == MatmulStructure::dense && !add_to_out && !start_row.defined())
    return product(b.detach().mT(), a.detach().mT(), out.detach().mT(), structure, false, start_row, nullptr);
  product(a, b, out, structure, add_to_out, start_row, nullptr);
}

void causal_product(const Tensor& a, const Tensor& b, const Tensor& out, double divisor, double above) {
  // Fused where the fast kernels compute every row (a row-major C, a nonempty sum); else a pass of its own.
  const ScaleBelowDiagonal scale{divisor, above};
  const bool fused = uses_fast_kernels(out) && out.is_contiguous() && a.size(-1) > 0;
  product(a, b, out, MatmulStructure::lower_c, false, Tensor(), fused ? &scale : nullptr);
  if (!fused) causal_scale(out, out, divisor, above);
}

// linear(x, W, bias) on W's panels with linear's bits, for one row where linear runs the FMA kernels (fast
// numerics, at least kNarrowestFastProduct columns): fast_row_times_panels, the threads splitting the panels;
// each column is the chain it is in the unpacked product (it depends only on its row, its column and k).
// Anything else (several rows: a prompt; narrow layers and exact numerics, whose one-row order depends on
// W's layout) is left to the caller, which unpacks W and multiplies as linear does (Backend::panel_linear): a
// prompt's product packs B for its tiles anyway, and the copy costs one pass over W.
bool row_times_panels(const Tensor& x, const Tensor& panels, const Tensor& bias, const Tensor& out) {
  init_cpu_runtime();
  const int64_t k = x.size(1), n = out.size(1), count = panels.size(0);
  const bool one_row = x.size(0) == 1 && n > 0 && uses_fast_kernels(out) && k > 0 && x.is_contiguous() &&
                       panels.is_contiguous() && out.is_contiguous() && (!bias.defined() || bias.is_contiguous());
  if (!one_row) return false;
  const ProductTimer timer(2.0 * double(n) * double(k));
  // One row reads a packed weight at the memory's speed: from 64K values (256 KB of float32, 20 µs on one
  // thread) two threads save more than starting them costs (SmolLM2's key and value projections, 576 x 192).
  const int threads = n * k >= (int64_t(1) << 16) ? get_num_threads() : 1;
  dispatch_floating(out.dtype(), "panel_linear", [&](auto tag) {
    using T = decltype(tag);
    const T* a = ptr<T>(x);
    const T* w = ptr<T>(panels);
    const T* b = bias.defined() ? ptr<T>(bias) : nullptr;
    T* c = ptr<T>(out);
    if (threads == 1 || count == 1) return fast_row_times_panels<T>(0, count, k, n, a, w, b, c);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int t = 0; t < threads; ++t) fast_row_times_panels<T>(count * t / threads, count * (t + 1) / threads, k, n, a, w, b, c);
  });
  return true;
}

}  // namespace autograd::cpu
