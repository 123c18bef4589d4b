// test_fast_numerics.cpp — the two numerics (autograd/numerics.h): the switch itself, and the fast
// products (cpu/kernels/matmul_fast.cpp) against the exact ones.
//
// Fast numerics may differ from exact in the last bits, so they are held to the error bound of a sum of
// products instead of to bits: |fast − exact| ≤ 2·k·u·Σ_p |a_ip·b_pj| for each entry (u the unit
// roundoff; both results are within k·u·Σ|a·b| of the true sum). They must still be deterministic and
// independent of the thread count, and skipping known zeros (causal attention) must not move a bit.
// ctest also reruns the gradcheck suites with SCRATCHGRAD_NUMERICS=fast (tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "autograd/cpu/runtime/runtime.h"
#include "nn/nn.h"
#include "tests/cpu_features.h"
#include "tests/test_helpers.h"

namespace {

using namespace autograd;
using testing_helpers::leaf;
using testing_helpers::randish;

using testing_helpers::cpu_has_fma;

Tensor product_in(Numerics mode, const Tensor& a, const Tensor& b) {
  NumericsGuard guard(mode);
  return matmul(a, b);
}

// Every entry of fast within 2·k·u·(|A|·|B|) of exact (computed in float64, which is exact enough here).
void expect_within_product_bound(const Tensor& a, const Tensor& b, const std::string& what) {
  const Tensor fast = product_in(Numerics::fast, a, b);
  const Tensor exact = product_in(Numerics::exact, a, b);
  const double u = a.dtype() == DType::Float32 ? std::ldexp(1.0, -24) : std::ldexp(1.0, -53);
  const int64_t k = a.size(-1);
  const Tensor scale = matmul(a.to(DType::Float64).abs(), b.to(DType::Float64).abs());
  const std::vector<double> f = fast.to_vector<double>(), e = exact.to_vector<double>(), s = scale.to_vector<double>();
  ASSERT_EQ(f.size(), e.size()) << what;
  int64_t differing = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    ASSERT_LE(std::abs(f[i] - e[i]), 2.0 * double(k) * u * s[i]) << what << ": entry " << i;
    differing += f[i] != e[i];
  }
  ::testing::Test::RecordProperty(what, int(differing));  // how many entries differ from exact, in the XML report
}

// ---------------------------------------------------------------- the switch

TEST(Numerics, SetGuardAndParse) {
  const Numerics before = numerics();
  set_numerics(Numerics::fast);
  EXPECT_EQ(numerics(), Numerics::fast);
  {
    NumericsGuard exact(Numerics::exact);
    EXPECT_EQ(numerics(), Numerics::exact);
    {
      NumericsGuard fast(Numerics::fast);
      EXPECT_EQ(numerics(), Numerics::fast);
    }
    EXPECT_EQ(numerics(), Numerics::exact);
    // a guard is this thread's: another thread sees the process-wide setting
    Numerics seen = Numerics::exact;
    std::thread([&] { seen = numerics(); }).join();
    EXPECT_EQ(seen, Numerics::fast);
  }
  EXPECT_EQ(numerics(), Numerics::fast);
  set_numerics(before);

  EXPECT_EQ(parse_numerics("exact"), Numerics::exact);
  EXPECT_EQ(parse_numerics("fast"), Numerics::fast);
  EXPECT_STREQ(numerics_name(Numerics::exact), "exact");
  EXPECT_STREQ(numerics_name(Numerics::fast), "fast");
  EXPECT_THROW_WITH(parse_numerics("quick", "--numerics"), std::invalid_argument, "--numerics", "'quick'",
                    "exact or fast");
  EXPECT_THROW_WITH(set_numerics(static_cast<Numerics>(7)), std::invalid_argument, "set_numerics", "7");
}

// ---------------------------------------------------------------- fast products

