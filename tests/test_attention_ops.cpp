// test_attention_ops.cpp — causal_scores and tril_matmul (autograd/ops/attention.cpp): the products that
// skip the masked half of causal attention (MatmulStructure) must give exactly the dense ops' bits,
// forward and backward, on any number of threads, and their gradients must be right on their own.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "autograd/autograd.h"
#include "autograd/inspect/gradcheck.h"
#include "test_helpers.h"

using namespace autograd;

namespace {

const double kInf = std::numeric_limits<double>::infinity();

Tensor above_diagonal(int64_t t) { return ones({t, t}, DType::Bool).triu(1); }

// The dense attention the two ops stand for, and the one through them.
Tensor dense_attention(const Tensor& q, const Tensor& k, const Tensor& v, double s) {
  Tensor scores = (matmul(q, k.mT()) / s).masked_fill(above_diagonal(q.size(-2)), -kInf);
  return matmul(softmax(scores, -1), v);
}
Tensor blocked_attention(const Tensor& q, const Tensor& k, const Tensor& v, double s) {
  return tril_matmul(softmax(causal_scores(q, k, s), -1), v);
}

struct Grads3 {
  Tensor out, dq, dk, dv;
};

template <typename F> Grads3 run(F attention, const Tensor& q0, const Tensor& k0, const Tensor& v0, const Tensor& g) {
  Tensor q = q0.detach().requires_grad_(), k = k0.detach().requires_grad_(), v = v0.detach().requires_grad_();
  Tensor out = attention(q, k, v, std::sqrt(double(q.size(-1))));
  out.backward(g);
  return {out.detach(), q.grad(), k.grad(), v.grad()};
}

void expect_same_bits(const Shape& qkv_shape, DType dtype) {
  Tensor q = randn(qkv_shape, dtype), k = randn(qkv_shape, dtype), v = randn(qkv_shape, dtype);
  Tensor g = randn(qkv_shape, dtype);
  Grads3 dense = run(dense_attention, q, k, v, g), blocked = run(blocked_attention, q, k, v, g);
  const std::string what = shape_to_string(qkv_shape) + " " + std::string(dtype_name(dtype));
  EXPECT_TRUE(equal(blocked.out, dense.out)) << what << ": output";
  EXPECT_TRUE(equal(blocked.dq, dense.dq)) << what << ": dq";
  EXPECT_TRUE(equal(blocked.dk, dense.dk)) << what << ": dk";
  EXPECT_TRUE(equal(blocked.dv, dense.dv)) << what << ": dv";
}

// Outputs start as NaN here: an entry the skipping kernels should have written but did not shows.
using testing_helpers::PoisonedBuffers;

TEST(CausalAttentionOps, SameBitsAsTheDenseOpsForwardAndBackward) {
  PoisonedBuffers poison;
  manual_seed(21);
  // T: within one 4-row tile, row tiles straddling the diagonal's column panels (16 / 32 wide), narrow
  // products (the row path, which computes everything), and T past one 256-deep chain block; d: narrow
  // and wide enough for the tile path
  for (int64_t t : {2, 5, 8, 33, 65, 100, 300}) {
    for (int64_t d : {3, 8, 64}) expect_same_bits({2, t, d}, DType::Float32);
  }
  expect_same_bits({2, 3, 70, 4}, DType::Float32);  // heads
  expect_same_bits({70, 5}, DType::Float64);
}

// The same in fast numerics, whose kernels skip the same zeros (dk = dscoresᵀ @ q packs its transposed A
// in blocks of row tiles: T 300 spans several).
TEST(CausalAttentionOps, SameBitsAsTheDenseOpsInFastNumerics) {
  PoisonedBuffers poison;
  NumericsGuard fast(Numerics::fast);
  manual_seed(27);
  for (int64_t t : {33, 100, 300}) expect_same_bits({2, t, 64}, DType::Float32);
  expect_same_bits({300, 40}, DType::Float64);
}

TEST(CausalAttentionOps, SameBitsOnTwoThreads) {
  PoisonedBuffers poison;
  manual_seed(26);
  const int previous = get_num_threads();
  set_num_threads(2);  // big enough to be split by rows and by batch items
  expect_same_bits({2, 200, 64}, DType::Float32);
  expect_same_bits({8, 130, 64}, DType::Float32);
  set_num_threads(previous);
}

TEST(CausalAttentionOps, SameBitsOnNonContiguousInputs) {
  manual_seed(22);
  Tensor q = randn({2, 6, 50}).transpose(1, 2), k = randn({2, 50, 12}).slice(2, 2, 8), v = randn({2, 50, 6});
  Tensor g = randn({2, 50, 6});
  Grads3 dense = run(dense_attention, q, k, v, g), blocked = run(blocked_attention, q, k, v, g);
  EXPECT_TRUE(equal(blocked.out, dense.out));
  EXPECT_TRUE(equal(blocked.dq, dense.dq));
  EXPECT_TRUE(equal(blocked.dk, dense.dk));
  EXPECT_TRUE(equal(blocked.dv, dense.dv));
}

// The heads' layout (q, k, v: [b, T, H, hd] seen as [b, H, T, hd]): the output and the gradients the two
// nodes send to q, k, v come back laid out as v, q, k are, so that viewing them back to [b, T, D] needs
// no copy; the same bits as the dense ops (every entry written: the buffers start as NaN).
TEST(CausalAttentionOps, ResultsKeepTheHeadsLayout) {
  PoisonedBuffers poison;
  manual_seed(23);
  auto heads = [] { return randn({3, 40, 4, 16}).transpose(1, 2).requires_grad_(); };  // b 3, T 40, H 4, hd 16
  Tensor q = heads(), k = heads(), v = heads(), g = randn({3, 4, 40, 16});
  auto in_heads_layout = [](const Tensor& t) { return t.transpose(1, 2).is_contiguous(); };
  Tensor scores = causal_scores(q, k, 4.0), out = tril_matmul(softmax(scores.detach(), -1).requires_grad_(), v);
  EXPECT_TRUE(in_heads_layout(out));
  const auto scores_grads = scores.grad_fn()->backward(randn(scores.shape()));
  const auto out_grads = out.grad_fn()->backward(g);
  EXPECT_TRUE(in_heads_layout(scores_grads[0])) << "dq";
  EXPECT_TRUE(in_heads_layout(scores_grads[1])) << "dk";
  EXPECT_TRUE(in_heads_layout(out_grads[1])) << "dv";
  Grads3 dense = run(dense_attention, q, k, v, g), blocked = run(blocked_attention, q, k, v, g);
  EXPECT_TRUE(equal(blocked.out, dense.out));
  EXPECT_TRUE(equal(blocked.dq, dense.dq));
  EXPECT_TRUE(equal(blocked.dk, dense.dk));
  EXPECT_TRUE(equal(blocked.dv, dense.dv));
}

TEST(CausalAttentionOps, ScoresAreMinusInfinityAboveTheDiagonal) {
  manual_seed(23);
  const std::vector<float> s = causal_scores(randn({40, 3}), randn({40, 3}), 2.0).to_vector<float>();
  for (int64_t i = 0; i < 40; ++i)
    for (int64_t j = 0; j < 40; ++j) EXPECT_EQ(s[size_t(i * 40 + j)] == -kInf, j > i) << i << ", " << j;
}

TEST(CausalAttentionOps, TrilMatmulIgnoresEntriesAboveTheDiagonal) {
  manual_seed(24);
  Tensor p = randn({45, 45}), v = randn({45, 3});
  EXPECT_TRUE(equal(tril_matmul(p, v), matmul(p.tril(), v)));
  Tensor leaf = p.detach().requires_grad_();
  tril_matmul(leaf, v).sum().backward();
  EXPECT_TRUE(equal(leaf.grad().triu(1), zeros({45, 45})));  // no gradient where tril(p) has none
}

TEST(CausalAttentionOps, Gradcheck) {
  manual_seed(25);
  const DType f64 = DType::Float64;
  // causal_scores ends in -inf, so its check goes through the softmax.
  Tensor q = randn({36, 2}, f64).requires_grad_(), k = randn({2, 36}, f64).t().requires_grad_();
  auto scores = [](const std::vector<Tensor>& in) { return softmax(causal_scores(in[0], in[1], 1.5), -1); };
  EXPECT_GRADCHECK(scores, {q, k});
  Tensor p = randn({36, 36}, f64).requires_grad_(), v = randn({3, 36}, f64).t().requires_grad_();
  auto product = [](const std::vector<Tensor>& in) { return tril_matmul(in[0], in[1]); };
  EXPECT_GRADCHECK(product, {p, v});
}

TEST(CausalAttentionOps, BadInputsAreNamedErrors) {
  EXPECT_THROW_WITH(causal_scores(randn({40, 3}), randn({41, 3}), 1.0), std::invalid_argument, "causal_scores");
  EXPECT_THROW_WITH(causal_scores(randn({40, 3}), randn({40, 4}), 1.0), std::invalid_argument, "[40, 4]");
  EXPECT_THROW_WITH(causal_scores(randn({40, 3}), randn({40, 3}, DType::Float64), 1.0), std::invalid_argument,
                    "float64");
  EXPECT_THROW_WITH(tril_matmul(randn({40, 39}), randn({40, 3})), std::invalid_argument, "tril_matmul");
  EXPECT_THROW_WITH(tril_matmul(randn({2, 40, 40}), randn({3, 40, 3})), std::invalid_argument, "[3, 40, 3]");
}

}  // namespace
