// cpu/kernels/matmul_fast.cpp — matrix products with fused multiply-adds: Numerics::fast (see numerics.h).
//
// The textbook blocked product (Goto's algorithm, the way BLIS lays it out):
//
//   for each block of kNc columns and block of kKc consecutive p   (in one of two orders: see gemm)
//       pack B[p0:p0+kc, j:j+kNc] into panels NR columns wide, p-major   (B's block stays in the L2 cache)
//       for each MR rows of A:                               (A's rows stay in the L1 cache)
//         for each panel of B:  C[i0:i0+MR, panel] (+)= micro-kernel(A's rows, the panel)
//
// A laid out by rows is mostly not packed (BLIS packs it; at these sizes the copy cost more than it saved):
// the micro-kernel broadcasts its values straight from A's rows, MR streams along memory (pack_a below says
// when it copies a tile). A transposed A (a weight gradient's xᵀ) is packed, many tiles at a time
// (pack_transposed_a in matmul_plan.h).
// The micro-kernel keeps an MR x NR tile of C in vector registers for the whole block and, for each p,
// loads one row of the B panel (2 vectors) and does acc[r] += a[r, p] * b_row for every r: 2·MR fused
// multiply-adds per p, each one instruction with one rounding. This file (with flash attention's fast
// twin) is compiled with -ffp-contract=fast and -O2 in every build type (CMakeLists.txt), so `acc + b * a`
// on GCC's vector types becomes one FMA wherever the target has FMA (the AVX2 and AVX-512 twins below);
// the exact kernels (matmul.cpp) never fuse.
//
// What stays the same as exact: every output entry is one chain over p, in order, in blocks of kKc (the
// first block stored, later ones added), so an entry never depends on m, on which rows share its tile,
// on how many items a batched call has, or on the thread that computes it: splitting the rows over
// threads changes no bit. What differs: each term is rounded once (a·b + acc), not twice; results agree
// with exact to a few float roundings (tests/test_fast_numerics.cpp bounds them).
#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "autograd/cpu/kernels/lanes.h"
#include "autograd/cpu/kernels/matmul_plan.h"
#include "autograd/cpu/runtime/runtime.h"

// The vector helpers below are always inlined into the AVX2 / AVX-512 functions that use them, so no
// vector ever crosses a call boundary and GCC's warning about the ABI of such calls does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace autograd::cpu {

