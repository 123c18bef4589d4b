// test_threads.cpp — the thread count changes speed, never results: big products are split by rows and
// batch items, and each output entry is computed the same way whichever thread computes it.
#include <gtest/gtest.h>

#include "autograd/autograd.h"
#include "autograd/cpu/kernels/loops.h"
#include "optim/optim.h"
#include "test_process.h"

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

// ---- elementwise kernels split over threads ----

namespace {

// The element offsets a plan visits, in order, when walking elements [begin, end).
std::vector<int64_t> visited(const cpu::LoopPlan<1>& plan, int64_t begin, int64_t end) {
  std::vector<int64_t> offsets;
  cpu::for_each_run_in(plan, begin, end, [&](const auto& off, int64_t n, const auto& st) {
    for (int64_t i = 0; i < n; ++i) offsets.push_back(off[0] + i * st[0]);
  });
  return offsets;
}

TEST(Threads, AnyCutOfTheIterationVisitsTheSameElementsInTheSameOrder) {
  // A transposed, sliced 3-D view: three loop dims survive merging, inner runs of 5.
  const Shape shape{3, 4, 5};
  const Shape strides{2, 60, 7};
  auto plan = cpu::make_plan<1>(shape, {&strides});
  std::vector<int64_t> naive;
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t k = 0; k < 5; ++k) naive.push_back(i * 2 + j * 60 + k * 7);
  ASSERT_EQ(visited(plan, 0, 60), naive);
  for (int64_t a = 0; a <= 60; a += 7) {
    for (int64_t b = a; b <= 60; b += 11) {
      std::vector<int64_t> joined = visited(plan, 0, a), middle = visited(plan, a, b), last = visited(plan, b, 60);
      joined.insert(joined.end(), middle.begin(), middle.end());
      joined.insert(joined.end(), last.begin(), last.end());
      EXPECT_EQ(joined, naive) << "cut at " << a << " and " << b;
    }
  }
}

template <typename F> Tensor on_threads(int threads, F f) {
  ThreadCount scope(threads);
  return f();
}

// At least as wide as tall: the threads split the columns (each packs only its share of B), in both
// numerics, with a start row (linear's bias) and with tall ones split on whole register tiles beside it.
TEST(Threads, WideProductsSplitByColumnsAreBitIdentical) {
  manual_seed(14);
  const Tensor a = randn({40, 300}), b = randn({300, 1000}), x = randn({57, 100}), w = randn({701, 100}),
               bias = randn({701}), grads = randn({2100, 256}), inputs = randn({2100, 1000}), tall = randn({700, 257}),
               c = randn({257, 300}), square = randn({256, 700});
  for (Numerics mode : {Numerics::exact, Numerics::fast}) {
    NumericsGuard guard(mode);
    EXPECT_TRUE(equal(product(1, a, b), product(2, a, b))) << numerics_name(mode);
    EXPECT_TRUE(equal(product(1, a, b), product(3, a, b))) << numerics_name(mode);
    auto with_bias = [&] { return linear(x, w, bias); };
    EXPECT_TRUE(equal(on_threads(1, with_bias), on_threads(2, with_bias))) << numerics_name(mode);
    // a weight gradient gᵀ·x: A a transposed view, 256 rows (not a whole number of 12-row tiles)
    EXPECT_TRUE(equal(product(1, grads.t(), inputs), product(2, grads.t(), inputs))) << numerics_name(mode);
    // a square weight gradient (700 x 700: split by columns too)
    EXPECT_TRUE(equal(product(1, square.t(), square), product(2, square.t(), square))) << numerics_name(mode);
    EXPECT_TRUE(equal(product(1, tall, c), product(2, tall, c))) << numerics_name(mode);
  }
}

// One row against a weight (a cached generation step's x·Wᵀ) is split by columns once the weight is big
// enough to take longer to read than threads take to start, though its multiply-adds are few (here 420,000,
// under the 2^20 that a product of many rows needs): each thread's columns come out as one thread's would.
TEST(Threads, OneRowAgainstAWeightSplitsItsColumnsBitIdentically) {
  manual_seed(15);
  const Tensor row = randn({1, 600}), weight = randn({700, 600}), bias = randn({700}), b = randn({600, 700});
  for (Numerics mode : {Numerics::exact, Numerics::fast}) {
    NumericsGuard guard(mode);
    EXPECT_TRUE(equal(product(1, row, weight.t()), product(2, row, weight.t()))) << numerics_name(mode);
    EXPECT_TRUE(equal(product(1, row, b), product(2, row, b))) << numerics_name(mode);
    auto with_bias = [&] { return linear(row, weight, bias); };
    EXPECT_TRUE(equal(on_threads(1, with_bias), on_threads(2, with_bias))) << numerics_name(mode);
    const Tensor two_rows = randn({2, 600});  // 840,000 multiply-adds: split the same way
    EXPECT_TRUE(equal(product(1, two_rows, b), product(3, two_rows, b))) << numerics_name(mode);
  }
}

