// atomic_file.cpp — see atomic_file.h.
#include "nn/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <random>
#include <regex>
#include <utility>

#include <fmt/format.h>

namespace nn {

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
  throw FileWriteError(fmt::format("{}: {}", path, problem));
}

std::string temp_path_for(const std::string& path) {
  std::random_device rd;
  return fmt::format("{}.tmp-{}-{:08x}", path, ::getpid(), rd());
}

}  // namespace

AtomicFile::AtomicFile(const std::string& path) : path_(path), temp_(temp_path_for(path)) {
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) fail(path_, fmt::format("cannot create {} ({})", temp_, std::strerror(errno)));
}

AtomicFile::~AtomicFile() {  // not committed: an error was thrown, so the old file stays and the temp one goes
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_.c_str());
}

void AtomicFile::write(const void* bytes, size_t n) {
  const char* p = static_cast<const char*>(bytes);
  while (n > 0) {
    const ssize_t done = ::write(fd_, p, std::min<size_t>(n, size_t(1) << 30));
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0)
      fail(path_, fmt::format("write failed after {} bytes ({}); the previous file is kept", written_,
                              done < 0 ? std::strerror(errno) : "no progress"));
    p += done, n -= size_t(done), written_ += size_t(done);
  }
}

void AtomicFile::commit() {
  if (::fsync(fd_) != 0) fail(path_, fmt::format("fsync failed ({}); the previous file is kept", std::strerror(errno)));
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) fail(path_, fmt::format("close failed ({}); the previous file is kept", std::strerror(errno)));
  if (::rename(temp_.c_str(), path_.c_str()) != 0)
    fail(path_, fmt::format("cannot rename the finished file into place ({})", std::strerror(errno)));
  committed_ = true;
  const std::filesystem::path folder = std::filesystem::path(path_).parent_path();
  const int dir = ::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) ::fsync(dir), ::close(dir);
}

void write_file_atomically(const std::string& path, std::string_view bytes) {
  remove_stale_temp_files(path);
  AtomicFile out(path);
  out.write(bytes.data(), bytes.size());
  out.commit();
}

// "<name>.tmp-<pid>-<8 hex>" next to `path`, left by a process that is gone: removed. (A pid reused since
// is the rare case where one stays.)
void remove_stale_temp_files(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path folder = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const std::regex pattern(R"(\.tmp-([0-9]+)-[0-9a-f]{8})");
  const std::string prefix = target.filename().string();
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename().string();
    std::smatch m;
    const std::string rest = name.size() > prefix.size() ? name.substr(prefix.size()) : std::string();
    if (!name.starts_with(prefix) || !std::regex_match(rest, m, pattern)) continue;
    long pid = 0;  // digits past a long's range (a crafted name) read as no process to check
    const std::string digits = m[1];
    if (std::from_chars(digits.data(), digits.data() + digits.size(), pid).ec != std::errc()) continue;
    if (pid > 0 && ::kill(pid_t(pid), 0) == -1 && errno == ESRCH) fs::remove(entry.path(), ec);
  }
}

}  // namespace nn
