// linear_after_gelu(h, w, b) must be linear(gelu(h), w, b) to the last bit, forward and backward, in both
// numerics; must pass gradcheck in float64 (plain, the bias broadcast over rows, non-contiguous inputs);
// must keep h but not gelu(h); and must refuse bad input naming itself. Its PyTorch reference is the GPT's
// (tests/test_gpt.cpp's fixtures run the feed-forward block through it).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/test_helpers.h"

namespace {

using namespace autograd;
using testing_helpers::leaf;
using testing_helpers::randish;
using testing_helpers::sliced_leaf;
using testing_helpers::transposed_leaf;
using Inputs = std::vector<Tensor>;

struct Result {
  Tensor out, grad_h, grad_w, grad_b;
};

Result run(bool fused, const Tensor& h0, const Tensor& w0, const Tensor& b0, const Tensor& up,
           const std::string& approximate) {
  Tensor h = h0.detach().requires_grad_(), w = w0.detach().requires_grad_();
  Tensor b = b0.defined() ? b0.detach().requires_grad_() : Tensor();
  Tensor out = fused ? linear_after_gelu(h, w, b, approximate) : linear(gelu(h, approximate), w, b);
  out.backward(up);
  return {out, h.grad(), w.grad(), b.defined() ? b.grad() : Tensor()};
}

}  // namespace

TEST(LinearAfterGelu, SameBitsAsTheTwoOps) {
  for (Numerics mode : {Numerics::exact, Numerics::fast})
    for (const std::string approximate : {"tanh", "none"})
      for (bool with_bias : {true, false})
        for (const Shape& shape : {Shape{4, 37, 96}, Shape{50, 96}}) {
          NumericsGuard guard(mode);
          const std::string what = std::string(numerics_name(mode)) + " " + approximate + (with_bias ? " bias " : " ") +
                                   shape_to_string(shape);
          const Tensor h = randish(shape, 1, -4, 4, DType::Float32);
          const Tensor w = randish({24, 96}, 2, -0.3, 0.3, DType::Float32);
          const Tensor b = with_bias ? randish({24}, 3, -1, 1, DType::Float32) : Tensor();
          Shape out_shape = shape;
          out_shape.back() = 24;
          const Tensor up = randish(out_shape, 4, -1, 1, DType::Float32);
          const Result fused = run(true, h, w, b, up, approximate), plain = run(false, h, w, b, up, approximate);
          testing_helpers::expect_same_float_bits(fused.out, plain.out, what + " out");
          testing_helpers::expect_same_float_bits(fused.grad_h, plain.grad_h, what + " grad h");
          testing_helpers::expect_same_float_bits(fused.grad_w, plain.grad_w, what + " grad weight");
          if (with_bias) testing_helpers::expect_same_float_bits(fused.grad_b, plain.grad_b, what + " grad bias");
        }
}

TEST(LinearAfterGelu, BackwardRecomputesWithTheForwardsNumerics) {
  // forward in fast numerics, backward after the guard is gone: the gradient is still fast's
  const Tensor h = randish({8, 64}, 5, -3, 3, DType::Float32), w = randish({16, 64}, 6, -0.3, 0.3, DType::Float32);
  const Tensor up = randish({8, 16}, 7, -1, 1, DType::Float32);
  Tensor h1 = h.detach().requires_grad_(), h2 = h.detach().requires_grad_();
  Tensor out1, out2;
  {
    NumericsGuard fast(Numerics::fast);
    out1 = linear_after_gelu(h1, w, Tensor(), "tanh");
    out2 = linear_after_gelu(h2, w, Tensor(), "tanh");
    out2.backward(up);
  }
  NumericsGuard exact(Numerics::exact);
  out1.backward(up);
  testing_helpers::expect_same_float_bits(h1.grad(), h2.grad(), "grad h");
}

TEST(LinearAfterGelu, Gradcheck) {
  for (const std::string approximate : {"tanh", "none"}) {
    auto f = [approximate](const Inputs& v) { return linear_after_gelu(v[0], v[1], v[2], approximate); };
    // plain; the bias broadcast over the rows of a batch
    EXPECT_GRADCHECK(f, Inputs{leaf({3, 5}, 10, -3, 3), leaf({4, 5}, 11), leaf({4}, 12)});
    EXPECT_GRADCHECK(f, Inputs{leaf({2, 3, 5}, 13, -3, 3), leaf({4, 5}, 14), leaf({4}, 15)});
    // non-contiguous: a transposed input, a transposed weight, a strided bias
    EXPECT_GRADCHECK(f, Inputs{transposed_leaf({3, 5}, 16, -3, 3), transposed_leaf({4, 5}, 17), sliced_leaf({4}, 18)});
    // no bias
    EXPECT_GRADCHECK([approximate](const Inputs& v) { return linear_after_gelu(v[0], v[1], Tensor(), approximate); },
                     Inputs{sliced_leaf({3, 5}, 19, -3, 3), leaf({2, 5}, 20)});
  }
}

TEST(LinearAfterGelu, KeepsTheInputButNotTheGeluOutput) {
  Tensor h = randish({6, 32}, 21, -2, 2, DType::Float32).requires_grad_();
  Tensor w = randish({8, 32}, 22, -0.3, 0.3, DType::Float32).requires_grad_();
  Tensor b = randish({8}, 23, -1, 1, DType::Float32).requires_grad_();
  Tensor out = linear_after_gelu(h, w, b, "tanh");
  ASSERT_TRUE(out.grad_fn());
  EXPECT_STREQ(out.grad_fn()->name, "LinearAfterGeluBackward");
  const auto& saved = out.grad_fn()->saved;
  ASSERT_EQ(saved.size(), 2u);  // h and the weight: nothing the size of gelu(h) besides h itself
  EXPECT_EQ(saved[0].storage, h.impl().storage);
  EXPECT_EQ(saved[1].storage, w.impl().storage);
}

TEST(LinearAfterGelu, RefusesBadInputNamingItself) {
  EXPECT_THROW_WITH(linear_after_gelu(zeros({2, 5}), zeros({3, 4})), std::invalid_argument, "linear_after_gelu",
                    "[2, 5]", "[3, 4]");
  EXPECT_THROW_WITH(linear_after_gelu(zeros({2, 5}), zeros({5})), std::invalid_argument, "linear_after_gelu", "[5]");
  EXPECT_THROW_WITH(linear_after_gelu(zeros({2, 5}), zeros({3, 5}), zeros({4})), std::invalid_argument,
                    "linear_after_gelu", "[4]", "[3, 5]");
  EXPECT_THROW_WITH(linear_after_gelu(zeros({2, 5}), zeros({3, 5}), Tensor(), "fast"), std::invalid_argument,
                    "linear_after_gelu", "fast");
  EXPECT_THROW_WITH(linear_after_gelu(zeros({2, 5}, DType::Int64), zeros({3, 5})), std::invalid_argument, "linear_after_gelu");
}
