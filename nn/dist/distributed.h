// distributed.h — the `dist` API: several processes ("ranks") that add up tensors together, named after
// torch.distributed and carried by MPI (built only with SCRATCHGRAD_MPI, see cmake/MPI.cmake).
//
// Every rank runs the same program; `mpirun -np N program` starts N of them. A collective (all_reduce,
// broadcast, barrier) must be called by every rank, in the same order, with tensors of the same shape and
// dtype: MPI matches the calls by their order, not by name. Tensors are CPU, contiguous, float32, float64
// or int64; the collectives work in place on their memory, as torch.distributed's do.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "autograd/autograd.h"

namespace dist {

using autograd::Tensor;

enum class ReduceOp { Sum, Max, Min };

// An MPI call failed (a rank died, a message was truncated, ...): the MPI error text, and which call.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A collective waited longer than timeout() for the other ranks. MPI cannot cancel it, so the job can only
// end (dist::abort); the tensor it was writing stays allocated until then.
struct Timeout : Error {
  using Error::Error;
};

// How long each collective waits for the other ranks before it throws Timeout: a rank that is stopped or hung
// would otherwise hold the others forever. 30 minutes unless SCRATCHGRAD_DIST_TIMEOUT (seconds) or
// set_timeout says otherwise (the default of torch.distributed's process groups); it must cover the longest
// work one rank does alone between two collectives, such as writing a checkpoint.
inline constexpr double kDefaultTimeoutSeconds = 1800;
void set_timeout(double seconds);
double timeout();

// Whether this process was started by mpirun (it sets OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK).
bool launched_by_mpirun();
// Starts MPI (once; later calls do nothing) and makes MPI errors return, so they become dist::Error.
// Finalises MPI at exit.
void init();
bool is_initialized();
// Ends every rank of the job with exit status `status` (MPI_Abort): what a rank that failed alone must do,
// since the others would wait for it forever in their next collective.
[[noreturn]] void abort(int status);
int rank();        // 0 … world_size() − 1; 0 before init()
int world_size();  // 1 before init()

// Every rank's `t` becomes the element-wise reduction (sum, max or min) of all ranks' `t`.
void all_reduce(Tensor& t, ReduceOp op = ReduceOp::Sum);
// Every rank's `t` becomes rank `root`'s `t`.
void broadcast(Tensor& t, int root);
// Returns once every rank has called it.
void barrier();
// Every rank gets every rank's `t`, in rank order: a tensor of shape [world_size, *t.shape].
Tensor all_gather(const Tensor& t);

// A reduction started with all_reduce_async: it runs while the caller goes on computing (MPI_Iallreduce),
// and `t` must not be touched until wait() returns. Every rank must start the same reductions in the same
// order.
class Work {
 public:
  Work() = default;
  Work(Work&& other) noexcept;
  Work& operator=(Work&& other) noexcept;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;
  ~Work();  // waits, if wait() was not called: MPI must not write into freed memory
  void wait();
  // Whether it has finished (then as wait()). MPI moves a non-blocking transfer on only inside MPI calls,
  // so a caller that computes for long should call test() now and then.
  bool test();
  bool pending() const { return request_ != nullptr; }

 private:
  friend Work all_reduce_async(Tensor& t, ReduceOp op);
  void* request_ = nullptr;  // an MPI_Request, owned; null when done
  Tensor tensor_;            // keeps the memory alive while MPI writes into it
};
Work all_reduce_async(Tensor& t, ReduceOp op = ReduceOp::Sum);

// The sum of `parts` over all ranks, added one part at a time in rank order: rank 0's parts in their
// order, then rank 1's, ... — ((p₀ + p₁) + p₂) + …, whatever the number of ranks. The running sum goes
// from rank to rank (a chain), and the last rank broadcasts it. Each part is a 1-D float32 or float64
// tensor of the same size on every rank; every rank must hold at least one.
Tensor sum_in_rank_order(const std::vector<Tensor>& parts);

// A 64-bit FNV-1a checksum of the tensors' bytes, in order: equal on two ranks only if (all but certainly)
// their values are bit for bit the same.
uint64_t checksum(const std::vector<Tensor>& tensors);

}  // namespace dist
