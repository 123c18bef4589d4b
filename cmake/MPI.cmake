# cmake/MPI.cmake — optional data-parallel training over MPI (included from the top-level CMakeLists.txt).
#
#   SCRATCHGRAD_MPI=AUTO  build nn/dist/ when an MPI library is found (Debian: libopenmpi-dev, openmpi-bin)
#   SCRATCHGRAD_MPI=ON    the same, but a missing MPI is an error
#   SCRATCHGRAD_MPI=OFF   one process only
#
# The result is the library scratchgrad_dist (the `dist` API named after torch.distributed, and
# nn::DistributedDataParallel), the macro SCRATCHGRAD_HAS_MPI for everything that links it, and
# SCRATCHGRAD_MPIEXEC, the launcher the tests use. Nothing else in the libraries needs MPI.

string(TOUPPER "${SCRATCHGRAD_MPI}" _sg_mpi_mode)
if(_sg_mpi_mode STREQUAL "OFF" OR _sg_mpi_mode STREQUAL "FALSE" OR _sg_mpi_mode STREQUAL "0")
  message(STATUS "scratchgrad: MPI off (SCRATCHGRAD_MPI=${SCRATCHGRAD_MPI})")
  return()
endif()
if(NOT _sg_mpi_mode MATCHES "^(AUTO|ON|TRUE|1)$")
  message(FATAL_ERROR "SCRATCHGRAD_MPI must be AUTO, ON or OFF, got '${SCRATCHGRAD_MPI}'")
endif()

# The C API, through the C++ compiler (the project enables no C): MPI 3 removed the C++ bindings, and
# MPI_CXX_SKIP_MPICXX keeps OpenMPI's old ones out.
set(MPI_CXX_SKIP_MPICXX ON)
find_package(MPI COMPONENTS CXX)
if(NOT MPI_CXX_FOUND)
  if(_sg_mpi_mode STREQUAL "AUTO")
    message(STATUS "scratchgrad: no MPI found, data parallelism off (apt-get install libopenmpi-dev openmpi-bin)")
    return()
  endif()
  message(FATAL_ERROR "SCRATCHGRAD_MPI=${SCRATCHGRAD_MPI} but no MPI was found (apt-get install libopenmpi-dev openmpi-bin)")
endif()
set(SCRATCHGRAD_MPIEXEC "${MPIEXEC_EXECUTABLE}" CACHE FILEPATH "mpirun, for the 2-rank tests")
message(STATUS "scratchgrad: MPI ${MPI_CXX_VERSION} found, building scratchgrad_dist (launcher: ${SCRATCHGRAD_MPIEXEC})")

file(GLOB _sg_dist_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/nn/dist/*.cpp)
add_library(scratchgrad_dist STATIC ${_sg_dist_sources})
target_link_libraries(scratchgrad_dist PUBLIC scratchgrad_nn PRIVATE MPI::MPI_CXX)
target_compile_definitions(scratchgrad_dist PUBLIC SCRATCHGRAD_HAS_MPI)
