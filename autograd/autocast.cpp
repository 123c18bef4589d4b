// autocast.cpp — the thread's autocast dtype and the conversions of a product's operands (autocast.h).
#include "autograd/autocast.h"

#include <stdexcept>
#include <string>

namespace autograd {

namespace {
thread_local DType current = DType::Float32;
}

AutocastGuard::AutocastGuard(DType dtype) : previous_(current) {
  if (dtype != DType::BFloat16 && dtype != DType::Float32)
    throw std::invalid_argument("AutocastGuard: products can be cast to bfloat16 (or kept in float32), not " +
                                std::string(dtype_name(dtype)));
  current = dtype;
}

AutocastGuard::~AutocastGuard() { current = previous_; }

DType autocast_dtype() { return current; }

bool autocast_applies(const Tensor& a, const Tensor& b) {
  return current == DType::BFloat16 && a.dtype() == DType::Float32 && b.dtype() == DType::Float32;
}

Tensor autocast_operand(const Tensor& x) { return x.defined() ? x.to(DType::BFloat16) : x; }

}  // namespace autograd
