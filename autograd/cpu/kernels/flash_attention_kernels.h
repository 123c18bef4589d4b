// cpu/kernels/flash_attention_kernels.h — the body of the FlashAttention kernels (cpu/kernels/flash_attention.cpp has the
// entry points, the threads and the algorithm's description), in one place for the two files that compile
// it: flash_attention.cpp (every product and every sum rounded on its own, Numerics::exact) and
// flash_attention_fast.cpp (each a·b + c one fused multiply-add, one rounding, in its AVX2+FMA and AVX-512
// builds: Numerics::fast). Both are compiled with -ffp-contract=off; madd says where a build fuses.
// Nothing else includes it.
//
// The order of every sum is the same in both and fixed: a score adds over the feature index in order, an
// output row over the keys in order, a row of dk or dv over the query rows in order and one of dq over the
// keys in order — whatever the number of threads, the vector width, or which rows share a tile (vectors
// run across independent entries, never along one sum).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "autograd/cpu/libm/exp_floats.h"
#include "autograd/cpu/kernels/lanes.h"

// The vector helpers below are always inlined into the functions compiled for each target, so no vector
// crosses a call boundary and GCC's warning about the ABI of such calls does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace autograd::cpu::flash {

inline constexpr int64_t kQueryBlock = 64;  // query rows of one forward work item (and of one dq work item)
inline constexpr int64_t kKeyBlock = 64;    // keys whose scores exist at one time

// One head: row pointers and sizes. Row i of q starts at q + i·q_rs (its d values at unit stride).
template <typename F> struct Head {
  const F *q, *k, *v;
  int64_t q_rs, k_rs, v_rs;
  int64_t rows, keys, d, dv;  // T, S, d, dv
  bool causal;
  F scale;
  // How many keys row i attends to (keys 0 .. n−1): all, or j <= i when causal.
  int64_t keys_seen(int64_t i) const { return causal ? std::min(keys, i + 1) : keys; }
  // The first row that sees key j.
  int64_t first_row_seeing(int64_t j) const { return causal ? j : 0; }
};

// What the backward reads and writes besides the head: lse and D (rowsum(dO ∘ O)) of the head, grad_out,
// and the three gradients (contiguous).
template <typename F> struct HeadGrads {
  const F* lse;
  const F* D;
  const F* dout;
  int64_t dout_rs;
  F *dq, *dk, *dv;
};

// One build of the kernels (one numerics, one CPU target): each work item is a call through these.
template <typename F> struct Kernels {
  // rows [r0, r1) of one head: out rows (contiguous) and their lse
  void (*forward)(const Head<F>&, int64_t r0, int64_t r1, F* out, F* lse);
  // keys [c0, c1) against query rows [r0, r1): into dk, dv (to_kv) and dq (to_q)
  void (*backward)(const Head<F>&, const HeadGrads<F>&, int64_t c0, int64_t c1, int64_t r0, int64_t r1, bool to_kv,
                   bool to_q);
  // D[i] = Σ_c dO[i, c]·O[i, c] for rows [r0, r1)
  void (*row_sums)(const F* dout, int64_t dout_rs, const F* out, int64_t dv, int64_t r0, int64_t r1, F* D);
};

// The fast builds (flash_attention_fast.cpp): null where the CPU has no FMA (or is not x86-64), and then
// fast numerics run the exact kernels.
template <typename F> const Kernels<F>* fast_kernels();

