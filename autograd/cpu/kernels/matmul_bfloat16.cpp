// cpu/kernels/matmul_bfloat16.cpp — products of bfloat16 matrices with float32 sums.
//
// Where the CPU has AVX512_BF16 (Zen 4 and 5, Intel Cooper Lake and later), one instruction does the work
// of two float32 fused multiply-adds per lane: vdpbf16ps takes 32 bfloat16 pairs from each operand and
// adds a₂ⱼ·b₂ⱼ + a₂ⱼ₊₁·b₂ⱼ₊₁ into float32 lane j. So the packing puts pairs of consecutive p side by side:
//
//   A (rows)     packed_a[i/MR][q][i%MR] = { A[i, 2q], A[i, 2q+1] }          one 32-bit word per pair
//   B (panel)    packed_b[q][c]    = { B[2q, j0+c], B[2q+1, j0+c] }  c < 32   two vectors per pair
//
// and the micro-kernel keeps an MR x 32 tile of C in 2·MR float32 registers; for each pair q it loads the
// panel's two vectors, broadcasts row r's word to all lanes and does acc[r] += dot(word, panel) for every
// row: 2·MR instructions, 64·MR multiply-adds per q. An odd K is padded with a zero term, N with zero
// columns (never stored). p is taken in blocks of kPairsPerBlock pairs so that a block of the panel
// (32 KiB) stays in L1 while every row block passes over it; the sums live in a float32 buffer until the
// last block, and are then stored as they are, or rounded once into a bfloat16 output (autocast's). With a
// long K and a small C, the blocks of pairs go outside the panels instead (deep_product).
//
// A single row times a Linear's weight (a cached generation step) takes a second path, dot products
// of contiguous rows without packing (row_product, below).
//
// Every product of two bfloat16 numbers is exact in float32; the sums are float32 roundings, in an order
// that differs from the reference loop (reference/matmul.cpp: bfloat16_matmul) only in how each pair is
// added, so the two agree exactly wherever the sums are exact and to a few float32 roundings elsewhere
// (tests/test_bfloat16_kernels.cpp). Elsewhere (no AVX512_BF16, or SCRATCHGRAD_NO_AVX512) both operands are
// widened to float32 and the float32 product runs: the same products, added in its own order.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "autograd/cpu/kernels.h"
#include "autograd/cpu/kernels/bfloat16_lanes.h"
#include "autograd/cpu/kernels/lanes.h"
#include "autograd/cpu/kernels/loops.h"
#include "autograd/cpu/runtime/buffer_cache.h"
#include "autograd/cpu/runtime/product_tally.h"
#include "autograd/cpu/runtime/runtime.h"
#include "autograd/precision/widening_backend.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SCRATCHGRAD_X86_BF16 1
#endif

#pragma GCC diagnostic ignored "-Wpsabi"

