// test_process.h — for tests that run the built programs or write files: a per-process scratch folder,
// reading a file whole, and running a shell command with its stdout, stderr and exit status captured.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

// The build passes the folder of the built programs; this default fits a run from the repository root.
#ifndef SCRATCHGRAD_BIN_DIR
#define SCRATCHGRAD_BIN_DIR "build/bin"
#endif

namespace testing_process {

namespace fs = std::filesystem;

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Whether this is an aarch64 build run by qemu-user on an x86-64 host (make test-arm64). There /proc/cpuinfo
// is the host's, and a program cannot start its own file again (the host cannot run an aarch64 file): what
// the command line does to choose OpenMP's wait (it runs itself again) can only be seen on a real ARM machine.
inline bool emulated_on_x86() {
#if defined(__x86_64__)
  return false;
#else
  return slurp("/proc/cpuinfo").find("vendor_id") != std::string::npos;
#endif
}

// This test process's own temporary folder (tests run in parallel under ctest), removed when the process
// ends unless a test failed (its files are then there to read) or SCRATCHGRAD_KEEP_SCRATCH is set. Without
// that, every ctest run left about a thousand folders behind, some of them hundreds of MB. Only the process
// that made the folder removes it: a death test's child, forked, runs the same static destructors on exit.
struct ScratchFolder {
  fs::path dir = fs::temp_directory_path() / ("scratchgrad_tests_" + std::to_string(::getpid()));
  pid_t owner = ::getpid();
  ~ScratchFolder() {
    if (::getpid() != owner || std::getenv("SCRATCHGRAD_KEEP_SCRATCH")) return;
    if (!::testing::UnitTest::GetInstance()->Passed()) return;
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
};

// A file name inside this test process's own temporary folder.
inline fs::path scratch(const std::string& name) {
  static ScratchFolder folder;
  fs::create_directories(folder.dir);
  return folder.dir / name;
}

struct Shell {
  int status;  // the exit status, -1 if the command did not exit normally
  std::string out, err;
  std::string command;  // what was run
};

// Runs `command` through /bin/sh, capturing what it writes.
inline Shell shell(const std::string& command) {
  static int counter = 0;
  const int n = counter++;
  fs::path out = scratch("out" + std::to_string(n)), err = scratch("err" + std::to_string(n));
  int raw = std::system((command + " >" + out.string() + " 2>" + err.string()).c_str());
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, slurp(out), slurp(err), command};
}

// How many times `part` occurs in `text` (overlapping occurrences count).
inline int count(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// The whole numbers a command printed, in order ("464 3290 318" from generate --ids or tokenize --ids).
inline std::vector<int64_t> ids_in(const std::string& text) {
  std::istringstream words(text);
  std::vector<int64_t> ids;
  for (int64_t id; words >> id;) ids.push_back(id);
  return ids;
}

}  // namespace testing_process
