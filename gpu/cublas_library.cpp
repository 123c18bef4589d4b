// gpu/cublas_library.cpp — finding cuBLAS at run time (see cublas_library.h).
#include "gpu/cublas_library.h"

#include <dlfcn.h>

#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace gpu {

namespace {

// The folder of the toolkit this build compiled against (cmake/CUDA.cmake passes it).
#ifndef SCRATCHGRAD_CUDA_LIBRARY_DIR
#define SCRATCHGRAD_CUDA_LIBRARY_DIR ""
#endif

void* open_cublas() {
  const std::string soname = fmt::format("libcublas.so.{}", CUBLAS_VER_MAJOR);  // the ABI the headers describe
  std::vector<std::string> tried{soname};
  if (std::string(SCRATCHGRAD_CUDA_LIBRARY_DIR).size()) tried.push_back(std::string(SCRATCHGRAD_CUDA_LIBRARY_DIR) + "/" + soname);
  std::string reasons;
  for (const std::string& name : tried) {
    if (void* library = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) return library;
    reasons += fmt::format("; {}", ::dlerror());
  }
  throw std::runtime_error(fmt::format("gpu matmul: cannot load cuBLAS{}", reasons));
}

template <typename Function>
void look_up(void* library, const char* symbol, Function& into) {
  into = reinterpret_cast<Function>(::dlsym(library, symbol));
  if (!into) throw std::runtime_error(fmt::format("gpu matmul: cuBLAS has no {} ({})", symbol, ::dlerror()));
}

CublasLibrary load() {
  void* library = open_cublas();  // kept open for the life of the process
  CublasLibrary c{};
  look_up(library, "cublasCreate_v2", c.create);
  look_up(library, "cublasSetMathMode", c.set_math_mode);
  look_up(library, "cublasSgemmStridedBatched", c.sgemm_strided_batched);
  look_up(library, "cublasDgemmStridedBatched", c.dgemm_strided_batched);
  look_up(library, "cublasGetStatusName", c.status_name);
  look_up(library, "cublasGetStatusString", c.status_string);
  return c;
}

}  // namespace

const CublasLibrary& cublas() {
  static const CublasLibrary library = load();  // thread-safe, once; a failure is retried on the next call
  return library;
}

}  // namespace gpu
