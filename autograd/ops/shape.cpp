// ops/shape.cpp — views (same storage, new shape/strides/offset) and the ops that join or split tensors.
// A view's backward reshapes, transposes or pads the gradient back to the input's layout.
// Every view node lists its input as saved, though the closure needs no values: the view shares the
// input's storage, so an in-place write to that storage afterwards (say masked_fill_ on the base) changes
// the view's values behind a history that no longer describes them. The version check in backward then
// reports it instead of passing a wrong gradient.
#include <algorithm>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "autograd/backend.h"
#include "autograd/ops.h"
#include "autograd/memory/pool.h"

namespace autograd {

// A view of t's storage with these sizes, strides and offset, unchecked: the ops below work them out.
static Tensor strided_view(const Tensor& t, const Shape& shape, const Shape& strides, int64_t offset) {
  auto out = memory::make_pooled<TensorImpl>();
  out->storage = t.impl().storage;
  out->shape = shape;
  out->strides = strides;
  out->offset = offset;
  out->dtype = t.dtype();
  out->is_view = true;
  return Tensor(std::move(out));
}

// The public view: every element it can reach must lie inside the storage, and no size computation may
// overflow on the way (a wrapped count would let kernels read outside any buffer).
Tensor Tensor::as_strided(const Shape& shape, const Shape& strides, int64_t offset) const {
  auto fail = [&](const char* why) {
    return std::invalid_argument(fmt::format("as_strided: sizes {}, strides {} and offset {} {} (storage of {} elements)",
                                             shape_to_string(shape), shape_to_string(strides), offset, why,
                                             impl().storage->nbytes / dtype_size(dtype())));
  };
  if (shape.size() != strides.size()) throw fail("have different lengths");
  const int64_t numel = checked_numel(shape, "as_strided");
  int64_t last = offset;  // the furthest element reached
  if (offset < 0) throw fail("reach before the storage");
  for (size_t d = 0; d < shape.size() && numel > 0; ++d) {
    if (strides[d] < 0) throw fail("have a negative stride");
    int64_t span = 0;
    if (__builtin_mul_overflow(shape[d] - 1, strides[d], &span) || __builtin_add_overflow(last, span, &last))
      throw fail("reach further than an int64 can count");
  }
  if (numel > 0 && uint64_t(last) >= impl().storage->nbytes / dtype_size(dtype())) throw fail("reach past the storage");
  return strided_view(*this, shape, strides, offset);
}

// Replaces one -1 in `shape` by whatever makes the element count match `numel`.
static Shape infer_shape(Shape shape, int64_t numel, const Shape& from, const char* op) {
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer_at >= 0) throw std::invalid_argument(fmt::format("{}: only one dimension can be -1", op));
      infer_at = int64_t(i);
    } else if (shape[i] < 0) {
      throw std::invalid_argument(fmt::format("{}: invalid size {} in shape {}", op, shape[i], shape_to_string(shape)));
    } else if (__builtin_mul_overflow(known, shape[i], &known)) {
      throw std::invalid_argument(fmt::format("{}: shape {} has more elements than an int64 can count", op,
                                              shape_to_string(shape)));
    }
  }
  if (infer_at >= 0 && known != 0 && numel % known == 0) shape[size_t(infer_at)] = numel / known;
  const bool resolved = infer_at < 0 || shape[size_t(infer_at)] >= 0;
  if (!resolved || checked_numel(shape, op) != numel)
    throw std::invalid_argument(fmt::format("{}: shape {} is invalid for input of shape {} ({} elements)", op,
                                            shape_to_string(shape), shape_to_string(from), numel));
  return shape;
}

