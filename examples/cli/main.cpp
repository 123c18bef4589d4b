// main.cpp — `scratchgrad train | generate | info | tokenize | bpe`. The command line itself (CLI11: every flag, its default
// and its help) is in command_line.cpp, so that tests and the fuzz target can parse one without a process;
// every bad input becomes one line on stderr and exit status 2.
#include <csignal>
#include <iostream>

#include "command_line.h"

int main(int argc, char** argv) {
  // Past a file-size limit (ulimit -f) a write then fails with EFBIG, which a save reports (and removes its
  // temporary file), instead of the process being killed without a word.
  std::signal(SIGXFSZ, SIG_IGN);
  return cli::run_command_line(argc, argv, std::cout, std::cerr);
}
