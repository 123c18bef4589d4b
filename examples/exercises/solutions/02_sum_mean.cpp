// Exercise 2, solved: sum and mean along a dim.
#include "../exercises.h"

namespace exercises {

// g has the output's shape; every input element along `dim` received g's one value, so each gets it back.
static Tensor spread_back(const Tensor& g, const Shape& input_shape, int64_t dim, bool keepdim) {
  Tensor kept = keepdim ? g : g.unsqueeze(dim);  // put back the summed dim, with size 1
  return kept.expand(input_shape).contiguous();
}

Tensor my_sum(const Tensor& x, int64_t dim, bool keepdim) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = sum(x, dim, keepdim);
  }
  if (!needs_grad({x})) return out;
  Shape shape = x.shape();
  int64_t d = dim < 0 ? dim + x.dim() : dim;
  return record("MySumBackward", out, {x}, {}, [shape, d, keepdim](const Tensor& g) {
    return Grads{spread_back(g, shape, d, keepdim)};
  });
}

Tensor my_mean(const Tensor& x, int64_t dim, bool keepdim) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = mean(x, dim, keepdim);
  }
  if (!needs_grad({x})) return out;
  Shape shape = x.shape();
  int64_t d = dim < 0 ? dim + x.dim() : dim;
  const double n = double(shape[size_t(d)]);
  return record("MyMeanBackward", out, {x}, {}, [shape, d, keepdim, n](const Tensor& g) {
    return Grads{spread_back(g, shape, d, keepdim) / n};  // each of the n elements counts 1/n
  });
}

}  // namespace exercises
