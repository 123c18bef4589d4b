// cpu/runtime/product_tally.cpp — see product_tally.h.
#include "autograd/cpu/runtime/product_tally.h"

#include <atomic>
#include <chrono>
#include <mutex>

namespace autograd::cpu {

namespace {
std::atomic<bool> tally_on{false};
std::mutex tally_mutex;  // a program may run products on several threads of its own
ProductTally tally;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

void set_product_tally(bool on) { tally_on = on; }

ProductTally take_product_tally() {
  std::lock_guard<std::mutex> lock(tally_mutex);
  ProductTally taken = tally;
  tally = ProductTally{};
  return taken;
}

ProductTimer::ProductTimer(double flops) : flops_(flops) {
  if (tally_on.load(std::memory_order_relaxed)) start_ns_ = now_ns();
}

ProductTimer::~ProductTimer() {
  if (start_ns_ < 0) return;
  const double seconds = double(now_ns() - start_ns_) * 1e-9;
  std::lock_guard<std::mutex> lock(tally_mutex);
  tally.seconds += seconds;
  tally.flops += flops_;
  ++tally.products;
}

}  // namespace autograd::cpu
