// cpu/runtime/buffer_cache.h — reuse of freed CPU tensor buffers.
//
// A training step allocates the same tensor sizes every iteration. Blocks of 1-100 KB are too big for
// malloc's per-thread cache, so each malloc/free pair walks its bins (and sometimes consolidates them),
// which at the seed model's size costs more than the arithmetic. Freed blocks are kept here in size
// classes (four per power of two, so at most 19% is wasted) and handed out again.
#pragma once
#include <cstddef>

namespace autograd::cpu {

void* cached_allocate(size_t nbytes);
void cached_deallocate(void* ptr, size_t nbytes) noexcept;  // never throws: see the .cpp
// Bytes held in free lists right now, and a way to give them back to the system.
size_t cached_free_bytes();
void release_cached_buffers();
// Tests: fill every new buffer with NaN bytes, so a kernel that reads an output entry it never wrote
// (instead of the zero a fresh page happens to hold) gives NaN rather than passing by luck.
void set_poison_allocations(bool on);

}  // namespace autograd::cpu