namespace autograd::cpu {

namespace {

bool has_avx512_bf16() {
#ifdef SCRATCHGRAD_X86_BF16
  static const bool yes = avx512_kernels() && (__builtin_cpu_init(), __builtin_cpu_supports("avx512bf16")) &&
                          std::getenv("SCRATCHGRAD_NO_AVX512_BF16") == nullptr;
  return yes;
#else
  return false;
#endif
}

// One matrix of a batch: where it starts and how to step along its rows and columns (in elements).
template <typename T> struct Strided {
  T* first;
  int64_t rs, cs;
  T& operator()(int64_t i, int64_t j) const { return first[i * rs + j * cs]; }
};

// The first element of t's matrix number n (t's batch dims in row-major order; expanded dims have stride 0).
template <typename T> Strided<T> item(const Tensor& t, int64_t n) {
  const int64_t dims = t.dim();
  int64_t offset = 0;
  for (int64_t d = dims - 3; d >= 0; --d) {
    offset += (n % t.size(d)) * t.strides()[size_t(d)];
    n /= t.size(d);
  }
  return {static_cast<T*>(t.raw_data()) + offset, t.strides()[size_t(dims - 2)], t.strides()[size_t(dims - 1)]};
}

#ifdef SCRATCHGRAD_X86_BF16

constexpr int64_t kMr = 12;               // rows per micro-tile: 24 accumulators, a chain each
constexpr int64_t kNr = 32;               // columns per panel: two vectors of 16 float32 lanes
constexpr int64_t kPairsPerBlock = 256;   // 512 p per block: 256 pairs · 128 bytes = 32 KiB of panel

uint32_t pair(bfloat16 even, bfloat16 odd) { return uint32_t(even.bits) | uint32_t(odd.bits) << 16; }

// The 32-bit word at two consecutive bfloat16 values (p and p + 1 side by side in memory, as a pair is).
uint32_t word_at(const bfloat16* at) {
  uint32_t w;
  std::memcpy(&w, at, sizeof w);
  return w;
}

// to[c] = { even[c], odd[c] } for c < count: two rows' values side by side as pairs (odd null past an odd
// K: a zero term). A whole `Full` has a fixed count, which the compiler makes vector instructions of.
template <int64_t Full>
[[gnu::always_inline]] inline void interleave(const bfloat16* even, const bfloat16* odd, uint32_t* to, int64_t count) {
  if (odd && count == Full)
    for (int64_t c = 0; c < Full; ++c) to[c] = even[c].bits | uint32_t(odd[c].bits) << 16;
  else
    for (int64_t c = 0; c < count; ++c) to[c] = even[c].bits | (odd ? uint32_t(odd[c].bits) << 16 : 0u);
}

// The packings below have a plain loop for each layout a training step meets, so that they cost little
// beside the products (a Linear's three products: x·Wᵀ, g·W and xᵀ·g, each operand with p along its rows
// or along its columns), and the element-by-element walk for any other strides.
//
// Where row i's word for pair q goes: rows in blocks of MR, each block's words pair by pair with its MR
// rows side by side, so that the micro-kernel reads its rows' words as one run of memory.
int64_t a_slot(int64_t i, int64_t q, int64_t pairs) { return ((i / kMr) * pairs + q) * kMr + i % kMr; }

// n values from the tensor buffers' cache (buffer_cache.h): a big product's packed A (25 MB for GPT-2's
// head) is then not a fresh mapping that the system zeroes every step.
template <typename T> class Cached {
 public:
  explicit Cached(size_t n)
      : bytes_(std::max<size_t>(n, 1) * sizeof(T)), p_(static_cast<T*>(cached_allocate(bytes_))) {}
  ~Cached() { cached_deallocate(p_, bytes_); }
  Cached(const Cached&) = delete;
  Cached& operator=(const Cached&) = delete;
  T* data() const { return p_; }

 private:
  size_t bytes_;
  T* p_;
};
using Words = Cached<uint32_t>;

// The words of one matrix's packed A: every row block whole (the last one's missing rows never read).
int64_t packed_a_words(int64_t m, int64_t k) { return (m + kMr - 1) / kMr * kMr * ((k + 1) / 2); }

// A's rows as words of two consecutive p (the last padded with a zero term when K is odd), in row blocks,
// into out (packed_a_words of them), the row blocks split over `threads`.
[[gnu::target("avx512f,avx512bw")]] void pack_a(Strided<const bfloat16> a, int64_t m, int64_t k, uint32_t* out,
                                                int threads) {
  const int64_t pairs = (k + 1) / 2, whole = k / 2;
  if (a.cs == 1) {  // p along a row: a pair is already one word in memory
    // a block's rows side by side, pair by pair: the block is written once, in order (row by row, each
    // row's pass would cross the whole block again: 1.2 MB for GPT-2's head's gradient, 12 times)
#pragma omp parallel for num_threads(threads) if (threads > 1) schedule(static)
    for (int64_t i0 = 0; i0 < m; i0 += kMr) {
      const int64_t rows = std::min(kMr, m - i0);
      uint32_t* block = out + i0 * pairs;
      const bfloat16* first = &a(i0, 0);
      for (int64_t q = 0; q < whole; ++q)
        for (int64_t r = 0; r < rows; ++r) block[q * kMr + r] = word_at(first + r * a.rs + 2 * q);
      if (k % 2)
        for (int64_t r = 0; r < rows; ++r) block[whole * kMr + r] = first[r * a.rs + k - 1].bits;
    }
  } else if (a.rs == 1) {  // p along a column (Aᵀ of a row-major matrix): rows 2q and 2q + 1 of it interleaved
#pragma omp parallel for num_threads(threads) if (threads > 1) schedule(static)
    for (int64_t i0 = 0; i0 < m; i0 += kMr) {  // block by block, each written once, in order
      const int64_t rows = std::min(kMr, m - i0);
      for (int64_t q = 0; q < pairs; ++q) {
        const bfloat16* even = &a(i0, 2 * q);
        const bfloat16* odd = 2 * q + 1 < k ? &a(i0, 2 * q + 1) : nullptr;
        interleave<kMr>(even, odd, out + i0 * pairs + q * kMr, rows);
      }
    }
  } else {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t q = 0; q < pairs; ++q)
        out[a_slot(i, q, pairs)] = pair(a(i, 2 * q), 2 * q + 1 < k ? a(i, 2 * q + 1) : bfloat16{0});
  }
}

// to[j · to_step + r] = from[r · from_step + j] for a 16 x 16 block of 32-bit words: 16 loads of 64 bytes,
// the block transposed in registers (lanes.h: transpose_rows, as matmul_fast.cpp packs a transposed B), 16
// stores of 64 bytes.
using SixteenWords = uint32_t __attribute__((vector_size(64)));
[[gnu::target("avx512f")]] void turn_over_16x16(const uint32_t* from, int64_t from_step, uint32_t* to,
                                                int64_t to_step) {
  // (the copies written here, not through load_vector / store_vector: clang refuses a 64-byte vector
  // returned by a function without AVX-512's target, inlined or not)
  SixteenWords rows[16];
  for (int64_t r = 0; r < 16; ++r) __builtin_memcpy(&rows[r], from + r * from_step, sizeof(SixteenWords));
  transpose_rows<SixteenWords, 16>(rows);
  for (int64_t r = 0; r < 16; ++r) __builtin_memcpy(to + r * to_step, &rows[r], sizeof(SixteenWords));
}

// B's columns j0 .. j0+32 as 32 words per pair of p (zero past N and past K).
[[gnu::target("avx512f,avx512bw")]] void pack_b_panel(Strided<const bfloat16> b, int64_t n, int64_t k, int64_t j0,
                                                      uint32_t* packed) {
  const int64_t pairs = (k + 1) / 2, whole = k / 2, width = std::min(kNr, n - j0);
  if (width < kNr) std::fill(packed, packed + pairs * kNr, 0u);  // the columns past N stay zero
  if (b.rs == 1) {  // p along a column (Wᵀ: a Linear's forward product): each column's pairs are words
    // 16 columns by 16 pairs at a time, turned over (when each column's words are 4-byte aligned); the rest
    // word by word
    const bool aligned = reinterpret_cast<uintptr_t>(&b(0, j0)) % 4 == 0 && b.cs % 2 == 0;
    const int64_t blocked_columns = aligned ? width / 16 * 16 : 0, blocked_pairs = aligned ? whole / 16 * 16 : 0;
    for (int64_t c = 0; c < blocked_columns; c += 16)
      for (int64_t q = 0; q < blocked_pairs; q += 16)
        turn_over_16x16(reinterpret_cast<const uint32_t*>(&b(2 * q, j0 + c)), b.cs / 2, packed + q * kNr + c, kNr);
    for (int64_t c = 0; c < width; ++c) {
      const bfloat16* column = &b(0, j0 + c);
      for (int64_t q = c < blocked_columns ? blocked_pairs : 0; q < whole; ++q)
        packed[q * kNr + c] = word_at(column + 2 * q);
      if (k % 2) packed[whole * kNr + c] = column[k - 1].bits;
    }
  } else if (b.cs == 1) {  // p down the rows (W, or a gradient): rows 2q and 2q + 1 interleaved
    // each row's 64 bytes sit in another page, where the hardware's prefetchers stop: asked for 16 pairs
    // of rows ahead (8 left a third of this loop's time waiting on its loads)
    constexpr int64_t kAhead = 16;
    for (int64_t q = 0; q < pairs; ++q) {
      const bfloat16* even = &b(2 * q, j0);
      const bfloat16* odd = 2 * q + 1 < k ? &b(2 * q + 1, j0) : nullptr;
      if (2 * (q + kAhead) + 1 < k) {
        _mm_prefetch(reinterpret_cast<const char*>(&b(2 * (q + kAhead), j0)), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(&b(2 * (q + kAhead) + 1, j0)), _MM_HINT_T0);
      }
      interleave<kNr>(even, odd, packed + q * kNr, width);
    }
  } else {
    for (int64_t q = 0; q < pairs; ++q)
      for (int64_t c = 0; c < width; ++c)
        packed[q * kNr + c] = pair(b(2 * q, j0 + c), 2 * q + 1 < k ? b(2 * q + 1, j0 + c) : bfloat16{0});
  }
}

// sums[r][0..32) (+)= Σ over pairs q in [q0, q1) of row r's words · the panel's words, for R rows.
template <int R>
[[gnu::target("avx512f,avx512bf16")]] void micro_kernel(const uint32_t* a, const uint32_t* panel, int64_t q0,
                                                         int64_t q1, float* sums, bool first) {
  __m512 acc[R][2];
  for (int r = 0; r < R; ++r) {
    acc[r][0] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(sums + r * kNr);
    acc[r][1] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(sums + r * kNr + 16);
  }
  for (int64_t q = q0; q < q1; ++q) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(panel + q * kNr);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(panel + q * kNr + 16);
    for (int r = 0; r < R; ++r) {
      const __m512bh word = (__m512bh)_mm512_set1_epi32(int(a[q * kMr + r]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], word, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], word, b1);
    }
  }
  for (int r = 0; r < R; ++r) {
    _mm512_storeu_ps(sums + r * kNr, acc[r][0]);
    _mm512_storeu_ps(sums + r * kNr + 16, acc[r][1]);
  }
}

