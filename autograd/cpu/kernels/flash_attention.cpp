// cpu/kernels/flash_attention.cpp — scaled dot-product attention without the [T, S] matrix of scores
// (FlashAttention-2), forward and backward. ops/flash_attention.cpp is the op; docs/autograd.md explains
// the algorithm ("Attention in O(T·d) memory").
//
// Each batch item is one head: q [T, d], k [S, d], v [S, dv], rows of unit stride. Keys are visited in
// blocks of 64. For each query row the forward keeps a running maximum m of the scores seen so far, the
// running sum l of exp(score − m), and the running output acc = Σ exp(score − m)·v; when a block raises
// the maximum, l and acc are rescaled by exp(m_old − m_new) (the online softmax). At the end
// out = acc / l and lse = m + log l. The backward recomputes each block's probabilities as
// exp(score − lse) from q, k and lse. Neither ever holds more than a 64 × 64 block of scores.
// Memory beyond the inputs and outputs: lse [T], D [T] in backward, and a few blocks of scratch per thread.
//
// The kernels' body is cpu/kernels/flash_attention_kernels.h, compiled here for exact numerics (every multiply
// and add rounded on its own) and in flash_attention_fast.cpp for fast numerics (fused multiply-adds).
// This file holds the entry points: which build runs, the batch items and the threads.
#include "autograd/cpu/kernels/flash_attention_kernels.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "autograd/cpu/kernels.h"
#include "autograd/cpu/runtime/runtime.h"
#include "autograd/numerics.h"

namespace autograd::cpu {

using flash::Head;
using flash::HeadGrads;
using flash::Kernels;
using flash::kKeyBlock;
using flash::kQueryBlock;

namespace flash {
namespace {

// The exact builds: the same operations per entry in each, so the CPU changes speed, never bits.
SCRATCHGRAD_FLASH_KERNELS(exact_baseline, , 16, false)
#if defined(__x86_64__) && defined(__GNUC__)
SCRATCHGRAD_FLASH_KERNELS(exact_avx2, [[gnu::target("avx2")]], 32, false)
SCRATCHGRAD_FLASH_KERNELS(exact_avx512, [[gnu::target("avx512f,avx512vl")]], 64, false)
#endif

}  // namespace
}  // namespace flash

namespace {

template <typename F> Kernels<F> kernels_for_this_cpu() {
  if (numerics() == Numerics::fast)
    if (const Kernels<F>* fast = flash::fast_kernels<F>()) return *fast;
#if defined(__x86_64__) && defined(__GNUC__)
  if (avx512_kernels()) return flash::exact_avx512<F>;
  if (has_avx2()) return flash::exact_avx2<F>;
#endif
  return flash::exact_baseline<F>;
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
