// memory/pooled_function.h — PooledFunction<R(Args...)>: std::function<R(Args...)> in all but where the
// captures live. They go in one block from the pool (pool.h) rather than a fresh heap allocation, which
// matters for a node's backward closure: one is made for every node of every training step.
#pragma once
#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

#include "autograd/memory/pool.h"

namespace autograd::memory {

template <typename Signature> class PooledFunction;

template <typename R, typename... Args> class PooledFunction<R(Args...)> {
 public:
  PooledFunction() = default;
  PooledFunction(std::nullptr_t) {}
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, PooledFunction> &&
                                                    std::is_invocable_r_v<R, F&, Args...>>>
  PooledFunction(F f) : callable_(new (pool_allocate(sizeof(Closure<F>))) Closure<F>(std::move(f))) {}
  PooledFunction(PooledFunction&& other) noexcept : callable_(std::exchange(other.callable_, nullptr)) {}
  PooledFunction& operator=(PooledFunction&& other) noexcept {
    if (this != &other) {
      reset();
      callable_ = std::exchange(other.callable_, nullptr);
    }
    return *this;
  }
  PooledFunction& operator=(std::nullptr_t) {
    reset();
    return *this;
  }
  PooledFunction(const PooledFunction&) = delete;
  PooledFunction& operator=(const PooledFunction&) = delete;
  ~PooledFunction() { reset(); }

  explicit operator bool() const { return callable_ != nullptr; }
  R operator()(Args... args) const { return callable_->call(std::forward<Args>(args)...); }

 private:
  struct Callable {
    virtual R call(Args... args) = 0;
    virtual size_t bytes() const = 0;
    virtual ~Callable() = default;
  };
  template <typename F> struct Closure final : Callable {
    F f;
    explicit Closure(F fn) : f(std::move(fn)) {}
    R call(Args... args) override { return f(std::forward<Args>(args)...); }
    size_t bytes() const override { return sizeof(Closure); }
  };
  void reset() {
    if (!callable_) return;
    const size_t bytes = callable_->bytes();
    callable_->~Callable();
    pool_deallocate(callable_, bytes);
    callable_ = nullptr;
  }
  Callable* callable_ = nullptr;
};

}  // namespace autograd::memory
