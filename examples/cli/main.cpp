// main.cpp — `scratchgrad train | generate | info | tokenize | bpe`. The command line itself (CLI11: every flag, its default
// and its help) is in command_line.cpp, so that tests and the fuzz target can parse one without a process;
// every bad input becomes one line on stderr and exit status 2.
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <iostream>

#include "command_line.h"

namespace {

// OpenMP's threads wait for one another at the end of each parallel region and for the next one, and by
// default (libgomp) they spin a while before they sleep. On a machine with more runnable jobs than cores a
// spinning thread holds the core that the thread it waits for needs: two threads then ran several times
// slower than one (docs/performance.md, bench/oversubscribed.sh). OMP_WAIT_POLICY=passive makes them sleep
// at once. libgomp reads it once, as it is loaded, before main runs, so the program sets it and runs itself
// again (exec keeps the process, its arguments, open files and limits). A user who set OMP_WAIT_POLICY or
// GOMP_SPINCOUNT keeps their own choice, and the program runs on as it is.
void wait_passively_in_openmp(char** argv) {
#if defined(__linux__)
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;
  ::setenv("OMP_WAIT_POLICY", "passive", /*overwrite=*/1);
  ::execv("/proc/self/exe", argv);  // returns only if it failed (no /proc): the program then runs on as it is
#else
  (void)argv;
#endif
}

}  // namespace

int main(int argc, char** argv) {
  wait_passively_in_openmp(argv);
  // Past a file-size limit (ulimit -f) a write then fails with EFBIG, which a save reports (and removes its
  // temporary file), instead of the process being killed without a word.
  std::signal(SIGXFSZ, SIG_IGN);
  return cli::run_command_line(argc, argv, std::cout, std::cerr);
}
