// guards.cpp — checks on paths, saved run state, numbers and resources (see guards.h).
#include "guards.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "nn/safetensors.h"
#include "text.h"

namespace cli {

namespace fs = std::filesystem;

std::string absolute_path(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::absolute(path, ec);
  return (ec ? fs::path(path) : p).lexically_normal().string();
}

namespace {

// A field's value as quoted in a message: at most 40 bytes of it.
std::string shortened(const std::string& text) { return text.size() <= 40 ? text : text.substr(0, 40) + "..."; }

// What identifies a file: its device and inode when it exists (through symlinks), else its absolute path
// with the symlinks of its folders resolved.
struct FileIdentity {
  bool exists = false;
  dev_t device = 0;
  ino_t inode = 0;
  std::string path;
  bool operator==(const FileIdentity& o) const {
    return exists == o.exists && (exists ? device == o.device && inode == o.inode : path == o.path);
  }
};

FileIdentity identity_of(const std::string& path) {
  FileIdentity id;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    id.exists = true, id.device = st.st_dev, id.inode = st.st_ino;
    return id;
  }
  std::error_code ec;
  const fs::path resolved = fs::weakly_canonical(fs::absolute(path, ec), ec);  // (relative: "m" and "./m" alike)
  id.path = ec ? absolute_path(path) : resolved.string();
  return id;
}

}  // namespace

void check_distinct_files(const std::vector<NamedPath>& paths) {
  std::vector<std::pair<const NamedPath*, FileIdentity>> seen;
  for (const NamedPath& p : paths) {
    if (p.path.empty()) continue;
    FileIdentity id = identity_of(p.path);
    for (const auto& [other, other_id] : seen)
      if (other_id == id)
        throw UsageError(fmt::format("{} {} and {} {} name the same file: one would overwrite the other", other->flag,
                                     other->path, p.flag, p.path));
    seen.emplace_back(&p, id);
  }
}

std::string checkpoint_target(const std::string& flag, const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return path;  // absent: created
  fs::path target = path;
  // the file the link (or chain of links) names, which need not exist yet
  for (int links = 0; S_ISLNK(st.st_mode); ++links) {
    std::error_code ec;
    const fs::path next = fs::read_symlink(target, ec);
    if (ec || links == 40)
      throw UsageError(fmt::format("{} {}: cannot follow the symbolic link ({})", flag, path,
                                   ec ? ec.message() : "too many levels of links"));
    target = next.is_absolute() ? next : target.parent_path() / next;
    if (::lstat(target.c_str(), &st) != 0) return target.string();  // a link to a file not made yet
  }
  if (S_ISDIR(st.st_mode)) throw UsageError(fmt::format("{} {}: is a folder, not a file to write", flag, path));
  if (!S_ISREG(st.st_mode))
    throw UsageError(fmt::format("{} {}: is not a regular file (a device, FIFO or socket); a checkpoint is written "
                                 "next to it and renamed over it, which would replace it: pass a file path",
                                 flag, path));
  return target.string();
}

std::string integer_problem(const std::string& text) {
  int64_t value = 0;
  const char* begin = text.data() + (text.starts_with('+') ? 1 : 0);
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(begin, end, value);
  if (error == std::errc::result_out_of_range)
    return fmt::format("{} is out of range (at most {})", text, INT64_MAX);
  if (error != std::errc() || stop != end) return fmt::format("{} is not a whole number", text);
  return "";
}

std::string seed_problem(const std::string& text) {
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data() + (text.starts_with('+') ? 1 : 0), end, value);
  if (error == std::errc::result_out_of_range) return fmt::format("{} is out of range (at most {})", text, UINT64_MAX);
  if (error != std::errc() || stop != end) return fmt::format("{} is not a whole number from 0 to {}", text, UINT64_MAX);
  return "";
}

int64_t run_state_int(const std::map<std::string, std::string>& metadata, const std::string& checkpoint,
                      const std::string& key, int64_t lo, int64_t hi) {
  auto it = metadata.find(key);
  if (it == metadata.end()) throw nn::CheckpointError(fmt::format("{}: run state has no '{}'", checkpoint, key));
  int64_t value = 0;
  const std::string& text = it->second;
  const auto [stop, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || stop != text.data() + text.size() || value < lo || value > hi)
    throw nn::CheckpointError(fmt::format("{}: run state '{}' is '{}', not a whole number from {} to {} "
                                          "(the checkpoint is damaged or was edited)",
                                          checkpoint, key, shortened(text), lo, hi));
  return value;
}

