// shape.h — Shape: a tensor's sizes or strides, a short list of int64 kept inline.
//
// Every tensor carries two of these and nearly every op makes a few more, so a heap allocation per list
// (std::vector) was a large share of a small model's step. Shape keeps up to kInline values inside the
// object and only goes to the heap beyond that; otherwise it behaves like std::vector<int64_t> (and
// converts to and from one).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <vector>

namespace autograd {

class Shape {
 public:
  using value_type = int64_t;
  using size_type = size_t;
  using difference_type = std::ptrdiff_t;
  using reference = int64_t&;
  using const_reference = const int64_t&;
  using pointer = int64_t*;
  using const_pointer = const int64_t*;
  using iterator = int64_t*;
  using const_iterator = const int64_t*;
  static constexpr size_t kInline = 6;

  Shape() = default;
  explicit Shape(size_t n, int64_t value = 0) { resize(n, value); }
  Shape(std::initializer_list<int64_t> values) { assign(values.begin(), values.end()); }
  template <std::input_iterator It> Shape(It first, It last) { assign(first, last); }
  Shape(const std::vector<int64_t>& values) { assign(values.begin(), values.end()); }  // NOLINT: implicit on purpose
  Shape(const Shape& other) { copy_from(other); }
  Shape(Shape&& other) noexcept { take(other); }
  Shape& operator=(const Shape& other) {
    if (this != &other) copy_from(other);
    return *this;
  }
  Shape& operator=(Shape&& other) noexcept {
    if (this != &other) {
      release();
      take(other);
    }
    return *this;
  }
  ~Shape() { release(); }
  operator std::vector<int64_t>() const { return {begin(), end()}; }  // NOLINT: implicit on purpose

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t* data() { return data_; }
  const int64_t* data() const { return data_; }
  iterator begin() { return data_; }
  iterator end() { return data_ + size_; }
  const_iterator begin() const { return data_; }
  const_iterator end() const { return data_ + size_; }
  const_iterator cbegin() const { return data_; }
  const_iterator cend() const { return data_ + size_; }
  int64_t& operator[](size_t i) { return data_[i]; }
  const int64_t& operator[](size_t i) const { return data_[i]; }
  int64_t& front() { return data_[0]; }
  int64_t& back() { return data_[size_ - 1]; }
  const int64_t& front() const { return data_[0]; }
  const int64_t& back() const { return data_[size_ - 1]; }

  void reserve(size_t n) {
    if (n <= capacity_) return;
    int64_t* grown = new int64_t[n];
    std::copy(begin(), end(), grown);
    if (on_heap()) delete[] data_;
    data_ = grown;
    capacity_ = n;
  }
  void resize(size_t n, int64_t value = 0) {
    reserve(n);
    for (size_t i = size_; i < n; ++i) data_[i] = value;
    size_ = n;
  }
  void clear() { size_ = 0; }
  void push_back(int64_t value) {
    if (size_ == capacity_) reserve(2 * capacity_);
    data_[size_++] = value;
  }
  void pop_back() { --size_; }
  iterator insert(const_iterator pos, int64_t value) {
    const size_t at = size_t(pos - data_);
    push_back(value);
    std::rotate(data_ + at, data_ + size_ - 1, data_ + size_);
    return data_ + at;
  }
  iterator erase(const_iterator pos) {
    const size_t at = size_t(pos - data_);
    std::copy(data_ + at + 1, data_ + size_, data_ + at);
    --size_;
    return data_ + at;
  }
  template <std::input_iterator It> void assign(It first, It last) {
    clear();
    for (; first != last; ++first) push_back(int64_t(*first));
  }

  friend bool operator==(const Shape& a, const Shape& b) {
    if (a.size_ != b.size_) return false;
    for (size_t i = 0; i < a.size_; ++i)  // a plain loop: std::equal would call memcmp for a handful of values
      if (a.data_[i] != b.data_[i]) return false;
    return true;
  }

 private:
  bool on_heap() const { return data_ != inline_; }
  void release() {
    if (on_heap()) delete[] data_;
    data_ = inline_;
    capacity_ = kInline;
    size_ = 0;
  }
  // Moves `other`'s values here (stealing its heap block if it has one) and leaves it empty.
  void take(Shape& other) {
    if (other.on_heap()) {
      data_ = other.data_;
      capacity_ = other.capacity_;
      other.data_ = other.inline_;
      other.capacity_ = kInline;
    } else {
      __builtin_memcpy(inline_, other.inline_, sizeof(inline_));  // a fixed size: a few moves, no memmove call
    }
    size_ = other.size_;
    other.size_ = 0;
  }
  // Copies `other`'s values. Up to kInline of them are copied as one fixed-size block (every buffer a
  // Shape points to holds at least kInline values), which compiles to a few moves instead of a call.
  void copy_from(const Shape& other) {
    if (other.size_ <= kInline) {
      release();
      __builtin_memcpy(inline_, other.data_, sizeof(inline_));
      size_ = other.size_;
    } else {
      assign(other.begin(), other.end());
    }
  }

  int64_t inline_[kInline] = {};
  int64_t* data_ = inline_;
  size_t size_ = 0;
  size_t capacity_ = kInline;
};

}  // namespace autograd
