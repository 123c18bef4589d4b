# FindBLIS.cmake — finds BLIS (never downloads it).
# Debian installs the header under a threading-flavoured folder, e.g.
# /usr/include/x86_64-linux-gnu/blis-openmp/blis.h, and ships no pkg-config file, so we look there too.
# Defines BLIS_FOUND, BLIS_INCLUDE_DIR, BLIS_LIBRARY and the imported target BLIS::BLIS.
include(FindPackageHandleStandardArgs)

find_path(BLIS_INCLUDE_DIR blis.h
  PATH_SUFFIXES blis-openmp blis-pthread blis-serial blis
                x86_64-linux-gnu/blis-openmp x86_64-linux-gnu/blis-pthread x86_64-linux-gnu/blis-serial
                aarch64-linux-gnu/blis-openmp aarch64-linux-gnu/blis-pthread aarch64-linux-gnu/blis-serial)
find_library(BLIS_LIBRARY NAMES blis blis-mt)

find_package_handle_standard_args(BLIS REQUIRED_VARS BLIS_LIBRARY BLIS_INCLUDE_DIR)

if(BLIS_FOUND AND NOT TARGET BLIS::BLIS)
  add_library(BLIS::BLIS UNKNOWN IMPORTED)
  set_target_properties(BLIS::BLIS PROPERTIES
    IMPORTED_LOCATION "${BLIS_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${BLIS_INCLUDE_DIR}")
  # the OpenMP flavour needs the OpenMP runtime at link time
  if(BLIS_INCLUDE_DIR MATCHES "openmp")
    find_package(OpenMP QUIET)
    if(OpenMP_CXX_FOUND)
      set_property(TARGET BLIS::BLIS APPEND PROPERTY INTERFACE_LINK_LIBRARIES OpenMP::OpenMP_CXX)
    endif()
  endif()
endif()
mark_as_advanced(BLIS_INCLUDE_DIR BLIS_LIBRARY)
