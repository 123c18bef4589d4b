// random_ops.h — random tensors, drawn by the PyTorch-compatible generator in random.h.
// Pass a Generator to use your own stream; by default the global one (seeded by manual_seed) is used.
#pragma once
#include "autograd/random/generator.h"
#include "autograd/tensor.h"

namespace autograd {

Tensor rand(const Shape& shape, DType dtype = DType::Float32, Generator* gen = nullptr);   // U[0, 1)
Tensor randn(const Shape& shape, DType dtype = DType::Float32, Generator* gen = nullptr);  // N(0, 1)
Tensor randint(int64_t low, int64_t high, const Shape& shape, Generator* gen = nullptr);  // int64 in [low, high)
Tensor randperm(int64_t n, Generator* gen = nullptr);

// In-place fills (no gradient history is recorded; use them on leaves under NoGradGuard or before
// requires_grad_). Non-contiguous tensors are filled in row-major order.
Tensor& uniform_(Tensor& t, double from = 0.0, double to = 1.0, Generator* gen = nullptr);
Tensor& normal_(Tensor& t, double mean = 0.0, double std = 1.0, Generator* gen = nullptr);
Tensor& bernoulli_(Tensor& t, double p, Generator* gen = nullptr);

// F.dropout: in training, zeroes each element with probability p and scales the rest by 1/(1-p),
// drawing the same mask PyTorch draws for the same seed; identity when not training or p == 0.
Tensor dropout(const Tensor& x, double p, bool training = true, Generator* gen = nullptr);

}  // namespace autograd
