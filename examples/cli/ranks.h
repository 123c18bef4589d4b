// ranks.h — the processes one training run is spread over: this process alone, or the N ranks that
// `mpirun -np N scratchgrad train ...` started (in a build with MPI, see docs/distributed.md).
//
// The trainer talks only to this class. ranks_mpi.cpp implements it with the dist API and
// nn::DistributedDataParallel; ranks_single.cpp, in a build without MPI, for one process. The build picks
// one of the two files, so the trainer needs no #ifdef.
#pragma once
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"

namespace cli {

class Ranks {
 public:
  Ranks();  // started by mpirun (and MPI built in): starts MPI; otherwise one rank
  ~Ranks();
  Ranks(const Ranks&) = delete;
  Ranks& operator=(const Ranks&) = delete;

  int rank() const;
  int size() const;
  bool is_root() const { return rank() == 0; }  // the rank that prints, evaluates and saves
  bool under_mpirun() const;

  // Copies rank 0's parameters to every rank and hooks them so that backward averages their gradients
  // over the ranks in buckets (DistributedDataParallel); `overlap` false starts the buckets only after backward.
  void share_parameters(nn::Module& model, bool overlap);
  void set_require_sync(bool on);  // false: backward only accumulates locally (an early micro-batch)
  void finish_gradient_sync();     // every .grad becomes the mean over the ranks
  double sum(double value) const;  // over the ranks
  // The sum of every rank's parts in rank order (dist::sum_in_rank_order); alone, the parts summed in order.
  autograd::Tensor sum_in_rank_order(const std::vector<autograd::Tensor>& parts) const;
  void barrier() const;
  // Compares a checksum of the parameters across the ranks; a mismatch throws, naming the step and ranks.
  void check_same_parameters(const nn::Module& model, int64_t steps_done) const;
  // Remembers the last checkpoint written, for the message printed if the job is stopped from outside.
  void note_checkpoint(const std::string& path, int64_t steps_done) const;

  // Gradient buckets, and seconds spent waiting for gradient sync after backward (0 for one process).
  std::vector<size_t> bucket_sizes() const;
  double sync_seconds() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// For main(): a run across several ranks that fails on one of them must end them all (the others would
// wait forever in their next collective): aborts the MPI job with `status`. Otherwise returns `status`.
int end_run(int status);
// For main(): the error line for a failure that means another rank stopped (a collective waited past
// dist::timeout()), with where the last checkpoint is; "" when `e` is any other failure.
std::string stopped_rank_error(const std::exception& e);
// This process's rank: 0 alone or before MPI started.
int process_rank();
// "" for one process; " (rank 1 of 2)" under mpirun, to tell the ranks' error lines apart.
std::string rank_label();

}  // namespace cli
