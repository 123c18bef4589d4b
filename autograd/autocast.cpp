// autocast.cpp — the thread's autocast dtype and the conversions of a product's operands (autocast.h).
#include "autograd/autocast.h"

#include <atomic>
#include <optional>
#include <stdexcept>
#include <string>

#include "autograd/node.h"

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
  auto castable = [](const Tensor& t) { return t.dtype() == DType::Float32 || t.dtype() == DType::BFloat16; };
  return autocast_dtype() == DType::BFloat16 && castable(a) && castable(b) &&
         (a.dtype() == DType::Float32 || b.dtype() == DType::Float32);
}

Tensor autocast_operand(const Tensor& x) { return x.defined() ? x.to(DType::BFloat16) : x; }

void store_in_bfloat16(const Tensor& leaf) {
  if (leaf.dtype() == DType::BFloat16) return;
  if (leaf.dtype() != DType::Float32 || leaf.grad_fn() || !leaf.is_contiguous() || leaf.impl().is_view)
    throw std::invalid_argument("store_in_bfloat16: expected a contiguous float32 leaf, got a " +
                                std::string(dtype_name(leaf.dtype())) + " tensor " + leaf.shape_str() +
                                (leaf.grad_fn() ? " made by an op" : leaf.impl().is_view ? " (a view)" : ""));
  Tensor rounded;
  {
    NoGradGuard no_grad;
    rounded = leaf.to(DType::BFloat16).contiguous();
  }
  // the same TensorImpl, now over the bfloat16 storage: what holds `leaf` holds the new values
  TensorImpl& impl = leaf.impl();
  impl.storage = rounded.impl().storage;
  impl.strides = rounded.strides();
  impl.offset = rounded.offset();
  impl.dtype = DType::BFloat16;
  impl.grad.reset();
}

}  // namespace autograd
