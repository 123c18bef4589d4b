// memory/pooled_box.h — PooledBox<Base>: owns one object of a class derived from Base (which has a virtual
// destructor), in a block from the pool (pool.h) rather than a fresh heap allocation. A node's backward
// function lives in one: one is made for every node of every training step.
#pragma once
#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

#include "autograd/memory/pool.h"

namespace autograd::memory {

template <typename Base> class PooledBox {
 public:
  PooledBox() = default;
  PooledBox(std::nullptr_t) {}
  template <typename Derived, typename = std::enable_if_t<std::is_base_of_v<Base, std::decay_t<Derived>>>>
  PooledBox(Derived object) : block_(pool_allocate(sizeof(Derived))), bytes_(sizeof(Derived)) {
    object_ = new (block_) Derived(std::move(object));
  }
  PooledBox(PooledBox&& other) noexcept
      : object_(std::exchange(other.object_, nullptr)), block_(std::exchange(other.block_, nullptr)),
        bytes_(std::exchange(other.bytes_, 0)) {}
  PooledBox& operator=(PooledBox&& other) noexcept {
    if (this != &other) {
      reset();
      object_ = std::exchange(other.object_, nullptr);
      block_ = std::exchange(other.block_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  PooledBox& operator=(std::nullptr_t) {
    reset();
    return *this;
  }
  PooledBox(const PooledBox&) = delete;
  PooledBox& operator=(const PooledBox&) = delete;
  ~PooledBox() { reset(); }

  explicit operator bool() const { return object_ != nullptr; }
  Base* operator->() const { return object_; }
  Base& operator*() const { return *object_; }

 private:
  void reset() {
    if (!object_) return;
    object_->~Base();
    pool_deallocate(block_, bytes_);
    object_ = nullptr;
    block_ = nullptr;
  }
  Base* object_ = nullptr;
  void* block_ = nullptr;  // where the derived object starts
  size_t bytes_ = 0;  // of the derived object: what its block was allocated for
};

}  // namespace autograd::memory
