# Runs `PROGRAM RUNG` and checks its report: EXPECT_STATUS (0: passed, 1: failed, 2: usage) and, if given, the
# regular expression EXPECT in the output. With STUB_FILE: the test is skipped (it prints "skipped: ...",
# which its SKIP_REGULAR_EXPRESSION matches) once that file no longer holds its stub (`not_implemented(`),
# i.e. when a learner has started on it.
if(STUB_FILE)
  file(READ ${STUB_FILE} source)
  string(FIND "${source}" "not_implemented(" at)
  if(at EQUAL -1)
    message("skipped: ${STUB_FILE} holds no stub any more (a learner is working on it)")
    return()
  endif()
endif()
execute_process(COMMAND ${PROGRAM} ${RUNG} OUTPUT_VARIABLE output ERROR_VARIABLE errors RESULT_VARIABLE status)
message("${output}${errors}")
if(NOT status EQUAL EXPECT_STATUS)
  message(FATAL_ERROR "${PROGRAM} ${RUNG} exited with status ${status}, expected ${EXPECT_STATUS}")
endif()
if(DEFINED EXPECT)
  string(REGEX MATCH "${EXPECT}" found "${output}${errors}")
  if(NOT found)
    message(FATAL_ERROR "the report of ${PROGRAM} ${RUNG} does not say: ${EXPECT}")
  endif()
endif()
