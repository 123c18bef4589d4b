// Every AVX-512 kernel (exact matmul tiles, exp_floats, row maxima, elementwise loops, masked_fill's
// select, bias-gradient sums, Adam, flash attention in both numerics) has a baseline twin that
// SCRATCHGRAD_NO_AVX512=1 selects. Training the character model a few steps touches all of them; this test
// trains it here and in a second copy of this test program started with SCRATCHGRAD_NO_AVX512=1, and the
// two must end with the same bits in every parameter.
// Most have an AVX2 twin too (for CPUs with AVX2 but not AVX-512, like AMD Zen 3), and
// SCRATCHGRAD_NO_AVX2=1 selects the baseline ones instead: the second test compares those two, in exact
// numerics (without AVX2 the fast numerics' products have no fused multiply-add, so other bits).
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "nn/nn.h"
#include "tests/cpu_features.h"
#include "optim/optim.h"
#include "test_process.h"

using namespace autograd;

namespace {

// A few Adam steps of a MiniSelfAttention; every parameter's bits afterwards, as text.
std::string train_and_dump(const nn::CharModelConfig& config, int64_t batch, int steps) {
  manual_seed(3);
  nn::MiniSelfAttention model(config);
  optim::Adam opt(model.parameters(), {.lr = 0.01});
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 4 * config.context + 10; ++i) ids.push_back((i * 7 + i / 3) % config.vocab);
  Tensor data = from_vector(ids, {int64_t(ids.size())});
  for (int s = 0; s < steps; ++s) {
    auto [xb, yb] = nn::random_windows(data, batch, config.context);
    Tensor loss = cross_entropy(model(xb).view({-1, config.vocab}), yb.view({-1}));
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  std::ostringstream out;
  for (auto& [name, p] : model.named_parameters()) {
    out << name;
    for (float v : p.to_vector<float>()) out << ' ' << std::bit_cast<uint32_t>(v);
    out << '\n';
  }
  return out.str();
}

// Sums over the rows of contiguous matrices (bias gradients), at row counts that use every level of
// the cascade, and column counts that leave partial vectors.
std::string row_sums() {
  std::ostringstream out;
  manual_seed(4);
  for (int64_t rows : {2, 17, 128, 300, 5000, 70000})
    for (int64_t cols : {3, 7, 24, 33, 100}) {
      Tensor x = randn({rows, cols});
      for (float v : x.sum(0).to_vector<float>()) out << std::bit_cast<uint32_t>(v) << ' ';
      out << '\n';
    }
  return out.str();
}

// scaled_dot_product_attention's kernels (their AVX-512 and AVX2 builds, exact and fast): output and
// gradients of q, k, v, causal with T past one block, and full with S != T and d, dv not whole vectors.
std::string flash_attention(std::initializer_list<Numerics> numerics) {
  std::ostringstream out;
  for (Numerics n : numerics) {
    NumericsGuard guard(n);
    for (DType dtype : {DType::Float32, DType::Float64}) {
      manual_seed(5);
      for (bool causal : {true, false}) {
        Tensor q = randn({2, 100, 20}, dtype).requires_grad_(), k = randn({2, causal ? 100 : 70, 20}, dtype).requires_grad_();
        Tensor v = randn({2, causal ? 100 : 70, 13}, dtype).requires_grad_();
        Tensor o = scaled_dot_product_attention(q, k, v, causal);
        o.backward(randn(o.shape(), dtype));
        for (const Tensor& t : {o.detach(), q.grad(), k.grad(), v.grad()}) {
          for (double x : t.to_vector<double>()) out << std::bit_cast<uint64_t>(x) << ' ';
          out << '\n';
        }
      }
    }
  }
  return out.str();
}

// The GPT's elementwise kernels (cpu/kernels/gelu.cpp, cpu/kernels/normalization.cpp): GELU forward and backward,
// layer_norm forward and backward, rows whose length is and is not a whole number of vectors; and its
// one-row products.
std::string gpt_kernels(Numerics numerics) {
  std::ostringstream out;
  NumericsGuard guard(numerics);
  manual_seed(9);
  for (int64_t n : {256, 100}) {
    Tensor x = (randn({37, n}) * 4.0).requires_grad_(), w = randn({n}).requires_grad_(), b = randn({n}).requires_grad_();
    Tensor h = gelu(x, "tanh"), y = layer_norm(h, {n}, w, b);
    y.backward(randn(y.shape()));
    for (const Tensor& t : {h.detach(), y.detach(), x.grad(), w.grad(), b.grad()}) {
      for (float v : t.contiguous().to_vector<float>()) out << std::bit_cast<uint32_t>(v) << ' ';
      out << '\n';
    }
  }
  // products with one row of A (a generation step with a KV cache; in fast numerics cpu/kernels/matmul_fast.cpp's
  // gemv): a Linear's transposed weight with a bias, and a row-major B, with partial vectors and blocks
  for (auto [n, k] : {std::pair<int64_t, int64_t>{100, 300}, {1100, 37}}) {
    const Tensor x = randn({1, k}), w = randn({n, k}), b = randn({n});
    for (const Tensor& t : {linear(x, w, b), matmul(x, w.t().contiguous())}) {
      for (float v : t.to_vector<float>()) out << std::bit_cast<uint32_t>(v) << ' ';
      out << '\n';
    }
  }
  return out.str();
}

// Everything, or (exact_only) only what runs in exact numerics; the character model trains in exact
// numerics (the test program's default).
std::string all_results(bool exact_only) {
  std::string kernels = row_sums() + gpt_kernels(Numerics::exact);
  kernels += exact_only ? flash_attention({Numerics::exact}) : flash_attention({Numerics::exact, Numerics::fast}) +
                                                                  gpt_kernels(Numerics::fast);
  return kernels + train_and_dump({.vocab = 13, .dim = 24, .context = 8, .heads = 1}, 16, 4) +  // the seed size
         train_and_dump({.vocab = 37, .dim = 40, .context = 20, .heads = 2}, 6, 3) +           // wide rows, 2 heads
         train_and_dump({.vocab = 70, .dim = 72, .context = 40, .heads = 1}, 3, 2);            // past one causal block
}

// The results of a second copy of this program, started with `env` (exact_only: the results in exact
// numerics only).
std::string results_of_a_second_process(const std::string& env, bool exact_only) {
  const auto file = testing_process::scratch("cpu_paths_results.txt");
  const auto run = testing_process::shell(env + " SCRATCHGRAD_PATHS_TEST_OUT=" + file.string() +
                                          (exact_only ? " SCRATCHGRAD_PATHS_TEST_EXACT_ONLY=1" : "") + " /proc/" +
                                          std::to_string(::getpid()) +
                                          "/exe --gtest_filter=Avx512Paths.WriteResultsForTheComparison");
  EXPECT_EQ(run.status, 0) << run.out << run.err;
  return testing_process::slurp(file);
}

}  // namespace

