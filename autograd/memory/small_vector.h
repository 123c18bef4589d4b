// small_vector.h — SmallVector<T, N>: a vector that keeps up to N elements inside the object.
//
// Every recorded op makes a Node with a list of input edges and a list of saved versions, nearly always
// one to three entries each. As std::vectors those were two heap allocations per node — a visible share
// of a small model's step. SmallVector keeps the first N in place and moves everything to a std::vector
// only when more arrive (cat and stack of many tensors). The gradients a node's backward returns (Grads)
// are one too: one allocation less per node of every backward pass.
#pragma once
#include <array>
#include <cstddef>
#include <initializer_list>
#include <utility>
#include <vector>

namespace autograd::memory {

template <typename T, size_t N> class SmallVector {
 public:
  SmallVector() = default;
  SmallVector(std::initializer_list<T> values) {
    reserve(values.size());
    for (const T& value : values) push_back(value);
  }
  SmallVector(const SmallVector&) = delete;
  SmallVector& operator=(const SmallVector&) = delete;
  SmallVector(SmallVector&& other) noexcept { *this = std::move(other); }
  SmallVector& operator=(SmallVector&& other) noexcept {
    if (this == &other) return *this;
    for (size_t i = 0; i < N; ++i) inline_[i] = std::move(other.inline_[i]);
    heap_ = std::move(other.heap_);
    size_ = other.size_;
    on_heap_ = other.on_heap_;
    other.clear();
    return *this;
  }

  size_t size() const { return on_heap_ ? heap_.size() : size_; }
  bool empty() const { return size() == 0; }
  T* data() { return on_heap_ ? heap_.data() : inline_.data(); }
  const T* data() const { return on_heap_ ? heap_.data() : inline_.data(); }
  T* begin() { return data(); }
  T* end() { return data() + size(); }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size(); }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }

  void reserve(size_t n) {
    if (n > N && !on_heap_) spill(n);
  }
  void push_back(T value) {
    if (!on_heap_ && size_ < N) {
      inline_[size_++] = std::move(value);
      return;
    }
    if (!on_heap_) spill(N + 1);
    heap_.push_back(std::move(value));
  }
  T& back() { return data()[size() - 1]; }
  void pop_back() {
    if (on_heap_) heap_.pop_back();
    else inline_[--size_] = T{};
  }
  // Drops every element (releasing what they hold) and goes back to inline storage.
  void clear() {
    for (T& slot : inline_) slot = T{};
    size_ = 0;
    heap_ = std::vector<T>();
    on_heap_ = false;
  }

 private:
  void spill(size_t capacity) {
    heap_.reserve(capacity);
    for (size_t i = 0; i < size_; ++i) heap_.push_back(std::move(inline_[i]));
    for (T& slot : inline_) slot = T{};
    size_ = 0;
    on_heap_ = true;
  }

  std::array<T, N> inline_{};  // slots past size_ hold default values (empty pointers)
  std::vector<T> heap_;        // used instead once more than N elements arrive
  size_t size_ = 0;
  bool on_heap_ = false;
};

}  // namespace autograd::memory