// a0·b0 + a1·b1 with a0·b0 = 1 + 2⁻¹¹ (rounded) and a1·b1 = −(1 + 2⁻¹¹ + 2⁻²⁴) (exactly, in real
// numbers). Rounding the second product first (exact) gives 0; one fused multiply-add keeps −2⁻²⁴.
// Every entry of a [40, 70] product meets it, in every tile of the micro-kernel. Products at most 48
// columns wide keep the exact kernels in fast numerics too (cpu/kernels/matmul.cpp says why), so those round twice.
TEST(FastNumerics, ProductsUseFusedMultiplyAdds) {
  const float e = std::ldexp(1.0f, -12);
  const Tensor a = from_vector(std::vector<float>{1 + e, -(1 + e)}, {1, 2}).expand({40, 2}).contiguous();
  const Tensor b = from_vector(std::vector<float>{1 + e, 1 + e}, {2, 1}).expand({2, 70}).contiguous();
  EXPECT_EQ(product_in(Numerics::exact, a, b).abs().sum().item<float>(), 0.0f);
  EXPECT_EQ(product_in(Numerics::fast, a.slice(1, 0, 2), b.slice(1, 0, 48)).abs().sum().item<float>(), 0.0f);
  if (!cpu_has_fma()) GTEST_SKIP() << "this CPU has no FMA: fast products are a multiply and an add";
  const Tensor c = product_in(Numerics::fast, a, b);
  EXPECT_EQ(c.abs().max().item<float>(), std::ldexp(1.0f, -24));
  EXPECT_EQ(c.abs().sum().item<float>(), 40 * 70 * std::ldexp(1.0f, -24));
}

TEST(FastNumerics, ProductsAgreeWithExactWithinTheirErrorBound) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    const std::string type = dtype == DType::Float32 ? "float32" : "float64";
    uint32_t seed = 100;
    // narrow (n <= 48), one register tile, several tiles with edges, K over one 256-deep block
    for (auto [m, n, k] : {std::array<int64_t, 3>{1, 1, 7}, {3, 5, 2}, {8, 24, 24}, {13, 48, 9}, {12, 32, 256},
                           {29, 67, 300}, {100, 130, 513}, {64, 256, 256}, {20, 1100, 40}}) {  // (1100: over two 512-column blocks of B)
      const Tensor a = randish({m, k}, seed++, -1, 1, dtype), b = randish({k, n}, seed++, -1, 1, dtype);
      const std::string shape = fmt::format("{} {}x{}x{}", type, m, n, k);
      expect_within_product_bound(a, b, shape);
      expect_within_product_bound(a.mT().contiguous().mT(), b, shape + " A column-major");
      expect_within_product_bound(a, b.mT().contiguous().mT(), shape + " B column-major");
    }
    // batched, broadcast over the batch, and sliced (non-contiguous) operands
    const Tensor a = randish({3, 4, 37, 50}, seed++, -1, 1, dtype), b = randish({4, 50, 45}, seed++, -1, 1, dtype);
    expect_within_product_bound(a, b, type + " batched with broadcast");
    const Tensor big = randish({90, 90}, seed++, -1, 1, dtype);
    expect_within_product_bound(big.slice(0, 1, 90, 3), big.slice(1, 0, 90, 2), type + " sliced");  // [30, 90] @ [90, 45]
  }
}

TEST(FastNumerics, LinearWithBiasAgreesWithExact) {
  // addmm: the bias is the sum's starting value, then every 256-deep block is added
  const Tensor x = randish({50, 300}, 1, -1, 1, DType::Float32), w = randish({70, 300}, 2, -1, 1, DType::Float32);
  const Tensor bias = randish({70}, 3, -1, 1, DType::Float32);
  Tensor fast, exact;
  {
    NumericsGuard g(Numerics::fast);
    fast = linear(x, w, bias);
  }
  {
    NumericsGuard g(Numerics::exact);
    exact = linear(x, w, bias);
  }
  const double bound = 2.0 * 301 * std::ldexp(1.0, -24) * 301;  // |x|, |w|, |bias| < 1
  EXPECT_LE((fast.to(DType::Float64) - exact.to(DType::Float64)).abs().max().item<double>(), bound);
}

