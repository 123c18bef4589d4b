// main.cpp — `scratchgrad train | generate | info | tokenize | bpe`. The command line itself (CLI11: every flag, its default
// and its help) is in command_line.cpp, so that tests and the fuzz target can parse one without a process;
// every bad input becomes one line on stderr and exit status 2.
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <iostream>

#include "command_line.h"

namespace {

// OpenMP's threads wait for one another at the end of each parallel region and for the next one. libgomp
// lets a waiting thread spin 300,000 turns (about 6 ms on the AMD EPYC of docs/performance.md) before it
// sleeps. On a machine with more runnable jobs than cores a spinning thread holds the core that the
// thread it waits for needs: two threads then ran 6–8× slower than one (bench/oversubscribed.sh). Sleeping
// at once (OMP_WAIT_POLICY=passive) costs a wake-up per region instead: 1.3–1.5× slower near idle
// (a cached GPT-2 step has hundreds of regions). 5,000 turns (about 0.1 ms) keeps both: the gaps between
// a step's regions are shorter, and a thread whose partner lost its core gives up its own soon.
// libgomp reads GOMP_SPINCOUNT once, as it is loaded, before main runs, so the program sets it and runs
// itself again (exec keeps the process, its arguments, open files and limits). A user who set
// GOMP_SPINCOUNT or OMP_WAIT_POLICY keeps their own choice, and the program runs on as it is. (Other
// OpenMP runtimes ignore GOMP_SPINCOUNT.)
constexpr const char* kOpenMPSpinCount = "5000";

void choose_openmp_wait(char** argv) {
#if defined(__linux__)
  if (std::getenv("GOMP_SPINCOUNT") || std::getenv("OMP_WAIT_POLICY")) return;
  ::setenv("GOMP_SPINCOUNT", kOpenMPSpinCount, /*overwrite=*/1);
  ::execv("/proc/self/exe", argv);  // returns only if it failed (no /proc): the program then runs on as it is
#else
  (void)argv;
#endif
}

}  // namespace

int main(int argc, char** argv) {
  choose_openmp_wait(argv);
  // Past a file-size limit (ulimit -f) a write then fails with EFBIG, which a save reports (and removes its
  // temporary file), instead of the process being killed without a word.
  std::signal(SIGXFSZ, SIG_IGN);
  return cli::run_command_line(argc, argv, std::cout, std::cerr);
}
