// read_file.cpp — see read_file.h.
#include "nn/tokenizer/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <new>

#include "nn/tokenizer/limits.h"

namespace tokenizer {

std::string read_file(const std::string& path, const char* what) {
  const std::string named = std::string(what) + " '" + path + "'";
  const auto refuse = [&](const std::string& why) { return TokenizerError("cannot read " + named + ": " + why); };
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw refuse(std::strerror(errno));
  if (S_ISDIR(st.st_mode)) throw refuse("it is a folder");
  if (!S_ISREG(st.st_mode)) throw refuse("it is not a regular file (a device, FIFO or socket)");
  if (uint64_t(st.st_size) > kMaxFileBytes)
    throw refuse("it has " + std::to_string(st.st_size) + " bytes, over the limit of " + std::to_string(kMaxFileBytes) +
                 " bytes for a tokenizer file");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw refuse(std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  std::string bytes;
  try {
    bytes.resize(size_t(st.st_size));
  } catch (const std::bad_alloc&) {
    throw refuse("out of memory for its " + std::to_string(st.st_size) + " bytes");
  }
  // Read what stat() saw, then one byte more: a file that changed meanwhile is refused, not read forever.
  size_t done = 0;
  for (char probe; ;) {
    const bool past_end = done == bytes.size();
    const ssize_t got = past_end ? ::read(fd, &probe, 1) : ::read(fd, bytes.data() + done, bytes.size() - done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw refuse(std::strerror(errno));
    if (got == 0) break;
    if (past_end) throw refuse("it grew while being read");
    done += size_t(got);
  }
  bytes.resize(done);
  return bytes;
}

}  // namespace tokenizer
