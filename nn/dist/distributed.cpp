// distributed.cpp — the `dist` API over MPI's C interface. Each function checks its tensor, then makes
// one MPI call (or a few); MPI does the communication (on one machine, through shared memory).
#include "nn/dist/distributed.h"

#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "nn/numbers.h"

namespace dist {

namespace {

// MPI's error text for `code`, turned into a dist::Error naming the call.
void check_mpi(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw Error(fmt::format("{}: MPI failed on rank {} of {}: {}", call, rank(), world_size(), std::string(text, length)));
}

// How long one collective waits for the other ranks. A rank that is stopped (SIGSTOP, a debugger) or hung
// would otherwise hold every other rank in its next collective forever; MPI itself never gives up.
double g_timeout_seconds = -1;  // read from SCRATCHGRAD_DIST_TIMEOUT on first use
// After one collective has timed out the job is over: later waits (a pending Work's destructor while the
// first Timeout unwinds) give up at once instead of each waiting out the limit again.
bool g_timed_out = false;

double default_timeout() {
  const char* text = std::getenv("SCRATCHGRAD_DIST_TIMEOUT");
  if (!text || !*text) return kDefaultTimeoutSeconds;
  // read whole (nn/numbers.h): "2x" is not 2 seconds, and 1e400 (infinity to strtod) is not "no limit"
  const std::optional<double> seconds = nn::parse_finite(text);
  if (!seconds || !(*seconds > 0))
    throw std::invalid_argument(fmt::format("SCRATCHGRAD_DIST_TIMEOUT={}: give a number of seconds above 0", text));
  return *seconds;
}

// Waits until `request` completes, or throws dist::Timeout. MPI can only poll a request it cannot cancel:
// MPI_Test in a loop, back to back for the first 10 ms (a collective's rounds move on only inside MPI
// calls, so polling keeps them fast), then every 100 µs so that a long wait costs no core.
void wait_for(MPI_Request* request, const char* call) {
  using clock = std::chrono::steady_clock;
  const clock::time_point start = clock::now();
  const double limit = timeout();
  for (;;) {
    int done = 0;
    check_mpi(MPI_Test(request, &done, MPI_STATUS_IGNORE), call);
    if (done) return;
    const double waited = std::chrono::duration<double>(clock::now() - start).count();
    if (waited > limit || g_timed_out) {
      g_timed_out = true;
      throw Timeout(fmt::format(
          "{}: rank {} of {} waited {:.3g} s for the other ranks and gives up: a rank has stopped, hung or fallen far "
          "behind (the limit is {:g} s: SCRATCHGRAD_DIST_TIMEOUT=<seconds>, or dist::set_timeout)",
          call, rank(), world_size(), waited, limit));
    }
    if (waited > 0.01) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// Starts a non-blocking MPI call (`start` fills the request) and waits for it with the deadline.
template <typename Start>
void run_with_deadline(const char* call, Start start) {
  MPI_Request request;
  check_mpi(start(&request), call);
  wait_for(&request, call);
}

void require_init(const char* call) {
  if (!is_initialized()) throw Error(fmt::format("{}: call dist::init() first", call));
}

MPI_Datatype mpi_type(const char* call, const Tensor& t) {
  switch (t.dtype()) {
    case autograd::DType::Float32: return MPI_FLOAT;
    case autograd::DType::Float64: return MPI_DOUBLE;
    case autograd::DType::Int64: return MPI_INT64_T;
    default:
      throw std::invalid_argument(fmt::format("{}: dtype {} is not supported (float32, float64 or int64)", call,
                                              autograd::dtype_name(t.dtype())));
  }
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return MPI_SUM;
    case ReduceOp::Max: return MPI_MAX;
    case ReduceOp::Min: return MPI_MIN;
  }
  throw std::invalid_argument("dist: unknown ReduceOp");
}

// The tensor's own memory is what MPI reads and writes, so it must be one dense CPU block.
void check_tensor(const char* call, const Tensor& t) {
  if (!t.defined()) throw std::invalid_argument(fmt::format("{}: the tensor is undefined", call));
  if (!t.device().is_cpu())
    throw std::invalid_argument(fmt::format("{}: the tensor of shape {} is on {}; the collectives take CPU tensors",
                                            call, t.shape_str(), t.device().str()));
  if (!t.is_contiguous())
    throw std::invalid_argument(
        fmt::format("{}: the tensor of shape {} is not contiguous (call .contiguous() first)", call, t.shape_str()));
  (void)mpi_type(call, t);
}

// MPI matches collectives by order only: ranks passing different sizes would read past each other's
// buffers or hang. One small allreduce of {size, dtype} (as max and as −min) lets every rank see a
// disagreement and throw the same error.
void check_ranks_agree(const char* call, const Tensor& t) {
  const int64_t dtype = int64_t(t.dtype());
  int64_t mine[4] = {t.numel(), -t.numel(), dtype, -dtype}, all[4];
  run_with_deadline(call, [&](MPI_Request* r) { return MPI_Iallreduce(mine, all, 4, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD, r); });
  if (all[0] != -all[1] || all[2] != -all[3])
    throw std::invalid_argument(fmt::format(
        "{}: the ranks passed different tensors (sizes {} to {} elements, or different dtypes); rank {} passed "
        "shape {} {}",
        call, -all[1], all[0], rank(), t.shape_str(), autograd::dtype_name(t.dtype())));
}

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace

void set_timeout(double seconds) {
  if (!(seconds > 0))
    throw std::invalid_argument(fmt::format("dist::set_timeout: {} s; give a number of seconds above 0", seconds));
  g_timeout_seconds = seconds;
}

double timeout() {
  if (g_timeout_seconds < 0) g_timeout_seconds = default_timeout();
  return g_timeout_seconds;
}

bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") || std::getenv("PMIX_RANK");
}

void init() {
  if (is_initialized()) return;
  check_mpi(MPI_Init(nullptr, nullptr), "dist::init");
  // The default handler aborts the job on any error; returning the code lets us say what failed.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  std::atexit(finalize_at_exit);
}

void abort(int status) {
  if (is_initialized()) MPI_Abort(MPI_COMM_WORLD, status);
  std::_Exit(status);
}

bool is_initialized() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

int rank() {
  int r = 0;
  if (is_initialized()) MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  int n = 1;
  if (is_initialized()) MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

void all_reduce(Tensor& t, ReduceOp op) {
  require_init("dist::all_reduce");
  check_tensor("dist::all_reduce", t);
  check_ranks_agree("dist::all_reduce", t);
  run_with_deadline("dist::all_reduce", [&](MPI_Request* r) {
    return MPI_Iallreduce(MPI_IN_PLACE, t.raw_data(), int(t.numel()), mpi_type("dist::all_reduce", t), mpi_op(op),
                          MPI_COMM_WORLD, r);
  });
  t.impl().storage->bump_version();  // written in place, as any in-place op
}

void broadcast(Tensor& t, int root) {
  require_init("dist::broadcast");
  check_tensor("dist::broadcast", t);
  if (root < 0 || root >= world_size())
    throw std::invalid_argument(fmt::format("dist::broadcast: root {} is not a rank (0 … {})", root, world_size() - 1));
  check_ranks_agree("dist::broadcast", t);
  run_with_deadline("dist::broadcast", [&](MPI_Request* r) {
    return MPI_Ibcast(t.raw_data(), int(t.numel()), mpi_type("dist::broadcast", t), root, MPI_COMM_WORLD, r);
  });
  t.impl().storage->bump_version();
}

void barrier() {
  require_init("dist::barrier");
  run_with_deadline("dist::barrier", [](MPI_Request* r) { return MPI_Ibarrier(MPI_COMM_WORLD, r); });
}

Tensor all_gather(const Tensor& t) {
  require_init("dist::all_gather");
  check_tensor("dist::all_gather", t);
  check_ranks_agree("dist::all_gather", t);
  autograd::Shape shape = t.shape();
  shape.insert(shape.begin(), world_size());
  Tensor out = autograd::empty(shape, t.dtype());
  const MPI_Datatype type = mpi_type("dist::all_gather", t);
  run_with_deadline("dist::all_gather", [&](MPI_Request* r) {
    return MPI_Iallgather(t.raw_data(), int(t.numel()), type, out.raw_data(), int(t.numel()), type, MPI_COMM_WORLD, r);
  });
  return out;
}

// ---------------------------------------------------------------- non-blocking reductions

Work::Work(Work&& other) noexcept : request_(other.request_), tensor_(std::move(other.tensor_)) {
  other.request_ = nullptr;
}

Work& Work::operator=(Work&& other) noexcept {
  if (this != &other) {
    if (pending()) wait();
    request_ = other.request_;
    tensor_ = std::move(other.tensor_);
    other.request_ = nullptr;
  }
  return *this;
}

Work::~Work() {
  if (!pending()) return;
  try {
    wait();
  } catch (const std::exception&) {
    // A destructor cannot throw. wait() has left the request and the tensor held (MPI may still write into it):
    // the job cannot go on, and whoever unwinds past here ends it (dist::abort).
  }
}

void Work::wait() {
  if (!pending()) return;
  MPI_Request* request = static_cast<MPI_Request*>(request_);
  try {
    wait_for(request, "dist::Work::wait");
  } catch (...) {
    // The reduction is still running and MPI cannot cancel it: keep its request and memory alive for good
    // (leaked on purpose) rather than let MPI write into freed memory before the job ends.
    request_ = nullptr;
    new Tensor(std::move(tensor_));
    throw;
  }
  request_ = nullptr;
  delete request;
  tensor_.impl().storage->bump_version();
  tensor_ = Tensor();
}

bool Work::test() {
  if (!pending()) return true;
  int done = 0;
  check_mpi(MPI_Test(static_cast<MPI_Request*>(request_), &done, MPI_STATUS_IGNORE), "dist::Work::test");
  if (done) wait();  // the request is already complete: this only releases it
  return done != 0;
}

Work all_reduce_async(Tensor& t, ReduceOp op) {
  require_init("dist::all_reduce_async");
  check_tensor("dist::all_reduce_async", t);  // sizes are not compared here: that would cost a blocking round
  Work work;
  auto* request = new MPI_Request;
  const int code = MPI_Iallreduce(MPI_IN_PLACE, t.raw_data(), int(t.numel()), mpi_type("dist::all_reduce_async", t),
                                  mpi_op(op), MPI_COMM_WORLD, request);
  if (code != MPI_SUCCESS) {
    delete request;
    check_mpi(code, "dist::all_reduce_async");
  }
  work.request_ = request;
  work.tensor_ = t;
  return work;
}

// ---------------------------------------------------------------- an order-fixed sum, and checksums

Tensor sum_in_rank_order(const std::vector<Tensor>& parts) {
  const char* call = "dist::sum_in_rank_order";
  require_init(call);
  if (parts.empty()) throw std::invalid_argument(fmt::format("{}: rank {} passed no parts", call, rank()));
  for (const Tensor& p : parts) {
    check_tensor(call, p);
    if (p.dim() != 1 || p.numel() != parts[0].numel() || p.dtype() != parts[0].dtype() ||
        p.dtype() == autograd::DType::Int64)
      throw std::invalid_argument(fmt::format("{}: parts must be 1-D float tensors of one size and dtype; got {} {} and {} {}",
                                              call, parts[0].shape_str(), autograd::dtype_name(parts[0].dtype()),
                                              p.shape_str(), autograd::dtype_name(p.dtype())));
  }
  check_ranks_agree(call, parts[0]);
  const int me = rank(), n = world_size();
  const MPI_Datatype type = mpi_type(call, parts[0]);
  const int count = int(parts[0].numel());
  Tensor running;
  size_t first = 0;
  if (me == 0) {
    running = parts[0].clone();
    first = 1;
  } else {  // the sum of every earlier rank's parts
    running = autograd::empty(parts[0].shape(), parts[0].dtype());
    run_with_deadline(call, [&](MPI_Request* r) { return MPI_Irecv(running.raw_data(), count, type, me - 1, 0, MPI_COMM_WORLD, r); });
  }
  for (size_t i = first; i < parts.size(); ++i) running.add_(parts[i]);
  if (me + 1 < n)
    run_with_deadline(call, [&](MPI_Request* r) { return MPI_Isend(running.raw_data(), count, type, me + 1, 0, MPI_COMM_WORLD, r); });
  run_with_deadline(call, [&](MPI_Request* r) { return MPI_Ibcast(running.raw_data(), count, type, n - 1, MPI_COMM_WORLD, r); });
  return running;
}

uint64_t checksum(const std::vector<Tensor>& tensors) {
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a's offset basis and prime
  for (const Tensor& t : tensors) {
    const Tensor dense = t.device().is_cpu() ? t.contiguous() : t.cpu().contiguous();
    const auto* bytes = static_cast<const unsigned char*>(dense.raw_data());
    const size_t nbytes = size_t(dense.numel()) * autograd::dtype_size(dense.dtype());
    for (size_t i = 0; i < nbytes; ++i) hash = (hash ^ bytes[i]) * 0x100000001b3ull;
  }
  return hash;
}

}  // namespace dist
