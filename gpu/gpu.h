// gpu/gpu.h — the public face of the CUDA device (namespace gpu). No CUDA header is needed to use it:
// programs move tensors with Tensor::to(Device::cuda()) and every op then runs through the CUDA Backend,
// which registers itself with autograd at start-up (see gpu/backend.cpp and docs/cuda.md).
#pragma once
#include <cstddef>
#include <string>

#include "autograd/backend.h"

namespace gpu {

// True when a CUDA driver and at least one device are present. Never throws, never crashes without a
// driver; the answer is computed once.
bool is_available();
int device_count();
// Why is_available() is false ("CUDA driver version is insufficient for CUDA runtime version", ...);
// empty when a device is available.
std::string unavailable_reason();
// "NVIDIA H200 (sm_90, 139.8 GiB)" for device 0, or the reason there is none.
std::string device_description();

// The caching allocator: freed blocks are kept for reuse instead of going back to cudaFree.
size_t allocated_bytes();  // held by live tensors
size_t cached_bytes();     // freed by tensors, kept for reuse
void empty_cache();        // cudaFree every cached block

// Waits for all queued GPU work (for timing). Throws with the CUDA error string if a kernel failed.
void synchronize();

// The CUDA kernel table (what autograd::backend(Device::cuda()) returns).
autograd::Backend& backend();

}  // namespace gpu
