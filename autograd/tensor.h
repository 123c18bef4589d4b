// tensor.h — the Tensor handle: shared storage viewed through shape, strides and an offset.
//
// A Tensor is a cheap handle (one shared_ptr) to a TensorImpl. Copying a Tensor copies the handle, not
// the data, exactly like assigning a Python variable that holds a torch.Tensor. Views (transpose, slice,
// expand, ...) make a new TensorImpl over the *same* Storage with different shape/strides/offset.
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/device.h"
#include "autograd/dtype.h"
#include "autograd/shape.h"

namespace autograd {

struct Node;
class Tensor;

// The bytes behind one or more tensors. `version` counts in-place writes, so a backward pass can tell
// that a tensor it saved was changed after it was saved (PyTorch's version counter).
struct Storage {
  void* data = nullptr;
  size_t nbytes = 0;
  Device device;
  Storage(size_t nbytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  // In-place writes so far (a node refuses to run if a tensor it saved was written since). A view's node
  // watches the counter without keeping the memory alive (version_counter()): from then on the counter
  // lives in its own small block, shared with the watchers.
  uint64_t version() const { return shared_version ? *shared_version : own_version; }
  void bump_version() { ++(shared_version ? *shared_version : own_version); }
  std::shared_ptr<const uint64_t> version_counter();

 private:
  uint64_t own_version = 0;
  std::shared_ptr<uint64_t> shared_version;  // null until someone watches
};

struct TensorImpl {
  TensorImpl() {}  // user-provided: make_pooled<TensorImpl>() then skips zero-filling the whole object first
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;  // in elements, not bytes
  int64_t offset = 0;
  DType dtype = DType::Float32;
  bool requires_grad = false;     // true for leaves that want .grad, and for results of recorded ops
  std::shared_ptr<Node> grad_fn;  // the node that made this tensor (null for leaves)
  std::shared_ptr<TensorImpl> grad;  // accumulated gradient of a leaf
  bool is_view = false;              // shares storage with the tensor it was made from
  std::string name;                  // optional: a parameter's dotted name, shown in traces and graphs
  // Called by backward() once this leaf's .grad is complete for the pass (PyTorch's post-accumulate-grad
  // hooks); each has an id so its owner can remove it. Empty for almost every tensor.
  std::vector<std::pair<uint64_t, std::function<void(Tensor&)>>> post_accumulate_grad_hooks;
};

// A nested initializer list of numbers: tensor({{1, 2}, {3, 4}}). Integer-only lists give int64 tensors,
// anything with a floating literal gives float32, as torch.tensor does.
class Nested {
 public:
  Nested(double v) : value_(v), is_int_(false) {}
  Nested(float v) : value_(v), is_int_(false) {}
  Nested(int v) : value_(v), is_int_(true) {}
  Nested(int64_t v) : value_(double(v)), is_int_(true) {}
  Nested(bool v) : value_(v ? 1.0 : 0.0), is_int_(true) {}
  Nested(std::initializer_list<Nested> items) : children_(items), is_leaf_(false) {}
  void flatten(Shape& shape, std::vector<double>& values, bool& all_int, size_t depth = 0) const;

 private:
  double value_ = 0;
  std::vector<Nested> children_;
  bool is_int_ = true;
  bool is_leaf_ = true;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- metadata ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Shape& strides() const { return impl().strides; }
  int64_t offset() const { return impl().offset; }
  int64_t size(int64_t dim) const {  // negative dims count from the end
    const Shape& s = shape();
    const int64_t n = int64_t(s.size()), d = dim < 0 ? dim + n : dim;
    if (d < 0 || d >= n) [[unlikely]] throw_bad_dim(dim);
    return s[size_t(d)];
  }
  int64_t dim() const { return int64_t(impl().shape.size()); }
  int64_t numel() const;
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage->device; }
  bool is_contiguous() const;
  std::string shape_str() const;  // "[2, 3]" for error messages
  TensorImpl& impl() const {  // inline: every accessor above goes through it
    if (!impl_) [[unlikely]] throw_undefined();
    return *impl_;
  }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& other) const { return impl_ == other.impl_; }

  // ---- raw data (CPU) ----
  template <typename T> T* data_ptr() const;  // pointer to element [0, 0, ...], checks dtype
  void* raw_data() const {  // pointer to element [0, ...] as bytes
    const TensorImpl& t = impl();
    return static_cast<char*>(t.storage->data) + t.offset * int64_t(dtype_size(t.dtype));
  }
  template <typename T> std::vector<T> to_vector() const;  // row-major copy of the values
  double item() const;                                      // the single value, as double
  template <typename T> T item() const { return T(item()); }
  Tensor operator[](int64_t index) const { return select(0, index); }