// Strides that let `new_shape` view memory laid out as (old_shape, old_strides), if any exist. Walks the
// old dims from the right in "chunks" that are contiguous among themselves; each chunk must be rebuilt
// exactly by a run of new dims. (The same rule as torch.Tensor.view.)
static std::optional<Shape> view_strides(const Shape& old_shape, const Shape& old_strides, const Shape& new_shape) {
  if (old_shape.empty() || shape_numel(old_shape) == 0) return contiguous_strides(new_shape);
  Shape new_strides(new_shape.size());
  int64_t view_d = int64_t(new_shape.size()) - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = int64_t(old_shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= old_shape[size_t(d)];
    bool chunk_ends = d == 0 || (old_shape[size_t(d - 1)] != 1 &&
                                 old_strides[size_t(d - 1)] != tensor_numel * chunk_base_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || new_shape[size_t(view_d)] == 1)) {
      new_strides[size_t(view_d)] = view_numel * chunk_base_stride;
      view_numel *= new_shape[size_t(view_d)];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (d > 0) {
      chunk_base_stride = old_strides[size_t(d - 1)];
      tensor_numel = view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

// Records a view op. Its backward reads no data (only shapes), so the node does not keep the input's
// memory, as PyTorch's view nodes do not: it watches the input's version counter instead, to refuse a
// gradient through a base written in place after the view was taken.
static Tensor record_view(const char* name, const Tensor& in, Tensor out, BackwardFn backward,
                          compat::source_location where = compat::source_location::current()) {
  Tensor recorded = record(name, std::move(out), std::span<const Tensor>(&in, 1), std::span<const Tensor>(),
                           std::move(backward), where);
  watch_in_place_writes(recorded, in);
  return recorded;
}

// y = x seen with another shape (view, reshape, flatten, squeeze)  ⇒  dx = g reshaped back to x's shape
struct ReshapeBackward final : BackwardFunction {
  Shape in_shape;
  explicit ReshapeBackward(const Shape& in_shape) : in_shape(in_shape) {}
  Grads apply(const Tensor& g) override { return {g.reshape(in_shape)}; }
};

// Records a view op whose backward is "reshape the gradient back to the input's shape".
static Tensor record_reshaping(const char* name, const Tensor& in, Tensor out) {
  if (!needs_grad({in})) return out;  // no node: skip building its backward function
  return record_view(name, in, std::move(out), ReshapeBackward(in.shape()));
}

// y = x with dims d0 and d1 swapped  ⇒  dx = g with them swapped back
struct TransposeBackward0 final : BackwardFunction {
  int64_t d0, d1;
  TransposeBackward0(int64_t d0, int64_t d1) : d0(d0), d1(d1) {}
  Grads apply(const Tensor& g) override { return {g.transpose(d0, d1)}; }
};

// y = x.permute(dims)  ⇒  dx = g.permute(the inverse of dims)
struct PermuteBackward0 final : BackwardFunction {
  Shape inverse;
  explicit PermuteBackward0(const Shape& inverse) : inverse(inverse) {}
  Grads apply(const Tensor& g) override { return {g.permute(inverse)}; }
};

// y = x with a new dim d of size 1  ⇒  dx = g without it
struct UnsqueezeBackward0 final : BackwardFunction {
  int64_t d;
  explicit UnsqueezeBackward0(int64_t d) : d(d) {}
  Grads apply(const Tensor& g) override { return {g.squeeze(d)}; }
};

// y = x stretched along its size-1 dims (and new leading ones)  ⇒  dx = g summed back over them
struct ExpandBackward0 final : BackwardFunction {
  Shape in_shape;
  explicit ExpandBackward0(const Shape& in_shape) : in_shape(in_shape) {}
  Grads apply(const Tensor& g) override { return {g.sum_to(in_shape)}; }
};

Tensor Tensor::view(const Shape& shape_in) const {
  Shape shape = infer_shape(shape_in, numel(), this->shape(), "view");
  auto strides = view_strides(this->shape(), this->strides(), shape);
  if (!strides)
    throw std::invalid_argument(fmt::format(
        "view: shape {} is not compatible with the input's size {} and stride {} (at least one dimension spans "
        "across two contiguous subspaces); use reshape() instead",
        shape_to_string(shape), shape_str(), shape_to_string(this->strides())));
  return record_reshaping("ViewBackward0", *this, strided_view(*this, shape, *strides, offset()));
}

Tensor Tensor::reshape(const Shape& shape_in) const {
  Shape shape = infer_shape(shape_in, numel(), this->shape(), "reshape");
  if (auto strides = view_strides(this->shape(), this->strides(), shape))
    return record_reshaping("ViewBackward0", *this, strided_view(*this, shape, *strides, offset()));
  return contiguous().view(shape);  // the one case that copies: strides forbid a view
}

// Swaps two dims of the view; `name` is the node PyTorch would show (t() records TBackward0).
// torch.flatten: dims [start_dim, end_dim] become one of their product's length, through reshape (so a
// view where the strides allow one, else a copy). As in PyTorch, a 0-d tensor becomes [1], and
// start_dim == end_dim returns the tensor itself.
Tensor flatten(const Tensor& t, int64_t start_dim, int64_t end_dim) {
  const int64_t range = std::max<int64_t>(t.dim(), 1);  // a 0-d tensor takes dims 0 and -1, as in PyTorch
  const auto wrap = [&](int64_t d, const char* which) {
    if (d < -range || d >= range)
      throw std::out_of_range(fmt::format("flatten: {} {} is out of range for a tensor of shape {} (expected a dim in "
                                          "[{}, {}])", which, d, t.shape_str(), -range, range - 1));
    return d < 0 ? d + range : d;
  };
  const int64_t start = wrap(start_dim, "start_dim"), end = wrap(end_dim, "end_dim");
  if (start > end)
    throw std::invalid_argument(fmt::format("flatten: start_dim {} comes after end_dim {} (a tensor of shape {})",
                                            start_dim, end_dim, t.shape_str()));
  if (t.dim() == 0) return t.reshape({1});
  if (start == end) return t;
  Shape shape(t.shape().begin(), t.shape().begin() + start);
  int64_t merged = 1;
  for (int64_t d = start; d <= end; ++d) merged *= t.size(d);
  shape.push_back(merged);  // spelled out, not -1: a size-0 dim elsewhere would leave -1 undecided
  for (int64_t d = end + 1; d < t.dim(); ++d) shape.push_back(t.size(d));
  return t.reshape(shape);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const { return autograd::flatten(*this, start_dim, end_dim); }

static Tensor transposed(const Tensor& t, int64_t d0, int64_t d1, const char* name) {
  d0 = wrap_dim(d0, t.dim(), "transpose");
  d1 = wrap_dim(d1, t.dim(), "transpose");
  if (t.dim() == 0) return t;
  Shape shape = t.shape(), strides = t.strides();
  std::swap(shape[size_t(d0)], shape[size_t(d1)]);
  std::swap(strides[size_t(d0)], strides[size_t(d1)]);
  if (!needs_grad({t})) return strided_view(t, shape, strides, t.offset());  // no node
  return record_view(name, t, strided_view(t, shape, strides, t.offset()), TransposeBackward0(d0, d1));
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const { return transposed(*this, d0, d1, "TransposeBackward0"); }

Tensor Tensor::t() const {
  if (dim() > 2) throw std::invalid_argument(fmt::format("t: expects a tensor with <= 2 dimensions, got {}", shape_str()));
  return transposed(*this, 0, dim() < 2 ? 0 : 1, "TBackward0");
}

Tensor Tensor::permute(const Shape& dims_in) const {
  if (int64_t(dims_in.size()) != dim())
    throw std::invalid_argument(fmt::format("permute: {} dims given for a tensor of shape {}", dims_in.size(), shape_str()));
  Shape dims(dims_in.size()), inverse(dims_in.size()), shape(dims_in.size()), strides(dims_in.size());
  std::vector<bool> used(dims_in.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    dims[i] = wrap_dim(dims_in[i], dim(), "permute");
    if (used[size_t(dims[i])])
      throw std::invalid_argument(fmt::format("permute: dims {} repeat dimension {}", shape_to_string(dims_in), dims[i]));
    used[size_t(dims[i])] = true;
    inverse[size_t(dims[i])] = int64_t(i);
    shape[i] = this->shape()[size_t(dims[i])];
    strides[i] = this->strides()[size_t(dims[i])];
  }
  if (!needs_grad({*this})) return strided_view(*this, shape, strides, offset());
  return record_view("PermuteBackward0", *this, strided_view(*this, shape, strides, offset()), PermuteBackward0(inverse));
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape shape = this->shape(), strides = this->strides();
  int64_t stride = size_t(d) < shape.size() ? shape[size_t(d)] * strides[size_t(d)] : 1;
  shape.insert(shape.begin() + d, 1);
  strides.insert(strides.begin() + d, stride);
  if (!needs_grad({*this})) return strided_view(*this, shape, strides, offset());
  return record_view("UnsqueezeBackward0", *this, strided_view(*this, shape, strides, offset()), UnsqueezeBackward0(d));
}

Tensor Tensor::squeeze(int64_t d) const {
  d = wrap_dim(d, dim(), "squeeze");
  if (dim() == 0 || shape()[size_t(d)] != 1) return *this;  // like PyTorch: squeezing a non-1 dim is a no-op
  Shape shape = this->shape(), strides = this->strides();
  shape.erase(shape.begin() + d);
  strides.erase(strides.begin() + d);
  return record_reshaping("SqueezeBackward1", *this, strided_view(*this, shape, strides, offset()));
}

Tensor Tensor::squeeze() const {
  Shape shape, strides;
  for (size_t i = 0; i < this->shape().size(); ++i)
    if (this->shape()[i] != 1) {
      shape.push_back(this->shape()[i]);
      strides.push_back(this->strides()[i]);
    }
  return record_reshaping("SqueezeBackward0", *this, strided_view(*this, shape, strides, offset()));
}

Tensor Tensor::expand(const Shape& target) const {
  if (target.size() < shape().size())
    throw std::invalid_argument(fmt::format("expand: the target shape {} has fewer dimensions than the input {}",
                                            shape_to_string(target), shape_str()));
  size_t lead = target.size() - shape().size();
  Shape shape(target.size()), strides(target.size(), 0);
  for (size_t i = 0; i < target.size(); ++i) {
    bool is_new = i < lead;
    int64_t have = is_new ? 1 : this->shape()[i - lead];
    int64_t want = target[i] == -1 && !is_new ? have : target[i];
    if (want < 0 || (have != want && have != 1))
      throw std::invalid_argument(fmt::format("expand: the expanded size {} must match the existing size {} at "
                                              "dimension {} (input {}, target {})",
                                              target[i], have, i, shape_str(), shape_to_string(target)));
    shape[i] = want;
    strides[i] = (is_new || have != want) ? 0 : this->strides()[i - lead];
  }
  if (shape == this->shape()) return *this;
  checked_numel(shape, "expand");  // a view, but every kernel that reads it counts its elements
  if (!needs_grad({*this})) return strided_view(*this, shape, strides, offset());
  return record_view("ExpandBackward0", *this, strided_view(*this, shape, strides, offset()), ExpandBackward0(this->shape()));
}

// y = x.slice(d, start, end, step)  ⇒  dx = g in the sliced positions, 0 everywhere else
struct SliceBackward0 final : BackwardFunction {
  Shape in_shape;
  int64_t d, start, end, step;
  SliceBackward0(const Shape& in_shape, int64_t d, int64_t start, int64_t end, int64_t step)
      : in_shape(in_shape), d(d), start(start), end(end), step(step) {}
  Grads apply(const Tensor& g) override {
    Tensor dx = zeros(in_shape, g.dtype(), g.device());
    backend(g.device()).copy(g, dx.slice(d, start, end, step));
    return {dx};
  }
};

// y = x.select(d, index)  ⇒  dx = g at that index of dim d, 0 everywhere else
struct SelectBackward0 final : BackwardFunction {
  Shape in_shape;
  int64_t d, index;
  SelectBackward0(const Shape& in_shape, int64_t d, int64_t index) : in_shape(in_shape), d(d), index(index) {}
  Grads apply(const Tensor& g) override {
    Tensor dx = zeros(in_shape, g.dtype(), g.device());
    backend(g.device()).copy(g, dx.select(d, index));
    return {dx};
  }
};

// The dim of `t` that `op` takes a length of: a 0-d tensor has none (wrap_dim alone would accept dim 0
// and -1 there, as reductions do, and the op would read past the end of the empty shape).
static int64_t sized_dim(const Tensor& t, int64_t d, const char* op) {
  if (t.dim() == 0)
    throw std::invalid_argument(fmt::format("{}: dimension {} given, but a 0-d tensor has no dimensions (shape [])", op, d));
  return wrap_dim(d, t.dim(), op);
}

Tensor Tensor::slice(int64_t d, std::optional<int64_t> start_in, std::optional<int64_t> end_in, int64_t step) const {
  d = sized_dim(*this, d, "slice");
  if (step <= 0) throw std::invalid_argument(fmt::format("slice: step must be positive, got {}", step));
  int64_t n = shape()[size_t(d)];
  auto clamp = [n](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + n : v, 0, n); };
  int64_t start = clamp(start_in.value_or(0)), end = clamp(end_in.value_or(n));
  int64_t len = end > start ? (end - start + step - 1) / step : 0;
  Shape shape = this->shape(), strides = this->strides();
  shape[size_t(d)] = len;
  strides[size_t(d)] *= step;
  Tensor out = strided_view(*this, shape, strides, offset() + start * this->strides()[size_t(d)]);
  if (!needs_grad({*this})) return out;
  return record_view("SliceBackward0", *this, out, SliceBackward0(this->shape(), d, start, end, step));
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  int64_t wd = sized_dim(*this, d, "narrow");
  int64_t n = shape()[size_t(wd)];
  if (start < 0) start += n;
  if (start < 0 || length < 0 || start + length > n)
    throw std::out_of_range(fmt::format("narrow: start {} and length {} exceed dimension {} of size {} (shape {})",
                                        start, length, wd, n, shape_str()));
  return slice(wd, start, start + length);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  d = sized_dim(*this, d, "select");
  int64_t n = shape()[size_t(d)];
  if (index < -n || index >= n)
    throw std::out_of_range(fmt::format("select: index {} is out of bounds for dimension {} with size {} (shape {})",
                                        index, d, n, shape_str()));
  if (index < 0) index += n;
  Shape shape = this->shape(), strides = this->strides();
  shape.erase(shape.begin() + d);
  strides.erase(strides.begin() + d);
  Tensor out = strided_view(*this, shape, strides, offset() + index * this->strides()[size_t(d)]);
  if (!needs_grad({*this})) return out;
  return record_view("SelectBackward0", *this, out, SelectBackward0(this->shape(), d, index));
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

// y = a copy of x  ⇒  dx = g
struct CloneBackward0 final : BackwardFunction {
  Grads apply(const Tensor& g) override { return {g}; }
};

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), dtype(), device());
  backend(device()).copy(*this, out);
  if (!needs_grad({*this})) return out;
  return record("CloneBackward0", out, {*this}, {}, CloneBackward0());
}

// ---------------------------------------------------------------- joining and splitting

// y = the inputs joined along dim  ⇒  each input's gradient is its slice of g
struct CatBackward0 final : BackwardFunction {
  int64_t dim;
  std::vector<int64_t> sizes;  // each input's length along dim
  CatBackward0(int64_t dim, std::vector<int64_t> sizes) : dim(dim), sizes(std::move(sizes)) {}
  Grads apply(const Tensor& g) override {
    Grads grads;
    for (Tensor& part : split(g, sizes, dim)) grads.push_back(std::move(part));
    return grads;
  }
};

// y = the inputs stacked along a new dim  ⇒  input i's gradient is g.select(dim, i)
struct StackBackward0 final : BackwardFunction {
  int64_t dim;
  size_t n;
  StackBackward0(int64_t dim, size_t n) : dim(dim), n(n) {}
  Grads apply(const Tensor& g) override {
    Grads grads;
    for (size_t i = 0; i < n; ++i) grads.push_back(g.select(dim, int64_t(i)));
    return grads;
  }
};

// cat and stack refuse mixed dtypes or devices the same way.
static void check_joinable(const std::vector<Tensor>& tensors, const char* op) {
  if (tensors.empty()) throw std::invalid_argument(fmt::format("{}: expected a non-empty list of tensors", op));
  const Tensor& first = tensors[0];
  for (size_t i = 1; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (t.dtype() != first.dtype())
      throw std::invalid_argument(fmt::format("{}: tensor {} has dtype {} but tensor 0 has dtype {}", op, i,
                                              dtype_name(t.dtype()), dtype_name(first.dtype())));
    if (t.device() != first.device())
      throw std::invalid_argument(fmt::format("{}: tensor {} is on {} but tensor 0 is on {}", op, i, t.device().str(),
                                              first.device().str()));
  }
}

// Copies `t` into the part of `out` that has t's shape, `strides` and `offset` (a raw view: no node).
static void copy_into(const Tensor& t, const Tensor& out, const Shape& strides, int64_t offset) {
  backend(out.device()).copy(t, strided_view(out, t.shape(), strides, offset));
}

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  check_joinable(tensors, "cat");
  const Tensor& first = tensors[0];
  // A 0-d tensor has no dim to join along (the rank check below then covers every other entry).
  if (first.dim() == 0)
    throw std::invalid_argument("cat: zero-dimensional tensor (at position 0) cannot be concatenated; use stack");
  dim = wrap_dim(dim, first.dim(), "cat");
  Shape out_shape = first.shape();
  out_shape[size_t(dim)] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    bool same_rank = t.dim() == first.dim();
    bool other_dims_match = same_rank;
    for (int64_t d = 0; same_rank && d < t.dim(); ++d)
      if (d != dim && t.shape()[size_t(d)] != first.shape()[size_t(d)]) other_dims_match = false;
    if (!other_dims_match)
      throw std::invalid_argument(fmt::format("cat: tensor {} has shape {} but tensor 0 has shape {}; all sizes must "
                                              "match except in dimension {}",
                                              i, t.shape_str(), first.shape_str(), dim));
    if (__builtin_add_overflow(out_shape[size_t(dim)], t.shape()[size_t(dim)], &out_shape[size_t(dim)]))
      throw std::invalid_argument(fmt::format("cat: the sizes in dimension {} add up to more than an int64 can count "
                                              "(at tensor {}, shape {})", dim, i, t.shape_str()));
  }
  Tensor out = empty(out_shape, first.dtype(), first.device());
  std::vector<int64_t> sizes;
  int64_t at = 0;
  for (const Tensor& t : tensors) {
    copy_into(t, out, out.strides(), at * out.strides()[size_t(dim)]);
    sizes.push_back(t.shape()[size_t(dim)]);
    at += sizes.back();
  }
  if (!needs_grad(std::span<const Tensor>(tensors))) return out;
  return record("CatBackward0", out, tensors, {}, CatBackward0(dim, sizes));
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  check_joinable(tensors, "stack");
  const Tensor& first = tensors[0];
  dim = wrap_dim(dim, first.dim() + 1, "stack");
  Shape out_shape = first.shape();
  out_shape.insert(out_shape.begin() + dim, int64_t(tensors.size()));
  checked_nbytes(out_shape, first.dtype(), "stack");
  Tensor out = empty(out_shape, first.dtype(), first.device());
  Shape item_strides = out.strides();  // entry i is out.select(dim, i): out's strides without `dim`
  item_strides.erase(item_strides.begin() + dim);
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].shape() != first.shape())
      throw std::invalid_argument(fmt::format("stack: expects each tensor to be equal size, but got {} at entry 0 "
                                              "and {} at entry {}",
                                              first.shape_str(), tensors[i].shape_str(), i));
    copy_into(tensors[i], out, item_strides, int64_t(i) * out.strides()[size_t(dim)]);
  }
  if (!needs_grad(std::span<const Tensor>(tensors))) return out;
  return record("StackBackward0", out, tensors, {}, StackBackward0(dim, tensors.size()));
}