// The fast kernel's entries depend only on their row, column and k: splitting rows over threads, or a
// batch into items, changes no bit; and causal attention's skipped zeros move none either.
TEST(FastNumerics, ThreadsAndSkippedZerosChangeNoBit) {
  NumericsGuard fast(Numerics::fast);
  const int before = get_num_threads();
  const Tensor a = randish({8, 130, 257}, 4, -1, 1, DType::Float32), b = randish({8, 257, 140}, 5, -1, 1, DType::Float32);
  set_num_threads(1);
  const Tensor one = matmul(a, b);
  set_num_threads(2);
  const Tensor two = matmul(a, b);
  set_num_threads(before);
  testing_helpers::expect_same_float_bits(two, one, "2 threads against 1");
  const Tensor item3 = matmul(a.select(0, 3), b.select(0, 3));
  testing_helpers::expect_same_float_bits(item3, one.select(0, 3), "one item alone against the batch");

  const Tensor q = randish({2, 3, 70, 16}, 6, -1, 1, DType::Float32), k = randish({2, 3, 70, 16}, 7, -1, 1, DType::Float32);
  const Tensor v = randish({2, 3, 70, 16}, 8, -1, 1, DType::Float32);
  const Tensor mask = ones({70, 70}, DType::Bool).triu(1);
  const Tensor dense = (matmul(q, k.mT()) / 4.0).masked_fill(mask, -std::numeric_limits<double>::infinity());
  testing_helpers::expect_same_float_bits(causal_scores(q, k, 4.0), dense, "causal_scores");
  const Tensor p = softmax(dense, -1);
  testing_helpers::expect_same_float_bits(tril_matmul(p, v), matmul(p, v), "tril_matmul");
  // past one 512-column block of packed B
  const Tensor long_q = randish({1, 600, 8}, 9, -1, 1, DType::Float32), long_k = randish({1, 600, 8}, 10, -1, 1, DType::Float32);
  const Tensor long_dense = matmul(long_q, long_k.mT()).masked_fill(ones({600, 600}, DType::Bool).triu(1),
                                                                   -std::numeric_limits<double>::infinity());
  testing_helpers::expect_same_float_bits(causal_scores(long_q, long_k, 1.0), long_dense, "causal_scores, T 600");
  const Tensor long_p = softmax(long_dense, -1), long_v = randish({1, 600, 600}, 11, -1, 1, DType::Float32);
  testing_helpers::expect_same_float_bits(tril_matmul(long_p, long_v), matmul(long_p, long_v), "tril_matmul, T 600");
}

// B transposed (x @ Wᵀ, q @ kᵀ) is packed through register transposes, VL x VL values at a time, the
// terms past the last whole VL one by one; B row-major is packed row by row; a transposed A is packed, a
// row-major one read in place. All must give the product the same numbers: every entry is the same chain. Sizes: edge panels (n = 100 is 3 panels of 32 and
// 4 columns), a term count that leaves a remainder (k = 300: blocks of 256 and 44 = 2·16 + 12), float
// and double (16 and 8 lanes with AVX-512).
TEST(FastNumerics, TransposedOperandsChangeNoBit) {
  NumericsGuard fast(Numerics::fast);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    const Tensor a = randish({37, 300}, 12, -1, 1, dtype), wt = randish({100, 300}, 13, -1, 1, dtype);
    const Tensor packed_transposed = matmul(a, wt.t()), packed_by_rows = matmul(a, wt.t().contiguous());
    EXPECT_TRUE(equal(packed_transposed, packed_by_rows)) << dtype_name(dtype);
    // A transposed (a weight gradient's xᵀ), packed 16 tiles of rows at a time: rows past one block and
    // two of them (96 and 192 rows with AVX2's 6-row tiles, 192 and 384 with AVX-512's 12), against the
    // same A laid out by rows
    const Tensor xt = randish({300, 400}, 16, -1, 1, dtype).t();
    EXPECT_TRUE(equal(matmul(xt, wt.t()), matmul(xt.contiguous(), wt.t()))) << dtype_name(dtype) << ", A transposed";
    // with A transposed, B is one block of all its columns up to 1024 (600), else blocks of 256 (1100)
    for (int64_t n : {600, 1100}) {
      const Tensor wide = randish({n, 300}, 17, -1, 1, dtype);
      EXPECT_TRUE(equal(matmul(xt, wide.t()), matmul(xt.contiguous(), wide.t())))
          << dtype_name(dtype) << ", A transposed, n " << n;
    }
  }
}

