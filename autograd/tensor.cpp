// tensor.cpp — storage, metadata, construction and data access. Ops with gradients live in ops/.
#include "autograd/tensor.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "autograd/backend.h"
#include "autograd/memory/pool.h"
#include "autograd/node.h"
#include "autograd/memory/out_of_memory.h"

namespace autograd {

// ---------------------------------------------------------------- storage

Storage::Storage(size_t n, Device d) : nbytes(n), device(d) {
  try {
    data = backend(d).allocate(n);
  } catch (const std::bad_alloc&) {
    throw OutOfMemory(fmt::format("allocate: out of memory: {} bytes on {} could not be allocated", n, d.str()));
  }
}

int64_t checked_numel(const Shape& shape, const char* op) {
  int64_t n = 1;
  for (int64_t s : shape) {
    if (s < 0) throw std::invalid_argument(fmt::format("{}: negative dimension in shape {}", op, shape_to_string(shape)));
    if (__builtin_mul_overflow(n, s, &n))
      throw std::invalid_argument(fmt::format("{}: shape {} has more elements than an int64 can count", op,
                                              shape_to_string(shape)));
  }
  return n;
}

size_t checked_nbytes(const Shape& shape, DType dtype, const char* op) {
  constexpr int64_t kMaxBytes = int64_t(1) << 62;
  const int64_t n = checked_numel(shape, op);
  if (n > kMaxBytes / int64_t(dtype_size(dtype)))
    throw std::invalid_argument(fmt::format("{}: shape {} of {} needs {} × {} bytes, more than any allocator can give",
                                            op, shape_to_string(shape), dtype_name(dtype), n, dtype_size(dtype)));
  return size_t(n) * dtype_size(dtype);
}
Storage::~Storage() { backend(device).deallocate(data, nbytes); }

std::shared_ptr<const uint64_t> Storage::version_counter() {
  if (!shared_version) shared_version = memory::make_pooled<uint64_t>(own_version);
  return shared_version;
}

Device parse_device(const std::string& text) {
  if (text == "cpu") return Device::cpu();
  if (text == "cuda") return Device::cuda(0);
  if (text.rfind("cuda:", 0) == 0) {
    try {
      size_t used = 0;
      int index = std::stoi(text.substr(5), &used);
      if (used == text.size() - 5 && index >= 0) return Device::cuda(index);
    } catch (const std::exception&) {
    }
  }
  throw std::invalid_argument(fmt::format("device: expected 'cpu', 'cuda' or 'cuda:N', got '{}'", text));
}

bool has_backend(Device device) {
  try {
    (void)backend(device);
    return true;
  } catch (const std::runtime_error&) {
    return false;
  }
}

// ---------------------------------------------------------------- shape helpers

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

std::string shape_to_string(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t range = std::max<int64_t>(ndim, 1);  // a 0-d tensor accepts dim 0 and -1, as in PyTorch
  if (dim < -range || dim >= range)
    throw std::out_of_range(fmt::format("{}: dimension {} out of range for a tensor of {} dimensions "
                                        "(expected to be in [{}, {}])",
                                        op, dim, ndim, -range, range - 1));
  return dim < 0 ? dim + range : dim;
}

// ---------------------------------------------------------------- metadata

void Tensor::throw_undefined() {
  throw std::logic_error("tensor: use of an undefined Tensor (default-constructed, or a missing grad)");
}

void Tensor::throw_bad_dim(int64_t d) const {
  if (dim() > 0) wrap_dim(d, dim(), "size");  // throws its usual message for a dim out of range
  throw std::out_of_range(fmt::format("size: a 0-d tensor has no dimension {}", d));
}
int64_t Tensor::numel() const { return shape_numel(shape()); }
std::string Tensor::shape_str() const { return shape_to_string(shape()); }

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (size_t i = shape().size(); i-- > 0;) {
    if (shape()[i] == 1) continue;  // the stride of a size-1 dim never matters
    if (strides()[i] != expected) return false;
    expected *= shape()[i];
  }
  return true;
}

