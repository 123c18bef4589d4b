// test_matmul_kernels.cpp — the product's fast paths against the order they promise.
//
// cpu/kernels/matmul.cpp has several ways to compute a product (narrow rows a few at a time, register tiles with
// packed panels, AVX2 / AVX-512 / baseline builds, transposed operands used in place or copied) and all
// of them must add every output entry in one order: a chain acc = acc + a·b over each block of 256
// values of p (the product rounded, then the sum), the first block's chain stored, each later block's
// chain added to what is there. Here a plain scalar loop computes that order, and every path's result
// must equal it bit for bit, on shapes chosen to reach every branch and every remainder.
// (Products with a single output row or column follow BLIS's dot-product order instead; ParityKernels
// covers those against PyTorch.)
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "autograd/autograd.h"
#include "autograd/cpu/kernels.h"
#include "autograd/cpu/runtime/product_tally.h"
#include "test_helpers.h"

using namespace autograd;

namespace {

// The reference order; with `start`, the sum starts from it (addmm: every block is added to C).
template <typename T>
Tensor reference_product(const Tensor& a, const Tensor& b, const Tensor& start = Tensor()) {
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  Tensor out = start.defined() ? start.contiguous().clone() : zeros({m, n}, a.dtype());
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  const T* pa = static_cast<const T*>(ac.raw_data());
  const T* pb = static_cast<const T*>(bc.raw_data());
  T* c = static_cast<T*>(out.raw_data());
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t p0 = 0; p0 < k; p0 += 256) {
        T acc = 0;
        for (int64_t p = p0; p < std::min(k, p0 + 256); ++p) {
          const T product = pa[i * k + p] * pb[p * n + j];
          acc = acc + product;
        }
        c[i * n + j] = p0 == 0 && !start.defined() ? acc : acc + c[i * n + j];
      }
    }
  }
  return out;
}

// A k x n operand laid out as asked: row-major, or the transpose of a row-major n x k matrix.
Tensor operand(int64_t rows, int64_t cols, bool transposed, DType dtype) {
  return transposed ? randn({cols, rows}, dtype).t() : randn({rows, cols}, dtype);
}

template <typename T>
void expect_reference_order(int64_t m, int64_t n, int64_t k, bool a_t, bool b_t, DType dtype) {
  Tensor a = operand(m, k, a_t, dtype), b = operand(k, n, b_t, dtype);
  Tensor got = matmul(a, b), want = reference_product<T>(a, b);
  EXPECT_TRUE(equal(got, want)) << fmt::format("[{},{}] @ [{},{}] (A transposed: {}, B transposed: {}, {})", m, k,
                                               k, n, a_t, b_t, dtype_name(dtype));
}

TEST(MatmulKernels, EveryPathAddsInTheReferenceOrder) {
  manual_seed(5);
  // m: below, at and past the row groups (4, 3, 2 rows) and the 4-row tiles; n: 1 to 6 vectors of 8
  // floats on the row path (full and partial), then tile widths of 16 (AVX2) and 32 (AVX-512) and
  // their remainders; k: short, one block, exactly 256, and two blocks.
  for (const int64_t m : {2, 3, 4, 5, 7, 9, 13}) {
    for (const int64_t n : {2, 7, 8, 13, 16, 24, 25, 33, 40, 48, 49, 64, 70}) {
      for (const int64_t k : {1, 5, 24, 256, 300}) {
        for (const bool a_t : {false, true}) {
          for (const bool b_t : {false, true}) expect_reference_order<float>(m, n, k, a_t, b_t, DType::Float32);
        }
      }
    }
  }
}

// A transposed A (a weight gradient's xᵀ) is packed 16 register tiles of rows at a time (pack_transposed_a,
// matmul_plan.h): m past one such block and two (96 and 192 rows with AVX2's 6-row tiles, 128 and 256 with
// AVX-512's 8), with a partial last tile, over one and two chain blocks.
TEST(MatmulKernels, TransposedAPackedInBlocksAddsInTheReferenceOrder) {
  manual_seed(10);
  for (const int64_t m : {97, 133, 262}) {
    for (const int64_t n : {16, 70}) {
      for (const int64_t k : {5, 300}) {
        for (const bool b_t : {false, true}) expect_reference_order<float>(m, n, k, true, b_t, DType::Float32);
      }
    }
  }
  expect_reference_order<double>(133, 33, 300, true, false, DType::Float64);
}

