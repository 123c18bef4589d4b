// ranks_mpi.cpp — Ranks in a build with MPI (see ranks.h): under mpirun, the dist API and
// nn::DistributedDataParallel; started any other way, one process that never touches MPI.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "nn/dist/data_parallel.h"
#include "nn/dist/distributed.h"
#include "ranks.h"
#include "commands.h"

namespace cli {

namespace {

// What a rank prints if mpirun stops it (SIGTERM) because another rank died: prepared beforehand, since a
// signal handler may only write() what already exists.
char stopped_message[1024] = "";
std::string last_checkpoint_note = "no checkpoint had been written";

void on_sigterm(int) {
  const ssize_t ignored = write(STDERR_FILENO, stopped_message, std::strlen(stopped_message));
  (void)ignored;
  _exit(128 + SIGTERM);
}

void prepare_stopped_message(const std::string& checkpoint_note) {
  last_checkpoint_note = checkpoint_note;
  std::snprintf(stopped_message, sizeof(stopped_message),
                "scratchgrad: error%s: the job was stopped from outside (did another rank die?); %s\n",
                rank_label().c_str(), checkpoint_note.c_str());
}

}  // namespace

struct Ranks::State {
  bool mpi = false;
  std::unique_ptr<nn::DistributedDataParallel> ddp;
};

Ranks::Ranks() : state_(std::make_unique<State>()) {
  if (!dist::launched_by_mpirun()) return;
  dist::init();
  try {
    (void)dist::timeout();  // a bad SCRATCHGRAD_DIST_TIMEOUT is refused now, not at the first collective
  } catch (const std::invalid_argument& e) {
    throw UsageErrorOnEveryRank(e.what());
  }
  state_->mpi = true;
  prepare_stopped_message("no checkpoint had been written");
  signal(SIGTERM, on_sigterm);
}

Ranks::~Ranks() = default;
int Ranks::rank() const { return state_->mpi ? dist::rank() : 0; }
int Ranks::size() const { return state_->mpi ? dist::world_size() : 1; }
bool Ranks::under_mpirun() const { return state_->mpi; }

void Ranks::share_parameters(nn::Module& model, bool overlap) {
  if (state_->mpi) state_->ddp = std::make_unique<nn::DistributedDataParallel>(model, nn::DataParallelOptions{.overlap = overlap});
}

void Ranks::set_require_sync(bool on) {
  if (state_->ddp) state_->ddp->set_require_sync(on);
}

void Ranks::finish_gradient_sync() {
  if (state_->ddp) state_->ddp->finish_gradient_sync();
}

double Ranks::sum(double value) const {
  if (!state_->mpi) return value;
  autograd::Tensor t = autograd::from_vector(std::vector<double>{value}, {1}, autograd::DType::Float64);
  dist::all_reduce(t, dist::ReduceOp::Sum);
  return t.to_vector<double>()[0];
}

autograd::Tensor Ranks::sum_in_rank_order(const std::vector<autograd::Tensor>& parts) const {
  if (state_->mpi) return dist::sum_in_rank_order(parts);
  autograd::Tensor total = parts.at(0).clone();
  for (size_t i = 1; i < parts.size(); ++i) total.add_(parts[i]);
  return total;
}

void Ranks::barrier() const {
  if (state_->mpi) dist::barrier();
}

void Ranks::check_same_parameters(const nn::Module& model, int64_t steps_done) const {
  if (!state_->mpi) return;
  const uint64_t mine = dist::checksum(model.parameters());
  autograd::Tensor all = dist::all_gather(autograd::from_vector(std::vector<int64_t>{int64_t(mine)}, {1}));
  const std::vector<int64_t> sums = all.to_vector<int64_t>();
  std::string listed;
  bool differ = false;
  for (size_t r = 0; r < sums.size(); ++r) {
    differ = differ || sums[r] != sums[0];
    listed += fmt::format("{}rank {}: {:016x}", r ? ", " : "", r, uint64_t(sums[r]));
  }
  if (differ)
    throw std::runtime_error(fmt::format(
        "the ranks' parameters differ after step {} (checksums {}); they no longer train the same model, so the "
        "run stops",
        steps_done, listed));
}

void Ranks::note_checkpoint(const std::string& path, int64_t steps_done) const {
  if (state_->mpi) prepare_stopped_message(fmt::format("the last checkpoint, after step {}, is {}", steps_done, path));
}

std::vector<size_t> Ranks::bucket_sizes() const { return state_->ddp ? state_->ddp->bucket_sizes() : std::vector<size_t>{}; }
double Ranks::sync_seconds() const { return state_->ddp ? state_->ddp->sync_seconds() : 0.0; }

int end_run(int status) {
  if (status != 0 && dist::is_initialized() && dist::world_size() > 1) {
    signal(SIGTERM, SIG_DFL);  // this rank is ending the job itself: no "stopped from outside" line
    std::fflush(nullptr);
    dist::abort(status);
  }
  return status;
}

std::string stopped_rank_error(const std::exception& e) {
  if (!dynamic_cast<const dist::Timeout*>(&e)) return "";
  return fmt::format("{}; {}", e.what(), last_checkpoint_note);
}

int process_rank() { return dist::rank(); }

std::string rank_label() {
  return dist::is_initialized() ? fmt::format(" (rank {} of {})", dist::rank(), dist::world_size()) : "";
}

}  // namespace cli
