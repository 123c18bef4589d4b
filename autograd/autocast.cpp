// autocast.cpp — the thread's autocast dtype and the conversions of a product's operands (autocast.h).
#include "autograd/autocast.h"

#include <atomic>
#include <optional>
#include <stdexcept>
#include <string>

namespace autograd {

namespace {
std::atomic<DType> process_wide{DType::Float32};
thread_local std::optional<DType> guarded;  // the innermost AutocastGuard's dtype on this thread

void check_dtype(DType dtype, const char* who) {
  if (dtype != DType::BFloat16 && dtype != DType::Float32)
    throw std::invalid_argument(std::string(who) + ": products can be cast to bfloat16 (or kept in float32), not " +
                                std::string(dtype_name(dtype)));
}
}  // namespace

AutocastGuard::AutocastGuard(DType dtype) : previous_(autocast_dtype()), had_guard_(guarded.has_value()) {
  check_dtype(dtype, "AutocastGuard");
  guarded = dtype;
}

AutocastGuard::~AutocastGuard() {
  if (had_guard_) guarded = previous_;
  else guarded.reset();
}

void set_autocast(DType dtype) {
  check_dtype(dtype, "set_autocast");
  process_wide = dtype;
}

DType autocast_dtype() { return guarded ? *guarded : process_wide.load(); }

bool autocast_applies(const Tensor& a, const Tensor& b) {
  return autocast_dtype() == DType::BFloat16 && a.dtype() == DType::Float32 && b.dtype() == DType::Float32;
}

Tensor autocast_operand(const Tensor& x) { return x.defined() ? x.to(DType::BFloat16) : x; }

}  // namespace autograd