// A product with one row of A (each token of a cached generation) skips the packing and reads B in place
// (cpu/kernels/matmul_fast.cpp's gemv), adding every entry's terms in the general kernel's order: a row alone has
// the bits it has among other rows. B transposed (a Linear's weight), row-major, and strided both ways (read
// one value at a time); k and n that leave partial vectors and blocks (k 300 = 256 + 44, n 100 = 6·16 + 4);
// the general kernel's two orders of blocks, each over several blocks of terms and of columns (n 1100, k 513
// along the terms first; n 300, k 700 along the columns first);
// addmm's bias; 1 and 2 threads (2304 x 768, split over columns); float and double; and an empty sum.
TEST(FastNumerics, OneRowProductsHaveTheBitsOfTheGeneralKernel) {
  NumericsGuard fast(Numerics::fast);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    uint32_t seed = 40;
    for (auto [n, k] : {std::array<int64_t, 2>{49, 7}, {100, 300}, {64, 17}, {1100, 513}, {300, 700}, {77, 0}}) {
      const std::string shape = fmt::format("{} n {} k {}", dtype_name(dtype), n, k);
      const Tensor rows = randish({5, k}, seed++, -1, 1, dtype), row = rows.slice(0, 2, 3);
      const Tensor w = randish({n, k}, seed++, -1, 1, dtype), bias = randish({n}, seed++, -1, 1, dtype);
      const Tensor wide = randish({2 * k, 2 * n}, seed++, -1, 1, dtype);
      for (const auto& [b, layout] : {std::pair{w.t(), "transposed"}, {w.t().contiguous(), "row-major"},
                                      {wide.slice(0, 0, 2 * k, 2).slice(1, 1, 2 * n, 2), "strided"}}) {
        testing_helpers::expect_same_float_bits(matmul(row, b), matmul(rows, b).slice(0, 2, 3), shape + " " + layout);
        testing_helpers::expect_same_float_bits(linear(row, b.t(), bias), linear(rows, b.t(), bias).slice(0, 2, 3),
                                                shape + " " + layout + ", linear with bias");
        if (k > 0) expect_within_product_bound(row, b, shape + " " + layout + ", against exact");
      }
    }
  }
  const int before = get_num_threads();
  const Tensor x = randish({1, 768}, 50, -1, 1, DType::Float32), w = randish({2304, 768}, 51, -1, 1, DType::Float32);
  set_num_threads(1);
  const Tensor one = linear(x, w);
  set_num_threads(2);
  const Tensor two = linear(x, w);
  set_num_threads(before);
  testing_helpers::expect_same_float_bits(two, one, "one row, 2 threads against 1");
  testing_helpers::expect_same_float_bits(one, linear(x.expand({3, 768}).contiguous(), w).slice(0, 1, 2),
                                          "one row against three");
}

