// ranks_single.cpp — Ranks in a build without MPI: this process is the only rank, so averaging over ranks
// is doing nothing and the ordered sum is a plain loop (see ranks.h).
#include "ranks.h"

#include <cstdlib>
#include <string>

#include "text.h"

namespace cli {

struct Ranks::State {};

// Started by `mpirun -np N` with N > 1, each process would train alone and all would write the same files.
Ranks::Ranks() : state_(std::make_unique<State>()) {
  for (const char* variable : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* size = std::getenv(variable);
    if (size && std::atoi(size) > 1)
      throw UsageError(std::string("started by mpirun with ") + size +
                       " processes, but this build has no MPI (install libopenmpi-dev and build again)");
  }
}
Ranks::~Ranks() = default;
int Ranks::rank() const { return 0; }
int Ranks::size() const { return 1; }
bool Ranks::under_mpirun() const { return false; }
void Ranks::share_parameters(nn::Module&, bool) {}
void Ranks::set_require_sync(bool) {}
void Ranks::finish_gradient_sync() {}
double Ranks::sum(double value) const { return value; }

autograd::Tensor Ranks::sum_in_rank_order(const std::vector<autograd::Tensor>& parts) const {
  autograd::Tensor total = parts.at(0).clone();
  for (size_t i = 1; i < parts.size(); ++i) total.add_(parts[i]);
  return total;
}

void Ranks::barrier() const {}
void Ranks::check_same_parameters(const nn::Module&, int64_t) const {}
void Ranks::note_checkpoint(const std::string&, int64_t) const {}
std::vector<size_t> Ranks::bucket_sizes() const { return {}; }
double Ranks::sync_seconds() const { return 0; }

int end_run(int status) { return status; }
std::string stopped_rank_error(const std::exception&) { return ""; }
int process_rank() { return 0; }
std::string rank_label() { return ""; }

}  // namespace cli
