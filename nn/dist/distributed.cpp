// distributed.cpp — the `dist` API over MPI's C interface. Each function checks its tensor, then makes
// one MPI call (or a few); MPI does the communication (on one machine, through shared memory).
#include "nn/dist/distributed.h"

#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include <fmt/format.h>

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
  check_mpi(MPI_Allreduce(mine, all, 4, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD), call);
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
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, t.raw_data(), int(t.numel()), mpi_type("dist::all_reduce", t), mpi_op(op),
                          MPI_COMM_WORLD),
            "dist::all_reduce");
  t.impl().storage->bump_version();  // written in place, as any in-place op
}

void broadcast(Tensor& t, int root) {
  require_init("dist::broadcast");
  check_tensor("dist::broadcast", t);
  if (root < 0 || root >= world_size())
    throw std::invalid_argument(fmt::format("dist::broadcast: root {} is not a rank (0 … {})", root, world_size() - 1));
  check_ranks_agree("dist::broadcast", t);
  check_mpi(MPI_Bcast(t.raw_data(), int(t.numel()), mpi_type("dist::broadcast", t), root, MPI_COMM_WORLD),
            "dist::broadcast");
  t.impl().storage->bump_version();
}

void barrier() {
  require_init("dist::barrier");
  check_mpi(MPI_Barrier(MPI_COMM_WORLD), "dist::barrier");
}

Tensor all_gather(const Tensor& t) {
  require_init("dist::all_gather");
  check_tensor("dist::all_gather", t);
  check_ranks_agree("dist::all_gather", t);
  autograd::Shape shape = t.shape();
  shape.insert(shape.begin(), world_size());
  Tensor out = autograd::empty(shape, t.dtype());
  const MPI_Datatype type = mpi_type("dist::all_gather", t);
  check_mpi(MPI_Allgather(t.raw_data(), int(t.numel()), type, out.raw_data(), int(t.numel()), type, MPI_COMM_WORLD),
            "dist::all_gather");
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
  if (pending()) {
    MPI_Request* request = static_cast<MPI_Request*>(request_);
    MPI_Wait(request, MPI_STATUS_IGNORE);
    delete request;
  }
}

void Work::wait() {
  if (!pending()) return;
  MPI_Request* request = static_cast<MPI_Request*>(request_);
  request_ = nullptr;
  const int code = MPI_Wait(request, MPI_STATUS_IGNORE);
  delete request;
  tensor_.impl().storage->bump_version();
  tensor_ = Tensor();
  check_mpi(code, "dist::Work::wait");
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
    check_mpi(MPI_Recv(running.raw_data(), count, type, me - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE), call);
  }
  for (size_t i = first; i < parts.size(); ++i) running.add_(parts[i]);
  if (me + 1 < n) check_mpi(MPI_Send(running.raw_data(), count, type, me + 1, 0, MPI_COMM_WORLD), call);
  check_mpi(MPI_Bcast(running.raw_data(), count, type, n - 1, MPI_COMM_WORLD), call);
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
