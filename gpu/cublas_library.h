// gpu/cublas_library.h — cuBLAS, opened with dlopen the first time a product runs on the GPU.
//
// Linking libcublas would map its ~100 MB (and its dependencies) into every run of a CUDA build, CPU runs
// included. Opening it on first use keeps a CPU run of a CUDA build as small and as quick to start as a
// CPU-only build. The CUDA runtime is linked statically for the same reason: it opens the driver
// (libcuda.so) only when a CUDA call is first made. The cuBLAS headers still give the types and signatures.
#pragma once
#include <cublas_v2.h>

namespace gpu {

// The cuBLAS entry points the products use.
struct CublasLibrary {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasSetMathMode) set_math_mode;
  decltype(&cublasSgemmStridedBatched) sgemm_strided_batched;
  decltype(&cublasDgemmStridedBatched) dgemm_strided_batched;
  decltype(&cublasGetStatusName) status_name;
  decltype(&cublasGetStatusString) status_string;
};

// Opens libcublas.so.<major of the headers> on the first call: from the loader's usual search path, else
// from the toolkit folder this build was made with. Throws std::runtime_error naming what was tried and
// why it failed.
const CublasLibrary& cublas();

}  // namespace gpu
