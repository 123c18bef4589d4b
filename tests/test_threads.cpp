// test_threads.cpp — the thread count changes speed, never results: big products are split by rows and
// batch items, and each output entry is computed the same way whichever thread computes it.
#include <gtest/gtest.h>

#include "autograd/autograd.h"

using namespace autograd;

namespace {

struct ThreadCount {
  explicit ThreadCount(int n) : previous(get_num_threads()) { set_num_threads(n); }
  ~ThreadCount() { set_num_threads(previous); }
  int previous;
};

Tensor product(int threads, const Tensor& a, const Tensor& b) {
  ThreadCount scope(threads);
  return matmul(a, b);
}

TEST(Threads, BigProductsAreBitIdenticalOnOneAndTwoThreads) {
  manual_seed(11);
  Tensor a = randn({300, 257}), b = randn({257, 190});  // 2-D, above the parallel threshold, odd sizes
  EXPECT_TRUE(equal(product(1, a, b), product(2, a, b)));
  Tensor qa = randn({6, 128, 64}), kb = randn({6, 64, 128});  // a batch of attention-sized products
  EXPECT_TRUE(equal(product(1, qa, kb), product(2, qa, kb)));
  Tensor bt = randn({190, 257}).t();  // a transposed operand
  EXPECT_TRUE(equal(product(1, a, bt), product(3, a, bt)));
}

TEST(Threads, SetNumThreadsIsRemembered) {
  ThreadCount scope(2);
  EXPECT_EQ(get_num_threads(), 2);
  set_num_threads(0);  // below 1 means 1
  EXPECT_EQ(get_num_threads(), 1);
}

}  // namespace
