// atomic_file.h — writing a file whole or not at all, for everything that replaces a user's file
// (checkpoints, LoRA adapters, saved tokenizers).
//
// The new version goes to a temporary file next to the target ("<path>.tmp-<pid>-<random>"), written with
// write(2) (so every failure, ENOSPC, EFBIG, EIO, is seen and named), fsynced, then renamed over the
// target: a crash, a kill -9 or a failed write at any moment leaves the previous file whole.
//
//   nn::AtomicFile out(path);
//   out.write(bytes.data(), bytes.size());
//   out.commit();  // without it (an exception on the way), the temporary file is removed
#pragma once
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace nn {

// A write that failed: one line, "<path>: <what went wrong>; the previous file is kept".
class FileWriteError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class AtomicFile {
 public:
  explicit AtomicFile(const std::string& path);  // creates the temporary file, or throws FileWriteError
  ~AtomicFile();                                 // not committed: the temporary file is removed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* bytes, size_t n);
  // fsync, close, rename over the target, fsync the folder: after this returns the new file is the one a
  // reader sees, even after a power cut; before it, the old one is.
  void commit();

 private:
  std::string path_, temp_;
  int fd_ = -1;
  size_t written_ = 0;
  bool committed_ = false;
};

// `bytes` as the whole new content of `path`, through an AtomicFile (stale temporary files of `path`
// removed first). Throws FileWriteError.
void write_file_atomically(const std::string& path, std::string_view bytes);

// Removes the temporary files that saves of `path` left when their process died (kill -9 mid-save). A
// live process's temporary file is never touched.
void remove_stale_temp_files(const std::string& path);

}  // namespace nn
