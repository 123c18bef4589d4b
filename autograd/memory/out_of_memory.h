// memory/out_of_memory.h — the error a tensor allocation throws when the device cannot satisfy it (the message
// names the bytes and the device), so that a program can tell a request too large for the machine from
// its own bugs.
#pragma once
#include <stdexcept>

namespace autograd {

class OutOfMemory : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace autograd
