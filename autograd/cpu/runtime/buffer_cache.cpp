// cpu/runtime/buffer_cache.cpp — size-classed free lists over aligned_alloc (see buffer_cache.h).
#include "autograd/cpu/runtime/buffer_cache.h"

#include <atomic>
#include <cstring>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

namespace autograd::cpu {

namespace {

constexpr size_t kAlignment = 64;                // AVX-512 loads like 64-byte alignment
constexpr size_t kLargest = size_t(1) << 30;      // blocks above 1 GiB go straight to the system
constexpr size_t kKeepAtMost = size_t(2) << 30;  // never hold more than 2 GiB of free blocks

// Size class of a request: 4 classes per power of two, starting at 64 bytes.
size_t class_of(size_t nbytes) {
  size_t n = std::max<size_t>(nbytes, kAlignment);
  size_t octave = std::bit_width(n - 1);  // n ≤ 2^octave
  if (octave <= 8) return std::bit_width((n - 1) >> 6);  // 64, 128, 256 bytes: plain powers of two
  size_t quarter = size_t(1) << (octave - 3);            // a quarter of the octave's lower bound
  size_t step = (n - 1 - (size_t(1) << (octave - 1))) / quarter;  // 0..3 within the octave
  return 3 + (octave - 9) * 4 + step;
}

size_t class_size(size_t cls) {
  if (cls < 3) return kAlignment << cls;
  size_t octave = (cls - 3) / 4 + 9, step = (cls - 3) % 4;
  return (size_t(1) << (octave - 1)) + (step + 1) * (size_t(1) << (octave - 3));
}

struct Cache {
  std::mutex mutex;
  std::array<std::vector<void*>, 96> free;
  size_t free_bytes = 0;
};

Cache& cache() {
  static Cache* instance = new Cache;  // never destroyed: tensors may be freed during static destruction
  return *instance;
}

}  // namespace

static std::atomic<bool> poison_new_buffers{false};
void set_poison_allocations(bool on) { poison_new_buffers = on; }

static void* allocate_unpoisoned(size_t nbytes);

void* cached_allocate(size_t nbytes) {
  void* p = allocate_unpoisoned(nbytes);
  if (poison_new_buffers) std::memset(p, 0xFF, nbytes);  // all-ones bytes: NaN as float or double
  return p;
}

static void* allocate_unpoisoned(size_t nbytes) {
  if (nbytes > kLargest) {
    void* p = std::aligned_alloc(kAlignment, (nbytes + kAlignment - 1) / kAlignment * kAlignment);
    if (!p) throw std::bad_alloc();
    return p;
  }
  const size_t cls = class_of(nbytes);
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    if (!c.free[cls].empty()) {
      void* p = c.free[cls].back();
      c.free[cls].pop_back();
      c.free_bytes -= class_size(cls);
      return p;
    }
  }
  void* p = std::aligned_alloc(kAlignment, class_size(cls));
  if (!p) {
    release_cached_buffers();  // memory is tight: give the cache back and try once more
    p = std::aligned_alloc(kAlignment, class_size(cls));
    if (!p) throw std::bad_alloc();
  }
  return p;
}

void cached_deallocate(void* p, size_t nbytes) noexcept {
  if (!p) return;
  if (nbytes > kLargest) return std::free(p);
  const size_t cls = class_of(nbytes);
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  if (c.free_bytes + class_size(cls) > kKeepAtMost) return std::free(p);
  // A deallocation never throws (it runs in destructors, often while an exception unwinds): when the free
  // list cannot grow, the block goes back to the system instead.
  try {
    c.free[cls].push_back(p);
  } catch (const std::bad_alloc&) {
    return std::free(p);
  }
  c.free_bytes += class_size(cls);
}

size_t cached_free_bytes() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.free_bytes;
}

void release_cached_buffers() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  for (auto& list : c.free) {
    for (void* p : list) std::free(p);
    list.clear();
  }
  c.free_bytes = 0;
}

}  // namespace autograd::cpu