using MicroKernel = void (*)(const uint32_t*, const uint32_t*, int64_t, int64_t, float*, bool);
template <size_t... R> constexpr auto kernels_by_rows(std::index_sequence<R...>) {
  return std::array<MicroKernel, sizeof...(R)>{&micro_kernel<int(R) + 1>...};
}
constexpr auto kKernels = kernels_by_rows(std::make_index_sequence<kMr>());

// A float32 output whose sums are rounded to bfloat16 and widened back as they are stored: autocast's
// product (rounded to bfloat16, as PyTorch's autocast output is) handed on in float32 in the same store.
struct RoundedFloat {
  float value;
};

// One sum stored as it is into float32, or rounded once into bfloat16 (or rounded and widened back); then
// the first `count` of 16: float32 through lanes.h's store_lanes, bfloat16 rounded (bfloat16_lanes.h) and
// stored the same way (whole vectors plainly, a partial one masked: masked stores are slow on AMD's
// AVX-512 cores).
inline void store_one(float& to, float sum) { to = sum; }
inline void store_one(bfloat16& to, float sum) { to = round_to_bfloat16(sum); }
inline void store_one(RoundedFloat& to, float sum) { to.value = widen(round_to_bfloat16(sum)); }
[[gnu::target("avx512f")]] inline void store_sixteen(float* to, __m512 sums, int64_t count) {
  store_lanes(to, __mmask16((1u << count) - 1), sums);
}
[[gnu::target("avx512f")]] inline void store_sixteen(bfloat16* to, __m512 sums, int64_t count) {
  const __m512i rounded = bfloat16_lanes(sums);
  if (count == 16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(to), _mm512_maskz_cvtepi32_epi16(0xFFFF, rounded));
  else _mm512_mask_cvtepi32_storeu_epi16(to, __mmask16((1u << count) - 1), rounded);
}
// `streaming`: a whole aligned vector written around the caches (_mm512_stream_ps), without first reading
// the line it overwrites: for a big output that is read much later (a weight's gradient, by the optimizer).
[[gnu::target("avx512f")]] inline void store_sixteen(RoundedFloat* to, __m512 sums, int64_t count,
                                                     bool streaming = false) {
  const __m512 widened = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, bfloat16_lanes(sums), 16));
  if (streaming && count == 16 && reinterpret_cast<uintptr_t>(to) % 64 == 0) return _mm512_stream_ps(&to->value, widened);
  store_lanes(&to->value, __mmask16((1u << count) - 1), widened);
}
template <typename T>
[[gnu::target("avx512f")]] inline void store_sixteen(T* to, __m512 sums, int64_t count, bool) {
  store_sixteen(to, sums, count);
}

