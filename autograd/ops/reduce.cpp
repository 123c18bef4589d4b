// ops/reduce.cpp — sum, mean, max, argmax. A reduction's backward broadcasts the gradient back over the
// reduced dims (for sum/mean), or routes it to the winning element (for max). Node names are PyTorch
// 1.13's grad_fn names; its overloads are numbered: sum() SumBackward0, sum(dim) SumBackward1, mean()
// MeanBackward0, mean(dim) MeanBackward1, max(dim) MaxBackward0, max() MaxBackward1.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "autograd/backend.h"
#include "autograd/ops.h"

namespace autograd {

// The shape with the reduced dims kept as size 1.
static Shape keepdim_shape(const Shape& shape, const std::vector<bool>& reduced) {
  Shape out = shape;
  for (size_t d = 0; d < shape.size(); ++d)
    if (reduced[d]) out[d] = 1;
  return out;
}

static Shape drop_reduced(const Shape& shape, const std::vector<bool>& reduced) {
  Shape out;
  for (size_t d = 0; d < shape.size(); ++d)
    if (!reduced[d]) out.push_back(shape[d]);
  return out;
}

// The forward of sum and mean: the reduced values (no node recorded), and the kept shape.
static Tensor sum_values(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim, Shape& kept) {
  std::vector<bool> reduced(size_t(a.dim()), dims.empty());  // no dims: reduce everything
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, a.dim(), "sum");
    if (a.dim() > 0) reduced[size_t(w)] = true;  // a 0-d tensor's dim 0 (or -1) reduces nothing, as in PyTorch
  }
  kept = keepdim_shape(a.shape(), reduced);
  Tensor out = empty(kept, a.dtype() == DType::Bool ? DType::Int64 : a.dtype(), a.device());
  {
    NoGradGuard no_grad;  // (a bool input's conversion records nothing)
    backend(a.device()).sum_to(a.dtype() == DType::Bool ? a.to(DType::Int64) : a, out);
  }
  if (!keepdim) out = out.as_strided(drop_reduced(a.shape(), reduced), contiguous_strides(drop_reduced(a.shape(), reduced)), 0);
  return out;
}

// y = Σ a over some dims  ⇒  da = g broadcast back over them: every element gets the gradient of its sum
struct SumBackward final : BackwardFunction {
  Shape in_shape, kept;  // kept: the output's shape with the summed dims as 1
  SumBackward(const Shape& in_shape, const Shape& kept) : in_shape(in_shape), kept(kept) {}
  Grads apply(const Tensor& g) override { return {g.reshape(kept).expand(in_shape)}; }
};

// out = Σ a over `dims` (all dims when empty): every input element gets the gradient of its sum.
// `where` defaults to the caller, so the node says it was recorded by sum() (or mean()), not here.
static Tensor sum_impl(const char* name, const Tensor& a, const std::vector<int64_t>& dims, bool keepdim,
                       compat::source_location where = compat::source_location::current()) {
  Shape kept;
  Tensor out = sum_values(a, dims, keepdim, kept);
  if (!needs_grad({a})) return out;
  return record(name, out, {a}, {}, SumBackward(a.shape(), kept), where);
}

Tensor sum(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) { return sum_impl("SumBackward1", a, dims, keepdim); }
Tensor sum(const Tensor& a) { return sum_impl("SumBackward0", a, {}, false); }
Tensor sum(const Tensor& a, int64_t dim, bool keepdim) { return sum(a, std::vector<int64_t>{dim}, keepdim); }

// Undoes broadcasting: sums `a` down to `shape` (which `a`'s shape must be a broadcast of).
Tensor sum_to(const Tensor& a, const Shape& shape) {
  if (a.shape() == shape) return a;
  size_t lead = a.shape().size() - std::min(a.shape().size(), shape.size());
  bool ok = shape.size() <= a.shape().size();
  std::vector<int64_t> dims;
  for (size_t d = 0; ok && d < a.shape().size(); ++d) {
    if (d < lead) dims.push_back(int64_t(d));
    else if (shape[d - lead] == 1 && a.shape()[d] != 1) dims.push_back(int64_t(d));
    else ok = shape[d - lead] == a.shape()[d];
  }
  if (!ok)
    throw std::invalid_argument(fmt::format("sum_to: shape {} is not a broadcast of {}", a.shape_str(), shape_to_string(shape)));
  if (!needs_grad({a})) {  // backward formulas (bias gradients): the values alone, no node to prepare
    Shape kept;
    return sum_values(a, dims, true, kept).reshape(shape);
  }
  return sum(a, dims, true).reshape(shape);
}

// y = (Σ a over some dims) / n  ⇒  da = g / n broadcast back over them
struct MeanBackward final : BackwardFunction {
  Shape in_shape, kept;
  int64_t n;
  MeanBackward(const Shape& in_shape, const Shape& kept, int64_t n) : in_shape(in_shape), kept(kept), n(n) {}
  Grads apply(const Tensor& g) override { return {(g / double(n)).reshape(kept).expand(in_shape)}; }
};

// out = (Σ a over `dims`) / n, n the number of elements each output averages: the sum, then one
// division (PyTorch's CPU mean does sum_out(...).div_(n)). Every input element gets g / n.
static Tensor mean_impl(const char* name, const Tensor& a, const std::vector<int64_t>& dims, bool keepdim, int64_t n,
                        compat::source_location where = compat::source_location::current()) {
  Shape kept;
  Tensor out;
  {
    NoGradGuard no_grad;
    out = sum_values(a, dims, keepdim, kept) / double(n);  // empty: 0/0 = nan, as in PyTorch
  }
  if (!needs_grad({a})) return out;
  return record(name, out, {a}, {}, MeanBackward(a.shape(), kept, n), where);
}