// A product's last tile of rows runs a kernel of MR, 2·MR/3 or MR/3 rows (12, 8, 4 with AVX-512; 6, 4, 2
// with AVX2), reading its rows in place when the kernel's height is theirs and from a zero-padded copy
// otherwise. Every row must keep the bits it has in a whole tile: the first m rows of a 40-row product
// against the same rows computed alone, for every m from 1 to 26 (every height of last tile, in both
// kernels' tiles), with A by rows, A transposed (packed among its neighbours), and rows 4 KiB apart (k 1024,
// copied so that they do not share L1 sets); float and double; a bias as the start row.
TEST(FastNumerics, LastTilesOfEveryHeightHaveTheBitsOfWholeTiles) {
  NumericsGuard fast(Numerics::fast);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (int64_t k : {300, 1024}) {
      const Tensor a = randish({40, k}, 60, -1, 1, dtype), w = randish({70, k}, 61, -1, 1, dtype);
      const Tensor bias = randish({70}, 62, -1, 1, dtype), a_transposed = a.t().contiguous().t();
      const Tensor all_rows = matmul(a, w.t()), all_with_bias = linear(a, w, bias);
      const Tensor all_transposed = matmul(a_transposed, w.t());
      for (int64_t m = 1; m <= 26; ++m) {
        const std::string shape = fmt::format("{} {} rows, k {}", dtype_name(dtype), m, k);
        testing_helpers::expect_same_float_bits(matmul(a.slice(0, 0, m), w.t()), all_rows.slice(0, 0, m), shape);
        testing_helpers::expect_same_float_bits(linear(a.slice(0, 0, m), w, bias), all_with_bias.slice(0, 0, m),
                                                shape + ", with bias");
        testing_helpers::expect_same_float_bits(matmul(a_transposed.slice(0, 0, m), w.t()), all_transposed.slice(0, 0, m),
                                                shape + ", A transposed");
      }
      testing_helpers::expect_same_float_bits(all_transposed, all_rows,
                                              fmt::format("{} k {}, A transposed", dtype_name(dtype), k));
    }
  }
}

// In fast numerics causal_scores scales each tile's rows inside the product, as soon as they are
// complete (a multiply when 1/s is exact, a division otherwise); the bits must be those of the dense
// ops, with every entry written (the buffers start as NaN), on one thread and two, in float and double.
TEST(FastNumerics, CausalScoresScaledInsideTheProductChangeNoBit) {
  NumericsGuard fast(Numerics::fast);
  testing_helpers::PoisonedBuffers poison;
  const int before = get_num_threads();
  for (int threads : {1, 2}) {
    for (DType dtype : {DType::Float32, DType::Float64}) {
      for (double s : {8.0, std::sqrt(48.0), 1.0}) {
        set_num_threads(threads);
        // six items (the threads take whole items) and one long one (the threads split its rows)
        for (const Shape& shape : {Shape{3, 2, 77, 48}, Shape{1, 300, 64}}) {
          const int64_t t = shape[shape.size() - 2];
          const Tensor q = randish(shape, 14, -1, 1, dtype), k = randish(shape, 15, -1, 1, dtype);
          const Tensor dense = (matmul(q, k.mT()) / s).masked_fill(ones({t, t}, DType::Bool).triu(1),
                                                                  -std::numeric_limits<double>::infinity());
          EXPECT_TRUE(equal(causal_scores(q, k, s), dense))
              << fmt::format("{} threads, {}, s = {}, T {}", threads, dtype_name(dtype), s, t);
        }
      }
    }
  }
  set_num_threads(before);
}

// float64 gradchecks of the products in fast numerics (ctest reruns every gradcheck suite this way too).
TEST(FastNumerics, ProductGradcheck) {
  NumericsGuard fast(Numerics::fast);
  using Inputs = std::vector<Tensor>;
  EXPECT_GRADCHECK([](const Inputs& x) { return matmul(x[0], x[1]); }, Inputs{leaf({5, 40}, 1), leaf({40, 33}, 2)});
  EXPECT_GRADCHECK([](const Inputs& x) { return matmul(x[0], x[1]); },
                   Inputs{testing_helpers::transposed_leaf({7, 13}, 3), testing_helpers::sliced_leaf({13, 50}, 4)});
  EXPECT_GRADCHECK([](const Inputs& x) { return matmul(x[0], x[1]); }, Inputs{leaf({2, 9, 6}, 5), leaf({6, 4}, 6)});
  EXPECT_GRADCHECK([](const Inputs& x) { return linear(x[0], x[1], x[2]); },
                   Inputs{leaf({6, 10}, 7), leaf({35, 10}, 8), leaf({35}, 9)});
  EXPECT_GRADCHECK([](const Inputs& x) { return tril_matmul(softmax(causal_scores(x[0], x[1], 2.0), -1), x[2]); },
                   Inputs{leaf({2, 9, 4}, 10), leaf({2, 9, 4}, 11), leaf({2, 9, 5}, 12)});
}