std::vector<Tensor> chunk(const Tensor& t, int64_t chunks, int64_t dim) {
  if (chunks <= 0) throw std::invalid_argument(fmt::format("chunk: chunks must be positive, got {}", chunks));
  dim = sized_dim(t, dim, "chunk");
  int64_t n = t.shape()[size_t(dim)];
  int64_t step = (n + chunks - 1) / chunks;
  std::vector<Tensor> out;
  for (int64_t start = 0; start < n; start += step) out.push_back(t.narrow(dim, start, std::min(step, n - start)));
  return out;
}

std::vector<Tensor> split(const Tensor& t, int64_t size, int64_t dim) {
  if (size <= 0)
    throw std::invalid_argument(fmt::format("split: split_size must be positive, got {} (shape {})", size, t.shape_str()));
  dim = sized_dim(t, dim, "split");
  const int64_t n = t.shape()[size_t(dim)];
  std::vector<Tensor> out;
  for (int64_t start = 0; start < n; start += size) out.push_back(t.narrow(dim, start, std::min(size, n - start)));
  return out;
}

std::vector<Tensor> split(const Tensor& t, const std::vector<int64_t>& sizes, int64_t dim) {
  dim = sized_dim(t, dim, "split");
  int64_t total = 0;
  for (int64_t s : sizes) total += s < 0 ? t.size(dim) + 1 : s;  // a negative size can never add up
  if (total != t.size(dim))
    throw std::invalid_argument(fmt::format("split: sizes {} do not add up to dimension {} of size {} (shape {})",
                                            shape_to_string(Shape(sizes.begin(), sizes.end())), dim, t.size(dim),
                                            t.shape_str()));
  std::vector<Tensor> out;
  int64_t start = 0;
  for (int64_t s : sizes) {
    out.push_back(t.narrow(dim, start, s));
    start += s;
  }
  return out;
}