// layer_norm splits its rows over threads, and its weight and bias gradients their columns.
TEST(Threads, LayerNormForwardAndBackwardAreBitIdentical) {
  manual_seed(15);
  const Tensor x0 = randn({600, 96}), w0 = randn({96}), b0 = randn({96}), dy = randn({600, 96});
  auto run = [&] {
    Tensor x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true), b = b0.clone().requires_grad_(true);
    Tensor y = layer_norm(x, {96}, w, b, 1e-5);
    y.backward(dy);
    return cat({y.detach().flatten(), x.grad().flatten(), w.grad(), b.grad()}, 0);
  };
  for (Numerics mode : {Numerics::exact, Numerics::fast}) {
    NumericsGuard guard(mode);
    EXPECT_TRUE(equal(on_threads(1, run), on_threads(2, run))) << (mode == Numerics::fast ? "fast" : "exact");
  }
}

// Adam splits a big parameter's elements over threads.
TEST(Threads, AdamStepsAreBitIdentical) {
  manual_seed(16);
  const Tensor p0 = randn({300, 257}), g0 = randn({300, 257});
  auto steps = [&] {
    Tensor p = p0.clone().requires_grad_(true);
    optim::Adam adam({p}, {.lr = 0.01, .weight_decay = 0.1, .amsgrad = true});
    for (int i = 0; i < 3; ++i) {
      p.set_grad(g0 * double(i + 1));
      adam.step();
    }
    return p.detach();
  };
  EXPECT_TRUE(equal(on_threads(1, steps), on_threads(2, steps)));
}

// tril_matmul (== tril(p) @ v) first checks whether p is zero above the diagonal, and copies tril(p) when
// not (its kernels read tiles that straddle the diagonal). The check scans the matrices on two threads:
// a nonzero in the last matrix still counts.
TEST(Threads, TrilMatmulSeesANonzeroAboveTheDiagonalInAnyMatrix) {
  manual_seed(17);
  Tensor p = randn({64, 128, 128}).tril(), v = randn({64, 128, 16});
  auto causal = [&] { return tril_matmul(p, v); };
  EXPECT_TRUE(equal(on_threads(2, causal), on_threads(1, [&] { return matmul(p.tril(), v); })));
  p.select(0, 63).select(0, 2).select(0, 100).fill_(0.5);
  EXPECT_TRUE(equal(on_threads(2, causal), on_threads(1, [&] { return matmul(p.tril(), v); })));
}

TEST(Threads, BigElementwiseAndSoftmaxAreBitIdenticalOnOneAndTwoThreads) {
  manual_seed(12);
  Tensor x = randn({70, 33, 40}), y = randn({40, 33}).t();  // y broadcasts along dim 0 of x
  Tensor sliced = x.slice(2, 1, 39).transpose(0, 1);        // non-contiguous, inner runs of 38
  auto elementwise = [&] { return (x * y + x / 3.0).exp().slice(2, 1, 39).transpose(0, 1) - sliced; };
  EXPECT_TRUE(equal(on_threads(1, elementwise), on_threads(2, elementwise)));
  Tensor mask = randn({33, 40}) > 0.5;
  auto masked = [&] { return x.masked_fill(mask, -1e9).contiguous(); };
  EXPECT_TRUE(equal(on_threads(1, masked), on_threads(2, masked)));
  for (int64_t dim : {0, 1, 2}) {
    auto soft = [&] { return softmax(sliced, dim); };
    EXPECT_TRUE(equal(on_threads(1, soft), on_threads(2, soft))) << "softmax over dim " << dim;
  }
}