  // ---- autograd state ----
  bool requires_grad() const { return impl().requires_grad; }
  Tensor& requires_grad_(bool on = true);
  Tensor grad() const;  // undefined Tensor until a backward pass reaches this leaf
  // `hook(leaf)` runs during backward() as soon as every gradient this pass sends to the leaf has been
  // added into its .grad (torch's register_post_accumulate_grad_hook), so a caller can start using that
  // gradient while the rest of backward still runs. Returns an id for remove_post_accumulate_grad_hook.
  uint64_t register_post_accumulate_grad_hook(std::function<void(Tensor&)> hook);
  void remove_post_accumulate_grad_hook(uint64_t id);
  void set_grad(const Tensor& g) const;
  const std::shared_ptr<Node>& grad_fn() const { return impl().grad_fn; }
  bool is_leaf() const { return impl().grad_fn == nullptr; }
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;
  Tensor detach() const;  // same storage, no history
  uint64_t version() const { return impl().storage->version(); }

  // ---- conversions and copies ----
  Tensor to(DType dtype) const;
  Tensor to(Device device) const;
  Tensor cpu() const { return to(Device::cpu()); }
  Tensor clone() const;
  Tensor contiguous() const;

  // ---- views (negative dims count from the end) ----
  Tensor view(const Shape& shape) const;
  Tensor reshape(const Shape& shape) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;  // transpose of a matrix (0-D and 1-D tensors are returned as they are)
  Tensor mT() const { return transpose(-2, -1); }
  Tensor permute(const Shape& dims) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor expand(const Shape& shape) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  // dims start_dim..end_dim merged into one, as torch.flatten: a view where the strides allow (reshape)
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  // A raw view over the same storage with no gradient history (for kernels and internal helpers).
  Tensor as_strided(const Shape& shape, const Shape& strides, int64_t offset) const;

  // ---- math (methods mirror torch.Tensor; free functions live in ops.h) ----
  Tensor sum() const;
  Tensor sum(int64_t dim, bool keepdim = false) const;
  Tensor sum_to(const Shape& shape) const;  // undo broadcasting: sum the dims that were expanded
  Tensor mean() const;
  Tensor mean(int64_t dim, bool keepdim = false) const;
  Tensor max() const;
  std::pair<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;  // values, indices
  Tensor argmax() const;
  Tensor argmax(int64_t dim, bool keepdim = false) const;
  Tensor abs() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor tanh() const;
  Tensor relu() const;
  Tensor pow(double exponent) const;
  Tensor matmul(const Tensor& other) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;
  Tensor masked_fill(const Tensor& mask, double value) const;
  Tensor tril(int64_t diagonal = 0) const;
  Tensor triu(int64_t diagonal = 0) const;
  Tensor to_bool() const { return to(DType::Bool); }

  // ---- in place (bump the version counter; only allowed where history stays correct) ----
  Tensor& masked_fill_(const Tensor& mask, double value);
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0.0); }
  Tensor& copy_(const Tensor& src);
  Tensor& add_(const Tensor& other, double alpha = 1.0);
  Tensor& mul_(double factor);

 private:
  std::shared_ptr<TensorImpl> impl_;
  [[noreturn]] static void throw_undefined();
  [[noreturn]] void throw_bad_dim(int64_t dim) const;
};

// ---- construction ----
Tensor empty(const Shape& shape, DType dtype = DType::Float32, Device device = Device::cpu());
Tensor zeros(const Shape& shape, DType dtype = DType::Float32, Device device = Device::cpu());
Tensor ones(const Shape& shape, DType dtype = DType::Float32, Device device = Device::cpu());
Tensor full(const Shape& shape, double value, DType dtype = DType::Float32, Device device = Device::cpu());
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor scalar_tensor(double value, DType dtype = DType::Float32, Device device = Device::cpu());
Tensor arange(int64_t end);                                        // int64, like torch.arange(5)
Tensor arange(int64_t start, int64_t end, int64_t step = 1);       // int64
Tensor arange(double start, double end, double step, DType dtype);  // floating ranges
Tensor eye(int64_t n, DType dtype = DType::Float32);
Tensor tensor(const Nested& values);                  // dtype inferred: int64 or float32
Tensor tensor(const Nested& values, DType dtype);
Tensor from_vector(const std::vector<float>& values, const Shape& shape);
Tensor from_vector(const std::vector<double>& values, const Shape& shape);
Tensor from_vector(const std::vector<int64_t>& values, const Shape& shape);
Tensor from_vector(const std::vector<double>& values, const Shape& shape, DType dtype);

Shape contiguous_strides(const Shape& shape);
inline int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}
std::string shape_to_string(const Shape& shape);  // "[2, 3]"
// The element count of `shape`, refusing (std::invalid_argument naming `op` and the shape) a negative
// size or a count that int64 cannot hold. Every shape a user can make passes through it.
int64_t checked_numel(const Shape& shape, const char* op);
// The bytes `numel` elements of `dtype` take, refusing (naming `op` and the shape) a size no allocator
// could give: more than 2^62 bytes.
size_t checked_nbytes(const Shape& shape, DType dtype, const char* op);
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);  // -1 → ndim-1, with a clear error

std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace autograd
