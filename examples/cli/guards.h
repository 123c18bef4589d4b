// guards.h — the trainer's checks on what a user (or a crafted file) hands it: output paths, a saved
// run's state, numbers on the command line, threads, memory. Each refuses with one line naming the flag,
// the file or the field, and what would be accepted (UsageError or nn::CheckpointError: exit status 2).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nn/module.h"

namespace cli {

// ---- paths

// `path` made absolute and lexically normal (what a checkpoint records as its run's text).
std::string absolute_path(const std::string& path);

struct NamedPath {
  std::string flag;  // "--save", "--text", ...
  std::string path;  // empty: not given
};
// Refuses two of `paths` that name the same file: by device and inode where the file exists (a hard link
// or a symlink is caught too), else by absolute path.
void check_distinct_files(const std::vector<NamedPath>& paths);

// Where `--save PATH` writes. Absent or a regular file: PATH itself. A symbolic link is written through:
// the file it points to is replaced and the link stays. Anything else (a device, a FIFO, a socket, a
// folder) is refused: a save replaces its target by rename, which would replace the device node itself.
std::string checkpoint_target(const std::string& flag, const std::string& path);

// ---- numbers

// Empty if `text` is a whole number that fits in an int64, else why not ("99999999999999999999 is out of
// range", ...). For the command line's integer flags, which would otherwise clamp.
std::string integer_problem(const std::string& text);
// The same for a seed: a whole number from 0 to 2^64 - 1.
std::string seed_problem(const std::string& text);

// A metadata field of a saved run: an integer in [lo, hi] written plainly, else nn::CheckpointError naming
// the checkpoint, the field, its value and the range.
int64_t run_state_int(const std::map<std::string, std::string>& metadata, const std::string& checkpoint,
                      const std::string& key, int64_t lo, int64_t hi);
// A finite number, else nn::CheckpointError.
double run_state_number(const std::map<std::string, std::string>& metadata, const std::string& checkpoint,
                        const std::string& key);

// ---- resume

// The flags that decide a run's model, data or recipe: with --resume they come from the checkpoint, so
// giving one is refused (naming those that may be given).
const std::vector<std::string>& flags_fixed_by_resume();
// Throws UsageError for the first flag of flags_fixed_by_resume() that `given(flag)` says was given.
void check_resume_flags(const std::function<bool(const char*)>& given);

// The optimizer's state a resume needs: both Adam moments of each of `parameters` parameters
// ("state.<i>.exp_avg", "state.<i>.exp_avg_sq", "state.<i>.step"), else nn::CheckpointError.
void check_optimizer_state(const nn::NamedTensors& optimizer_state, size_t parameters, const std::string& checkpoint);

// ---- checkpoints

// Refuses (nn::CheckpointError) a vocabulary that holds a character twice: the second could never be made.
void check_distinct_characters(const std::u32string& vocabulary, const std::string& checkpoint);
// Refuses floating-point tensors holding NaN or an infinity (a diverged run), naming the first and the count.
void check_finite_parameters(const nn::NamedTensors& tensors, const std::string& checkpoint);

// ---- resources

// The most --threads accepted; above the machine's CPUs the count is lowered to them (with a note).
inline constexpr int kMaxThreads = 1024;
// --threads checked (UsageError above kMaxThreads) and lowered to the CPUs there are; `note` is set to a
// line saying so when it was lowered.
int usable_threads(int requested, std::string& note);

// Refuses (UsageError) a model whose parameters and training state need more than the machine's memory,
// naming `what`, the bytes and the memory there is.
void check_fits_in_memory(double bytes, const std::string& what);

}  // namespace cli