// Run by the tests below in a second process: writes the results to a file.
TEST(Avx512Paths, WriteResultsForTheComparison) {
  const char* out = std::getenv("SCRATCHGRAD_PATHS_TEST_OUT");
  if (!out) GTEST_SKIP() << "only run by the tests below, in a second process";
  std::ofstream(out) << all_results(std::getenv("SCRATCHGRAD_PATHS_TEST_EXACT_ONLY") != nullptr);
}

TEST(Avx512Paths, SameBitsAsTheBaselineKernels) {
  if (std::getenv("SCRATCHGRAD_NO_AVX512")) GTEST_SKIP() << "SCRATCHGRAD_NO_AVX512 is set: nothing to compare";
  if (!testing_helpers::cpu_has_avx512f()) GTEST_SKIP() << "no AVX-512 on this CPU";
  const std::string here = all_results(false);
  const std::string baseline = results_of_a_second_process("SCRATCHGRAD_NO_AVX512=1", false);
  ASSERT_FALSE(baseline.empty());
  EXPECT_TRUE(here == baseline) << "the AVX-512 kernels and their baseline twins trained to different bits";
}

TEST(Avx2Paths, SameBitsAsTheBaselineKernelsInExactNumerics) {
  if (std::getenv("SCRATCHGRAD_NO_AVX512") || std::getenv("SCRATCHGRAD_NO_AVX2"))
    GTEST_SKIP() << "SCRATCHGRAD_NO_AVX512 or SCRATCHGRAD_NO_AVX2 is set: the test sets them itself";
  if (!testing_helpers::cpu_has_avx2()) GTEST_SKIP() << "no AVX2 on this CPU";
  const std::string avx2 = results_of_a_second_process("SCRATCHGRAD_NO_AVX512=1", true);
  const std::string baseline = results_of_a_second_process("SCRATCHGRAD_NO_AVX2=1", true);
  ASSERT_FALSE(avx2.empty());
  EXPECT_TRUE(avx2 == baseline) << "the AVX2 kernels and their baseline twins trained to different bits";
}
