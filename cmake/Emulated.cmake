# cmake/Emulated.cmake — how the tests start the built programs. Included by tests/CMakeLists.txt.
#
# Natively they run bin/<program>. In a cross build (cmake/aarch64-linux-gnu.cmake sets
# CMAKE_CROSSCOMPILING_EMULATOR) ctest already runs the test programs themselves under the emulator, but a
# test that starts another program (the command line through /bin/sh, a seed program from a CMake script)
# would hand an aarch64 file to the host. So a cross build gets bin-emulated/: for each program of
# examples/ and for the test program, a two-line script of the same name that runs bin/<program> under the emulator (argv[0] kept).
# SCRATCHGRAD_PROGRAMS_DIR is the folder the tests start programs from: bin/ or bin-emulated/.
set(SCRATCHGRAD_PROGRAMS_DIR ${PROJECT_BINARY_DIR}/bin)

# The executable targets defined in `dir` and the folders below it.
function(scratchgrad_executables_below dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  set(found "")
  foreach(target ${targets})
    get_target_property(type ${target} TYPE)
    if(type STREQUAL "EXECUTABLE")
      list(APPEND found ${target})
    endif()
  endforeach()
  get_property(subdirectories DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(subdirectory ${subdirectories})
    scratchgrad_executables_below(${subdirectory} below)
    list(APPEND found ${below})
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

if(CMAKE_CROSSCOMPILING_EMULATOR)
  set(SCRATCHGRAD_PROGRAMS_DIR ${PROJECT_BINARY_DIR}/bin-emulated)
  list(JOIN CMAKE_CROSSCOMPILING_EMULATOR " " _sg_emulator)
  scratchgrad_executables_below(${PROJECT_SOURCE_DIR}/examples _sg_programs)
  list(APPEND _sg_programs scratchgrad_tests)  # (test_catalog.cpp reruns suites in a second process)
  foreach(program ${_sg_programs})
    file(GENERATE OUTPUT ${SCRATCHGRAD_PROGRAMS_DIR}/$<TARGET_FILE_NAME:${program}>
         CONTENT "#!/bin/sh\nexec ${_sg_emulator} -0 \"$0\" $<TARGET_FILE:${program}> \"$@\"\n"
         FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
  endforeach()
endif()

# The tests that a CMake script or a shell script runs (compare_output.cmake, exercises/expect_report.cmake)
# start a target's file themselves: in a cross build each test of the folder that calls this gets
# SCRATCHGRAD_EMULATOR in its environment, which those scripts put in front of the program. (Called at the
# end of each folder's list: CMake 3.25 sets a test's properties only from its own folder.)
function(scratchgrad_emulate_script_tests)
  if(CMAKE_CROSSCOMPILING_EMULATOR)
    list(JOIN CMAKE_CROSSCOMPILING_EMULATOR " " emulator)
    get_property(tests DIRECTORY PROPERTY TESTS)
    foreach(test ${tests})
      set_property(TEST ${test} APPEND PROPERTY ENVIRONMENT "SCRATCHGRAD_EMULATOR=${emulator}")
    endforeach()
  endif()
endfunction()