// A row-major A is read in place by the tiles, except rows 4 KiB apart (k = 1024 floats), which share L1
// cache sets and are copied kc + 16 apart (pack_a, matmul_plan.h), and a last, partial tile of rows.
TEST(MatmulKernels, RowsOfAReadInPlaceOrCopiedAddInTheReferenceOrder) {
  manual_seed(11);
  for (const int64_t m : {12, 13, 17}) {
    for (const int64_t k : {1000, 1024}) {
      for (const bool b_t : {false, true}) expect_reference_order<float>(m, 70, k, false, b_t, DType::Float32);
    }
  }
  expect_reference_order<double>(13, 33, 512, false, true, DType::Float64);  // 4 KiB rows of doubles
}

TEST(MatmulKernels, DoublesAddInTheReferenceOrder) {
  manual_seed(6);
  for (const int64_t m : {2, 5, 9}) {
    for (const int64_t n : {3, 4, 8, 12, 16, 20, 24, 25, 33}) {  // the row path's 1 to 6 widths, then tiles
      for (const int64_t k : {7, 257}) expect_reference_order<double>(m, n, k, false, true, DType::Float64);
    }
  }
}

TEST(MatmulKernels, AddingOntoAStartingValueFollowsTheReferenceOrder) {
  manual_seed(8);
  for (const int64_t m : {2, 3, 9}) {  // (one output row or column is a dot product: another order)
    for (const int64_t n : {2, 13, 24, 70}) {
      for (const int64_t k : {5, 300}) {
        Tensor a = randn({m, k}), b = randn({n, k}).t(), start = randn({m, n});
        Tensor out = start.clone();
        cpu::batched_matmul(a, b, out, MatmulStructure::dense, /*add_to_out=*/true);
        EXPECT_TRUE(equal(out, reference_product<float>(a, b, start))) << m << " x " << k << " @ " << k << " x " << n;
      }
    }
  }
}

// linear: the bias is the sum's starting value, read in place of C by the first block (addmm's start row),
// for every width of the row path and past it, float and double.
template <typename T> void expect_linear_in_reference_order(DType dtype) {
  for (const int64_t m : {2, 9, 13}) {
    for (const int64_t n : {2, 8, 13, 16, 24, 40, 48, 70}) {
      for (const int64_t k : {5, 300}) {
        Tensor x = randn({m, k}, dtype), w = randn({n, k}, dtype), bias = randn({n}, dtype);
        Tensor want = reference_product<T>(x, w.t(), bias.expand({m, n}));
        EXPECT_TRUE(equal(linear(x, w, bias), want)) << fmt::format("linear [{},{}] -> {} ({})", m, k, n, dtype_name(dtype));
      }
    }
  }
}

TEST(MatmulKernels, LinearStartsFromTheBiasInTheReferenceOrder) {
  testing_helpers::PoisonedBuffers poison;  // what a kernel reads from C instead of the bias shows
  manual_seed(9);
  expect_linear_in_reference_order<float>(DType::Float32);
  expect_linear_in_reference_order<double>(DType::Float64);
}

TEST(MatmulKernels, BatchedProductsAddInTheReferenceOrder) {
  manual_seed(7);
  Tensor a = randn({3, 9, 24}), b = randn({3, 24, 13}).transpose(1, 2).contiguous().transpose(1, 2);
  Tensor got = matmul(a, b);
  for (int64_t item = 0; item < 3; ++item) EXPECT_TRUE(equal(got[item], reference_product<float>(a[item], b[item])));
}

TEST(MatmulKernels, TheProductTallyCountsEachProductsMultiplyAddsWhileOn) {
  Tensor a = testing_helpers::randish({2, 5, 3}, 81, -1, 1, DType::Float32);
  Tensor b = testing_helpers::randish({3, 4}, 82, -1, 1, DType::Float32);
  cpu::take_product_tally();
  matmul(a, b);  // off: not counted
  EXPECT_EQ(cpu::take_product_tally().products, 0);
  cpu::set_product_tally(true);
  matmul(a, b);                                    // 2 items of 5 x 4 x 3
  matmul(a.select(0, 0), b.narrow(1, 0, 2));       // 5 x 2 x 3
  cpu::set_product_tally(false);
  const cpu::ProductTally tally = cpu::take_product_tally();
  EXPECT_EQ(tally.products, 2);
  EXPECT_EQ(tally.flops, 2.0 * (2 * 5 * 4 * 3 + 5 * 2 * 3));
  EXPECT_GT(tally.seconds, 0.0);
  EXPECT_EQ(cpu::take_product_tally().products, 0);  // taking it started it again from zero
}

}  // namespace
