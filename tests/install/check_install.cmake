# tests/install/check_install.cmake — run by ctest: installs the build into WORK_DIR/prefix, builds
# the README's "A first program" example there as an outside project, runs it, and compares what it prints
# with the output block that follows it in the README.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/project)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
endfunction()

run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix)

# The README's example: the ```cpp block after "## A first program", then the ``` block after "prints".
file(READ ${SOURCE_DIR}/README.md readme)
string(FIND "${readme}" "## A first program" at)
string(SUBSTRING "${readme}" ${at} -1 section)
string(REGEX MATCH "```cpp\n(.*)\n```\n\nprints[^\n]*\n\n```\n([^`]*)```" found "${section}")
if(NOT found)
  message(FATAL_ERROR "README.md: no ```cpp block followed by its printed output under '## A first program'")
endif()
set(code "${CMAKE_MATCH_1}\n")
set(expected "${CMAKE_MATCH_2}")
file(WRITE ${WORK_DIR}/project/main.cpp "${code}")
file(COPY ${SOURCE_DIR}/tests/install/CMakeLists.txt DESTINATION ${WORK_DIR}/project)

# A sanitizer build's libraries need the sanitizers' runtime in the program that links them.
set(flags)
if(SANITIZE)
  set(flags "-DCMAKE_CXX_FLAGS=-fsanitize=address,undefined" "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined")
endif()
# Without components, the package must not look for CUDA or MPI: configured with both made unfindable.
run(${CMAKE_COMMAND} -S ${WORK_DIR}/project -B ${WORK_DIR}/build -DCMAKE_BUILD_TYPE=Release
    -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON
    -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON ${flags})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${WORK_DIR}/build/readme_example)
if(NOT run_output STREQUAL expected)
  message(FATAL_ERROR "the installed package's README example printed\n${run_output}\nbut README.md shows\n${expected}")
endif()

# Each optional component: found when the package was built with it, else refused by name; an unknown
# component is refused too.
set(cmake_dir ${WORK_DIR}/prefix/lib/cmake/scratchgrad)
if(NOT EXISTS ${cmake_dir})
  file(GLOB cmake_dir ${WORK_DIR}/prefix/lib*/cmake/scratchgrad)
endif()
foreach(component gpu dist nonesuch)
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${WORK_DIR}/project -B ${WORK_DIR}/build-${component}
                          -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DSG_COMPONENTS=${component}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(EXISTS ${cmake_dir}/scratchgrad_${component}Targets.cmake)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "find_package(scratchgrad COMPONENTS ${component}) failed:\n${out}\n${err}")
    endif()
  elseif(rc EQUAL 0 OR NOT err MATCHES "(built without|unknown component) '${component}'")
    message(FATAL_ERROR "find_package(scratchgrad COMPONENTS ${component}) should have been refused by name:\n${err}")
  endif()
endforeach()

# The pkg-config file names the installed headers and libraries.
file(GLOB pc ${WORK_DIR}/prefix/lib*/pkgconfig/scratchgrad.pc)
if(NOT pc)
  message(FATAL_ERROR "no scratchgrad.pc under ${WORK_DIR}/prefix")
endif()
file(READ ${pc} pc_text)
if(NOT pc_text MATCHES "-lscratchgrad_autograd" OR NOT EXISTS ${WORK_DIR}/prefix/include/autograd/autograd.h)
  message(FATAL_ERROR "scratchgrad.pc or the headers are incomplete:\n${pc_text}")
endif()
message(STATUS "installed package OK: the README example prints what the README shows")
