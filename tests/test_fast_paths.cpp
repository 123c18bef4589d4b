// Fast paths that skip general machinery must give the general path's bits. Each test runs the same
// values through both: once in the layout the fast path takes, once in one it does not.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "autograd/cpu/kernels.h"
#include "test_helpers.h"

using namespace autograd;
using testing_helpers::expect_same_float_bits;
using testing_helpers::randish;
using testing_helpers::spaced_copy;

// A bias gradient: sum over the rows of a contiguous [R, C] (cpu/kernels/sums.cpp, cascade_sum).
TEST(FastPaths, SumOverRowsOfAContiguousMatrix) {
  for (int64_t rows : {2, 3, 16, 17, 128, 300, 5000})
    for (int64_t cols : {2, 7, 8, 24, 33, 64, 100}) {
      Tensor x = randish({rows, cols}, uint32_t(rows * 1000 + cols), -1, 1, DType::Float32);
      const std::string what = "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
      expect_same_float_bits(x.sum(0), spaced_copy(x).sum(0), "sum(0) " + what);
      expect_same_float_bits(x.sum_to({cols}), spaced_copy(x).sum_to({cols}), "sum_to " + what);
      expect_same_float_bits(x.sum(1), spaced_copy(x).sum(1), "sum(1) " + what);  // not the fast path's: still right
    }
}

// q @ k.transpose(-2, -1): k's gradient is made in k's layout (ops/matmul.cpp, empty_product), which the CPU
// kernel computes as (dCᵀ·q)ᵀ (cpu/kernels/matmul.cpp, batched_matmul); the bits must be the textbook (qᵀ·dC)ᵀ's.
TEST(FastPaths, GradientOfATransposedRightOperand) {
  struct Case {
    Shape q, k;
  };
  for (const Case& c : {Case{{16, 8, 24}, {16, 8, 24}}, Case{{4, 3, 5, 7}, {4, 3, 6, 7}}, Case{{8, 24}, {9, 24}},
                        Case{{2, 3, 8, 24}, {1, 3, 8, 24}} /* k broadcast over a batch dim: summed, the plain form */,
                        Case{{5, 1}, {4, 1}}, Case{{1, 6}, {3, 6}}}) {
    Tensor q = randish(c.q, 11, -1, 1, DType::Float32).requires_grad_();
    Tensor k = randish(c.k, 12, -1, 1, DType::Float32).requires_grad_();
    Tensor s = q.matmul(k.transpose(-2, -1));
    Tensor g = randish(s.shape(), 13, -1, 1, DType::Float32);
    s.backward(g);
    Tensor want;
    {
      NoGradGuard no_grad;
      want = matmul(q.mT(), g).sum_to(k.mT().shape()).mT();  // dB = Aᵀ·dC for B = kᵀ, then back to k's shape
    }
    expect_same_float_bits(k.grad(), want, "k " + k.shape_str());
    EXPECT_TRUE(k.grad().is_contiguous());
  }
}

// addmm hands its bias to the exact kernel as a start row instead of copying it down the output first
// (cpu/kernels/matmul.cpp, ProductOptions::start_row). The other route — the copy, then adding the product onto
// it (add_to_out) — must give the same bits, on one thread and on two, and for K <= 256 (one block)
// both are chain + bias, i.e. matmul(x, wᵀ) + b.
TEST(FastPaths, LinearBiasAsAStartRow) {
  struct Case {
    int64_t rows, in, out;
  };
  for (DType dtype : {DType::Float32, DType::Float64})
    for (const Case& c : {Case{128, 24, 24}, Case{128, 24, 13}, Case{50, 40, 100}, Case{64, 300, 13},
                          Case{70, 300, 70}, Case{300, 600, 64}}) {
      const std::string what = std::to_string(c.rows) + "x" + std::to_string(c.in) + "->" + std::to_string(c.out);
      Tensor x = randish({c.rows, c.in}, 21, -1, 1, dtype), w = randish({c.out, c.in}, 22, -1, 1, dtype);
      Tensor b = randish({c.out}, 23, -1, 1, dtype);
      set_num_threads(1);
      Tensor one = linear(x, w, b);
      set_num_threads(2);
      Tensor two = linear(x, w, b);
      set_num_threads(1);
      Tensor copied = b.expand({c.rows, c.out}).contiguous();  // the copy route
      cpu::batched_matmul(x, w.t(), copied, MatmulStructure::dense, /*add_to_out=*/true);
      std::vector<double> v1 = one.to_vector<double>(), v2 = two.to_vector<double>();
      ASSERT_EQ(v1, v2) << what;  // (exact: float values convert to double losslessly)
      ASSERT_EQ(v1, copied.to_vector<double>()) << what;
      if (c.in <= 256) {
        std::vector<double> want = (matmul(x, w.t()) + b).to_vector<double>();
        ASSERT_EQ(v1, want) << what;
      }
    }
}

// masked_fill on contiguous floats selects 16 values at a time with AVX-512, 8 with AVX2
// (cpu/kernels/select_floats.cpp): the same bits
// as the one-at-a-time loop a non-contiguous input takes, for every run length and mask pattern.
TEST(FastPaths, MaskedFillSelectsTheSameBits) {
  for (int64_t n : {1, 5, 8, 15, 16, 17, 33, 64, 100}) {
    Tensor x = randish({3, n, n}, uint32_t(n), -1, 1, DType::Float32);
    Tensor mask = randish({n, n}, uint32_t(n + 7), -1, 1, DType::Float32) > 0.0;
    for (double value : {-std::numeric_limits<double>::infinity(), 0.0, -0.0, 2.5}) {
      expect_same_float_bits(x.masked_fill(mask, value), spaced_copy(x).masked_fill(mask, value),
                       "masked_fill n " + std::to_string(n));
    }
  }
}