// The first `count` of bias[0..16) as lanes (zero past count), or zeros for no bias (adding them changes no
// sum: a sum starts at +0, so it is never −0).
[[gnu::target("avx512f")]] inline __m512 bias_lanes(const float* bias, int64_t count) {
  return bias ? _mm512_maskz_loadu_ps(__mmask16((1u << count) - 1), bias) : _mm512_setzero_ps();
}

// C[:, j0 : j0 + width] = the m x 32 sums (rows of 32), each plus bias[j] when there is one (addmm's bias,
// added in float32 before the rounding, as the widening backend's addmm adds it): along C's rows where
// they are contiguous, else where its columns are (a weight's gradient, made in its transposed layout)
// 16 x 16 blocks turned over into a tile and stored along the columns, the rest one by one. No call a
// row: a product stores m times its panels' count of these, 73,728 for a 768 x 3072 weight's gradient.
template <typename T>
[[gnu::target("avx512f")]] void store_sums(const float* sums, Strided<T> c, int64_t m, int64_t j0, int64_t width,
                                           const float* bias, bool streaming) {
  if (c.cs == 1) {
    const int64_t low = std::min<int64_t>(16, width), high = width - low;  // the panel's two vectors
    const __m512 bias_low = bias_lanes(bias ? bias + j0 : nullptr, low);
    const __m512 bias_high = bias_lanes(bias && high > 0 ? bias + j0 + 16 : nullptr, std::max<int64_t>(high, 0));
    for (int64_t i = 0; i < m; ++i) {
      store_sixteen(&c(i, j0), _mm512_add_ps(_mm512_loadu_ps(sums + i * kNr), bias_low), low, streaming);
      if (high > 0)
        store_sixteen(&c(i, j0 + 16), _mm512_add_ps(_mm512_loadu_ps(sums + i * kNr + 16), bias_high), high, streaming);
    }
    return;
  }
  const int64_t blocked_rows = c.rs == 1 ? m / 16 * 16 : 0, blocked_columns = c.rs == 1 ? width / 16 * 16 : 0;
  alignas(64) float tile[16 * 16];
  for (int64_t i = 0; i < blocked_rows; i += 16)
    for (int64_t col = 0; col < blocked_columns; col += 16) {
      turn_over_16x16(reinterpret_cast<const uint32_t*>(sums + i * kNr + col), kNr,
                      reinterpret_cast<uint32_t*>(tile), 16);
      for (int64_t cc = 0; cc < 16; ++cc) {
        const __m512 b = _mm512_set1_ps(bias ? bias[j0 + col + cc] : 0.0f);
        store_sixteen(&c(i, j0 + col + cc), _mm512_add_ps(_mm512_load_ps(tile + cc * 16), b), 16, streaming);
      }
    }
  for (int64_t i = 0; i < m; ++i)
    for (int64_t col = i < blocked_rows ? blocked_columns : 0; col < width; ++col)
      store_one(c(i, j0 + col), bias ? sums[i * kNr + col] + bias[j0 + col] : sums[i * kNr + col]);
}

