// A Linear's weight packed for generation (autograd/ops/panels.cpp): the layout, and linear on it with the
// bits of linear on the weight itself.
#include <gtest/gtest.h>

#include <array>
#include <string>

#include <fmt/format.h>

#include "autograd/autograd.h"
#include "tests/test_helpers.h"

using namespace autograd;
using testing_helpers::randish;

namespace {

// Every value of a [rows, cols] tensor as doubles, row by row.
std::vector<double> values_of(const Tensor& t) { return t.contiguous().to(DType::Float64).to_vector<double>(); }

}  // namespace

// panels[i, p, l] = W[16i + l, p], zero rows past the last, and unpack gives W back exactly.
TEST(Panels, LayoutAndRoundTrip) {
  const Tensor w = randish({37, 20}, 1, -1, 1, DType::Float32);
  const Tensor panels = pack_panels(w);
  ASSERT_EQ(panels.shape(), (Shape{3, 20, 16}));
  EXPECT_TRUE(panels.is_contiguous());
  const std::vector<double> wv = values_of(w), pv = values_of(panels);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t p = 0; p < 20; ++p)
      for (int64_t l = 0; l < 16; ++l) {
        const int64_t row = 16 * i + l;
        const double want = row < 37 ? wv[size_t(row * 20 + p)] : 0.0;
        ASSERT_EQ(pv[size_t((i * 20 + p) * 16 + l)], want) << "panel " << i << " p " << p << " lane " << l;
      }
  testing_helpers::expect_same_float_bits(unpack_panels(panels, 37), w, "unpacked");
  const Tensor exact16 = randish({16, 3}, 2, -1, 1, DType::Float64);  // a whole panel: no padding
  testing_helpers::expect_same_float_bits(unpack_panels(pack_panels(exact16), 16), exact16, "one whole panel");
}

// In fast numerics an entry is one chain of fused multiply-adds over p in blocks of 256, the bias after the
// first block, whatever the layout of the weight: panel_linear has linear's bits. One row (the panels' own
// kernel: pairs of panels, and an odd one left) and several (the batched product), with and without a bias;
// k inside one block, across blocks, and empty; n a whole number of panels or not; float and double; the one-row
// kernel on 1 and 2 threads (2304 x 768, GPT-2's q, k and v together, splits its panels between them).
TEST(Panels, LinearOnPanelsHasTheBitsOfLinear) {
  NumericsGuard fast(Numerics::fast);
  uint32_t seed = 10;
  for (DType dtype : {DType::Float32, DType::Float64})
    for (auto [n, k] : {std::array<int64_t, 2>{49, 7}, {100, 300}, {16, 17}, {1100, 513}, {5, 64}, {33, 0}})
      for (int64_t m : {1, 3}) {
        const Tensor x = randish({m, k}, seed++, -1, 1, dtype), w = randish({n, k}, seed++, -1, 1, dtype);
        const Tensor bias = randish({n}, seed++, -1, 1, dtype), panels = pack_panels(w);
        const std::string shape = fmt::format("{} m {} n {} k {}", dtype_name(dtype), m, n, k);
        testing_helpers::expect_same_float_bits(panel_linear(x, panels, n), linear(x, w), shape);
        testing_helpers::expect_same_float_bits(panel_linear(x, panels, n, bias), linear(x, w, bias), shape + " bias");
      }
  const int before = get_num_threads();
  const Tensor x = randish({1, 768}, 50, -1, 1, DType::Float32), w = randish({2304, 768}, 51, -1, 1, DType::Float32);
  const Tensor bias = randish({2304}, 52, -1, 1, DType::Float32), panels = pack_panels(w);
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    testing_helpers::expect_same_float_bits(panel_linear(x, panels, 2304, bias), linear(x, w, bias),
                                            fmt::format("2304 x 768 on {} thread(s)", threads));
  }
  set_num_threads(before);
  // a batch of rows [2, 3, k] keeps its leading dims
  const Tensor batch = randish({2, 3, 300}, 60, -1, 1, DType::Float32), w2 = randish({40, 300}, 61, -1, 1, DType::Float32);
  const Tensor out = panel_linear(batch, pack_panels(w2), 40);
  EXPECT_EQ(out.shape(), (Shape{2, 3, 40}));
  testing_helpers::expect_same_float_bits(out, linear(batch, w2), "a [2, 3, 300] batch");
}

// Exact numerics, the reference kernels and bfloat16 take the panels through one product a panel: the
// values of linear (the sums in their own order), and bfloat16's product, whose chain does not depend on the
// columns beside an entry, exactly.
TEST(Panels, OtherNumericsKernelsAndBfloat16) {
  const Tensor x = randish({1, 300}, 70, -1, 1, DType::Float32), w = randish({50, 300}, 71, -1, 1, DType::Float32);
  const Tensor bias = randish({50}, 72, -1, 1, DType::Float32);
  {
    NumericsGuard exact(Numerics::exact);
    EXPECT_TRUE(allclose(panel_linear(x, pack_panels(w), 50, bias), linear(x, w, bias), 1e-5, 1e-5));
  }
  {
    KernelsGuard reference(Kernels::reference);
    EXPECT_TRUE(allclose(panel_linear(x, pack_panels(w), 50, bias), linear(x, w, bias), 1e-5, 1e-5));
  }
  NumericsGuard fast(Numerics::fast);
  const Tensor xb = x.to(DType::BFloat16), wb = w.to(DType::BFloat16), bb = bias.to(DType::BFloat16);
  const Tensor packed = pack_panels(wb);
  EXPECT_EQ(packed.dtype(), DType::BFloat16);
  testing_helpers::expect_same_float_bits(panel_linear(xb, packed, 50, bb).to(DType::Float32),
                                          linear(xb, wb, bb).to(DType::Float32), "bfloat16");
}

TEST(Panels, RefusesWhatItCannotMultiply) {
  const Tensor w = randish({20, 8}, 80, -1, 1, DType::Float32), panels = pack_panels(w);
  const Tensor x = randish({1, 8}, 81, -1, 1, DType::Float32);
  EXPECT_THROW_WITH(pack_panels(randish({2, 3, 4}, 82)), std::invalid_argument, "pack_panels", "[2, 3, 4]");
  EXPECT_THROW_WITH(panel_linear(randish({1, 9}, 83, -1, 1, DType::Float32), panels, 20), std::invalid_argument,
                    "panel_linear", "[1, 9]", "8 in_features");
  EXPECT_THROW_WITH(panel_linear(x, panels, 40), std::invalid_argument, "panel_linear", "40 rows");
  EXPECT_THROW_WITH(panel_linear(x, w, 20), std::invalid_argument, "panel_linear", "[20, 8]");
  EXPECT_THROW_WITH(panel_linear(x, panels, 20, randish({19}, 84, -1, 1, DType::Float32)), std::invalid_argument,
                    "bias of shape [19]", "out_features 20");
  EXPECT_THROW_WITH(panel_linear(x.to(DType::Float64), panels, 20), std::invalid_argument, "panel_linear");
  Tensor trained = randish({1, 8}, 85, -1, 1, DType::Float32).requires_grad_();
  EXPECT_THROW_WITH(panel_linear(trained, panels, 20), std::invalid_argument, "no gradient");
  EXPECT_THROW_WITH(unpack_panels(panels, 33), std::invalid_argument, "unpack_panels", "33 rows");
  NoGradGuard no_grad;
  EXPECT_NO_THROW(panel_linear(trained, panels, 20));
}
