// Exercise 10, solved: one causal attention head, forward and backward, in one node.
#include <cmath>
#include <limits>

#include "../exercises.h"

namespace exercises {

Tensor my_attention_head(const Tensor& q, const Tensor& k, const Tensor& v) {
  const int64_t T = q.size(-2);
  const double root_d = std::sqrt(double(q.size(-1)));
  Tensor p, out;
  {
    NoGradGuard no_grad;
    Tensor scores = matmul(q, k.mT()) / root_d;                                        // s = q kᵀ / √d
    scores = masked_fill(scores, causal_mask(T), -std::numeric_limits<double>::infinity());  // no peeking ahead
    p = softmax(scores, -1);                                                            // p = softmax(s)
    out = matmul(p, v);                                                                 // out = p v
  }
  if (!needs_grad({q, k, v})) return out;
  return record("MyAttentionHeadBackward", out, {q, k, v}, {q, k, v}, [q, k, v, p, root_d](const Tensor& g) {
    Tensor dv = matmul(p.mT(), g);                        // out = p v   →  dv = pᵀ g,  dp = g vᵀ
    Tensor dp = matmul(g, v.mT());
    Tensor ds = p * (dp - (dp * p).sum(-1, true));        // softmax's backward (rung 6); masked entries: p = 0
    ds = ds / root_d;                                     // s = (q kᵀ) / √d
    Tensor dq = matmul(ds, k);                            // q kᵀ  →  dq = ds k,  dk = dsᵀ q
    Tensor dk = matmul(ds.mT(), q);
    return Grads{dq.sum_to(q.shape()), dk.sum_to(k.shape()), dv.sum_to(v.shape())};
  });
}

}  // namespace exercises
