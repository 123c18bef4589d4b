# cmake/Install.cmake — `cmake --install` puts the headers (in the source layout), the libraries, a CMake
# package (find_package(scratchgrad) → scratchgrad::autograd, ::nn, ::optim; COMPONENTS gpu dist → ::gpu, ::dist) and a pkg-config file
# under the prefix.
include(CMakePackageConfigHelpers)

# The core libraries form one export set; each optional library (gpu: CUDA, dist: MPI) has its own, so a
# consumer that does not ask for that component never needs its toolkit (scratchgradConfig.cmake.in).
set(_sg_exported scratchgrad_autograd scratchgrad_nn scratchgrad_optim)
install(TARGETS ${_sg_exported} EXPORT scratchgradTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
set(SCRATCHGRAD_PACKAGE_HAS_GPU OFF)
set(SCRATCHGRAD_PACKAGE_HAS_MPI OFF)
set(_sg_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/scratchgrad)
foreach(component gpu dist)
  if(TARGET scratchgrad_${component})
    install(TARGETS scratchgrad_${component} EXPORT scratchgrad_${component}Targets
            ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
            INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
    install(EXPORT scratchgrad_${component}Targets NAMESPACE scratchgrad:: DESTINATION ${_sg_cmake_dir})
  endif()
endforeach()
if(TARGET scratchgrad_gpu)
  set(SCRATCHGRAD_PACKAGE_HAS_GPU ON)
endif()
if(TARGET scratchgrad_dist)
  set(SCRATCHGRAD_PACKAGE_HAS_MPI ON)
endif()
foreach(dir autograd nn optim)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
endforeach()
if(SCRATCHGRAD_PACKAGE_HAS_GPU)
  install(FILES ${PROJECT_SOURCE_DIR}/gpu/gpu.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gpu)
endif()

install(EXPORT scratchgradTargets NAMESPACE scratchgrad:: DESTINATION ${_sg_cmake_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/scratchgradConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/scratchgradConfig.cmake INSTALL_DESTINATION ${_sg_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/scratchgradConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/scratchgradConfig.cmake ${PROJECT_BINARY_DIR}/scratchgradConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/FindBLIS.cmake
        DESTINATION ${_sg_cmake_dir})

# pkg-config: static libraries, so their own dependencies are listed too.
set(_sg_pc_libs "-lscratchgrad_optim -lscratchgrad_nn -lscratchgrad_autograd ${BLIS_LIBRARY}")
if(OpenMP_CXX_FOUND)
  string(APPEND _sg_pc_libs " ${OpenMP_CXX_FLAGS}")
endif()
string(APPEND _sg_pc_libs " -pthread")
configure_file(${PROJECT_SOURCE_DIR}/cmake/scratchgrad.pc.in ${PROJECT_BINARY_DIR}/scratchgrad.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/scratchgrad.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