// A whole GPT step in both numerics: the same loss and gradients to float32 rounding.
TEST(FastNumerics, GptStepAgreesWithExact) {
  nn::GPTConfig cfg;
  cfg.vocab_size = 30, cfg.context_length = 16, cfg.emb_dim = 32, cfg.n_heads = 4, cfg.n_layers = 2,
  cfg.drop_rate = 0.0;
  manual_seed(5);
  nn::GPTModel model(cfg);
  const Tensor idx = randint(0, 30, {4, 16}), targets = randint(0, 30, {4, 16});
  auto step = [&](Numerics mode) {
    NumericsGuard guard(mode);
    model.zero_grad();
    Tensor loss = cross_entropy(model(idx).reshape({-1, 30}), targets.flatten());
    loss.backward();
    std::vector<Tensor> grads;
    for (const Tensor& p : model.parameters()) grads.push_back(p.grad().clone());
    return std::pair{loss.item<float>(), grads};
  };
  const auto [exact_loss, exact_grads] = step(Numerics::exact);
  const auto [fast_loss, fast_grads] = step(Numerics::fast);
  EXPECT_NEAR(fast_loss, exact_loss, 1e-5 * std::abs(exact_loss));
  for (size_t i = 0; i < exact_grads.size(); ++i) {
    const double scale = exact_grads[i].abs().max().item<float>();
    const double diff = (fast_grads[i] - exact_grads[i]).abs().max().item<float>();
    EXPECT_LE(diff, 1e-4 * scale + 1e-7) << "parameter " << i;
  }
}

}  // namespace

// ---------------------------------------------------------------- GELU (cpu/kernels/gelu.cpp's fast numerics)

namespace gelu_fast {

// GELU's tanh form and its derivative in long double: ½x·(1 + tanh(u)) written as x / (1 + e^(−2u)), which
// does not cancel to 0 for large negative x.
long double reference(long double x) { return x / (1.0L + std::exp(-2.0L * std::sqrt(2.0L / M_PIl) * (x + 0.044715L * x * x * x))); }
long double reference_slope(long double x) {
  const long double h = 1e-6L * std::max(1.0L, std::fabs(x));
  return (reference(x + h) - reference(x - h)) / (2 * h);
}

// Inputs over GELU's whole working range, dense where it bends, plus the far tails.
std::vector<float> inputs() {
  std::vector<float> x;
  for (int i = -40000; i <= 40000; ++i) x.push_back(float(i) * 3e-4f);  // [-12, 12]
  for (float v = 12.0f; v < 1e15f; v *= 1.37f) x.insert(x.end(), {v, -v});
  return x;
}

std::vector<float> gelu_in(Numerics mode, const Tensor& x, bool backward) {
  NumericsGuard guard(mode);
  Tensor leaf = x.detach().requires_grad_();
  Tensor y = gelu(leaf, "tanh");
  if (!backward) return y.detach().contiguous().to_vector<float>();
  y.backward(ones(y.shape()));
  return leaf.grad().contiguous().to_vector<float>();
}

}  // namespace gelu_fast

