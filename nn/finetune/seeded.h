// seeded.h — random choices that a seed fixes on every platform: std::mt19937_64's output is defined by the
// standard, but std::uniform_int_distribution and std::shuffle are not (libstdc++ and libc++ differ), so a
// split or a generated data set uses these instead.
#pragma once
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace finetune {

class SeededRandom {
 public:
  explicit SeededRandom(uint64_t seed) : engine_(seed) {}
  // Uniform in [0, n), n > 0: draws below 2^64 mod n are redrawn, so that every remainder is equally likely.
  uint64_t below(uint64_t n) {
    const uint64_t threshold = (0 - n) % n;
    uint64_t x = engine_();
    while (x < threshold) x = engine_();
    return x % n;
  }
  // Uniform in [low, high].
  int64_t between(int64_t low, int64_t high) { return low + int64_t(below(uint64_t(high - low) + 1)); }

  // Fisher–Yates: each order of `items` equally likely.
  template <typename T>
  void shuffle(std::vector<T>& items) {
    for (size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[below(i)]);
  }

 private:
  std::mt19937_64 engine_;
};

}  // namespace finetune