// C[:, j0 : j0+32] of one matrix: pack its panel of B, then every row block, block of pairs by block.
template <typename T>
void panel_product(const uint32_t* a, Strided<const bfloat16> b, Strided<T> c, int64_t m, int64_t n,
                   int64_t k, int64_t j0, uint32_t* panel, float* sums, const float* bias, bool streaming) {
  const int64_t pairs = (k + 1) / 2;
  pack_b_panel(b, n, k, j0, panel);
  if (pairs == 0) std::fill(sums, sums + m * kNr, 0.0f);
  for (int64_t q0 = 0; q0 < pairs; q0 += kPairsPerBlock) {
    const int64_t q1 = std::min(pairs, q0 + kPairsPerBlock);
    for (int64_t i0 = 0; i0 < m; i0 += kMr) {
      const int64_t rows = std::min(kMr, m - i0);
      kKernels[size_t(rows - 1)](a + i0 * pairs, panel, q0, q1, sums + i0 * kNr, q0 == 0);
    }
  }
  const int64_t width = std::min(kNr, n - j0);
  store_sums(sums, c, m, j0, width, bias, streaming);
}

// One matrix with a long K and a small C (GPT-2's head's input gradient: K 50,257, C 256 x 768): B is packed
// and multiplied a block of pairs at a time across all its panels, with every panel's float32 sums kept
// meanwhile, so that A's block (a few hundred KB) is read from L2 by every panel; panel by panel, all of A
// (25 MB there) would come from memory again for each of C's 24 panels.
template <typename T>
void deep_product(const uint32_t* a, Strided<const bfloat16> b, Strided<T> c, int64_t m, int64_t n, int64_t k,
                  const float* bias, bool streaming) {
  const int64_t pairs = (k + 1) / 2, panels = (n + kNr - 1) / kNr;
  const Cached<float> sums(size_t(panels * m * kNr));  // panel by panel: [panel][row][32]
  const int threads = int(std::min<int64_t>(get_num_threads(), panels));
  for (int64_t q0 = 0; q0 < pairs; q0 += kPairsPerBlock) {
    const int64_t q1 = std::min(pairs, q0 + kPairsPerBlock);
    const Strided<const bfloat16> block{&b(2 * q0, 0), b.rs, b.cs};  // B's rows 2·q0 ..
    const int64_t block_k = std::min(k - 2 * q0, 2 * (q1 - q0));
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
      const Words panel(size_t(kPairsPerBlock * kNr));
#pragma omp for schedule(static)
      for (int64_t p = 0; p < panels; ++p) {
        pack_b_panel(block, n, block_k, p * kNr, panel.data());
        for (int64_t i0 = 0; i0 < m; i0 += kMr) {
          const int64_t rows = std::min(kMr, m - i0);
          kKernels[size_t(rows - 1)](a + i0 * pairs + q0 * kMr, panel.data(), 0, q1 - q0,
                                     sums.data() + (p * m + i0) * kNr, q0 == 0);
        }
      }
    }
  }
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
#pragma omp for schedule(static) nowait
    for (int64_t p = 0; p < panels; ++p)
      store_sums(sums.data() + p * m * kNr, c, m, p * kNr, std::min(kNr, n - p * kNr), bias, streaming);
    _mm_sfence();  // this thread's streaming stores, before the region's end lets anyone read them
  }
}

// Whether deep_product suits a matrix of the product: K of four blocks of pairs or more, C's sums within 4 MB.
bool is_deep(int64_t m, int64_t n, int64_t k) {
  return (k + 1) / 2 >= 4 * kPairsPerBlock && m * ((n + kNr - 1) / kNr * kNr) <= (int64_t(1) << 20);
}

