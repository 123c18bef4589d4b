# cmake/CUDA.cmake — the optional CUDA backend in gpu/ (included from the top-level CMakeLists.txt).
#
#   SCRATCHGRAD_CUDA=AUTO  build gpu/ when nvcc is found (on PATH, $CUDACXX, $CUDA_HOME or /usr/local/cuda)
#   SCRATCHGRAD_CUDA=ON    the same, but a missing nvcc is an error
#   SCRATCHGRAD_CUDA=OFF   CPU only
#
# The result is the static library scratchgrad_gpu (kernels + cuBLAS products + the Backend that registers
# itself with autograd at start-up), the macro SCRATCHGRAD_HAS_CUDA for everything that links it, and the
# benchmark bin/bench_gpu. GPU architectures default to sm_75 … sm_90 plus compute_90 PTX (which newer GPUs
# JIT-compile); pass -DCMAKE_CUDA_ARCHITECTURES=native (or e.g. 90) to build for one GPU only.

string(TOUPPER "${SCRATCHGRAD_CUDA}" _sg_cuda_mode)
if(_sg_cuda_mode STREQUAL "OFF" OR _sg_cuda_mode STREQUAL "FALSE" OR _sg_cuda_mode STREQUAL "0")
  message(STATUS "scratchgrad: CUDA backend off (SCRATCHGRAD_CUDA=${SCRATCHGRAD_CUDA})")
  return()
endif()
if(NOT _sg_cuda_mode MATCHES "^(AUTO|ON|TRUE|1)$")
  message(FATAL_ERROR "SCRATCHGRAD_CUDA must be AUTO, ON or OFF, got '${SCRATCHGRAD_CUDA}'")
endif()
set(_sg_cuda_required OFF)
if(NOT _sg_cuda_mode STREQUAL "AUTO")
  set(_sg_cuda_required ON)
endif()

# ---- find nvcc (enable_language alone would only look on PATH) ----
if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
  find_program(SCRATCHGRAD_NVCC nvcc
    HINTS "$ENV{CUDA_HOME}/bin" "$ENV{CUDA_PATH}/bin"
    PATHS /usr/local/cuda/bin /opt/cuda/bin /usr/lib/cuda/bin
    DOC "nvcc used when CMAKE_CUDA_COMPILER is not given")
  if(SCRATCHGRAD_NVCC)
    set(ENV{CUDACXX} "${SCRATCHGRAD_NVCC}")  # what enable_language / check_language look at first
  endif()
endif()