// y = tril(x) (or triu)  ⇒  dx = tril(g) (or triu): the kept elements pass their gradient, the zeroed ones none
struct TriangleBackward final : BackwardFunction {
  int64_t diagonal;
  bool lower;
  TriangleBackward(int64_t diagonal, bool lower) : diagonal(diagonal), lower(lower) {}
  Grads apply(const Tensor& g) override { return {lower ? g.tril(diagonal) : g.triu(diagonal)}; }
};

// Keeps elements with (column - row) <= diagonal (tril) or >= diagonal (triu) in the last two dims.
static Tensor triangle(const Tensor& t, int64_t diagonal, bool lower) {
  if (t.dim() < 2)
    throw std::invalid_argument(fmt::format("{}: input tensor must have at least 2 dimensions, got shape {}",
                                            lower ? "tril" : "triu", t.shape_str()));
  const int64_t rows = t.size(-2), cols = t.size(-1);
  Tensor out = empty(t.shape(), t.dtype(), t.device());
  {
    NoGradGuard no_grad;
    // keep[i, j]: whether column j minus row i is on the kept side of the diagonal
    Tensor offset = arange(cols).unsqueeze(0) - arange(rows).unsqueeze(1);
    Tensor keep = (lower ? le(offset, double(diagonal)) : ge(offset, double(diagonal))).to(t.device());
    Tensor zero = zeros({}, t.dtype(), t.device());
    backend(t.device()).where(keep.expand(t.shape()), t, zero.expand(t.shape()), out);
  }
  if (!needs_grad({t})) return out;
  return record(lower ? "TrilBackward0" : "TriuBackward0", out, {t}, {}, TriangleBackward(diagonal, lower));
}
Tensor tril(const Tensor& t, int64_t diagonal) { return triangle(t, diagonal, true); }
Tensor triu(const Tensor& t, int64_t diagonal) { return triangle(t, diagonal, false); }
Tensor Tensor::tril(int64_t diagonal) const { return autograd::tril(*this, diagonal); }
Tensor Tensor::triu(int64_t diagonal) const { return autograd::triu(*this, diagonal); }

}  // namespace autograd
