// runtime.h — process-wide CPU settings.
#pragma once

namespace autograd {

// Threads used by BLIS and the CPU kernels (default 1, or SCRATCHGRAD_THREADS).
void set_num_threads(int threads);
int get_num_threads();

// Which BLIS kernel family is in use ("skx", "haswell", ...), after start-up selection.
const char* blis_kernel_name();

}  // namespace autograd