# nvcc compiles host code with the same C++ compiler as the rest of the project.
if(NOT CMAKE_CUDA_HOST_COMPILER AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  set(CMAKE_CUDA_HOST_COMPILER "${CMAKE_CXX_COMPILER}" CACHE FILEPATH "host compiler for nvcc")
endif()
if((NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "") AND NOT "$ENV{CUDAARCHS}" STREQUAL "")
  # CMake's own environment variable for the default (CI sets one architecture: it only checks that the
  # backend compiles, and every architecture costs a device-code pass of each .cu file).
  set(CMAKE_CUDA_ARCHITECTURES "$ENV{CUDAARCHS}" CACHE STRING "GPU architectures to build for")
elseif(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
  # T4, A100, A10/RTX 30xx, L4/L40/RTX 40xx, H100/H200 as machine code; PTX of sm_90 for anything newer.
  set(CMAKE_CUDA_ARCHITECTURES "75-real;80-real;86-real;89-real;90" CACHE STRING "GPU architectures to build for")
endif()

# check_language tries the compiler in a scratch project, so AUTO never fails the configure.
include(CheckLanguage)
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  if(_sg_cuda_required)
    message(FATAL_ERROR "SCRATCHGRAD_CUDA=${SCRATCHGRAD_CUDA} but no working nvcc was found (looked on PATH, "
                        "$CUDACXX, $CUDA_HOME/bin and /usr/local/cuda/bin); install the CUDA toolkit, pass "
                        "-DCMAKE_CUDA_COMPILER=/path/to/nvcc, or use -DSCRATCHGRAD_CUDA=OFF")
  endif()
  message(STATUS "scratchgrad: CUDA backend not built (no working nvcc; SCRATCHGRAD_CUDA=AUTO)")
  return()
endif()
enable_language(CUDA)
# CMake 3.25's FindCUDAToolkit sets a property on CUDA::nvToolsExt even when that library is missing, which
# it is from CUDA 12.9 on ("set_property could not find TARGET CUDA::nvToolsExt"); Debian 12's cmake has the
# bug. A placeholder target, made only then, lets the module finish. (Nothing here uses NVTX.)
if(CMAKE_VERSION VERSION_LESS 3.26 AND NOT TARGET CUDA::nvToolsExt)
  get_filename_component(_sg_cuda_bin "${CMAKE_CUDA_COMPILER}" DIRECTORY)
  find_library(SCRATCHGRAD_NVTOOLSEXT nvToolsExt HINTS "${_sg_cuda_bin}/../lib64" "${_sg_cuda_bin}/../lib" NO_DEFAULT_PATH)
  if(NOT SCRATCHGRAD_NVTOOLSEXT)
    add_library(CUDA::nvToolsExt INTERFACE IMPORTED)
  endif()
endif()
find_package(CUDAToolkit REQUIRED)


# ---- the library ----
file(GLOB SCRATCHGRAD_GPU_SOURCES CONFIGURE_DEPENDS
  ${PROJECT_SOURCE_DIR}/gpu/*.cpp ${PROJECT_SOURCE_DIR}/gpu/*.cu)
list(FILTER SCRATCHGRAD_GPU_SOURCES EXCLUDE REGEX "/bench_[^/]*$")
add_library(scratchgrad_gpu STATIC ${SCRATCHGRAD_GPU_SOURCES})
# Nothing of CUDA is loaded until a CUDA device is first used: the runtime is linked statically (it opens
# the driver, libcuda.so, on its first call) and cuBLAS is opened with dlopen by gpu/cublas_library.cpp.
# So a CPU run of a CUDA build starts as quickly, and stays as small, as a CPU-only build.
target_link_libraries(scratchgrad_gpu PUBLIC scratchgrad_autograd PRIVATE CUDA::cudart_static ${CMAKE_DL_LIBS})
target_include_directories(scratchgrad_gpu PRIVATE ${CUDAToolkit_INCLUDE_DIRS})  # cublas_v2.h, for the types
set_source_files_properties(${PROJECT_SOURCE_DIR}/gpu/cublas_library.cpp PROPERTIES
  COMPILE_DEFINITIONS SCRATCHGRAD_CUDA_LIBRARY_DIR="${CUDAToolkit_LIBRARY_DIR}")
target_compile_definitions(scratchgrad_gpu PUBLIC SCRATCHGRAD_HAS_CUDA)
# The .cu files include autograd headers, which are C++20, and CUDA_STANDARD follows CXX_STANDARD. CMake
# before 3.27 does not know nvcc's C++20 flag (generation fails with "requires the language dialect
# CUDA20"), so teach it when needed; nvcc has taken -std=c++20 since CUDA 12.
if(NOT "cuda_std_20" IN_LIST CMAKE_CUDA_COMPILE_FEATURES AND CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.0)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
endif()
set_target_properties(scratchgrad_gpu PROPERTIES CUDA_STANDARD 20 CUDA_STANDARD_REQUIRED ON CUDA_EXTENSIONS OFF)

# The top-level add_compile_options(-Wall -Wextra ...) reach the .cu files too, and nvcc does not take
# them: keep them for C++ and hand only the warning flags to nvcc's host compiler.
get_target_property(_sg_gpu_opts scratchgrad_gpu COMPILE_OPTIONS)
if(_sg_gpu_opts)
  set(_sg_fixed)
  foreach(_opt IN LISTS _sg_gpu_opts)
    list(APPEND _sg_fixed "$<$<COMPILE_LANGUAGE:CXX>:${_opt}>")
    if(_opt MATCHES "^-W")
      list(APPEND _sg_fixed "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${_opt}>")
    endif()
  endforeach()
  set_property(TARGET scratchgrad_gpu PROPERTY COMPILE_OPTIONS ${_sg_fixed})
endif()
# Precise math (no --use_fast_math): GPU results stay within a few ulp of the CPU's.
target_compile_options(scratchgrad_gpu PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>)

# Static registration: gpu/backend.cpp registers the CUDA Backend from a static initialiser, but a linker
# only takes an object out of a static library when something refers to it. Every program that links
# scratchgrad_gpu (directly or through the `scratchgrad` umbrella) is told to treat the anchor defined in
# that object as undefined, so the object — and with it the registration — is always linked in.
target_link_options(scratchgrad_gpu INTERFACE "LINKER:--undefined=scratchgrad_gpu_registered")

message(STATUS "scratchgrad: CUDA backend on (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, "
               "architectures ${CMAKE_CUDA_ARCHITECTURES}, toolkit ${CUDAToolkit_LIBRARY_DIR})")

# ---- the GPU benchmark ----
if(EXISTS ${PROJECT_SOURCE_DIR}/gpu/bench_gpu.cpp)
  add_executable(bench_gpu ${PROJECT_SOURCE_DIR}/gpu/bench_gpu.cpp)
  target_link_libraries(bench_gpu PRIVATE scratchgrad_gpu scratchgrad_optim scratchgrad_nn)
endif()
