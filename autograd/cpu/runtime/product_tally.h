// cpu/runtime/product_tally.h — how long the matrix products took, and how many multiply-adds they did:
// the part of a training step that runs at the kernels' speed, apart from everything else (bench_gpt2_train
// prints both, so that MFU's shortfall can be split between the products and the rest).
#pragma once
#include <cstdint>

namespace autograd::cpu {

struct ProductTally {
  double seconds = 0;  // wall time inside the CPU's product entry (all its threads' work, timed on the caller)
  double flops = 0;    // 2·m·n·k for each product of each batch item
  int64_t products = 0;
};

// Off by default: when on, every CPU product (batched_matmul, causal_product) adds to the tally, at the cost
// of two clock reads per product.
void set_product_tally(bool on);
// The tally since it was last taken (then zero again).
ProductTally take_product_tally();

// In the product's entry: times its scope, when the tally is on.
class ProductTimer {
 public:
  explicit ProductTimer(double flops);
  ~ProductTimer();
  ProductTimer(const ProductTimer&) = delete;
  ProductTimer& operator=(const ProductTimer&) = delete;

 private:
  double flops_;
  int64_t start_ns_ = -1;  // -1: not timing
};

}  // namespace autograd::cpu