// Everything below has internal linkage: each of the two files gets its own copy, compiled its own way.
namespace {

// VB bytes of F as one GCC vector: + and * act lane by lane, each lane rounded like the scalar operation.
template <typename F, int VB> struct Vec;
template <int VB> struct Vec<float, VB> { typedef float type __attribute__((vector_size(VB))); };
template <int VB> struct Vec<double, VB> { typedef double type __attribute__((vector_size(VB))); };

// Per-thread scratch: a key block's k and v transposed ([d][kKeyBlock], [dv][kKeyBlock]: the right-hand
// operands of the scores and of dP, rows of contiguous memory), the scores / probabilities and dP / dS of up
// to kQueryBlock rows against one key block, and the forward's running state of kQueryBlock rows.
template <typename F> struct Scratch {
  std::vector<F> kt, vt, s, dp, acc, m, l;
  void fit(int64_t d, int64_t dv) {
    kt.resize(size_t(std::max<int64_t>(d, 1) * kKeyBlock));
    vt.resize(size_t(std::max<int64_t>(dv, 1) * kKeyBlock));
    s.resize(kQueryBlock * kKeyBlock);
    dp.resize(kQueryBlock * kKeyBlock);
    acc.resize(size_t(std::max<int64_t>(dv, 1) * kQueryBlock));
    m.resize(kQueryBlock);
    l.resize(kQueryBlock);
  }
};
template <typename F> Scratch<F>& scratch(int64_t d, int64_t dv) {
  thread_local Scratch<F> w;
  w.fit(d, dv);
  return w;
}

// xt[e][j] = x[j][e] for n rows of `width` values (row stride rs), in 8 × 8 squares: a square's 8 source
// rows and 8 destination rows stay in the L1 cache while it is copied (row by row, every write would go to
// another cache line: at d 256 that took 40% of the forward).
template <typename F>
[[gnu::always_inline]] inline void transpose_block(const F* __restrict x, int64_t rs, int64_t n, int64_t width,
                                                   F* __restrict xt) {
  constexpr int64_t B = 8;
  for (int64_t j0 = 0; j0 < n; j0 += B)
    for (int64_t e0 = 0; e0 < width; e0 += B) {
      if (j0 + B <= n && e0 + B <= width) {
#pragma GCC unroll 8
        for (int64_t e = 0; e < B; ++e)
#pragma GCC unroll 8
          for (int64_t j = 0; j < B; ++j) xt[(e0 + e) * kKeyBlock + j0 + j] = x[(j0 + j) * rs + e0 + e];
        continue;
      }
      for (int64_t e = e0; e < std::min(e0 + B, width); ++e)
        for (int64_t j = j0; j < std::min(j0 + B, n); ++j) xt[e * kKeyBlock + j] = x[j * rs + e];
    }
}

// a·b + c, fused (one rounding) in the fast build and two roundings in the exact one, said explicitly at
// every multiply-add rather than left to the compiler's -ffp-contract: which a·b + c a compiler contracts
// differs between compilers (GCC 12 and 13 do not agree) and between the AVX2 and AVX-512 builds, and
// each build must give the same bits everywhere. Both files are compiled with -ffp-contract=off.
template <bool fused, typename F> [[gnu::always_inline]] inline F madd(F a, F b, F c) {
  if constexpr (fused) return __builtin_fma(a, b, c);
  return a * b + c;
}
// The same on each lane of a vector, times one scalar: a[l]·b + c[l]. The lane loop compiles to one vector
// FMA instruction in the fast builds.
template <bool fused, typename V, typename F> [[gnu::always_inline]] inline V madd_lanes(V a, F b, V c) {
  if constexpr (fused) {
    V r;
#pragma GCC unroll 16
    for (int l = 0; l < int(sizeof(V) / sizeof(F)); ++l) r[l] = __builtin_fma(a[l], b, c[l]);
    return r;
  }
  return c + a * b;
}

// y[c] = y[c] + a·x[c] for c < n.
template <bool fused, typename F>
[[gnu::always_inline]] inline void axpy(F a, const F* __restrict x, F* __restrict y, int64_t n) {
  for (int64_t c = 0; c < n; ++c) y[c] = madd<fused>(x[c], a, y[c]);
}

// The small products every step is made of:
//   C[i][j] = C[i][j] + Σₚ A[i·ars + p·acs]·B[p·brs + j]     for i < m, j < n
// (from 0 instead of C's value if zero_c), each entry one chain of multiply-adds in order of p. A tile of
// R rows by NV vectors of columns stays in registers for the whole chain: for each p, NV vectors of B's
// row are loaded and multiplied by R values of A (A may be read transposed: ars 1). Whatever tile an
// entry falls in, and the columns past the last whole vector (axpy), its chain is the same.
template <int VB, bool fused, int64_t R, int64_t NV, typename F>
[[gnu::always_inline]] inline void tile(int64_t k, const F* __restrict a, int64_t ars, int64_t acs,
                                        const F* __restrict b, int64_t brs, F* __restrict c, int64_t crs) {
  using V = typename Vec<F, VB>::type;
  constexpr int64_t W = VB / int64_t(sizeof(F));
  V acc[R][NV];
#pragma GCC unroll 8
  for (int64_t r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int64_t v = 0; v < NV; ++v) acc[r][v] = load_vector<V>(c + r * crs + v * W);
  for (int64_t p = 0; p < k; ++p) {
    V bp[NV];
#pragma GCC unroll 2
    for (int64_t v = 0; v < NV; ++v) bp[v] = load_vector<V>(b + p * brs + v * W);
#pragma GCC unroll 8
    for (int64_t r = 0; r < R; ++r) {
      const F ar = a[r * ars + p * acs];
#pragma GCC unroll 2
      for (int64_t v = 0; v < NV; ++v) acc[r][v] = madd_lanes<fused>(bp[v], ar, acc[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int64_t r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int64_t v = 0; v < NV; ++v) store_vector(c + r * crs + v * W, acc[r][v]);
}

// Rows by tiles of R, then one at a time, for the NV-vector-wide column strip starting at c (and b).
template <int VB, bool fused, int64_t R, int64_t NV, typename F>
[[gnu::always_inline]] inline void strip(int64_t m, int64_t k, const F* a, int64_t ars, int64_t acs, const F* b,
                                         int64_t brs, F* c, int64_t crs) {
  int64_t i = 0;
  for (; i + R <= m; i += R) tile<VB, fused, R, NV>(k, a + i * ars, ars, acs, b, brs, c + i * crs, crs);
  for (; i < m; ++i) tile<VB, fused, 1, NV>(k, a + i * ars, ars, acs, b, brs, c + i * crs, crs);
}

// Tiles of two vectors where there are enough columns (8 rows: 16 of AVX-512's 32 registers; 6 rows: 12 of
// AVX2's 16; 4 with SSE), then one vector (8 rows), then the last columns narrower than a vector.
template <int VB, bool fused, typename F>
[[gnu::always_inline]] inline void block_product(int64_t m, int64_t n, int64_t k, const F* a, int64_t ars,
                                                 int64_t acs, const F* b, int64_t brs, F* c, int64_t crs,
                                                 bool zero_c) {
  constexpr int64_t W = VB / int64_t(sizeof(F)), R2 = VB == 64 ? 8 : VB == 32 ? 6 : 4;
  if (zero_c)
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * crs, c + i * crs + n, F(0));
  int64_t j = 0;
  for (; j + 2 * W <= n; j += 2 * W) strip<VB, fused, R2, 2>(m, k, a, ars, acs, b + j, brs, c + j, crs);
  for (; j + W <= n; j += W) strip<VB, fused, 8, 1>(m, k, a, ars, acs, b + j, brs, c + j, crs);
  if (j < n)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = 0; p < k; ++p) axpy<fused>(a[i * ars + p * acs], b + p * brs + j, c + i * crs + j, n - j);
}

// x[j] = exp(x[j]) for j < n: the C library's exp (exp_floats gives expf's bits 16 at a time).
inline void exp_in_place(float* x, int64_t n) { exp_floats(x, x, n); }
inline void exp_in_place(double* x, int64_t n) {
  for (int64_t j = 0; j < n; ++j) x[j] = std::exp(x[j]);
}

// ---------------------------------------------------------------- forward

// Rows [r0, r1) of one head: out rows (contiguous, dv each) and their lse.
template <int VB, bool fused, typename F>
[[gnu::always_inline]] inline void forward_rows(const Head<F>& h, int64_t r0, int64_t r1, F* out, F* lse) {
  Scratch<F>& w = scratch<F>(h.d, h.dv);
  const int64_t dv = h.dv;
  const F neg_inf = -std::numeric_limits<F>::infinity();
  F *acc = w.acc.data(), *m = w.m.data(), *l = w.l.data();
  std::fill(acc, acc + (r1 - r0) * dv, F(0));
  std::fill(m, m + (r1 - r0), neg_inf);
  std::fill(l, l + (r1 - r0), F(0));

  // Key blocks wholly in the future of every row here (causal) are never visited.
  const int64_t key_end = h.keys_seen(r1 - 1);
  for (int64_t c0 = 0; c0 < key_end; c0 += kKeyBlock) {
    const int64_t c1 = std::min(c0 + kKeyBlock, key_end), nc = c1 - c0;
    const int64_t i0 = std::max(r0, h.first_row_seeing(c0));  // rows before it see none of this block
    transpose_block(h.k + c0 * h.k_rs, h.k_rs, nc, h.d, w.kt.data());
    // scores of rows i0..r1 against the block: s[i][j] = q_i · k_j
    block_product<VB, fused>(r1 - i0, nc, h.d, h.q + i0 * h.q_rs, h.q_rs, 1, w.kt.data(), kKeyBlock, w.s.data(), kKeyBlock,
                     true);
    for (int64_t i = i0; i < r1; ++i) {
      F* s = w.s.data() + (i - i0) * kKeyBlock;
      const int64_t n = std::min(c1, h.keys_seen(i)) - c0, r = i - r0;  // the keys of this block row i sees
      F block_max = neg_inf;
      for (int64_t j = 0; j < n; ++j) {
        s[j] = s[j] * h.scale;
        block_max = std::max(block_max, s[j]);
      }
      for (int64_t j = n; j < nc; ++j) s[j] = neg_inf;  // the future (causal): weight exp(−inf) = 0
      const F m_new = std::max(m[r], block_max);
      for (int64_t j = 0; j < nc; ++j) s[j] = s[j] - m_new;
      exp_in_place(s, nc);  // p̃[j] = exp(score − m_new), at most 1
      F sum = 0;
      for (int64_t j = 0; j < n; ++j) sum = sum + s[j];
      // The rows so far were weighted by exp(score − m_old); reweight them: 0 on the first block
      // (m_old = −inf), exactly 1 when the maximum did not move.
      const F alpha = std::exp(m[r] - m_new);
      m[r] = m_new;
      F* a = acc + r * dv;
      if (alpha != F(1))
        for (int64_t c = 0; c < dv; ++c) a[c] = a[c] * alpha;
      l[r] = madd<fused>(l[r], alpha, sum);
    }
    // acc[i] += Σⱼ p̃[i][j]·v_j
    block_product<VB, fused>(r1 - i0, dv, nc, w.s.data(), kKeyBlock, 1, h.v + c0 * h.v_rs, h.v_rs, acc + (i0 - r0) * dv, dv,
                     false);
  }
  for (int64_t i = r0; i < r1; ++i) {
    const int64_t r = i - r0;
    F* o = out + i * dv;
    const F* a = acc + r * dv;
    if (l[r] == F(0)) {  // no keys at all (S = 0): the empty sum, as softmax(·) @ v of nothing gives
      std::fill(o, o + dv, F(0));
      lse[i] = neg_inf;
      continue;
    }
    for (int64_t c = 0; c < dv; ++c) o[c] = a[c] / l[r];
    lse[i] = m[r] + std::log(l[r]);
  }
}

// ---------------------------------------------------------------- backward (FlashAttention-2)

// The contributions of keys [c0, c1) and query rows [r0, r1) (rows before the first that sees c0 are
// skipped): into dk and dv rows c0..c1 if to_kv, into dq rows r0..r1 if to_q. With P = exp(S − L):
//   dV[j] += P[i, j]·dO[i],  dP[i, j] = dO[i]·V[j],  dS[i, j] = P[i, j]·(dP[i, j] − D[i])·scale,
//   dQ[i] += dS[i, j]·K[j],  dK[j] += dS[i, j]·Q[i]
// for up to kQueryBlock rows at a time. Entries in a row's future (causal) have P = dS = 0.
template <int VB, bool fused, typename F>
[[gnu::always_inline]] inline void backward_block(const Head<F>& h, const HeadGrads<F>& g, int64_t c0, int64_t c1,
                                                  int64_t r0, int64_t r1, bool to_kv, bool to_q) {
  Scratch<F>& w = scratch<F>(h.d, h.dv);
  const int64_t d = h.d, dv = h.dv, nc = c1 - c0;
  F *S = w.s.data(), *dS = w.dp.data();
  transpose_block(h.k + c0 * h.k_rs, h.k_rs, nc, d, w.kt.data());
  transpose_block(h.v + c0 * h.v_rs, h.v_rs, nc, dv, w.vt.data());
  for (int64_t i0 = std::max(r0, h.first_row_seeing(c0)); i0 < r1; i0 += kQueryBlock) {
    const int64_t i1 = std::min(i0 + kQueryBlock, r1), rows = i1 - i0;
    const F* q = h.q + i0 * h.q_rs;
    const F* dout = g.dout + i0 * g.dout_rs;
    // P[i][j], recomputed: the forward kept only lse
    block_product<VB, fused>(rows, nc, d, q, h.q_rs, 1, w.kt.data(), kKeyBlock, S, kKeyBlock, true);
    for (int64_t i = i0; i < i1; ++i) {
      F* s = S + (i - i0) * kKeyBlock;
      const int64_t n = std::min(c1, h.keys_seen(i)) - c0;
      for (int64_t j = 0; j < n; ++j) s[j] = madd<fused>(s[j], h.scale, -g.lse[i]);
      for (int64_t j = n; j < nc; ++j) s[j] = -std::numeric_limits<F>::infinity();
      exp_in_place(s, nc);
    }
    if (to_kv)  // dV[j] += Σᵢ P[i][j]·dO[i]  (Pᵀ read through its strides)
      block_product<VB, fused>(nc, dv, rows, S, 1, kKeyBlock, dout, g.dout_rs, g.dv + c0 * dv, dv, false);
    // dP[i][j] = dO[i]·v_j, then dS in place
    block_product<VB, fused>(rows, nc, dv, dout, g.dout_rs, 1, w.vt.data(), kKeyBlock, dS, kKeyBlock, true);
    for (int64_t i = i0; i < i1; ++i) {
      const F* p = S + (i - i0) * kKeyBlock;
      F* ds = dS + (i - i0) * kKeyBlock;
      const int64_t n = std::min(c1, h.keys_seen(i)) - c0;
      for (int64_t j = 0; j < n; ++j) ds[j] = p[j] * (ds[j] - g.D[i]) * h.scale;  // dS[i, j]·scale
      for (int64_t j = n; j < nc; ++j) ds[j] = F(0);
    }
    if (to_q)  // dQ[i] += Σⱼ dS[i][j]·k_j
      block_product<VB, fused>(rows, d, nc, dS, kKeyBlock, 1, h.k + c0 * h.k_rs, h.k_rs, g.dq + i0 * d, d, false);
    if (to_kv)  // dK[j] += Σᵢ dS[i][j]·q_i
      block_product<VB, fused>(nc, d, rows, dS, 1, kKeyBlock, q, h.q_rs, g.dk + c0 * d, d, false);
  }
}

// D[i] = Σ_c dO[i, c]·O[i, c] for rows [r0, r1) (O contiguous).
template <bool fused, typename F>
[[gnu::always_inline]] inline void row_sums(const F* dout, int64_t dout_rs, const F* out, int64_t dv, int64_t r0,
                                            int64_t r1, F* D) {
  for (int64_t i = r0; i < r1; ++i) {
    F sum = 0;
    for (int64_t c = 0; c < dv; ++c) sum = madd<fused>(dout[i * dout_rs + c], out[i * dv + c], sum);
    D[i] = sum;
  }
}

// ---------------------------------------------------------------- one build of the kernels
//
// SCRATCHGRAD_FLASH_KERNELS(name, target attribute, vector bytes, fused) defines name<F>: the three entry
// points compiled for that target with VB-byte vectors (fused: the fast build, see madd).
#define SCRATCHGRAD_FLASH_KERNELS(NAME, TARGET, VB, FUSED)                                                           \
  template <typename F> TARGET void NAME##_forward(const Head<F>& h, int64_t r0, int64_t r1, F* out, F* lse) {    \
    forward_rows<VB, FUSED>(h, r0, r1, out, lse);                                                                 \
  }                                                                                                             \
  template <typename F>                                                                                         \
  TARGET void NAME##_backward(const Head<F>& h, const HeadGrads<F>& g, int64_t c0, int64_t c1, int64_t r0,      \
                              int64_t r1, bool to_kv, bool to_q) {                                              \
    backward_block<VB, FUSED>(h, g, c0, c1, r0, r1, to_kv, to_q);                                               \
  }                                                                                                             \
  template <typename F>                                                                                         \
  TARGET void NAME##_row_sums(const F* dout, int64_t rs, const F* out, int64_t dv, int64_t r0, int64_t r1, F* D) { \
    row_sums<FUSED>(dout, rs, out, dv, r0, r1, D);                                                                 \
  }                                                                                                             \
  template <typename F> constexpr Kernels<F> NAME = {NAME##_forward<F>, NAME##_backward<F>, NAME##_row_sums<F>};

}  // namespace
}  // namespace autograd::cpu::flash