template <typename T> T* Tensor::data_ptr() const {
  if (dtype() != dtype_of<T>::value)
    throw std::invalid_argument(fmt::format("data_ptr: tensor has dtype {}, asked for {}", dtype_name(dtype()),
                                            dtype_name(dtype_of<T>::value)));
  return static_cast<T*>(raw_data());
}
template float* Tensor::data_ptr<float>() const;
template double* Tensor::data_ptr<double>() const;
template int64_t* Tensor::data_ptr<int64_t>() const;
template bool* Tensor::data_ptr<bool>() const;
template bfloat16* Tensor::data_ptr<bfloat16>() const;

template <typename T> std::vector<T> Tensor::to_vector() const {
  Tensor c = to(Device::cpu()).to(dtype_of<T>::value).contiguous();
  const T* p = c.data_ptr<T>();
  return std::vector<T>(p, p + c.numel());
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<bool> Tensor::to_vector<bool>() const;

double Tensor::item() const {
  if (numel() != 1)
    throw std::invalid_argument(
        fmt::format("item: a tensor with {} elements (shape {}) cannot be converted to a number", numel(), shape_str()));
  Tensor c = to(Device::cpu());
  switch (dtype()) {
    case DType::Float32: return *c.data_ptr<float>();
    case DType::Float64: return *c.data_ptr<double>();
    case DType::Int64: return double(*c.data_ptr<int64_t>());
    case DType::Bool: return *c.data_ptr<bool>() ? 1.0 : 0.0;
    case DType::BFloat16: return widen(*c.data_ptr<bfloat16>());
  }
  return 0;
}

// ---------------------------------------------------------------- autograd state

Tensor& Tensor::requires_grad_(bool on) {
  if (on && !is_floating(dtype()))
    throw std::invalid_argument(
        fmt::format("requires_grad_: only floating point tensors can require gradients, got {}", dtype_name(dtype())));
  if (!on && grad_fn())
    throw std::invalid_argument("requires_grad_: cannot turn off gradients of a non-leaf tensor; use detach()");
  impl().requires_grad = on;
  return *this;
}

Tensor Tensor::grad() const { return impl().grad ? Tensor(impl().grad) : Tensor(); }

uint64_t Tensor::register_post_accumulate_grad_hook(std::function<void(Tensor&)> hook) {
  if (grad_fn() || !requires_grad())
    throw std::invalid_argument(fmt::format(
        "register_post_accumulate_grad_hook: the tensor of shape {} is not a leaf that requires grad{}", shape_str(),
        grad_fn() ? fmt::format(" (it was made by {})", grad_fn()->grad_fn_name()) : ""));
  static std::atomic<uint64_t> next_id{1};
  const uint64_t id = next_id++;
  impl().post_accumulate_grad_hooks.emplace_back(id, std::move(hook));
  return id;
}

void Tensor::remove_post_accumulate_grad_hook(uint64_t id) {
  std::erase_if(impl().post_accumulate_grad_hooks, [id](const auto& entry) { return entry.first == id; });
}

void Tensor::set_grad(const Tensor& g) const {
  if (g.defined() && g.shape() != shape())
    throw std::invalid_argument(
        fmt::format("set_grad: gradient of shape {} for a tensor of shape {}", g.shape_str(), shape_str()));
  impl().grad = g.defined() ? g.impl_ptr() : nullptr;
}

Tensor Tensor::detach() const {
  auto out = memory::make_pooled<TensorImpl>(impl());
  out->requires_grad = false;
  out->grad_fn = nullptr;
  out->grad = nullptr;
  out->post_accumulate_grad_hooks.clear();  // they belong to the original leaf, not to a new one
  return Tensor(out);
}

// ---------------------------------------------------------------- construction

Tensor empty(const Shape& shape, DType dtype, Device device) {
  const size_t nbytes = checked_nbytes(shape, dtype, "empty");
  auto impl = memory::make_pooled<TensorImpl>();
  impl->storage = memory::make_pooled<Storage>(nbytes, device);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  backend(device).fill(t, value);
  return t;
}
Tensor zeros(const Shape& shape, DType dtype, Device device) { return full(shape, 0.0, dtype, device); }
Tensor ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1.0, dtype, device); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype(), t.device()); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), t.dtype(), t.device()); }
Tensor scalar_tensor(double value, DType dtype, Device device) { return full({}, value, dtype, device); }

