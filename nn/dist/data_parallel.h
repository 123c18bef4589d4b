// data_parallel.h — nn::DistributedDataParallel: every rank holds the whole model and trains it on its own
// share of each batch; averaging the gradients before each step keeps the copies equal (PyTorch's DDP).
//
//   nn::DistributedDataParallel ddp(model);  // rank 0's parameters are copied to every rank
//   loss = loss_of(model, my_shard);
//   loss.backward();                         // buckets start their allreduce as their gradients complete
//   ddp.finish_gradient_sync();              // wait for the rest: every .grad is now the ranks' mean
//   optimizer.step();
//
// How it overlaps: the parameters are grouped into buckets of about `bucket_cap_bytes`, in reverse order of
// registration, because backward produces the last layers' gradients first. A post-accumulate-grad hook on
// each parameter (Tensor::register_post_accumulate_grad_hook) copies its gradient into its bucket's flat
// buffer; when a bucket is full it starts a non-blocking allreduce (dist::all_reduce_async) and backward
// goes on with the earlier layers while the bucket travels. docs/distributed.md explains the why.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "nn/dist/distributed.h"
#include "nn/module.h"

namespace nn {

struct DataParallelOptions {
  // PyTorch's default is 25 MiB, for models of hundreds of MB; our GPTs hold 0.1–5 MB of gradients,
  // and one bucket would leave nothing to overlap.
  size_t bucket_cap_bytes = size_t(256) << 10;
  // false: start every bucket only in finish_gradient_sync(), after backward (to measure what overlap saves)
  bool overlap = true;
};

class DistributedDataParallel {
 public:
  // Needs dist::init(). Broadcasts rank 0's parameters and buffers, and hooks every parameter.
  explicit DistributedDataParallel(Module& module, DataParallelOptions options = {});
  ~DistributedDataParallel();  // removes the hooks
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  Module& module() const { return module_; }
  // While false, backward only adds into the local .grad (PyTorch's no_sync(), for gradient accumulation):
  // turn it back on before the last micro-batch's backward.
  void set_require_sync(bool on) { require_sync_ = on; }
  // After backward, before the optimizer step: starts any bucket not started yet (a parameter no gradient
  // reached counts as zeros), waits for all, and sets every .grad to the mean over the ranks.
  void finish_gradient_sync();

  // The number of parameters in each bucket, in the order they are sent.
  std::vector<size_t> bucket_sizes() const;
  // Seconds spent inside finish_gradient_sync() (waiting for the allreduces that backward did not hide,
  // and writing the means back), summed over calls.
  double sync_seconds() const { return sync_seconds_; }
  int64_t syncs() const { return syncs_; }
  // Buckets whose allreduce started inside backward (overlapped), and in finish_gradient_sync(), so far.
  int64_t buckets_started_in_backward() const { return started_in_backward_; }
  int64_t buckets_started_after_backward() const { return started_after_backward_; }

 private:
  struct Slot {
    Tensor parameter;
    int64_t offset = 0;  // in the bucket's buffer
    uint64_t hook = 0;
    bool ready = false;  // its gradient is in the buffer for this step
  };
  struct Bucket {
    std::vector<Slot> slots;
    Tensor buffer;  // the slots' gradients side by side
    size_t ready = 0;
    dist::Work work;
    bool started = false;
  };
  void build_buckets(const std::vector<Tensor>& parameters);
  void on_gradient_ready(size_t bucket, size_t slot);
  void start(Bucket& bucket);
  void drive_progress();

  Module& module_;
  DataParallelOptions options_;
  std::vector<Bucket> buckets_;
  bool require_sync_ = true;
  double sync_seconds_ = 0;
  int64_t syncs_ = 0, started_in_backward_ = 0, started_after_backward_ = 0;
};

}  // namespace nn
