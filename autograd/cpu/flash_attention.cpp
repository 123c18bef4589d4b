// cpu/flash_attention.cpp — scaled dot-product attention without the [T, S] matrix of scores
// (FlashAttention-2), forward and backward. ops/flash_attention.cpp is the op; docs/autograd.md explains
// the algorithm ("Attention in O(T·d) memory").
//
// Each batch item is one head: q [T, d], k [S, d], v [S, dv], rows of unit stride. Keys are visited in
// blocks of kKeyBlock. For each query row the forward keeps a running maximum m of the scores seen so far,
// the running sum l of exp(score − m), and the running output acc = Σ exp(score − m)·v; when a block
// raises the maximum, l and acc are rescaled by exp(m_old − m_new) (the online softmax). At the end
// out = acc / l and lse = m + log l. The backward recomputes each block's probabilities as
// exp(score − lse) from q, k and lse, and never stores more than one block's row of them either.
// Memory beyond the inputs and outputs: lse [T], D [T] in backward, and a few blocks of scratch per thread.
//
// Numerics. exact: every multiply and every add rounded on its own (the build has -ffp-contract=off);
// fast: fused multiply-adds (std::fma, one rounding), compiled for AVX2+FMA or AVX-512 when the CPU has
// them. The order of every sum is the same in both and fixed: a score adds over the feature index in
// order, an output row over the keys in order, a gradient row of dk/dv over the query rows in order and
// one of dq over the keys in order — whatever the number of threads or the vector width (vectors run
// across independent entries, never across one sum). These are not the composed ops' bits: those add a
// row's exponentials in another order, and divide the scores by √d where this multiplies by 1/√d.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "autograd/cpu/exp_floats.h"
#include "autograd/cpu/kernels.h"
#include "autograd/cpu/runtime.h"
#include "autograd/numerics.h"