// `bias`: float32 [N] added to every row's sums, or null.
template <typename T>
void avx512_bf16_product(const Tensor& a, const Tensor& b, const Tensor& out, const float* bias) {
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  const int64_t items = out.numel() / std::max<int64_t>(m * n, 1);
  if (m == 0 || n == 0) return;
  // every matrix's A packed in one buffer (a batch of attention's small products makes 48 of them)
  const int64_t words = packed_a_words(m, k);
  // a float32 output of 4 MB or more (a weight's gradient) is streamed past the caches (store_sixteen)
  const bool streaming = out.numel() >= (int64_t(1) << 20);
  const Words packed_a(size_t(items * words));
  // Row blocks and matrices are independent: split over the threads from 32 K values up (the elementwise
  // ops' threshold), by matrix for a batch. On one thread, the others wait for it: in a GPT-2 step under
  // autocast that was 12 ms on two threads (perf: all of pack_a's samples on the first thread).
  const int packers = m * k * items >= kParallelElements ? get_num_threads() : 1;
  if (items == 1) {
    pack_a(item<const bfloat16>(a, 0), m, k, packed_a.data(), packers);
  } else {
#pragma omp parallel for num_threads(packers) if (packers > 1) schedule(static)
    for (int64_t t = 0; t < items; ++t) pack_a(item<const bfloat16>(a, t), m, k, packed_a.data() + t * words, 1);
  }
  if (is_deep(m, n, k)) {
    for (int64_t t = 0; t < items; ++t)
      deep_product(packed_a.data() + t * words, item<const bfloat16>(b, t), item<T>(out, t), m, n, k, bias, streaming);
    return;
  }
  const int64_t panels = (n + kNr - 1) / kNr, tasks = items * panels;
  const int threads = int(std::min<int64_t>(get_num_threads(), tasks));
  // Each task is one panel of one matrix: tasks share nothing they write, so threads split them freely.
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    // each thread's panel and sums from the buffers' cache (a panel of K 3,072 is 196 KB: as a vector, a
    // fresh mapping per product per thread)
    const Words panel(size_t(std::max<int64_t>((k + 1) / 2, 1) * kNr));
    const Cached<float> sums(size_t(m * kNr));
#pragma omp for schedule(static) nowait
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t t = task / panels, j0 = (task % panels) * kNr;
      panel_product(packed_a.data() + t * words, item<const bfloat16>(b, t), item<T>(out, t), m, n, k, j0,
                    panel.data(), sums.data(), bias, streaming);
    }
    _mm_sfence();  // this thread's streaming stores, before the region's end lets anyone read them
  }
}

// ---- one row times a Linear's weight: generation's products

// A cached generation step multiplies one row by each weight matrix: packing the weight for the kernel
// above would cost more than the product. A Linear's weight W [N, K] is used transposed (b = Wᵀ), so
// column j of b is row j of W, contiguous in p, and so is the row a: out[j] = Σ_p a[p]·W[j, p] is a dot
// product of two contiguous bfloat16 vectors, 32 terms an instruction (16 lanes of pairs), each weight byte
// read once. kDotColumns columns at a time share each load of a, and their independent chains of
// vdpbf16ps hide the instruction's latency; each column's 16 lanes are added at the end.
constexpr int64_t kDotColumns = 8;

// The sum of v's 16 lanes, halves added pairwise (lanes 8 apart, then 4, 2, 1), in whole registers. (The
// masked forms, all lanes kept: GCC 12's unmasked shuffles, 256-bit casts and _mm512_reduce_add_ps start
// from an undefined register and draw a false "uninitialised" warning.)
[[gnu::target("avx512f")]] float lane_sum(__m512 v) {
  constexpr __mmask16 all = 0xFFFF;
  v = _mm512_add_ps(v, _mm512_mask_shuffle_f32x4(v, all, v, v, 0x4E));  // 256-bit halves swapped
  v = _mm512_add_ps(v, _mm512_mask_shuffle_f32x4(v, all, v, v, 0xB1));  // 128-bit quarters swapped in pairs
  v = _mm512_add_ps(v, _mm512_mask_permute_ps(v, all, v, 0x4E));        // 64-bit halves of each quarter
  v = _mm512_add_ps(v, _mm512_mask_permute_ps(v, all, v, 0xB1));        // neighbouring lanes
  return _mm512_cvtss_f32(v);
}

template <int C>
[[gnu::target("avx512f,avx512bw,avx512bf16")]] void dot_columns(const bfloat16* a, const bfloat16* w, int64_t w_row,
                                                               int64_t k, float* out, int64_t out_step) {
  __m512 acc[C];
  for (int c = 0; c < C; ++c) acc[c] = _mm512_setzero_ps();
  for (int64_t p = 0; p < k; p += 32) {
    const __mmask32 live = k - p >= 32 ? ~__mmask32(0) : (__mmask32(1) << (k - p)) - 1;  // zeros past K
    const __m512bh x = (__m512bh)_mm512_maskz_loadu_epi16(live, a + p);
    for (int c = 0; c < C; ++c) {
      _mm_prefetch(reinterpret_cast<const char*>(w + (c + C) * w_row + p), _MM_HINT_T0);  // the next block's line
      acc[c] = _mm512_dpbf16_ps(acc[c], x, (__m512bh)_mm512_maskz_loadu_epi16(live, w + c * w_row + p));
    }
  }
  for (int c = 0; c < C; ++c) out[c * out_step] = lane_sum(acc[c]);
}