Tensor from_vector(const std::vector<double>& values, const Shape& shape, DType dtype) {
  if (int64_t(values.size()) != shape_numel(shape))
    throw std::invalid_argument(fmt::format("from_vector: {} values do not fill shape {} ({} elements)", values.size(),
                                            shape_to_string(shape), shape_numel(shape)));
  Tensor src = empty(shape, DType::Float64);
  if (!values.empty()) std::memcpy(src.raw_data(), values.data(), values.size() * sizeof(double));  // (no null pointers)
  return dtype == DType::Float64 ? src : src.to(dtype);
}

template <typename T> static Tensor from_typed(const std::vector<T>& values, const Shape& shape) {
  if (int64_t(values.size()) != shape_numel(shape))
    throw std::invalid_argument(fmt::format("from_vector: {} values do not fill shape {} ({} elements)", values.size(),
                                            shape_to_string(shape), shape_numel(shape)));
  Tensor t = empty(shape, dtype_of<T>::value);
  if (!values.empty()) std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(T));
  return t;
}
Tensor from_vector(const std::vector<float>& v, const Shape& s) { return from_typed(v, s); }
Tensor from_vector(const std::vector<double>& v, const Shape& s) { return from_typed(v, s); }
Tensor from_vector(const std::vector<int64_t>& v, const Shape& s) { return from_typed(v, s); }

void Nested::flatten(Shape& shape, std::vector<double>& values, bool& all_int, size_t depth) const {
  if (is_leaf_) {
    if (depth != shape.size())
      throw std::invalid_argument("tensor: nested list is ragged (a number where a list was expected)");
    values.push_back(value_);
    all_int = all_int && is_int_;
    return;
  }
  if (depth == shape.size()) {
    // The first number fixed the depth of every number; a list this deep after it makes the list ragged.
    if (!values.empty())
      throw std::invalid_argument("tensor: nested list is ragged (a list where a number was expected)");
    shape.push_back(int64_t(children_.size()));
  } else if (shape[depth] != int64_t(children_.size()))
    throw std::invalid_argument(fmt::format("tensor: nested list is ragged: expected {} items at depth {}, got {}",
                                            shape[depth], depth, children_.size()));
  for (const Nested& c : children_) c.flatten(shape, values, all_int, depth + 1);
}

static Tensor tensor_from_nested(const Nested& n, std::optional<DType> dtype) {
  Shape shape;
  std::vector<double> values;
  bool all_int = true;
  n.flatten(shape, values, all_int);
  return from_vector(values, shape, dtype.value_or(all_int ? DType::Int64 : DType::Float32));
}
Tensor tensor(const Nested& values) { return tensor_from_nested(values, std::nullopt); }
Tensor tensor(const Nested& values, DType dtype) { return tensor_from_nested(values, dtype); }

Tensor arange(int64_t end) { return arange(0, end, 1); }
Tensor arange(int64_t start, int64_t end, int64_t step) {
  if (step == 0) throw std::invalid_argument("arange: step must be nonzero");
  int64_t n = std::max<int64_t>(0, (end - start + step + (step > 0 ? -1 : 1)) / step);
  Tensor t = empty({n}, DType::Int64);
  int64_t* p = t.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) p[i] = start + i * step;
  return t;
}
Tensor arange(double start, double end, double step, DType dtype) {
  if (step == 0) throw std::invalid_argument("arange: step must be nonzero");
  int64_t n = std::max<int64_t>(0, int64_t(std::ceil((end - start) / step)));
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = start + double(i) * step;
  return from_vector(v, {n}, dtype);
}

Tensor eye(int64_t n, DType dtype) {
  Tensor t = zeros({n, n}, dtype);
  backend(t.device()).fill(t.as_strided({n}, {n + 1}, 0), 1.0);
  return t;
}

}  // namespace autograd