double run_state_number(const std::map<std::string, std::string>& metadata, const std::string& checkpoint,
                        const std::string& key) {
  auto it = metadata.find(key);
  if (it == metadata.end()) throw nn::CheckpointError(fmt::format("{}: run state has no '{}'", checkpoint, key));
  double value = 0;
  const std::string& text = it->second;
  const auto [stop, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || stop != text.data() + text.size() || !std::isfinite(value))
    throw nn::CheckpointError(fmt::format("{}: run state '{}' is '{}', not a finite number (the checkpoint is damaged "
                                          "or was edited)",
                                          checkpoint, key, shortened(text)));
  return value;
}

const std::vector<std::string>& flags_fixed_by_resume() {
  static const std::vector<std::string> flags{
      "--model", "--preset", "--layers",  "--dropout", "--warmup", "--weight-decay", "--clip",
      "--accumulate", "--batch", "--context", "--dim", "--heads", "--lr", "--seed", "--eval-every",
      "--sample", "--deterministic-reduce", "--reduce-shards", "--tokenizer", "--vocab-size", "--kv-heads",
      "--ffn-dim"};
  return flags;
}

void check_resume_flags(const std::function<bool(const char*)>& given) {
  for (const std::string& flag : flags_fixed_by_resume())
    if (given(flag.c_str()))
      throw UsageError(fmt::format("{} cannot change a resumed run (its model, data and recipe come from the "
                                   "checkpoint); with --resume give only --steps (to extend the run), --text, "
                                   "--allow-other-text, --save, --save-every, --plot, --graph, --threads, --device, "
                                   "--numerics, --precision, --check-every, --no-overlap",
                                   flag));
}

void check_optimizer_state(const nn::NamedTensors& optimizer_state, size_t parameters, const std::string& checkpoint) {
  std::map<std::string, bool> have;
  for (const auto& [name, t] : optimizer_state) have[name] = true;
  for (size_t i = 0; i < parameters; ++i)
    for (const char* slot : {"step", "exp_avg", "exp_avg_sq"})
      if (!have.count(fmt::format("state.{}.{}", i, slot)))
        throw nn::CheckpointError(fmt::format("{}: the optimizer's state is incomplete (no tensor optimizer.state.{}.{}): "
                                              "a resume would restart Adam's moments; train a new run from it instead",
                                              checkpoint, i, slot));
}

void check_distinct_characters(const std::u32string& vocabulary, const std::string& checkpoint) {
  std::u32string sorted = vocabulary;
  std::sort(sorted.begin(), sorted.end());
  const auto twice = std::adjacent_find(sorted.begin(), sorted.end());
  if (twice != sorted.end())
    throw nn::CheckpointError(fmt::format("{}: the vocabulary holds the character {} twice (the file is damaged or was "
                                          "edited)",
                                          checkpoint, printable(*twice)));
}

void check_finite_parameters(const nn::NamedTensors& tensors, const std::string& checkpoint) {
  for (const auto& [name, t] : tensors)
    nn::check_finite(checkpoint, name, t, "the run that saved it diverged; retrain with a smaller --lr");
}

int usable_threads(int requested, std::string& note) {
  if (requested < 1 || requested > kMaxThreads)
    throw UsageError(fmt::format("--threads must be from 1 to {}, got {}", kMaxThreads, requested));
  const int cpus = int(std::max(1u, std::thread::hardware_concurrency()));
  if (requested <= cpus) return requested;
  note = fmt::format("note: --threads {} is more than the {} CPUs here; using {}", requested, cpus, cpus);
  return cpus;
}

void check_fits_in_memory(double bytes, const std::string& what) {
  double memory = double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGESIZE));
  struct rlimit limit {};  // ulimit -v lowers what this process may have
  if (::getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) memory = std::min(memory, double(limit.rlim_cur));
  if (memory > 0 && bytes > memory)
    throw UsageError(fmt::format("{} needs at least {:.0f} bytes ({:.3g} GB) but this process may have {:.0f} bytes "
                                 "({:.3g} GB) of memory: choose smaller sizes",
                                 what, bytes, bytes / 1e9, memory, memory / 1e9));
}

}  // namespace cli