// out[0, :] of one matrix, for a contiguous row a and b with contiguous columns (b.rs == 1).
void row_product(Strided<const bfloat16> a, Strided<const bfloat16> b, Strided<float> c, int64_t n, int64_t k) {
  const int64_t blocks = (n + kDotColumns - 1) / kDotColumns;
  const int threads = int(std::min<int64_t>(get_num_threads(), blocks));
#pragma omp parallel for num_threads(threads) if (threads > 1) schedule(static)
  for (int64_t block = 0; block < blocks; ++block) {
    const int64_t j = block * kDotColumns;
    if (n - j >= kDotColumns) dot_columns<kDotColumns>(a.first, &b(0, j), b.cs, k, &c(0, j), c.cs);
    else
      for (int64_t jj = j; jj < n; ++jj) dot_columns<1>(a.first, &b(0, jj), b.cs, k, &c(0, jj), c.cs);
  }
}

// Whether every matrix of the product is one contiguous row times columns contiguous in p (a Linear's weight).
bool is_row_times_weight(const Tensor& a, const Tensor& b) {
  return a.size(-2) == 1 && (a.size(-1) <= 1 || a.strides().back() == 1) &&
         (b.size(-2) <= 1 || b.strides()[size_t(b.dim() - 2)] == 1);
}

void avx512_bf16_row_products(const Tensor& a, const Tensor& b, const Tensor& out) {
  const int64_t k = a.size(-1), n = b.size(-1);
  const int64_t items = out.numel() / std::max<int64_t>(n, 1);
  for (int64_t t = 0; t < items && n > 0; ++t)
    row_product(item<const bfloat16>(a, t), item<const bfloat16>(b, t), item<float>(out, t), n, k);
}

// ---- one row times bfloat16 panels: a Linear's weight packed for generation (ops/panels.cpp)

// Panels [P, K, 16] in bfloat16, as float32's (panel i = Wᵀ's columns 16i .. 16i + 15, p by p): each panel row
// is 16 bfloat16 values, widened to float32 (exact) and added into 16 float32 lanes, one chain of fused
// multiply-adds over p per column (every product of two bfloat16 numbers is exact in float32). Two panels
// go together, from the two halves of the range: two runs of memory a thread.
template <int PANELS>
[[gnu::target("avx512f")]] void bf16_panels_together(const int64_t (&index)[PANELS], int64_t k, int64_t n,
                                                      const bfloat16* a, const bfloat16* panels, float* out) {
  __m512 acc[PANELS];
  for (int i = 0; i < PANELS; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t p = 0; p < k; ++p) {
    const __m512 x = _mm512_set1_ps(widen(a[p]));
    for (int i = 0; i < PANELS; ++i) {
      const __m256i row = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panels + (index[i] * k + p) * 16));
      // the top halves (the masked forms, all lanes kept: GCC 12's unmasked ones draw a false warning)
      const __m512i wide = _mm512_maskz_cvtepu16_epi32(0xFFFF, row);
      const __m512 w = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, wide, 16));
      acc[i] = _mm512_fmadd_ps(w, x, acc[i]);
    }
  }
  for (int i = 0; i < PANELS; ++i) {
    alignas(64) float sums[16];
    _mm512_store_ps(sums, acc[i]);
    const int64_t j0 = index[i] * 16;
    for (int64_t l = 0; l < std::min<int64_t>(16, n - j0); ++l) out[j0 + l] = sums[l];
  }
}

void bf16_row_times_panels(int64_t first, int64_t last, int64_t k, int64_t n, const bfloat16* a,
                           const bfloat16* panels, float* out) {
  const int64_t half = (last - first) / 2;
  for (int64_t i = first; i < first + half; ++i) bf16_panels_together<2>({i, i + half}, k, n, a, panels, out);
  if ((last - first) % 2) bf16_panels_together<1>({last - 1}, k, n, a, panels, out);
}

#endif  // SCRATCHGRAD_X86_BF16

}  // namespace

bool bfloat16_row_times_panels(const Tensor& a, const Tensor& panels, const Tensor& out) {
#ifdef SCRATCHGRAD_X86_BF16
  const int64_t k = panels.size(1), n = out.size(-1), count = panels.size(0);
  if (!avx512_kernels() || a.numel() != k || !a.is_contiguous() || !panels.is_contiguous() || !out.is_contiguous())
    return false;
  ProductTimer timer(2.0 * double(n) * double(k));
  const bfloat16* pa = static_cast<const bfloat16*>(a.raw_data());
  const bfloat16* pw = static_cast<const bfloat16*>(panels.raw_data());
  float* po = static_cast<float*>(out.raw_data());
  const int threads = n * k >= (int64_t(1) << 17) ? get_num_threads() : 1;  // 256 KB of bfloat16, as float32's
  if (threads == 1 || count == 1) {
    bf16_row_times_panels(0, count, k, n, pa, pw, po);
    return true;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int t = 0; t < threads; ++t)
    bf16_row_times_panels(count * t / threads, count * (t + 1) / threads, k, n, pa, pw, po);
  return true;
#else
  (void)a, (void)panels, (void)out;
  return false;
#endif
}

