// gpu/check.h — turning CUDA and cuBLAS status codes into exceptions that name the op (internal).
#pragma once
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace gpu::detail {

[[noreturn]] inline void throw_cuda(cudaError_t err, const char* op, const char* call) {
  throw std::runtime_error(std::string("gpu ") + op + ": " + call + " failed: " + cudaGetErrorString(err) + " (" +
                           cudaGetErrorName(err) + ")");
}

inline void check(cudaError_t err, const char* op, const char* call) {
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // clear a non-sticky error so the next op starts clean
    throw_cuda(err, op, call);
  }
}

// After a kernel launch: a bad configuration shows up here. With SCRATCHGRAD_CUDA_SYNC=1 every op also
// waits for its kernels, so an error inside a kernel is reported with this op's name (like
// CUDA_LAUNCH_BLOCKING=1 in PyTorch); otherwise it surfaces at the next synchronising call.
void check_launch(const char* op);

}  // namespace gpu::detail

#define GPU_CHECK(call, op) ::gpu::detail::check((call), (op), #call)
