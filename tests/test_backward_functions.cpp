// test_backward_functions.cpp — the backward functions of autograd/ops/ (node.h: BackwardFunction) and what
// sits below them: the engine calls each op's own class, a lambda still records (the exercises write
// theirs so), the reference backend's backward kernels are the ones it runs, and a gradient that keeps its
// input's layout has the bits of the plain product.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <typeinfo>

#include <fmt/format.h>

#include "autograd/autograd.h"
#include "autograd/backend.h"
#include "autograd/reference/backend.h"
#include "test_helpers.h"

using namespace autograd;
using namespace testing_helpers;

// The engine calls the node's backward function directly: for a matrix product it is the op's own class
// (what a debugger shows below run_node), and a lambda given to record is called through a Closure.
TEST(BackwardFunctions, EachOpRecordsItsOwnNamedClass) {
  Tensor a = randish({2, 3}, 1).requires_grad_(), b = randish({3, 4}, 2).requires_grad_();
  Tensor c = a.matmul(b);
  ASSERT_TRUE(c.grad_fn());
  EXPECT_STREQ(c.grad_fn()->name, "MmBackward0");
  EXPECT_NE(std::string(typeid(*c.grad_fn()->backward).name()).find("MatmulBackward"), std::string::npos);
  Tensor s = softmax(c, -1);
  EXPECT_NE(std::string(typeid(*s.grad_fn()->backward).name()).find("SoftmaxBackward"), std::string::npos);
}

TEST(BackwardFunctions, ALambdaStillRecordsAndNodesCanBeCalledLikeFunctions) {
  Tensor x = randish({3}, 3).requires_grad_();
  Tensor out = x.detach() * 2.0;
  out = record("TimesTwoBackward", out, {x}, {}, [](const Tensor& g) { return Grads{g * 2.0}; });
  // an engine of one's own (the exercises' rung 5) calls node->backward(g)
  Grads grads = out.grad_fn()->backward(ones({3}, DType::Float64));
  ASSERT_EQ(grads.size(), 1u);
  EXPECT_TRUE(allclose(grads[0], full({3}, 2.0, DType::Float64)));
  out.sum().backward();
  EXPECT_TRUE(allclose(x.grad(), full({3}, 2.0, DType::Float64)));
}

