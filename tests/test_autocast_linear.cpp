// test_autocast_linear.cpp — linear under autocast is one node (ops/autocast_linear.cpp) with the bits of
// the composed graph it stands for: x, W and b rounded to bfloat16, the bfloat16 addmm, the product widened
// back to float32; and in backward the gradient rounded, the two bfloat16 products, each widened back.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/autograd.h"
#include "tests/test_helpers.h"

namespace {

using namespace autograd;

void expect_same_bits(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.defined(), want.defined()) << what;
  if (!want.defined()) return;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const Tensor g = got.contiguous(), w = want.contiguous();
  EXPECT_EQ(std::memcmp(g.raw_data(), w.raw_data(), size_t(g.numel()) * dtype_size(g.dtype())), 0) << what;
}

struct Case {
  Shape x_shape;
  int64_t out;
  bool bias, frozen_weight;
};

struct Result {
  Tensor y, dx, dw, db;
};

// y = linear(x, w, b) under autocast (fused: the one node) or as the composed graph written out, then
// backward from a fixed gradient.
Result run(const Case& c, bool fused) {
  manual_seed(5);
  const int64_t in = c.x_shape.back();
  const Tensor x = randn(c.x_shape).requires_grad_(true);
  const Tensor w = (randn({c.out, in}) * 0.3).requires_grad_(!c.frozen_weight);
  const Tensor b = c.bias ? randn({c.out}).requires_grad_(true) : Tensor();
  Tensor y;
  if (fused) {
    AutocastGuard bf16(DType::BFloat16);
    y = linear(x, w, b);
    EXPECT_EQ(std::string(y.grad_fn()->name), "AutocastLinearBackward");
  } else {
    const Tensor b16 = c.bias ? b.to(DType::BFloat16) : Tensor();
    y = linear(x.to(DType::BFloat16), w.to(DType::BFloat16), b16).to(DType::Float32);
  }
  Shape g_shape = y.shape();
  y.backward(randn(g_shape) * 3.0);
  return {y.detach(), x.grad(), c.frozen_weight ? Tensor() : w.grad(), c.bias ? b.grad() : Tensor()};
}

TEST(AutocastLinear, SameBitsAsTheComposedGraph) {
  const std::vector<Case> cases = {
      {{5, 70}, 40, true, false},      {{2, 7, 64}, 33, true, false},  {{13, 65}, 1, false, false},
      {{3, 4, 16}, 48, false, false},  {{70}, 20, true, false},        {{6, 40}, 30, true, true},
      {{300, 96}, 160, true, false},   // big enough for the products and conversions to use two threads
  };
  const int threads_before = get_num_threads();
  for (Kernels kernels : {Kernels::cpu, Kernels::reference})
    for (int threads : {1, 2}) {
      KernelsGuard guard(kernels);
      set_num_threads(threads);
      for (const Case& c : cases) {
        SCOPED_TRACE(testing::Message() << (kernels == Kernels::cpu ? "cpu" : "reference") << " threads " << threads
                                        << " x " << shape_to_string(c.x_shape) << " out " << c.out);
        const Result fused = run(c, true), composed = run(c, false);
        expect_same_bits(fused.y, composed.y, "y");
        expect_same_bits(fused.dx, composed.dx, "dx");
        expect_same_bits(fused.dw, composed.dw, "dW");
        expect_same_bits(fused.db, composed.db, "db");
      }
    }
  set_num_threads(threads_before);
}

// Outside a guard the node still rounds (backward runs wherever it is called), and a float32 weight with
// no autocast is the float32 addmm.
TEST(AutocastLinear, RoundsWithOrWithoutAGuard) {
  manual_seed(6);
  const Tensor x = randn({4, 24}), w = randn({8, 24}), b = randn({8});
  const Tensor called = autocast_linear(x, w, b);
  const Tensor composed =
      linear(x.to(DType::BFloat16), w.to(DType::BFloat16), b.to(DType::BFloat16)).to(DType::Float32);
  expect_same_bits(called, composed, "autocast_linear outside a guard");
  EXPECT_FALSE(equal(linear(x, w, b), composed));  // float32 without autocast: not rounded
}

// Called directly, it checks what linear checks (a mismatched x would otherwise be reshaped into rows of
// the wrong width) and that everything is float32.
TEST(AutocastLinear, RefusesWhatLinearRefuses) {
  EXPECT_THROW_WITH(autocast_linear(zeros({4, 6}), zeros({5, 8}), zeros({5})), std::invalid_argument,
                    "autocast_linear", "[4, 6]", "[5, 8]");
  EXPECT_THROW_WITH(autocast_linear(zeros({4, 8}), zeros({5, 8}), zeros({4})), std::invalid_argument,
                    "autocast_linear", "bias of shape [4]");
  EXPECT_THROW_WITH(autocast_linear(zeros({4, 8}), zeros({5, 8}, DType::Float64)), std::invalid_argument,
                    "autocast_linear", "float64", "[5, 8]");
}

}  // namespace