namespace {

template <typename T, int VB> struct Vec;  // VB bytes of T as one GCC vector
template <int VB> struct Vec<float, VB> { typedef float type __attribute__((vector_size(VB))); };
template <int VB> struct Vec<double, VB> { typedef double type __attribute__((vector_size(VB))); };

// The register tile: MR rows by NR = 2 vectors of columns. With 32 vector registers (AVX-512) 12 x 2
// accumulators leave room for B's two vectors and a broadcast of A; with 16 (AVX2, SSE) 6 x 2 do.
// Each accumulator is a chain with a 4-cycle latency, and two FMAs start per cycle: at least 8 chains
// must be in flight to keep both FMA units busy, and more rows per loaded B vector save loads.
template <int VB> constexpr int64_t kMr = VB == 64 ? 12 : 6;
// A last tile of fewer rows runs a kernel of two thirds or one third of MR rows when that covers it (8 or
// 4; 4 or 2 on AVX2), reading its rows in place: m = 256 (4 batches of 64 tokens) is 21 tiles of 12 and
// one of 4, which the 12-row kernel ran at the cost of 12 on a copy of its rows padded with zeros. A third
// of MR rows still has 2·MR/3 chains of FMAs in flight, enough to keep both FMA units busy on AVX-512.
template <int VB> constexpr int64_t kernel_rows(int64_t mr) {
  return mr > 2 * kMr<VB> / 3 ? kMr<VB> : mr > kMr<VB> / 3 ? 2 * kMr<VB> / 3 : kMr<VB> / 3;
}
template <typename T, int VB> constexpr int64_t kNr = 2 * VB / int64_t(sizeof(T));
// Columns of B packed at a time: kKc x kNc floats (256 KiB) stay in a core's L2 cache while every row
// tile of A passes over them, and so do the rows of C they add to when A has few rows (m = 256: 256 KiB
// of C beside them, where 512 columns made 1 MiB with B and no longer fit a 1 MiB L2). A multiple of every
// NR. Square products do not care: for them 256, 512 and 1024 run alike.
constexpr int64_t kNc = 256;
// With a transposed A (a weight gradient gᵀ·x), which is packed again for every block of B, a B of up to
// kWideNc columns is one block: A is packed once per block of terms rather than once per 256 columns (for
// GPT-2's weight gradients, n = 768, three times fewer copies of a 0.8 to 51 MB A).
constexpr int64_t kWideNc = 1024;

// A whole panel of a transposed B (brs == 1: each column of B runs along memory) into out[p][c]: VL
// columns by VL terms at a time, read as VL vectors, transposed in registers and written as VL rows of the
// panel (a scalar copy moves one value per load and store; this moves VL). Terms past the last whole VL
// one by one.
template <typename T, int64_t NR>
[[gnu::always_inline]] inline void pack_transposed_panel(int64_t kc, const T* b, int64_t bcs, T* out) {
  constexpr int64_t VL = NR / 2;
  using V = typename Vec<T, int(VL * int64_t(sizeof(T)))>::type;
  const int64_t whole = kc / VL * VL;
  for (int64_t c0 = 0; c0 < NR; c0 += VL)
    for (int64_t p0 = 0; p0 < whole; p0 += VL) {
      V rows[VL];
#pragma GCC unroll 16
      for (int64_t r = 0; r < VL; ++r) rows[r] = load_vector<V>(b + (c0 + r) * bcs + p0);
      transpose_rows<V, VL>(rows);
#pragma GCC unroll 16
      for (int64_t r = 0; r < VL; ++r) store_vector(out + (p0 + r) * NR + c0, rows[r]);
    }
  for (int64_t c = 0; c < NR; ++c)
    for (int64_t p = whole; p < kc; ++p) out[p * NR + c] = b[c * bcs + p];
}

// out[jp][p][c] = b[p0 + p, j0 + c] for the panel starting at column j0 = jp·NR, zero past column n.
template <typename T, int64_t NR>
[[gnu::always_inline]] inline void pack_b(int64_t kc, int64_t n, const T* b, int64_t brs, int64_t bcs, T* out) {
  if (bcs == 1) {  // a row-major B: its whole panels row by row, each row of the block one run along memory
    // (Panel by panel, each of the kc rows gave NR values at a time, a row apart: kc short streams for a
    // weight coming from memory. The feed-forward's dY·W, 256 x 3072 x 768 with cold caches, ran 171-178
    // GFLOP/s that way and 183-187 this way.)
    const int64_t whole = n / NR * NR;
    for (int64_t p = 0; p < kc; ++p)
      for (int64_t j0 = 0; j0 < whole; j0 += NR) std::memcpy(out + j0 * kc + p * NR, b + p * brs + j0, NR * sizeof(T));
    b += whole;  // the edge panel, if any, below
    out += whole * kc;
    n -= whole;
  }
  for (int64_t j0 = 0; j0 < n; j0 += NR, out += kc * NR) {
    const int64_t nr = std::min(NR, n - j0);
    if (brs == 1 && nr == NR) {  // B transposed (x @ Wᵀ, q @ kᵀ): transposed in registers
      pack_transposed_panel<T, NR>(kc, b + j0 * bcs, bcs, out);
      continue;
    }
    // an edge panel: column by column, so the reads run along memory
    for (int64_t c = 0; c < nr; ++c) {
      const T* column = b + (j0 + c) * bcs;
      for (int64_t p = 0; p < kc; ++p) out[p * NR + c] = column[p * brs];
    }
    for (int64_t p = 0; p < kc; ++p)
      for (int64_t c = nr; c < NR; ++c) out[p * NR + c] = T(0);
  }
}

// How the tile is written back: stored (the first block of a sum that starts at zero), or added to what
// C holds, or (the first block of addmm) added to the start row.
struct WriteBack {
  bool store;
  const void* start;  // the start row, at this panel's first column; null: add to C
};

// C[0:mr, 0:nr] (+)= A panel (kc x ROWS) · B panel (kc x NR), the tile held in registers throughout.
// A is read in place: a[r * a_rs + p * a_ps] is row r's term p, for a packed panel (a_ps = MR, a_rs = 1) as
// for a row-major A (a_ps = 1: each row is a stream along memory) or a column-major one (a_rs = 1).
// ROWS is MR, or fewer for a last tile (kernel_rows); mr <= ROWS rows of C are written.
template <typename T, int VB, int64_t ROWS>
[[gnu::always_inline]] inline void micro_kernel(int64_t kc, const T* ap, int64_t a_rs, int64_t a_ps, const T* bp,
                                                int64_t mr, int64_t nr, T* c, int64_t crs, int64_t ccs, WriteBack how) {
  using V = typename Vec<T, VB>::type;
  constexpr int64_t VL = VB / int64_t(sizeof(T)), NR = 2 * VL;
  V acc[ROWS][2];
#pragma GCC unroll 16
  for (int64_t r = 0; r < ROWS; ++r) acc[r][0] = acc[r][1] = V{};  // register by register (no rep stos)
  if (!how.store && !how.start && ccs == 1)  // the tile is added to C's rows at the end: fetched meanwhile
    for (int64_t r = 0; r < mr; ++r) {
      __builtin_prefetch(c + r * crs);
      __builtin_prefetch(c + r * crs + NR - 1);
    }
#pragma GCC unroll 4  // four terms a trip: the loop's own counting and branch are shared by 8·ROWS FMAs
  for (int64_t p = 0; p < kc; ++p) {
    const V b0 = load_vector<V>(bp + p * NR), b1 = load_vector<V>(bp + p * NR + VL);
#pragma GCC unroll 16
    for (int64_t r = 0; r < ROWS; ++r) {  // unrolled, so the 2·ROWS accumulators stay in registers
      const T a = ap[r * a_rs + p * a_ps];
      acc[r][0] = acc[r][0] + b0 * a;  // one fused multiply-add each
      acc[r][1] = acc[r][1] + b1 * a;
    }
  }
  const T* start = static_cast<const T*>(how.start);
  if (ccs == 1 && nr == NR) {  // whole vectors in and out of a row-major C
    const V s0 = start ? load_vector<V>(start) : V{}, s1 = start ? load_vector<V>(start + VL) : V{};
    for (int64_t r = 0; r < mr; ++r) {
      T* row = c + r * crs;
      if (how.store) {
        store_vector(row, acc[r][0]);
        store_vector(row + VL, acc[r][1]);
      } else {
        store_vector(row, acc[r][0] + (start ? s0 : load_vector<V>(row)));
        store_vector(row + VL, acc[r][1] + (start ? s1 : load_vector<V>(row + VL)));
      }
    }
    return;
  }
  for (int64_t r = 0; r < mr; ++r) {
    T values[NR];
    store_vector(values, acc[r][0]);
    store_vector(values + VL, acc[r][1]);
    for (int64_t col = 0; col < nr; ++col) {
      T& out = c[r * crs + col * ccs];
      out = how.store ? values[col] : values[col] + (start ? start[col] : out);
    }
  }
}

// One finished row of causal scores, scaled and filled in place (CausalRowScale, matmul_plan.h) on VB-byte
// vectors: this file is compiled with -O2, which leaves loops of unknown length scalar.
template <typename T, int VB>
[[gnu::always_inline]] inline void scale_causal_row(const CausalRowScale<T>& s, T* row, int64_t n, int64_t last) {
  using V = typename Vec<T, VB>::type;
  constexpr int64_t VL = VB / int64_t(sizeof(T));
  const int64_t kept = std::clamp<int64_t>(last + 1, 0, n);
  int64_t j = 0;
  if (s.by_inverse)
    for (; j + VL <= kept; j += VL) store_vector(row + j, load_vector<V>(row + j) * s.inverse);
  else
    for (; j + VL <= kept; j += VL) store_vector(row + j, load_vector<V>(row + j) / s.divisor);
  s(row + j, row + j, kept - j, kept - 1 - j);  // the last few kept entries
  V fill;
  for (int64_t l = 0; l < VL; ++l) fill[l] = s.fill;
  for (j = kept; j + VL <= n; j += VL) store_vector(row + j, fill);
  for (; j < n; ++j) row[j] = s.fill;
}

// Rows [row0, row0 + mr) of the whole matrix, at c (row stride crs). (A function, not a lambda in gemm:
// a lambda's body would not be compiled for gemm's target.)
template <typename T, int VB>
[[gnu::always_inline]] inline void scale_causal_rows(const CausalRowScale<T>& s, T* c, int64_t crs, int64_t mr,
                                                     int64_t n, int64_t row0) {
  for (int64_t r = 0; r < mr; ++r) scale_causal_row<T, VB>(s, c + r * crs, n, row0 + r);
}

template <typename T> struct Buffers {
  std::vector<T> a, b, block_a;
};
template <typename T> Buffers<T>& buffers() {
  thread_local Buffers<T> mine;  // reused across calls: no allocation per product once warm
  return mine;
}

// row[l * stride] for lanes l < nr, zero past them: a row of B's edge columns, or one term past the last
// whole VL. (A function, not a lambda in gemv: a lambda's body would not be compiled for gemv's target.)
template <typename V, typename T>
[[gnu::always_inline]] inline V gathered_row(const T* row, int64_t stride, int64_t nr) {
  V v{};
  for (int64_t l = 0; l < nr; ++l) v[l] = row[l * stride];
  return v;
}

// One row of A (x·W for each token of a generation with a KV cache): the general path above would pack all
// of B for that single row and run a 12-row tile of which one row is used. This reads B once, in place.
// Order of the additions: exactly gemm's — each entry one fused multiply-add chain over p, in blocks of
// kKc (the first block stored, or added to the start row or C; later blocks added to C) — so a row's bits
// do not depend on whether it came alone (a cached step) or among others (the prompt), and since no sum
// ever crosses lanes they do not depend on the vector width (AVX-512, AVX2) nor on the threads, which
// split the columns (batched_matmul). Lanes are columns: VL columns of C at a time, one accumulator.
template <typename T, int VB>
[[gnu::always_inline]] inline void gemv(int64_t n, int64_t k, const T* a, int64_t acs, const T* b, int64_t brs,
                                        int64_t bcs, T* c, int64_t ccs, const ProductOptions& options) {
  using V = typename Vec<T, VB>::type;
  constexpr int64_t VL = VB / int64_t(sizeof(T));
  const T* start = static_cast<const T*>(options.start_row);
  for (int64_t j0 = 0; j0 < n; j0 += VL) {
    const int64_t nr = std::min(VL, n - j0);
    const T* bj = b + j0 * bcs;
    for (int64_t p0 = 0; p0 < k; p0 += kKc) {
      const int64_t p_end = std::min(k, p0 + kKc);
      V acc{};
      int64_t p = p0;
      if (brs == 1 && nr == VL) {
        // B transposed (x @ Wᵀ, a Linear's weight): each column runs along memory. VL columns by VL terms
        // are read as VL vectors (VL streams, each a whole cache line on AVX-512) and transposed in
        // registers, so each row of the block becomes one vector of VL columns. The step is bound by
        // memory, and the hardware prefetchers keep too few of these VL interleaved streams ahead: each
        // load also asks for the same terms of the next VL columns, so the next block is in the cache when
        // its turn comes (a prefetch past the matrix's end is harmless: it never faults).
        for (; p + VL <= p_end; p += VL) {
          V rows[VL];
#pragma GCC unroll 16
          for (int64_t r = 0; r < VL; ++r) {
            rows[r] = load_vector<V>(bj + r * bcs + p);
            __builtin_prefetch(bj + (r + VL) * bcs + p);
          }
          transpose_rows<V, VL>(rows);
#pragma GCC unroll 16
          for (int64_t r = 0; r < VL; ++r) acc = acc + rows[r] * a[(p + r) * acs];
        }
      } else if (bcs == 1 && nr == VL) {  // B row-major: VL columns of row p are one vector
        for (; p < p_end; ++p) acc = acc + load_vector<V>(bj + p * brs) * a[p * acs];
      }
      for (; p < p_end; ++p) acc = acc + gathered_row<V>(bj + p * brs, bcs, nr) * a[p * acs];
      for (int64_t l = 0; l < nr; ++l) {  // write back as micro_kernel does
        T& out = c[(j0 + l) * ccs];
        const bool first = p0 == 0;
        out = first && !options.add_to_c ? acc[l] : acc[l] + (first && start ? start[j0 + l] : out);
      }
    }
  }
}

// One row times a weight packed in panels (ops/panels.cpp): panel i holds Wᵀ's columns 16i .. 16i + 15, p by
// p, so it is one run of memory read front to back, where gemv above reads 16 rows of W side by side (16
// streams with a stride between them, which the prefetchers serve at about 70% of the memory's speed). Each
// column is one chain over p in blocks of kKc, the bias added after the first block and each later block
// added on: gemv's order, so an entry has the bits of linear(x, W, bias). PANELS panels go together: two
// streams of memory and two chains of FMAs a thread, where one alone keeps too few reads in flight.
template <typename T, int VB, int64_t PANELS>
[[gnu::always_inline]] inline void panels_together(const int64_t (&index)[PANELS], int64_t k, int64_t n, const T* a,
                                                   const T* panels, const T* bias, T* out) {
  using V = typename Vec<T, VB>::type;
  constexpr int64_t VL = VB / int64_t(sizeof(T)), W = kPanelWidth / VL;  // vectors in a panel's row
  for (int64_t p0 = 0; p0 < k; p0 += kKc) {
    const int64_t p_end = std::min(k, p0 + kKc);
    V acc[PANELS][W] = {};
    for (int64_t p = p0; p < p_end; ++p) {
      const T x = a[p];
#pragma GCC unroll 4
      for (int64_t i = 0; i < PANELS; ++i)
#pragma GCC unroll 4
        for (int64_t w = 0; w < W; ++w)
          acc[i][w] = acc[i][w] + load_vector<V>(panels + (index[i] * k + p) * kPanelWidth + w * VL) * x;
    }
    for (int64_t i = 0; i < PANELS; ++i) {
      const int64_t j0 = index[i] * kPanelWidth, columns = std::min(kPanelWidth, n - j0);
      for (int64_t l = 0; l < columns; ++l) {  // written back as gemv writes
        T& entry = out[j0 + l];
        const T sum = acc[i][l / VL][l % VL];
        entry = p0 > 0 ? sum + entry : bias ? sum + bias[j0 + l] : sum;
      }
    }
  }
}

// Panels [first, last): the first half's panel i beside the second half's panel i.
template <typename T, int VB>
[[gnu::always_inline]] inline void row_times_panels(int64_t first, int64_t last, int64_t k, int64_t n, const T* a,
                                                    const T* panels, const T* bias, T* out) {
  const int64_t half = (last - first) / 2;
  for (int64_t i = first; i < first + half; ++i)
    panels_together<T, VB, 2>({i, i + half}, k, n, a, panels, bias, out);
  if ((last - first) % 2) panels_together<T, VB, 1>({last - 1}, k, n, a, panels, bias, out);
}

// One tile of rows of A and C within a block: A's rows (in place, or `packed` among their neighbours) from
// term offset p_begin of the block for kw terms, and the rows of C they add to.
template <typename T> struct RowTile {
  const PackedA* packed;  // null: A's rows at a (strides ars, acs), copied by pack_a where they must be
  const T* a;
  int64_t ars, acs, mr, p_begin, kw;
  T* c;
  int64_t crs, ccs;
};
// The block's columns: its first column, its panels [first_panel, end_panel), C's width n, the block's terms.
struct Columns {
  int64_t jb, first_panel, end_panel, n, kc;
};

// The micro-kernel of ROWS rows over every panel of the block, for one tile. `first_block` says how the
// block's tile is written back, its start (if any) at column 0 of the start row.
template <typename T, int VB, int64_t ROWS>
[[gnu::always_inline]] inline void run_tile(const RowTile<T>& tile, const Columns& cols, Buffers<T>& buf,
                                            WriteBack first_block) {
  constexpr int64_t NR = kNr<T, VB>;
  const PackedA a = tile.packed ? *tile.packed : pack_a<T, ROWS>(tile.kw, tile.mr, tile.a, tile.ars, tile.acs, buf.a);
  const T* a_tile = static_cast<const T*>(a.data);
  const T* start = static_cast<const T*>(first_block.start);
  for (int64_t jp = cols.first_panel; jp < cols.end_panel; ++jp) {
    const int64_t j0 = jp * NR;
    const T* panel = buf.b.data() + (j0 - cols.jb) * cols.kc + tile.p_begin * NR;
    // the start row stands in for C in the first block these rows add up
    const WriteBack how{first_block.store, start ? start + j0 : nullptr};
    micro_kernel<T, VB, ROWS>(tile.kw, a_tile, a.rs, a.ps, panel, tile.mr, std::min(NR, cols.n - j0),
                              tile.c + j0 * tile.ccs, tile.crs, tile.ccs, how);
  }
}

// C (m x n) = A (m x k) · B (k x n), any strides, for one item.
template <typename T, int VB>
[[gnu::always_inline]] inline void gemm(int64_t m, int64_t n, int64_t k, const T* a, int64_t ars, int64_t acs,
                                        const T* b, int64_t brs, int64_t bcs, T* c, int64_t crs, int64_t ccs,
                                        const ProductOptions& options) {
  if (m == 1 && options.structure == MatmulStructure::dense && !options.scale_below)
    return gemv<T, VB>(n, k, a, acs, b, brs, bcs, c, ccs, options);
  constexpr int64_t NR = kNr<T, VB>, MR = kMr<VB>;
  Buffers<T>& buf = buffers<T>();
  const int64_t n_panels = (n + NR - 1) / NR;
  const T* start = static_cast<const T*>(options.start_row);
  const bool transposed_a = ars == 1 && acs != 1 && m > MR;  // packed kTilesPerBlockOfA tiles at a time
  const int64_t block_columns = transposed_a && n <= kWideNc ? n_panels * NR : kNc;
  buf.b.resize(size_t(std::min(k, kKc) * std::min(n_panels * NR, block_columns)));
  if (transposed_a) buf.block_a.resize(size_t(std::min(k, kKc) * MR * kTilesPerBlockOfA));
  const bool scale = options.scale_below != nullptr;
  const CausalRowScale<T> scale_row(scale ? *options.scale_below : ScaleBelowDiagonal{1, 0});
  // The blocks of B in one of two orders. Along p first (a block of C's columns, m x kNc, stays in the L2
  // cache while all its terms add up; A is read again for every block of columns), or along the columns
  // first (a block of A, m x kKc, stays in the L2 cache while every block of columns uses it; C is read and
  // written again for every block of terms). Whichever matrix is read again is the smaller one: for the
  // GPT-2 head's x·Wᵀ (k = 768, n = 50,257) that spares a 51 MB C three trips to memory, for its input
  // gradient dY·W (k = 50,257, n = 768) it spares a 51 MB A three. Each entry's chain is the same either way.
  const bool along_p_first = k <= 2 * n;  // A (m x k, read) against C (m x n, read and written)
  const int64_t column_blocks = (n + block_columns - 1) / block_columns, term_blocks = (k + kKc - 1) / kKc;
  for (int64_t block = 0; block < column_blocks * term_blocks; ++block) {
    const int64_t jb = (along_p_first ? block / term_blocks : block % column_blocks) * block_columns;
    const int64_t p0 = (along_p_first ? block % term_blocks : block / column_blocks) * kKc;
    const int64_t nc = std::min(block_columns, n - jb), kc = std::min(kKc, k - p0);
    pack_b<T, NR>(kc, nc, b + p0 * brs + jb * bcs, brs, bcs, buf.b.data());
    for (int64_t i0 = 0; i0 < m; i0 += MR) {
      const int64_t mr = std::min(MR, m - i0);
      const int64_t tile_in_block = i0 / MR % kTilesPerBlockOfA;
      if (transposed_a && tile_in_block == 0)
        pack_transposed_a<T, MR>(kc, std::min(MR * kTilesPerBlockOfA, m - i0), a + i0 + p0 * acs, acs, buf.block_a.data());
      // the tile's rows are complete after their last block: scaled then, while still in the cache
      const bool finish_rows = scale && p0 + kKc >= k && jb + block_columns >= n;
      TileWork w = tile_work(options.structure, options.row0 + i0, mr, p0, kc, n_panels, NR);
      if (options.add_to_c) w.first = false;
      const int64_t panel_end = std::min(w.panels, (jb + nc + NR - 1) / NR);
      if (w.p_begin >= w.p_end || panel_end <= jb / NR) {  // only zeros, or nothing wanted here
        if (finish_rows) scale_causal_rows<T, VB>(scale_row, c + i0 * crs, crs, mr, n, options.row0 + i0);
        continue;
      }
      const PackedA packed = {buf.block_a.data() + (tile_in_block * kc + w.p_begin - p0) * MR, 1, MR};
      const RowTile<T> tile{transposed_a ? &packed : nullptr, a + i0 * ars + w.p_begin * acs, ars, acs, mr,
                            w.p_begin - p0, w.p_end - w.p_begin, c + i0 * crs, crs, ccs};
      const Columns columns{jb, jb / NR, panel_end, n, kc};
      const WriteBack first_block{w.first, start && p0 == 0 ? start : nullptr};
      switch (kernel_rows<VB>(mr)) {
        case MR: run_tile<T, VB, MR>(tile, columns, buf, first_block); break;
        case 2 * MR / 3: run_tile<T, VB, 2 * MR / 3>(tile, columns, buf, first_block); break;
        default: run_tile<T, VB, MR / 3>(tile, columns, buf, first_block); break;
      }
      if (finish_rows) scale_causal_rows<T, VB>(scale_row, c + i0 * crs, crs, mr, n, options.row0 + i0);
    }
  }
}

template <typename T, int VB>
[[gnu::always_inline]] inline void gemm_items(Items items, int64_t m, int64_t n, int64_t k, const T* a, int64_t ars,
                                              int64_t acs, const T* b, int64_t brs, int64_t bcs, T* c, int64_t crs,
                                              int64_t ccs, const ProductOptions& options) {
  for (const auto& [oc, oa, ob] : items)
    gemm<T, VB>(m, n, k, a + oa, ars, acs, b + ob, brs, bcs, c + oc, crs, ccs, options);
}

// The same code three times: 16-byte vectors for any x86-64 (no FMA there: a multiply and an add), and,
// chosen at run time, AVX2 + FMA (16 ymm registers) and AVX-512 + FMA (32 zmm registers).
template <typename T>
void gemm_baseline(Items items, int64_t m, int64_t n, int64_t k, const T* a, int64_t ars, int64_t acs, const T* b,
                   int64_t brs, int64_t bcs, T* c, int64_t crs, int64_t ccs, const ProductOptions& options) {
  gemm_items<T, 16>(items, m, n, k, a, ars, acs, b, brs, bcs, c, crs, ccs, options);
}
#if defined(__x86_64__) && defined(__GNUC__)
template <typename T>
[[gnu::target("avx2,fma")]] void gemm_avx2(Items items, int64_t m, int64_t n, int64_t k, const T* a, int64_t ars,
                                           int64_t acs, const T* b, int64_t brs, int64_t bcs, T* c, int64_t crs,
                                           int64_t ccs, const ProductOptions& options) {
  gemm_items<T, 32>(items, m, n, k, a, ars, acs, b, brs, bcs, c, crs, ccs, options);
}
template <typename T>
[[gnu::target("avx512f,avx512vl,fma")]] void gemm_avx512(Items items, int64_t m, int64_t n, int64_t k, const T* a,
                                                         int64_t ars, int64_t acs, const T* b, int64_t brs,
                                                         int64_t bcs, T* c, int64_t crs, int64_t ccs,
                                                         const ProductOptions& options) {
  gemm_items<T, 64>(items, m, n, k, a, ars, acs, b, brs, bcs, c, crs, ccs, options);
}
#endif

template <typename T>
void panels_baseline(int64_t first, int64_t last, int64_t k, int64_t n, const T* a, const T* panels, const T* bias,
                     T* out) {
  row_times_panels<T, 16>(first, last, k, n, a, panels, bias, out);
}
#if defined(__x86_64__) && defined(__GNUC__)
template <typename T>
[[gnu::target("avx2,fma")]] void panels_avx2(int64_t first, int64_t last, int64_t k, int64_t n, const T* a,
                                             const T* panels, const T* bias, T* out) {
  row_times_panels<T, 32>(first, last, k, n, a, panels, bias, out);
}
template <typename T>
[[gnu::target("avx512f,avx512vl,fma")]] void panels_avx512(int64_t first, int64_t last, int64_t k, int64_t n,
                                                           const T* a, const T* panels, const T* bias, T* out) {
  row_times_panels<T, 64>(first, last, k, n, a, panels, bias, out);
}
#endif

}  // namespace

