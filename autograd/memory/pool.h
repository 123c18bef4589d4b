// pool.h — recycled memory blocks for the engine's small, short-lived objects.
//
// A seed-size training step creates ~120 TensorImpls, ~30 Nodes and their Storages and frees them all
// microseconds later; at ~20-40 ns per malloc/free pair that was a few percent of the step. make_pooled<T>
// is std::make_shared<T> whose one block (object plus reference counts) comes from a per-thread free list
// of blocks of that size, so after the first step nearly every one is a reused block.
#pragma once
#include <cstddef>
#include <memory>
#include <utility>

namespace autograd::memory {

// A block of at least `bytes` (at most kPoolLargest; larger requests go to operator new).
void* pool_allocate(size_t bytes);
// Returns a block from pool_allocate(bytes), to this thread's free list (or to operator delete when
// the list is full or the thread is exiting).
void pool_deallocate(void* block, size_t bytes) noexcept;

template <typename T> struct PoolAllocator {
  using value_type = T;
  PoolAllocator() = default;
  template <typename U> PoolAllocator(const PoolAllocator<U>&) noexcept {}
  T* allocate(size_t n) { return static_cast<T*>(pool_allocate(n * sizeof(T))); }
  void deallocate(T* p, size_t n) noexcept { pool_deallocate(p, n * sizeof(T)); }
  template <typename U> bool operator==(const PoolAllocator<U>&) const noexcept { return true; }
};

template <typename T, typename... Args> std::shared_ptr<T> make_pooled(Args&&... args) {
  return std::allocate_shared<T>(PoolAllocator<T>(), std::forward<Args>(args)...);
}

}  // namespace autograd::memory
