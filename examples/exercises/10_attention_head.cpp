// Exercise 10: one causal attention head, forward and backward, as one op.
//
// q, k, v [..., T, d]:
//
//     s = q kᵀ / √d          (scores: how much query i matches key j)
//     s = mask(s)            (−inf where j > i: causal_mask, rung 8)
//     p = softmax(s)         (along the last dim: each query's weights sum to 1)
//     out = p v
//
// Backward, the chain rule through each line in reverse (rungs 4 and 6):
//
//     dv = pᵀ g,  dp = g vᵀ,  ds = p ⊙ (dp − Σ_j dp_j p_j) / √d,  dq = ds k,  dk = dsᵀ q
//
// Keep p from the forward for the closure. Masked entries have p = 0, so they pass no gradient.
//
// Check it:  make exercise N=10     Explained in: docs/backprop-walkthrough.md (the whole step, node by
//                                   node), docs/autograd.md ("Attention in O(T·d) memory")
#include <cmath>
#include <limits>

#include "exercises.h"

namespace exercises {

Tensor my_attention_head(const Tensor& q, const Tensor& k, const Tensor& v) {
  (void)q;
  (void)k;
  (void)v;
  not_implemented(10);  // YOUR CODE
}

}  // namespace exercises

// Hints, one at a time:
// 1. The forward under NoGradGuard with the engine's ops: matmul, masked_fill(s, causal_mask(T), −inf),
//    softmax(s, -1), matmul. Divide by √d (not multiply by 1/√d): that is the workshop's rounding.
// 2. Return Grads{dq, dk, dv}, each .sum_to its input's shape (batch dims may broadcast).
// 3. If dk comes out wrong: s = q kᵀ, so k enters transposed — dk is dsᵀ q, not ds q.
// 4. Rung 14 asks for PyTorch's bits, so round as PyTorch's chain of nodes does, in the order written
//    above: p ⊙ (dp − Σ dp ⊙ p) first, then divided by √d (a division here too, as DivBackward does).