const char* bfloat16_kernel_name() { return has_avx512_bf16() ? "avx512_bf16" : "float32 (widened)"; }

// A bfloat16 out (a product under autocast), or a float32 one with `how.rounded`, gets each float32 sum (plus
// the bias) rounded once: by the packed kernel as it stores, else through a float32 copy.
void bfloat16_matmul(const Tensor& a, const Tensor& b, const Tensor& out, const ProductStore& how) {
  const bool rounded = out.dtype() == DType::BFloat16;
#ifdef SCRATCHGRAD_X86_BF16
  if (has_avx512_bf16() && !is_row_times_weight(a, b)) {  // the packed kernel rounds as it stores
    ProductTimer timer(2.0 * double(out.numel()) * double(a.size(-1)));  // bench_gpt2_train's products line
    const Tensor bias = how.bias.defined() ? how.bias.contiguous() : Tensor();
    const float* b0 = bias.defined() ? bias.data_ptr<float>() : nullptr;
    if (rounded) return avx512_bf16_product<bfloat16>(a, b, out, b0);
    return how.rounded ? avx512_bf16_product<RoundedFloat>(a, b, out, b0) : avx512_bf16_product<float>(a, b, out, b0);
  }
#endif
  if (rounded || how.rounded || how.bias.defined()) {  // the float32 sums, the bias, then rounded once
    const Tensor sums = empty(out.shape(), DType::Float32);
    bfloat16_matmul(a, b, sums, {});
    if (how.bias.defined()) binary(BinaryOp::Add, sums, how.bias.expand(sums.shape()), sums);
    if (rounded) return round_into_bfloat16(sums, out);
    if (!how.rounded) return copy(sums, out);
    const Tensor sixteen = empty(out.shape(), DType::BFloat16);
    round_into_bfloat16(sums, sixteen);
    return widen_into_float32(sixteen, out);
  }
#ifdef SCRATCHGRAD_X86_BF16
  if (has_avx512_bf16()) {
    ProductTimer timer(2.0 * double(out.numel()) * double(a.size(-1)));
    return avx512_bf16_row_products(a, b, out);
  }
#endif
  // The portable path: both operands widened (exact), then the float32 product.
  batched_matmul(widen_to_float32(a), widen_to_float32(b), out);
}

#ifdef SCRATCHGRAD_X86_BF16
// One core's bfloat16 peak for bench_ops: 24 independent chains acc += dot(a, b) of vdpbf16ps on zmm0-23
// (a and b in zmm30-31), `rounds` times, in assembly (as cpu/runtime/core_peak.cpp's FMA loop) so that the
// chains stay in registers; 64 FLOPs (32 multiply-adds) per instruction. a holds bfloat16 1.0 pairs, b 2⁻²⁰
// pairs: the chains grow by 2⁻¹⁹ a round, no overflow, no denormal.
#define SG_BF16_CHAIN(i) "vdpbf16ps %%zmm30, %%zmm31, %%zmm" #i "\n\t"
#define SG_BF16_CHAINS_12(op) op(0) op(1) op(2) op(3) op(4) op(5) op(6) op(7) op(8) op(9) op(10) op(11)
#define SG_BF16_CHAINS_24(op) \
  SG_BF16_CHAINS_12(op) op(12) op(13) op(14) op(15) op(16) op(17) op(18) op(19) op(20) op(21) op(22) op(23)
[[gnu::target("avx512f")]] static double bf16_peak_rounds_avx512(int64_t rounds) {
  static const uint32_t one_pair = 0x3F803F80u, small_pair = 0x35803580u;
  const int64_t total = rounds;
  if (rounds <= 0) return 0;
  asm volatile("vpbroadcastd %1, %%zmm30\n\tvpbroadcastd %2, %%zmm31\n1:\n\t" SG_BF16_CHAINS_24(SG_BF16_CHAIN)
               "dec %0\n\tjnz 1b\n\tvzeroupper"
               : "+r"(rounds)
               : "m"(one_pair), "m"(small_pair)
               : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
                 "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22",
                 "xmm23", "xmm30", "xmm31", "cc");
  return double(total) * 24 * 64;
}
#endif

double bfloat16_peak_rounds(int64_t rounds) {
#ifdef SCRATCHGRAD_X86_BF16
  if (has_avx512_bf16()) return bf16_peak_rounds_avx512(rounds);
#endif
  return 0;
}

}  // namespace autograd::cpu
