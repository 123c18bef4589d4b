// fuzz_common.h — what every fuzz target shares: a scratch folder of its own, writing the input to a file
// there, and the checks on a refusal (a one-line message) whose failure is a crash libFuzzer reports.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace fuzz {

// Reports a broken promise and aborts: libFuzzer (or the replay) then keeps the input that did it.
[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "\nFUZZ CHECK FAILED: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

inline void expect(bool ok, const std::string& what) {
  if (!ok) fail(what);
}

// A refusal must say what is wrong in one line: not empty, no line break.
inline void check_message(const std::exception& e, std::string_view kind) {
  const std::string m = e.what();
  if (m.empty()) fail(std::string(kind) + " with an empty message");
  if (m.find('\n') != std::string::npos || m.find('\r') != std::string::npos)
    fail(std::string(kind) + " with a message of more than one line: " + m);
}

// A folder for this process's files (the targets run several at a time on one machine). A clean exit
// removes it; a crash (abort) leaves it, to look at.
struct ScratchDir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("scratchgrad-fuzz-" + std::to_string(getpid()));
  ScratchDir() { std::filesystem::create_directories(path); }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};
inline const std::filesystem::path& scratch_dir() {
  static const ScratchDir dir;
  return dir.path;
}

inline std::string write_scratch(const std::string& name, const uint8_t* data, size_t size) {
  const std::filesystem::path p = scratch_dir() / name;
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  out.close();
  if (!out) fail("cannot write the scratch file " + p.string());
  return p.string();
}

}  // namespace fuzz