// One truth: on the reference kernels, softmax's, layer_norm's, GELU's, SiLU's, rms_norm's and the rotary
// embedding's gradients are their backward kernels' results, bit for bit (there is no second, tensor-op formula).
TEST(BackwardFunctions, TheReferenceBackendRunsItsOwnBackwardKernels) {
  KernelsGuard reference(Kernels::reference);
  Backend& kernels = reference::reference_backend();
  const Tensor g = randish({4, 5}, 4, -1, 1, DType::Float32);
  {
    Tensor x = randish({4, 5}, 5, -2, 2, DType::Float32).requires_grad_();
    Tensor y = log_softmax(x, 1);
    y.backward(g);
    Tensor want = empty({4, 5}, DType::Float32);
    kernels.softmax_backward(y.detach(), g, 1, /*log=*/true, want);
    expect_same_float_bits(x.grad(), want, "log_softmax");
  }
  {
    Tensor x = randish({4, 5}, 6, -2, 2, DType::Float32).requires_grad_();
    gelu(x, "tanh").backward(g);
    Tensor want = empty({4, 5}, DType::Float32);
    kernels.gelu_backward(g, x.detach(), /*tanh=*/true, want);
    expect_same_float_bits(x.grad(), want, "gelu");
  }
  {
    Tensor x = randish({4, 5}, 7, -2, 2, DType::Float32).requires_grad_();
    auto [y, mean, rstd] = native_layer_norm(x, {5}, Tensor(), Tensor(), 1e-5);
    y.backward(g);
    Tensor want = empty({4, 5}, DType::Float32);
    kernels.layer_norm_backward(g, x.detach(), mean.reshape({4}), rstd.reshape({4}), Tensor(), want, Tensor(), Tensor());
    expect_same_float_bits(x.grad(), want, "layer_norm");
  }
  {
    Tensor x = randish({4, 5}, 8, -2, 2, DType::Float32).requires_grad_();
    silu(x).backward(g);
    Tensor want = empty({4, 5}, DType::Float32);
    kernels.silu_backward(g, x.detach(), want);
    expect_same_float_bits(x.grad(), want, "silu");
  }
  {
    Tensor x = randish({4, 5}, 9, -2, 2, DType::Float32).requires_grad_();
    rms_norm(x, Tensor(), 1e-6).backward(g);
    Tensor y = empty({4, 5}, DType::Float32), rstd = empty({4}, DType::Float32), want = empty({4, 5}, DType::Float32);
    kernels.rms_norm(x.detach(), Tensor(), 1e-6, y, rstd);
    kernels.rms_norm_backward(g, x.detach(), rstd, Tensor(), want, Tensor());
    expect_same_float_bits(x.grad(), want, "rms_norm");
  }
  {
    Tensor x = randish({4, 6}, 10, -2, 2, DType::Float32).requires_grad_();
    const Tensor cos = randish({4, 3}, 11, -1, 1, DType::Float32), sin = randish({4, 3}, 12, -1, 1, DType::Float32);
    const Tensor up = randish({4, 6}, 13, -1, 1, DType::Float32);
    rotary_embedding(x, cos, sin).backward(up);
    Tensor want = empty({1, 4, 6}, DType::Float32);
    kernels.rotary_embedding(up.reshape({1, 4, 6}), cos, sin, /*inverse=*/true, want);
    expect_same_float_bits(x.grad(), want.reshape({4, 6}), "rotary_embedding");
  }
}

// A product written into column-major memory (a gradient in its input's layout) has the bits of the
// plain product, on both kernels; with one row or one column (where BLIS's dot-product order differs
// between C = A·B and Cᵀ = Bᵀ·Aᵀ) the CPU computes it directly.
TEST(BackwardFunctions, AColumnMajorProductHasThePlainProductsBits) {
  struct Case {
    int64_t m, k, n;
  };
  for (Kernels which : {Kernels::cpu, Kernels::reference})
    for (const Case& c : {Case{8, 300, 24}, Case{24, 5, 8}, Case{1, 7, 9}, Case{9, 7, 1}, Case{1, 1, 1}}) {
      KernelsGuard guard(which);
      const Tensor a = randish({c.m, c.k}, 8, -1, 1, DType::Float32), b = randish({c.k, c.n}, 9, -1, 1, DType::Float32);
      Tensor plain = empty({c.m, c.n}, DType::Float32);
      backend(Device::cpu()).matmul(a, b, plain);
      Tensor column_major = empty({c.n, c.m}, DType::Float32).mT();
      backend(Device::cpu()).matmul(a, b, column_major);
      expect_same_float_bits(column_major, plain, fmt::format("{} x {} x {}", c.m, c.k, c.n));
    }
}

// A linear's weight gradient (dW = Xᵀ·g, made in the transposed weight's layout) reaches the weight
// contiguous, with the bits of the plain product.
TEST(BackwardFunctions, ALinearWeightGradientKeepsTheWeightsLayout) {
  Tensor x = randish({6, 4}, 10, -1, 1, DType::Float32);
  Tensor w = randish({3, 4}, 11, -1, 1, DType::Float32).requires_grad_();
  Tensor bias = randish({3}, 12, -1, 1, DType::Float32).requires_grad_();
  Tensor g = randish({6, 3}, 13, -1, 1, DType::Float32);
  linear(x, w, bias).backward(g);
  EXPECT_TRUE(w.grad().is_contiguous());
  NoGradGuard no_grad;
  expect_same_float_bits(w.grad(), matmul(x.mT(), g).t(), "dW");
}
