// read_file.h — a tokenizer file read whole, or a TokenizerError naming it (shared by the loaders).
#pragma once
#include <new>
#include <string>

#include "nn/tokenizer/error.h"

namespace tokenizer {

// The bytes of `path`. Refused, naming `what` and the path: a file that is missing or unreadable, a folder,
// anything that is not a regular file (a device such as /dev/zero, a FIFO: they could be endless), a file
// over kMaxFileBytes (tokenizer.h), and a read that runs out of memory.
std::string read_file(const std::string& path, const char* what);

// load() with a failed allocation turned into a TokenizerError that names what was being loaded (the
// command line would otherwise blame the model's sizes).
template <typename Load>
auto naming_memory(const std::string& what, Load&& load) -> decltype(load()) {
  try {
    return load();
  } catch (const std::bad_alloc&) {
    throw TokenizerError("out of memory loading " + what);
  }
}

}  // namespace tokenizer
