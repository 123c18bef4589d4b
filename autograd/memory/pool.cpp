// pool.cpp — per-thread free lists of blocks, one list per 64-byte size class.
#include "autograd/memory/pool.h"

#include <new>

namespace autograd::memory {

namespace {

constexpr size_t kClassBytes = 64, kClasses = 16;  // blocks of 64, 128, ..., 1024 bytes
constexpr size_t kMaxKept = 1024;                  // per class: a big graph's worth, bounded memory

struct FreeBlock {
  FreeBlock* next;
};

// Plain data, so it can still be read after the thread's destructors have run (see ListsOwner).
struct FreeLists {
  FreeBlock* head[kClasses];
  size_t count[kClasses];
  bool closed;  // the thread is exiting: blocks go straight back to operator delete
};
thread_local FreeLists lists{};

// Frees the cached blocks when the thread exits. Objects destroyed after that (static tensors at
// program exit) find `closed` set and free their block directly.
struct ListsOwner {
  ~ListsOwner() {
    lists.closed = true;
    for (size_t c = 0; c < kClasses; ++c)
      while (FreeBlock* b = lists.head[c]) {
        lists.head[c] = b->next;
        ::operator delete(b);
      }
  }
};

size_t class_of(size_t bytes) { return (bytes + kClassBytes - 1) / kClassBytes - 1; }

// The pool is off under AddressSanitizer, which can then still catch a use after free of these objects.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kPoolOn = false;
#else
constexpr bool kPoolOn = true;
#endif

void ensure_owner() {
  thread_local ListsOwner owner;  // constructed on a thread's first use of the pool
  (void)owner;
}

}  // namespace

void* pool_allocate(size_t bytes) {
  const size_t c = class_of(bytes);
  if (!kPoolOn || c >= kClasses || bytes == 0) return ::operator new(bytes);
  ensure_owner();
  if (FreeBlock* b = lists.head[c]) {
    lists.head[c] = b->next;
    --lists.count[c];
    return b;
  }
  return ::operator new((c + 1) * kClassBytes);  // the class size, so any list can take it back
}

void pool_deallocate(void* block, size_t bytes) noexcept {
  const size_t c = class_of(bytes);
  if (!kPoolOn || c >= kClasses || bytes == 0) return ::operator delete(block);
  if (lists.closed || lists.count[c] >= kMaxKept) return ::operator delete(block);
  ensure_owner();
  auto* b = static_cast<FreeBlock*>(block);
  b->next = lists.head[c];
  lists.head[c] = b;
  ++lists.count[c];
}

}  // namespace autograd::memory