Tensor mean(const Tensor& a) { return mean_impl("MeanBackward0", a, {}, false, a.numel()); }
Tensor mean(const Tensor& a, int64_t dim, bool keepdim) {
  // a 0-d tensor's dim 0 (or -1) holds its one value, as for sum
  const int64_t n = a.dim() == 0 ? (wrap_dim(dim, 0, "mean"), int64_t(1)) : a.size(dim);
  return mean_impl("MeanBackward1", a, {dim}, keepdim, n);
}

// y = max of a along dim  ⇒  da = g at the position that won (the index max returned), 0 elsewhere
struct MaxBackward0 final : BackwardFunction {
  Tensor index;  // the winners' positions, in the kept shape
  Shape in_shape, kept;
  int64_t dim;
  MaxBackward0(const Tensor& index, const Shape& in_shape, const Shape& kept, int64_t dim)
      : index(index), in_shape(in_shape), kept(kept), dim(dim) {}
  Grads apply(const Tensor& g) override {
    const int64_t n = in_shape[size_t(dim)];
    Shape line(in_shape.size(), 1);  // positions 0..n-1 along dim
    line[size_t(dim)] = n;
    Tensor winner = eq(index, arange(n).to(g.device()).view(line));  // one-hot along dim
    return {where(winner, g.reshape(kept), zeros({}, g.dtype(), g.device()))};
  }
};

// y = max of all elements  ⇒  da = g / count on each of the count elements equal to the max (a tie splits it;
// a NaN max goes to the NaNs), as PyTorch's evenly_distribute_backward does
struct MaxBackward1 final : BackwardFunction {
  Tensor a, y;  // detached
  MaxBackward1(const Tensor& a, const Tensor& y) : a(a.detach()), y(y.detach()) {}
  Grads apply(const Tensor& g) override {
    Tensor winners = std::isnan(y.item()) ? ne(a, a) : eq(a, y);  // a constant mask
    const double count = winners.sum().item();
    return {where(winners, g / count, 0.0)};
  }
};

std::pair<Tensor, Tensor> max(const Tensor& a, int64_t dim_in, bool keepdim) {
  int64_t dim = wrap_dim(dim_in, a.dim(), "max");
  if (a.dim() > 0 && a.shape()[size_t(dim)] == 0)
    throw std::invalid_argument(fmt::format("max: cannot reduce over dimension {} of size 0 (shape {})", dim, a.shape_str()));
  if (a.dim() == 0) return {a, zeros({}, DType::Int64, a.device())};
  std::vector<bool> reduced(size_t(a.dim()), false);
  reduced[size_t(dim)] = true;
  Shape kept = keepdim_shape(a.shape(), reduced);
  Tensor values = empty(kept, a.dtype(), a.device());
  Tensor indices = empty(kept, DType::Int64, a.device());
  backend(a.device()).max_dim(a, dim, values, indices);
  if (!keepdim) {  // squeezed before recording, so that one node (as in PyTorch) stands for the op
    values = values.squeeze(dim);
    indices = indices.squeeze(dim);
  }
  if (!needs_grad({a})) return {values, indices};
  values = record("MaxBackward0", values, {a}, {}, MaxBackward0(indices.detach().reshape(kept), a.shape(), kept, dim));
  return {values, indices};
}

// The max of all elements (its gradient: MaxBackward1).
Tensor max(const Tensor& a) {
  if (a.numel() == 0) throw std::invalid_argument("max: cannot take the max of an empty tensor");
  Tensor value;
  {
    NoGradGuard no_grad;
    value = max(a.reshape({-1}), 0, false).first;
  }
  if (!needs_grad({a})) return value;
  return record("MaxBackward1", value, {a}, {a}, MaxBackward1(a, value));
}

Tensor argmax(const Tensor& a, int64_t dim, bool keepdim) {
  NoGradGuard no_grad;
  return max(a, dim, keepdim).second;
}
Tensor argmax(const Tensor& a) {
  NoGradGuard no_grad;
  return max(a.reshape({-1}), 0, false).second;
}

bool equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  return x == y;
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  Shape shape = broadcast_shapes(a.shape(), b.shape(), "allclose");
  NoGradGuard no_grad;
  std::vector<double> x = a.expand(shape).to_vector<double>(), y = b.expand(shape).to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) || std::isnan(y[i])) return false;
    if (x[i] == y[i]) continue;  // equal infinities
    if (std::abs(x[i] - y[i]) > atol + rtol * std::abs(y[i])) return false;
  }
  return true;
}

Tensor Tensor::sum() const { return autograd::sum(*this); }
Tensor Tensor::sum(int64_t dim, bool keepdim) const { return autograd::sum(*this, dim, keepdim); }
Tensor Tensor::sum_to(const Shape& shape) const { return autograd::sum_to(*this, shape); }
Tensor Tensor::mean() const { return autograd::mean(*this); }
Tensor Tensor::mean(int64_t dim, bool keepdim) const { return autograd::mean(*this, dim, keepdim); }
Tensor Tensor::max() const { return autograd::max(*this); }
std::pair<Tensor, Tensor> Tensor::max(int64_t dim, bool keepdim) const { return autograd::max(*this, dim, keepdim); }
Tensor Tensor::argmax() const { return autograd::argmax(*this); }
Tensor Tensor::argmax(int64_t dim, bool keepdim) const { return autograd::argmax(*this, dim, keepdim); }

}  // namespace autograd
