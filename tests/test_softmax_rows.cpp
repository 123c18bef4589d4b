// The float fast path of softmax / log_softmax (contiguous rows over the last dim, exps 16 at a time
// through exp_floats) against the general row-by-row path, bit for bit.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "test_helpers.h"

using namespace autograd;
using testing_helpers::expect_same_float_bits;
using testing_helpers::randish;
using testing_helpers::spaced_copy;

namespace {

// Scores with everything softmax meets: masked -inf entries, huge values (exp leaves the fast path),
// an all -inf row (NaN, as in PyTorch), a NaN, and maxima that are ties of -0 and +0.
Tensor hard_scores(int64_t rows, int64_t n, uint32_t seed) {
  std::vector<double> v = testing_helpers::uniform_values(rows * n, seed, -30.0, 30.0);
  const double inf = std::numeric_limits<double>::infinity();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double& x = v[size_t(r * n + j)];
      if (r % 4 == 1 && j > r % n) x = -inf;  // causal-style masking
      if (r % 7 == 3 && j == 0) x = 120.0;    // exp(x - max) with |x - max| >= 88
      if (r == 5) x = -inf;                   // a fully masked row
      if (r == 6 && j == n / 2) x = std::numeric_limits<double>::quiet_NaN();
      if (r == 7) x = j < 2 ? (j == 0 ? -0.0 : 0.0) : -200.0;  // the maximum is a tie of -0 and +0
      if (r == 8) x = j == n - 1 ? 0.0 : -0.0;
    }
  return from_vector(v, {rows, n}, DType::Float32);
}

}  // namespace

TEST(SoftmaxRows, FastPathMatchesTheGeneralPathBitForBit) {
  for (int64_t n : {1, 2, 3, 7, 8, 9, 13, 16, 17, 31, 64, 65, 300}) {
    for (int64_t rows : {1, 9, 40}) {
      Tensor x = hard_scores(rows, n, uint32_t(n * 100 + rows));
      const std::string what = "n " + std::to_string(n) + " rows " + std::to_string(rows);
      expect_same_float_bits(softmax(x, -1), softmax(spaced_copy(x), -1), "softmax " + what);
      expect_same_float_bits(log_softmax(x, -1), log_softmax(spaced_copy(x), -1), "log_softmax " + what);
    }
  }
}

// A batch of rows big enough to be split over threads gives the same bits as one thread.
TEST(SoftmaxRows, ThreadsDoNotChangeBits) {
  Tensor x = randish({64, 128, 8}, 3, -10, 10, DType::Float32);
  set_num_threads(1);
  Tensor one = log_softmax(x, -1), one_sm = softmax(x, -1);
  set_num_threads(2);
  Tensor two = log_softmax(x, -1), two_sm = softmax(x, -1);
  set_num_threads(1);
  expect_same_float_bits(two, one, "log_softmax");
  expect_same_float_bits(two_sm, one_sm, "softmax");
}

namespace {
// Σ over a row in PyTorch's vector-lane order, one value at a time: 8 lanes over blocks of 8, leftovers
// into lanes 0, 1, ..., lanes folded left to right; rows under 8 folded left to right.
float lane_order_sum(const float* v, int64_t n) {
  if (n < 8) {
    float sum = v[0];
    for (int64_t j = 1; j < n; ++j) sum = sum + v[j];
    return sum;
  }
  float lanes[8];
  for (int l = 0; l < 8; ++l) lanes[l] = v[l];
  int64_t d = 8;
  for (; d < n - n % 8; d += 8)
    for (int l = 0; l < 8; ++l) lanes[l] = lanes[l] + v[d + l];
  for (int l = 0; d + l < n; ++l) lanes[l] = lanes[l] + v[d + l];
  float sum = lanes[0];
  for (int l = 1; l < 8; ++l) sum = sum + lanes[l];
  return sum;
}
}  // namespace

namespace {
// One backward through `op` (softmax or log_softmax over the last dim) on 12 random rows of n floats; then
// `want(y_row, g_row, j)` must give every entry of dx bit for bit.
template <typename Op, typename Want> void check_backward_formula(int64_t n, Op op, Want want) {
  Tensor x = randish({12, n}, uint32_t(n), -5, 5, DType::Float32).requires_grad_();
  Tensor g = randish({12, n}, uint32_t(n + 1), -1, 1, DType::Float32);
  Tensor y = op(x);
  y.backward(g);
  std::vector<float> yv = y.detach().to_vector<float>(), gv = g.to_vector<float>(), dx = x.grad().to_vector<float>();
  for (int64_t r = 0; r < 12; ++r)
    for (int64_t j = 0; j < n; ++j)
      ASSERT_EQ(std::bit_cast<uint32_t>(dx[size_t(r * n + j)]),
                std::bit_cast<uint32_t>(want(yv.data() + r * n, gv.data() + r * n, j)))
          << "n " << n << " row " << r << " col " << j;
}
}  // namespace

// softmax's backward on float rows (a copy per row length up to 16, cpu/kernels/softmax.cpp): dx = (g − Σ g·y) · y,
// each g·y rounded, Σ in the vector-lane order, computed here one value at a time.
TEST(SoftmaxRows, SoftmaxBackwardMatchesTheFormula) {
  for (int64_t n : {1, 5, 8, 13, 16, 17, 21, 100})
    check_backward_formula(n, [](const Tensor& x) { return softmax(x, -1); },
                           [n](const float* yr, const float* gr, int64_t j) {
                             std::vector<float> products(static_cast<size_t>(n), 0.0f);
                             for (int64_t i = 0; i < n; ++i) products[size_t(i)] = gr[i] * yr[i];
                             return (gr[j] - lane_order_sum(products.data(), n)) * yr[j];
                           });
}

// log_softmax's backward on float rows: dx = g − exp(y) · Σ g, Σ in the vector-lane order, computed here
// one value at a time.
TEST(SoftmaxRows, LogSoftmaxBackwardMatchesTheFormula) {
  for (int64_t n : {1, 5, 8, 13, 16, 21, 100})
    check_backward_formula(n, [](const Tensor& x) { return log_softmax(x, -1); },
                           [n](const float* yr, const float* gr, int64_t j) {
                             return gr[j] - std::exp(yr[j]) * lane_order_sum(gr, n);
                           });
}