// Fast GELU (our own exp, 16 lanes at a time) within a few float roundings of the true function, forward
// and backward, over its whole range; its limits in the tails; NaN passes through.
TEST(FastNumerics, GeluAgreesWithTheTrueFunction) {
  const std::vector<float> x = gelu_fast::inputs();
  const Tensor xs = from_vector(x, {int64_t(x.size())});
  const std::vector<float> y = gelu_fast::gelu_in(Numerics::fast, xs, false), dy = gelu_fast::gelu_in(Numerics::fast, xs, true);
  for (size_t i = 0; i < x.size(); ++i) {
    const long double ref = gelu_fast::reference(x[i]), slope = gelu_fast::reference_slope(x[i]);
    // −2u = x·(…) is rounded before the exp, which scales its error by |2u| (up to 86): hence 3e−5. Past
    // the clamp (gelu(x) below |x|·e^−86, about 1e−36) the answer is the limit, −0.
    ASSERT_LE(std::fabs(y[i] - ref), 3e-5L * std::fabs(ref) + 1e-35L) << "gelu(" << x[i] << ")";
    if (std::fabs(x[i]) < 1e3f) {  // past it the finite difference of the reference is itself rounding
      ASSERT_LE(std::fabs(dy[i] - slope), 3e-5L * std::fabs(slope) + 3e-7L) << "gelu'(" << x[i] << ")";
    }
  }
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor tails = from_vector(std::vector<float>{1e30f, -1e30f, inf, 1e15f, -1e15f, nan}, {6});
  const std::vector<float> t = gelu_fast::gelu_in(Numerics::fast, tails, false), dt = gelu_fast::gelu_in(Numerics::fast, tails, true);
  EXPECT_EQ(t[0], 1e30f);
  EXPECT_EQ(t[1], 0.0f);
  EXPECT_EQ(t[2], inf);
  EXPECT_EQ(dt[3], 1.0f);
  EXPECT_EQ(dt[4], 0.0f);
  EXPECT_TRUE(std::isnan(t[5]) && std::isnan(dt[5]));
}

// The AVX-512 kernel (contiguous float tensors) and the element-by-element loop (other layouts, and CPUs
// without AVX-512) give the same bits.
TEST(FastNumerics, GeluKernelAndLoopGiveTheSameBits) {
  const std::vector<float> x = gelu_fast::inputs();
  const int64_t n = int64_t(x.size()) / 2 * 2;
  const Tensor contiguous = from_vector(std::vector<float>(x.begin(), x.begin() + n), {2, n / 2});
  const Tensor transposed = contiguous.t().contiguous().t();  // the same values, column-major
  ASSERT_FALSE(transposed.is_contiguous());
  for (bool backward : {false, true}) {
    const std::vector<float> a = gelu_fast::gelu_in(Numerics::fast, contiguous, backward);
    const std::vector<float> b = gelu_fast::gelu_in(Numerics::fast, transposed, backward);
    for (size_t i = 0; i < a.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(a[i]), std::bit_cast<uint32_t>(b[i])) << (backward ? "gelu'(" : "gelu(") << x[i] << ")";
  }
}

// ---------------------------------------------------------------- layer_norm (cpu/kernels/normalization.cpp)

// Fast layer_norm (16-lane sums, a two-pass variance) against exact, forward and every gradient, on rows
// of whole vectors and not, with and without an affine part, on a non-contiguous input too.
TEST(FastNumerics, LayerNormAgreesWithExact) {
  for (int64_t n : {256, 100, 7}) {
    for (bool affine : {true, false}) {
      manual_seed(uint64_t(n) + affine);
      const Tensor x0 = randn({33, n}) * 3.0 + 1.5, w0 = randn({n}), b0 = randn({n}), dy = randn({33, n});
      for (bool transposed : {false, true}) {
        auto run = [&](Numerics mode) {
          NumericsGuard guard(mode);
          Tensor x = (transposed ? x0.t().contiguous().t() : x0).detach().requires_grad_();
          Tensor w = w0.detach().requires_grad_(), b = b0.detach().requires_grad_();
          Tensor y = affine ? layer_norm(x, {n}, w, b) : layer_norm(x, {n});
          y.backward(dy);
          std::vector<Tensor> out = {y.detach(), x.grad()};
          if (affine) out.insert(out.end(), {w.grad(), b.grad()});
          return out;
        };
        const std::vector<Tensor> exact = run(Numerics::exact), fast = run(Numerics::fast);
        for (size_t i = 0; i < exact.size(); ++i) {
          const double scale = exact[i].abs().max().item<float>();
          const double diff = (fast[i] - exact[i]).abs().max().item<float>();
          EXPECT_LE(diff, 2e-5 * scale) << "n " << n << (affine ? " affine" : "") << (transposed ? " transposed" : "")
                                        << ": result " << i;
        }
      }
    }
  }
}
