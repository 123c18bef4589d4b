// random_ops.cpp — tensor-level wrappers over the raw generator fills of random.cpp.
#include "autograd/random/random_tensors.h"

#include <stdexcept>

#include <fmt/format.h>

#include "autograd/backend.h"
#include "autograd/node.h"
#include "autograd/ops.h"

namespace autograd {

namespace {

Generator& pick(Generator* gen) { return gen ? *gen : default_generator(); }

// Fills a contiguous CPU float tensor with `fill(float*)` / `fill(double*)`, then writes it into `t`
// (whatever its layout or device).
template <typename Fill> Tensor& fill_with(Tensor& t, const char* op, Fill fill) {
  if (!is_floating(t.dtype()))
    throw std::invalid_argument(fmt::format("{}: expected a floating point tensor, got {}", op, dtype_name(t.dtype())));
  Tensor buffer = (t.device().is_cpu() && t.is_contiguous()) ? t : empty(t.shape(), t.dtype());
  if (t.dtype() == DType::Float32) fill(buffer.data_ptr<float>(), t.numel());
  else fill(buffer.data_ptr<double>(), t.numel());
  if (!buffer.same(t)) {
    NoGradGuard no_grad;
    backend(t.device()).copy(buffer.to(t.device()), t);
  }
  t.impl().storage->bump_version();
  return t;
}

}  // namespace

Tensor& uniform_(Tensor& t, double from, double to, Generator* gen) {
  return fill_with(t, "uniform_", [&](auto* p, int64_t n) { random::uniform(pick(gen), p, n, from, to); });
}

Tensor& normal_(Tensor& t, double mean, double std, Generator* gen) {
  return fill_with(t, "normal_", [&](auto* p, int64_t n) { random::normal(pick(gen), p, n, mean, std); });
}

Tensor& bernoulli_(Tensor& t, double p, Generator* gen) {
  return fill_with(t, "bernoulli_", [&](auto* ptr, int64_t n) { random::bernoulli(pick(gen), ptr, n, p); });
}

Tensor rand(const Shape& shape, DType dtype, Generator* gen) {
  Tensor t = empty(shape, dtype);
  return uniform_(t, 0.0, 1.0, gen);
}

Tensor randn(const Shape& shape, DType dtype, Generator* gen) {
  Tensor t = empty(shape, dtype);
  return normal_(t, 0.0, 1.0, gen);
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, Generator* gen) {
  Tensor t = empty(shape, DType::Int64);
  random::random_from_to(pick(gen), t.data_ptr<int64_t>(), t.numel(), low, high);
  return t;
}

Tensor randperm(int64_t n, Generator* gen) {
  if (n < 0) throw std::invalid_argument(fmt::format("randperm: n must be non-negative, got {}", n));
  Tensor t = empty({n}, DType::Int64);
  random::randperm(pick(gen), t.data_ptr<int64_t>(), n);
  return t;
}

Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) {
  if (p < 0.0 || p > 1.0)
    throw std::invalid_argument(fmt::format("dropout: probability has to be between 0 and 1, but got {}", p));
  if (!training || p == 0.0) return x;
  if (p == 1.0) return x * zeros_like(x);
  // PyTorch: noise = empty_like(x).bernoulli_(1 - p); noise /= (1 - p); return x * noise
  Tensor noise = empty(x.shape(), x.dtype());
  bernoulli_(noise, 1.0 - p, gen);
  noise = noise.to(x.device());
  {
    NoGradGuard no_grad;
    backend(noise.device()).unary(UnaryOp::DivScalar, noise, noise, 1.0 - p);
  }
  return x * noise;
}

}  // namespace autograd