template <typename T>
void fast_gemm(int64_t m, int64_t n, int64_t k, const T* a, int64_t ars, int64_t acs, const T* b, int64_t brs,
               int64_t bcs, T* c, int64_t crs, int64_t ccs, ProductOptions options, Items items) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (avx512_kernels() && has_fma()) return gemm_avx512(items, m, n, k, a, ars, acs, b, brs, bcs, c, crs, ccs, options);
  if (has_avx2() && has_fma()) return gemm_avx2(items, m, n, k, a, ars, acs, b, brs, bcs, c, crs, ccs, options);
#endif
  gemm_baseline(items, m, n, k, a, ars, acs, b, brs, bcs, c, crs, ccs, options);
}

template <typename T>
void fast_row_times_panels(int64_t first, int64_t last, int64_t k, int64_t n, const T* a, const T* panels,
                           const T* bias, T* out) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (avx512_kernels() && has_fma()) return panels_avx512(first, last, k, n, a, panels, bias, out);
  if (has_avx2() && has_fma()) return panels_avx2(first, last, k, n, a, panels, bias, out);
#endif
  panels_baseline(first, last, k, n, a, panels, bias, out);
}

int64_t fast_gemm_tile_rows() {
#if defined(__x86_64__) && defined(__GNUC__)
  if (avx512_kernels() && has_fma()) return kMr<64>;
  if (has_avx2() && has_fma()) return kMr<32>;
#endif
  return kMr<16>;
}

template void fast_gemm<float>(int64_t, int64_t, int64_t, const float*, int64_t, int64_t, const float*, int64_t,
                               int64_t, float*, int64_t, int64_t, ProductOptions, Items);
template void fast_gemm<double>(int64_t, int64_t, int64_t, const double*, int64_t, int64_t, const double*, int64_t,
                                int64_t, double*, int64_t, int64_t, ProductOptions, Items);

template void fast_row_times_panels<float>(int64_t, int64_t, int64_t, int64_t, const float*, const float*,
                                           const float*, float*);
template void fast_row_times_panels<double>(int64_t, int64_t, int64_t, int64_t, const double*, const double*,
                                            const double*, double*);

}  // namespace autograd::cpu
