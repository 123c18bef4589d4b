// autocast.cpp — the thread's autocast dtype and the conversions of a product's operands (autocast.h).
#include "autograd/autocast.h"

#include <atomic>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "autograd/backend.h"
#include "autograd/node.h"
#include "autograd/ops/gradients.h"

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

// ---- the weights' kept bfloat16 copies
//
// A weight's copy is keyed by its storage (a weak pointer: the address is reused once the weight is gone)
// and is valid while the weight's version counter stands where it stood when the copy was made or written,
// and the copy's own counter has not moved (someone wrote into a copy autocast_operand handed out).
namespace {
struct KeptCopy {
  std::weak_ptr<Storage> weight;
  int64_t offset;
  Shape shape;
  uint64_t weight_version, copy_version;
  Tensor copy;  // contiguous bfloat16, the weight's shape, no history
};

struct KeptCopies {
  std::mutex mutex;
  std::unordered_map<const Storage*, KeptCopy> by_storage;
};
std::atomic<bool> keeping{true};
KeptCopies& kept() {
  static KeptCopies* copies = new KeptCopies;  // never destroyed: weights held by statics outlive it
  return *copies;
}

// A trained weight: a float32 leaf that wants a gradient, contiguous and not a view. (Activations are never
// leaves that want one; a frozen weight is not kept, as PyTorch's autocast does not cache it either.)
bool is_trained_weight(const Tensor& x) {
  return x.dtype() == DType::Float32 && x.requires_grad() && !x.grad_fn() && x.is_contiguous() &&
         !x.impl().is_view;
}

// The entry for w's copy when it is w's (the same storage, offset and shape), else null. Under the mutex.
KeptCopy* entry_of(KeptCopies& copies, const Tensor& w) {
  const auto found = copies.by_storage.find(w.impl().storage.get());
  if (found == copies.by_storage.end()) return nullptr;
  KeptCopy& e = found->second;
  const bool same = e.weight.lock() == w.impl().storage && e.offset == w.offset() && e.shape == w.shape();
  return same ? &e : nullptr;
}

// Entries whose weight has been freed go, with their copies.
void forget_the_dead(KeptCopies& copies) {
  std::erase_if(copies.by_storage, [](const auto& entry) { return entry.second.weight.expired(); });
}

// No one but the entry holds the copy's memory: it may be written in place.
bool unshared(const KeptCopy& e) { return e.copy.impl().storage.use_count() == 1; }

// w's bfloat16 copy at w's present values: the kept one, or a fresh rounding kept for next time.
Tensor bfloat16_copy_of(const Tensor& w) {
  KeptCopies& copies = kept();
  const std::lock_guard lock(copies.mutex);
  KeptCopy* e = entry_of(copies, w);
  if (e && e->weight_version == w.version() && e->copy_version == e->copy.version()) return e->copy;
  NoGradGuard no_grad;
  Tensor copy;
  if (e && unshared(*e)) {  // rounded again into the same memory (a user wrote the weight in place)
    copy = e->copy;
    backend(w.device()).copy(w, copy);
    copy.impl().storage->bump_version();
  } else {
    copy = w.detach().to(DType::BFloat16);
  }
  forget_the_dead(copies);
  copies.by_storage[w.impl().storage.get()] =
      KeptCopy{w.impl().storage, w.offset(), w.shape(), w.version(), copy.version(), copy};
  return copy;
}
}  // namespace

Tensor autocast_operand(const Tensor& x) {
  if (!x.defined()) return x;
  if (!is_trained_weight(x) || !keep_bfloat16_copies()) return x.to(DType::BFloat16);
  // the kept copy, as a tensor of its own recorded as the conversion: its gradient comes back widened
  return record_conversion(x, bfloat16_copy_of(x).detach());
}

Tensor writable_bfloat16_copy(const Tensor& weight) {
  KeptCopies& copies = kept();
  const std::lock_guard lock(copies.mutex);
  KeptCopy* e = entry_of(copies, weight);
  if (!e) return Tensor();
  if (!unshared(*e)) {  // a graph still holds it: not written under it, made afresh when next wanted
    copies.by_storage.erase(weight.impl().storage.get());
    return Tensor();
  }
  return e->copy;
}

void bfloat16_copy_written(const Tensor& weight) {
  KeptCopies& copies = kept();
  const std::lock_guard lock(copies.mutex);
  if (KeptCopy* e = entry_of(copies, weight)) {
    e->copy.impl().storage->bump_version();
    e->weight_version = weight.version();
    e->copy_version = e->copy.version();
  }
}

void set_keep_bfloat16_copies(bool keep) {
  keeping = keep;
  if (!keep) release_bfloat16_copies();
}

bool keep_bfloat16_copies() { return keeping; }

void release_bfloat16_copies() {
  KeptCopies& copies = kept();
  const std::lock_guard lock(copies.mutex);
  copies.by_storage.clear();
}

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