// GELU's blocks of 256 and causal_scores' matrices are split over threads (parallel_ranges); each
// element is computed alone, so forward and backward have the same bits on one and two threads.
TEST(Threads, GeluAndCausalScoresAreBitIdentical) {
  manual_seed(14);
  Tensor x = randn({257, 129}), dy = randn({257, 129});  // not a whole number of blocks
  for (Numerics mode : {Numerics::exact, Numerics::fast}) {
    NumericsGuard guard(mode);
    for (const char* approximate : {"tanh", "none"}) {
      auto forward = [&] { return gelu(x, approximate); };
      auto backward = [&] {
        Tensor leaf = x.detach().requires_grad_();
        gelu(leaf, approximate).backward(dy);
        return leaf.grad();
      };
      EXPECT_TRUE(equal(on_threads(1, forward), on_threads(2, forward))) << numerics_name(mode) << " " << approximate;
      EXPECT_TRUE(equal(on_threads(1, backward), on_threads(2, backward))) << numerics_name(mode) << " " << approximate;
    }
  }
  Tensor q = randn({2, 3, 128, 16}), k = randn({2, 3, 128, 16});
  auto scores = [&] { return causal_scores(q, k, 4.0); };
  EXPECT_TRUE(equal(on_threads(1, scores), on_threads(2, scores)));
}

}  // namespace

// Big sums over rows (a D 256 model's bias gradients) split their columns over threads; each column is
// still added up in one thread's order, so the bits cannot change.
TEST(Threads, BigColumnSumsAreBitIdenticalOnOneAndTwoThreads) {
  manual_seed(13);
  for (Shape shape : {Shape{4096, 256}, Shape{300, 1000}, Shape{40, 2000}, Shape{5000, 7}}) {
    Tensor x = randn(shape);
    auto column_sums = [&] { return x.sum(0); };
    EXPECT_TRUE(equal(on_threads(1, column_sums), on_threads(2, column_sums))) << shape_to_string(shape);
    Tensor wide = randn({3, shape[0], shape[1]});
    auto leading = [&] { return wide.sum_to(shape); };
    EXPECT_TRUE(equal(on_threads(1, leading), on_threads(2, leading))) << shape_to_string(shape);
  }
}

// ---- the command line's OpenMP wait ----

namespace {

// What libgomp says it took, as it starts (OMP_DISPLAY_ENV=verbose, on stderr), in a run of the command
// line with the wait variables removed and then `env` set: how many times it started (main.cpp runs the
// program again to choose the wait), and the last start's wait policy and spin count.
struct OpenMPWait {
  int starts = 0;
  std::string policy, spin_count;
};

std::string last_value(const std::string& text, const std::string& name) {
  const std::string key = name + " = '";
  const size_t at = text.rfind(key);
  if (at == std::string::npos) return "";
  const size_t from = at + key.size();
  return text.substr(from, text.find('\'', from) - from);
}

OpenMPWait openmp_wait(const std::string& env) {
  const testing_process::Shell r = testing_process::shell("env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT OMP_DISPLAY_ENV=verbose " +
                                                          env + " " + SCRATCHGRAD_BIN_DIR + "/scratchgrad --help");
  EXPECT_EQ(r.status, 0) << r.command << "\n" << r.err;
  return {testing_process::count(r.err, "OPENMP DISPLAY ENVIRONMENT BEGIN"), last_value(r.err, "OMP_WAIT_POLICY"),
          last_value(r.err, "GOMP_SPINCOUNT")};
}

}  // namespace

// On a machine with more runnable jobs than cores, OpenMP threads that spin long while they wait take the
// cores their partners need: the command line makes them spin 5,000 turns before they sleep (libgomp's own
// default is 300,000) unless the user chose a wait, which is then kept as it is. (Timing it is
// bench/oversubscribed.sh's job.)
TEST(Threads, TheCommandLineSpinsBrieflyUnlessTheUserChoseAWait) {
  if (testing_process::emulated_on_x86())
    GTEST_SKIP() << "under qemu-user the command line cannot run itself again (the host cannot run its aarch64 file)";
  const OpenMPWait chosen_by_us = openmp_wait("");
  if (chosen_by_us.starts == 0) GTEST_SKIP() << "the OpenMP runtime is not libgomp: it does not say what it took";
  EXPECT_EQ(chosen_by_us.starts, 2);  // libgomp's own default first, then the program run again
  EXPECT_EQ(chosen_by_us.spin_count, "5000");

  const OpenMPWait active = openmp_wait("OMP_WAIT_POLICY=active");
  EXPECT_EQ(active.starts, 1);
  EXPECT_EQ(active.policy, "ACTIVE");
  const OpenMPWait passive = openmp_wait("OMP_WAIT_POLICY=passive");
  EXPECT_EQ(passive.starts, 1);
  EXPECT_EQ(passive.spin_count, "0");
  const OpenMPWait spins = openmp_wait("GOMP_SPINCOUNT=1234");
  EXPECT_EQ(spins.starts, 1);
  EXPECT_EQ(spins.spin_count, "1234");
}
