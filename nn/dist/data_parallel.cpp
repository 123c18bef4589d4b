// data_parallel.cpp — buckets, hooks and the end-of-backward wait of nn::DistributedDataParallel.
#include "nn/dist/data_parallel.h"

#include <chrono>

#include <fmt/format.h>

namespace nn {

using autograd::DType;

DistributedDataParallel::DistributedDataParallel(Module& module, DataParallelOptions options)
    : module_(module), options_(options) {
  if (!dist::is_initialized()) throw dist::Error("DistributedDataParallel: call dist::init() first");
  if (options_.bucket_cap_bytes == 0)
    throw std::invalid_argument("DistributedDataParallel: bucket_cap_bytes must be positive, got 0");
  autograd::NoGradGuard no_grad;
  for (auto& [name, t] : module.named_parameters()) {
    if (!t.device().is_cpu())
      throw std::invalid_argument(fmt::format(
          "DistributedDataParallel: parameter {} is on {}; the MPI collectives here carry CPU tensors", name,
          t.device().str()));
    Tensor shared = t;
    dist::broadcast(shared, 0);  // every rank starts from rank 0's copy
  }
  for (auto& [name, t] : module.named_buffers()) {
    Tensor shared = t;
    if (t.dtype() != DType::Bool) dist::broadcast(shared, 0);
  }
  build_buckets(module.parameters());
}

DistributedDataParallel::~DistributedDataParallel() {
  for (Bucket& bucket : buckets_) {
    if (bucket.started) bucket.work.wait();
    for (Slot& slot : bucket.slots) slot.parameter.remove_post_accumulate_grad_hook(slot.hook);
  }
}

// Reverse registration order (the order backward completes gradients in), a new bucket when the cap
// would be passed or the dtype changes.
void DistributedDataParallel::build_buckets(const std::vector<Tensor>& parameters) {
  size_t bytes = 0;
  for (auto it = parameters.rbegin(); it != parameters.rend(); ++it) {
    const Tensor& p = *it;
    const size_t size = size_t(p.numel()) * autograd::dtype_size(p.dtype());
    const bool full = !buckets_.empty() && bytes + size > options_.bucket_cap_bytes;
    if (buckets_.empty() || full || buckets_.back().slots.front().parameter.dtype() != p.dtype()) {
      buckets_.emplace_back();
      bytes = 0;
    }
    Bucket& bucket = buckets_.back();
    const int64_t offset = bucket.slots.empty() ? 0 : bucket.slots.back().offset + bucket.slots.back().parameter.numel();
    bucket.slots.push_back({p, offset});
    bytes += size;
  }
  for (size_t b = 0; b < buckets_.size(); ++b) {
    Bucket& bucket = buckets_[b];
    const Slot& last = bucket.slots.back();
    bucket.buffer = autograd::zeros({last.offset + last.parameter.numel()}, last.parameter.dtype());
    for (size_t s = 0; s < bucket.slots.size(); ++s)
      bucket.slots[s].hook =
          bucket.slots[s].parameter.register_post_accumulate_grad_hook([this, b, s](Tensor&) { on_gradient_ready(b, s); });
  }
}

// Runs inside backward, as soon as one parameter's gradient is complete.
void DistributedDataParallel::on_gradient_ready(size_t b, size_t s) {
  if (!require_sync_) return;
  Bucket& bucket = buckets_[b];
  Slot& slot = bucket.slots[s];
  if (bucket.started || slot.ready) return;  // a second backward before the sync: it waits for the next step
  const Tensor grad = slot.parameter.grad();
  bucket.buffer.slice(0, slot.offset, slot.offset + grad.numel()).copy_(grad.reshape({-1}));
  slot.ready = true;
  if (++bucket.ready == bucket.slots.size() && options_.overlap) {
    start(bucket);
    ++started_in_backward_;
  }
  drive_progress();
}

void DistributedDataParallel::start(Bucket& bucket) {
  for (Slot& slot : bucket.slots)  // a parameter no gradient reached adds nothing
    if (!slot.ready) bucket.buffer.slice(0, slot.offset, slot.offset + slot.parameter.numel()).zero_();
  bucket.work = dist::all_reduce_async(bucket.buffer, dist::ReduceOp::Sum);
  bucket.started = true;
}

// MPI advances a non-blocking allreduce only inside MPI calls: test the ones in flight.
void DistributedDataParallel::drive_progress() {
  for (Bucket& bucket : buckets_)
    if (bucket.started && bucket.work.pending()) bucket.work.test();
}

void DistributedDataParallel::finish_gradient_sync() {
  const auto begin = std::chrono::steady_clock::now();
  autograd::NoGradGuard no_grad;
  // Every rank starts the buckets in the same order: the ones backward did not start, in bucket order.
  for (Bucket& bucket : buckets_)
    if (!bucket.started) {
      start(bucket);
      ++started_after_backward_;
    }
  const double inverse_world = 1.0 / double(dist::world_size());
  for (Bucket& bucket : buckets_) {
    bucket.work.wait();
    for (Slot& slot : bucket.slots) {
      Tensor mean = bucket.buffer.slice(0, slot.offset, slot.offset + slot.parameter.numel()).view(slot.parameter.shape());
      if (!slot.parameter.grad().defined()) slot.parameter.set_grad(autograd::zeros_like(slot.parameter));
      slot.parameter.grad().copy_(mean).mul_(inverse_world);
      slot.ready = false;
    }
    bucket.ready = 0;
    bucket.started = false;
  }
  sync_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  ++syncs_;
}

std::vector<size_t> DistributedDataParallel::bucket_sizes() const {
  std::vector<size_t> sizes;
  for (const Bucket& bucket : buckets_) sizes.push_back(bucket.slots.size());
  return sizes;
}

}  // namespace nn