namespace autograd::cpu {

namespace {

constexpr int64_t kQueryBlock = 64;  // query rows of one forward work item (and of one dq work item)
constexpr int64_t kKeyBlock = 64;    // keys whose scores exist at one time

// The two ways to compute a·b + c.
struct Rounded {  // exact: a rounded product, then a rounded sum
  template <typename F> [[gnu::always_inline]] static F madd(F a, F b, F c) { return a * b + c; }
};
struct Fused {  // fast: one rounding (a vfmadd instruction where the CPU has FMA)
  template <typename F> [[gnu::always_inline]] static F madd(F a, F b, F c) { return std::fma(a, b, c); }
};

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

// What the backward reads and writes besides the head: out, lse and D (rowsum(dO ∘ O)) of the head, grad_out,
// and the three gradients (contiguous).
template <typename F> struct HeadGrads {
  const F* lse;
  const F* D;
  const F* dout;
  int64_t dout_rs;
  F *dq, *dk, *dv;
};

// Per-thread scratch: a key block's k and v transposed ([d][kKeyBlock], [dv][kKeyBlock], so that the
// scores of one query row against the block are a loop over contiguous memory), one row of scores /
// probabilities and of dP, and the forward's running state for kQueryBlock rows.
template <typename F> struct Scratch {
  std::vector<F> kt, vt, s, dp, acc, m, l;
  void fit(int64_t d, int64_t dv) {
    kt.resize(size_t(std::max<int64_t>(d, 1) * kKeyBlock));
    vt.resize(size_t(std::max<int64_t>(dv, 1) * kKeyBlock));
    s.resize(kKeyBlock);
    dp.resize(kKeyBlock);
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

// xt[e][j] = x[j][e] for n rows of `width` values (row stride rs).
template <typename F>
[[gnu::always_inline]] inline void transpose_block(const F* __restrict x, int64_t rs, int64_t n, int64_t width,
                                                   F* __restrict xt) {
  for (int64_t j = 0; j < n; ++j)
    for (int64_t e = 0; e < width; ++e) xt[e * kKeyBlock + j] = x[j * rs + e];
}

// out[j] = Σₑ x[e]·yt[e][j] for j < n, each sum from e = 0 up (vectors run across j).
template <typename M, typename F>
[[gnu::always_inline]] inline void row_dots(const F* __restrict x, const F* __restrict yt, int64_t width, int64_t n,
                                            F* __restrict out) {
  for (int64_t j = 0; j < n; ++j) out[j] = F(0);
  for (int64_t e = 0; e < width; ++e) {
    const F xe = x[e];
    const F* __restrict col = yt + e * kKeyBlock;
    for (int64_t j = 0; j < n; ++j) out[j] = M::madd(xe, col[j], out[j]);
  }
}

// y[c] += a·x[c] for c < n.
template <typename M, typename F>
[[gnu::always_inline]] inline void axpy(F a, const F* __restrict x, F* __restrict y, int64_t n) {
  for (int64_t c = 0; c < n; ++c) y[c] = M::madd(a, x[c], y[c]);
}

// x[j] = exp(x[j]) for j < n: the C library's exp (exp_floats gives expf's bits 16 at a time).
inline void exp_in_place(float* x, int64_t n) { exp_floats(x, x, n); }
inline void exp_in_place(double* x, int64_t n) {
  for (int64_t j = 0; j < n; ++j) x[j] = std::exp(x[j]);
}

// ---------------------------------------------------------------- forward

// Rows [r0, r1) of one head: out rows (contiguous, dv each) and their lse.
template <typename M, typename F>
[[gnu::always_inline]] inline void forward_rows(const Head<F>& h, int64_t r0, int64_t r1, F* out, F* lse) {
  Scratch<F>& w = scratch<F>(h.d, h.dv);
  const int64_t dv = h.dv;
  F *acc = w.acc.data(), *m = w.m.data(), *l = w.l.data(), *s = w.s.data();
  std::fill(acc, acc + (r1 - r0) * dv, F(0));
  std::fill(m, m + (r1 - r0), -std::numeric_limits<F>::infinity());
  std::fill(l, l + (r1 - r0), F(0));

  // Key blocks wholly in the future of every row here (causal) are never visited.
  const int64_t key_end = h.keys_seen(r1 - 1);
  for (int64_t c0 = 0; c0 < key_end; c0 += kKeyBlock) {
    const int64_t c1 = std::min(c0 + kKeyBlock, key_end);
    transpose_block(h.k + c0 * h.k_rs, h.k_rs, c1 - c0, h.d, w.kt.data());
    for (int64_t i = std::max(r0, h.first_row_seeing(c0)); i < r1; ++i) {
      const int64_t n = std::min(c1, h.keys_seen(i)) - c0, r = i - r0;  // the keys of this block row i sees
      row_dots<M>(h.q + i * h.q_rs, w.kt.data(), h.d, n, s);
      F block_max = -std::numeric_limits<F>::infinity();
      for (int64_t j = 0; j < n; ++j) {
        s[j] = s[j] * h.scale;
        block_max = std::max(block_max, s[j]);
      }
      const F m_new = std::max(m[r], block_max);
      for (int64_t j = 0; j < n; ++j) s[j] = s[j] - m_new;
      exp_in_place(s, n);  // p̃[j] = exp(score − m_new), at most 1
      F sum = 0;
      for (int64_t j = 0; j < n; ++j) sum = sum + s[j];
      // The rows so far were weighted by exp(score − m_old); reweight them: 0 on the first block
      // (m_old = −inf), exactly 1 when the maximum did not move.
      const F alpha = std::exp(m[r] - m_new);
      m[r] = m_new;
      F* a = acc + r * dv;
      if (alpha != F(1))
        for (int64_t c = 0; c < dv; ++c) a[c] = a[c] * alpha;
      l[r] = M::madd(l[r], alpha, sum);
      for (int64_t j = 0; j < n; ++j) axpy<M>(s[j], h.v + (c0 + j) * h.v_rs, a, dv);
    }
  }
  for (int64_t i = r0; i < r1; ++i) {
    const int64_t r = i - r0;
    F* o = out + i * dv;
    const F* a = acc + r * dv;
    if (l[r] == F(0)) {  // no keys at all (S = 0): the empty sum, as softmax(·) @ v of nothing gives
      std::fill(o, o + dv, F(0));
      lse[i] = -std::numeric_limits<F>::infinity();
      continue;
    }
    for (int64_t c = 0; c < dv; ++c) o[c] = a[c] / l[r];
    lse[i] = m[r] + std::log(l[r]);
  }
}

// ---------------------------------------------------------------- backward (FlashAttention-2)

// The contributions of keys [c0, c1) and query rows [r0, r1) (rows before the first that sees c0 are
// skipped): into dk and dv rows c0..c1 if to_kv, into dq rows r0..r1 if to_q. Per row i, with P = exp(S − L):
//   dV[j] += P[i, j]·dO[i],  dP[i, j] = dO[i]·V[j],  dS[i, j] = P[i, j]·(dP[i, j] − D[i])·scale,
//   dQ[i] += dS[i, j]·K[j],  dK[j] += dS[i, j]·Q[i].
template <typename M, typename F>
[[gnu::always_inline]] inline void backward_block(const Head<F>& h, const HeadGrads<F>& g, int64_t c0, int64_t c1,
                                                  int64_t r0, int64_t r1, bool to_kv, bool to_q) {
  Scratch<F>& w = scratch<F>(h.d, h.dv);
  const int64_t d = h.d, dv = h.dv;
  F *s = w.s.data(), *dp = w.dp.data();
  transpose_block(h.k + c0 * h.k_rs, h.k_rs, c1 - c0, d, w.kt.data());
  transpose_block(h.v + c0 * h.v_rs, h.v_rs, c1 - c0, dv, w.vt.data());
  for (int64_t i = std::max(r0, h.first_row_seeing(c0)); i < r1; ++i) {
    const int64_t n = std::min(c1, h.keys_seen(i)) - c0;
    const F* qi = h.q + i * h.q_rs;
    const F* doi = g.dout + i * g.dout_rs;
    row_dots<M>(qi, w.kt.data(), d, n, s);
    for (int64_t j = 0; j < n; ++j) s[j] = s[j] * h.scale - g.lse[i];
    exp_in_place(s, n);  // P[i, j], recomputed: the forward kept only lse
    if (to_kv)
      for (int64_t j = 0; j < n; ++j) axpy<M>(s[j], doi, g.dv + (c0 + j) * dv, dv);
    row_dots<M>(doi, w.vt.data(), dv, n, dp);
    for (int64_t j = 0; j < n; ++j) dp[j] = s[j] * (dp[j] - g.D[i]) * h.scale;  // dS[i, j]·scale
    if (to_q)
      for (int64_t j = 0; j < n; ++j) axpy<M>(dp[j], h.k + (c0 + j) * h.k_rs, g.dq + i * d, d);
    if (to_kv)
      for (int64_t j = 0; j < n; ++j) axpy<M>(dp[j], qi, g.dk + (c0 + j) * d, d);
  }
}

// D[i] = Σ_c dO[i, c]·O[i, c] for rows [r0, r1) (O contiguous).
template <typename M, typename F>
[[gnu::always_inline]] inline void row_sums(const F* dout, int64_t dout_rs, const F* out, int64_t dv, int64_t r0,
                                            int64_t r1, F* D) {
  for (int64_t i = r0; i < r1; ++i) {
    F sum = 0;
    for (int64_t c = 0; c < dv; ++c) sum = M::madd(dout[i * dout_rs + c], out[i * dv + c], sum);
    D[i] = sum;
  }
}

// ---------------------------------------------------------------- the same code for each CPU
//
// Each work item is one call through a pointer to one of these: compiled once for the baseline x86-64
// target and again with AVX2 / AVX-512 vectors, Rounded or Fused. The operations per entry are the same
// in every build of one numerics, so the CPU changes speed, never bits. (Fused on a CPU without FMA
// calls the library's fma: slow, same bits.)
template <typename F> struct Kernels {
  void (*forward)(const Head<F>&, int64_t, int64_t, F*, F*);
  void (*backward)(const Head<F>&, const HeadGrads<F>&, int64_t, int64_t, int64_t, int64_t, bool, bool);
  void (*row_sums)(const F*, int64_t, const F*, int64_t, int64_t, int64_t, F*);
};

#define SCRATCHGRAD_FLASH_KERNELS(NAME, TARGET, M)                                                              \
  template <typename F> TARGET void NAME##_forward(const Head<F>& h, int64_t r0, int64_t r1, F* out, F* lse) {    \
    forward_rows<M>(h, r0, r1, out, lse);                                                                       \
  }                                                                                                             \
  template <typename F>                                                                                         \
  TARGET void NAME##_backward(const Head<F>& h, const HeadGrads<F>& g, int64_t c0, int64_t c1, int64_t r0,      \
                              int64_t r1, bool to_kv, bool to_q) {                                              \
    backward_block<M>(h, g, c0, c1, r0, r1, to_kv, to_q);                                                       \
  }                                                                                                             \
  template <typename F>                                                                                         \
  TARGET void NAME##_row_sums(const F* dout, int64_t rs, const F* out, int64_t dv, int64_t r0, int64_t r1, F* D) { \
    row_sums<M>(dout, rs, out, dv, r0, r1, D);                                                                  \
  }                                                                                                             \
  template <typename F> constexpr Kernels<F> NAME = {NAME##_forward<F>, NAME##_backward<F>, NAME##_row_sums<F>};

SCRATCHGRAD_FLASH_KERNELS(exact_baseline, , Rounded)
SCRATCHGRAD_FLASH_KERNELS(fast_baseline, , Fused)
#if defined(__x86_64__) && defined(__GNUC__)
SCRATCHGRAD_FLASH_KERNELS(exact_avx2, [[gnu::target("avx2")]], Rounded)
SCRATCHGRAD_FLASH_KERNELS(exact_avx512, [[gnu::target("avx512f,avx512vl")]], Rounded)
SCRATCHGRAD_FLASH_KERNELS(fast_avx2, [[gnu::target("avx2,fma")]], Fused)
SCRATCHGRAD_FLASH_KERNELS(fast_avx512, [[gnu::target("avx512f,avx512vl,fma")]], Fused)
#endif
#undef SCRATCHGRAD_FLASH_KERNELS

template <typename F> Kernels<F> kernels_for_this_cpu() {
  const bool exact = numerics() == Numerics::exact;
#if defined(__x86_64__) && defined(__GNUC__)
  if (avx512_kernels()) return exact ? exact_avx512<F> : fast_avx512<F>;
  if (has_avx2()) return exact ? exact_avx2<F> : fast_avx2<F>;  // (every AVX2 CPU has FMA)
#endif
  return exact ? exact_baseline<F> : fast_baseline<F>;
}

// ---------------------------------------------------------------- batch items and threads

// The element offset of batch item b (row-major over the leading dims) in t, whose last `inner` dims are
// not batch dims. Broadcast dims have stride 0.
int64_t item_offset(const Tensor& t, int64_t b, int64_t inner) {
  int64_t off = 0;
  for (int64_t dim = t.dim() - inner - 1; dim >= 0; --dim) {
    const int64_t size = t.size(dim);
    off += (b % size) * t.strides()[size_t(dim)];
    b /= size;
  }
  return off;
}

template <typename F> const F* at(const Tensor& t, int64_t off) { return static_cast<const F*>(t.raw_data()) + off; }
template <typename F> F* at_mut(const Tensor& t, int64_t off) { return static_cast<F*>(t.raw_data()) + off; }

template <typename F> Head<F> head_of(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale,
                                      int64_t b) {
  return Head<F>{at<F>(q, item_offset(q, b, 2)), at<F>(k, item_offset(k, b, 2)), at<F>(v, item_offset(v, b, 2)),
                 q.strides().end()[-2], k.strides().end()[-2], v.strides().end()[-2],
                 q.size(-2), k.size(-2), q.size(-1), v.size(-1), causal, F(scale)};
}

// How many heads: the product of the batch dims (counted from the shape, since out may hold no elements).
int64_t batch_items_of(const Tensor& out) {
  int64_t n = 1;
  for (int64_t dim = 0; dim + 2 < out.dim(); ++dim) n *= out.size(dim);
  return n;
}

// Runs f(i) for i < n, spread over threads when the whole job (`work` multiply-adds) is worth it.
// Which thread runs an item never changes its numbers.
template <typename Fn> void parallel_items(int64_t n, int64_t work, Fn f) {
  const int threads = work < (int64_t(1) << 18) ? 1 : int(std::min<int64_t>(get_num_threads(), n));
  if (threads <= 1) {
    for (int64_t i = 0; i < n; ++i) f(i);
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (int64_t i = 0; i < n; ++i) f(i);
}

int64_t blocks(int64_t n, int64_t block) { return (n + block - 1) / block; }

}  // namespace

void flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale, const Tensor& out,
                     const Tensor& lse) {
  const int64_t items = batch_items_of(out), T = q.size(-2), S = k.size(-2), d = q.size(-1), dv = v.size(-1);
  if (items == 0 || T == 0) return;
  dispatch_floating(q.dtype(), "scaled_dot_product_attention", [&](auto tag) {
    using F = decltype(tag);
    const Kernels<F> kern = kernels_for_this_cpu<F>();
    const int64_t row_blocks = blocks(T, kQueryBlock);
    // One work item: one head's block of query rows (each row's numbers are its own: any split is safe).
    parallel_items(items * row_blocks, items * T * S * (d + dv), [&](int64_t item) {
      const int64_t b = item / row_blocks, r0 = (item % row_blocks) * kQueryBlock;
      const Head<F> h = head_of<F>(q, k, v, causal, scale, b);
      kern.forward(h, r0, std::min(r0 + kQueryBlock, T), at_mut<F>(out, b * T * dv), at_mut<F>(lse, b * T));
    });
  });
}

void flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                              const Tensor& grad_out, bool causal, double scale, const Tensor& dq, const Tensor& dk,
                              const Tensor& dv) {
  const int64_t items = batch_items_of(out), T = q.size(-2), S = k.size(-2), d = q.size(-1), dvs = v.size(-1);
  dispatch_floating(q.dtype(), "scaled_dot_product_attention", [&](auto tag) {
    using F = decltype(tag);
    std::fill_n(at_mut<F>(dq, 0), dq.numel(), F(0));
    std::fill_n(at_mut<F>(dk, 0), dk.numel(), F(0));
    std::fill_n(at_mut<F>(dv, 0), dv.numel(), F(0));
    if (items == 0 || T == 0 || S == 0) return;
    const Kernels<F> kern = kernels_for_this_cpu<F>();
    std::vector<F> D(size_t(items * T));  // rowsum(dO ∘ O): O(T) per head
    auto grads_of = [&](int64_t b) {
      return HeadGrads<F>{at<F>(lse, b * T), D.data() + b * T, at<F>(grad_out, item_offset(grad_out, b, 2)),
                          grad_out.strides().end()[-2], at_mut<F>(dq, b * T * d), at_mut<F>(dk, b * S * d),
                          at_mut<F>(dv, b * S * dvs)};
    };
    const int64_t work = items * T * S * (2 * d + 2 * dvs);
    parallel_items(items, items * T * dvs, [&](int64_t b) {
      const HeadGrads<F> g = grads_of(b);
      kern.row_sums(g.dout, g.dout_rs, at<F>(out, b * T * dvs), dvs, 0, T, D.data() + b * T);
    });
    const int64_t key_blocks = blocks(S, kKeyBlock), row_blocks = blocks(T, kQueryBlock);
    const int threads = get_num_threads();
    if (items >= threads || work < (int64_t(1) << 18)) {
      // One pass per head (FlashAttention-2's loop): key blocks in order, each against every query row that
      // sees it, the head's dq rows collecting each block's share as it goes.
      parallel_items(items, work, [&](int64_t b) {
        const Head<F> h = head_of<F>(q, k, v, causal, scale, b);
        const HeadGrads<F> g = grads_of(b);
        for (int64_t c0 = 0; c0 < S; c0 += kKeyBlock)
          kern.backward(h, g, c0, std::min(c0 + kKeyBlock, S), 0, T, true, true);
      });
      return;
    }
    // Fewer heads than threads: two passes, each split finer. dk and dv by key block (every row against
    // it), then dq by query block (every key block in order). The probabilities are computed twice, and
    // every sum adds the same terms in the same order as the single pass does: the same bits.
    parallel_items(items * key_blocks, work, [&](int64_t item) {
      const int64_t b = item / key_blocks, c0 = (item % key_blocks) * kKeyBlock;
      kern.backward(head_of<F>(q, k, v, causal, scale, b), grads_of(b), c0, std::min(c0 + kKeyBlock, S), 0, T,
                    true, false);
    });
    parallel_items(items * row_blocks, work, [&](int64_t item) {
      const int64_t b = item / row_blocks, r0 = (item % row_blocks) * kQueryBlock, r1 = std::min(r0 + kQueryBlock, T);
      const Head<F> h = head_of<F>(q, k, v, causal, scale, b);
      const HeadGrads<F> g = grads_of(b);
      for (int64_t c0 = 0; c0 < h.keys_seen(r1 - 1); c0 += kKeyBlock)
        kern.backward(h, g, c0, std::min(c0 + kKeyBlock, S), r0, r1, false, true);
    });
  });
}

}  // namespace autograd::cpu
