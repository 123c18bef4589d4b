// reference/backend.h — the reference backend: every kernel as the textbook loop (see kernels.h), for CPU
// tensors when Kernels::reference is chosen (numerics.h: set_kernels, KernelsGuard, SCRATCHGRAD_KERNELS).
#pragma once
#include "autograd/backend.h"

namespace autograd::reference {

Backend& reference_backend();

}  // namespace autograd::reference
