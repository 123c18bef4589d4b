// memory/node_table.h — NodeTable<Key, V>: a map from node pointers to values, for the engine's per-pass
// bookkeeping (dependency counts, pending gradients).
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "autograd/compat.h"

namespace autograd::memory {

// A small open-addressing table (linear probing, at most half full, never
// shrinking) in the pass's arena — a few times cheaper per lookup than std::unordered_map here, which
// allocates a list node per entry and divides by a prime per lookup.
template <typename Key, typename V> class NodeTable {
 public:
  explicit NodeTable(compat::pmr::memory_resource* arena) : slots_(16, arena) {}
  // The entry for `node`, created (value-initialised) if it is not there yet.
  V& operator[](Key* node) {
    if (2 * (used_ + 1) > slots_.size()) grow();
    Slot& slot = find_slot(node);
    if (!slot.node) {
      slot.node = node;
      ++used_;
    }
    return slot.value;
  }
  bool contains(Key* node) const { return const_cast<NodeTable*>(this)->find_slot(node).node != nullptr; }

 private:
  struct Slot {
    Key* node = nullptr;
    V value{};
  };
  Slot& find_slot(Key* node) {
    const size_t mask = slots_.size() - 1;
    size_t i = (reinterpret_cast<uintptr_t>(node) >> 4) * 0x9E3779B97F4A7C15ull >> 32 & mask;
    while (slots_[i].node && slots_[i].node != node) i = (i + 1) & mask;
    return slots_[i];
  }
  void grow() {
    compat::pmr::vector<Slot> old(slots_.size() * 2, slots_.get_allocator());
    old.swap(slots_);
    for (Slot& s : old)
      if (s.node) {
        Slot& moved = find_slot(s.node);
        moved.node = s.node;
        moved.value = std::move(s.value);
      }
  }
  compat::pmr::vector<Slot> slots_;
  size_t used_ = 0;
};

}  // namespace autograd::memory
