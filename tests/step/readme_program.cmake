# tests/step/readme_program.cmake — ctest's step.readme_first_program_is_the_readmes: examples/readme_first_program.cpp
# (the program `make step` runs for the README's ops) holds the README's first program as it is, below
# its header comment.
file(READ ${SOURCE_DIR}/README.md readme)
string(FIND "${readme}" "## A first program" at)
string(SUBSTRING "${readme}" ${at} -1 section)
string(REGEX MATCH "```cpp\n([^`]*)\n```" found "${section}")
if(NOT found)
  message(FATAL_ERROR "README.md: no ```cpp block under '## A first program'")
endif()
set(code "${CMAKE_MATCH_1}\n")
file(READ ${SOURCE_DIR}/examples/readme_first_program.cpp example)
string(REGEX REPLACE "^(//[^\n]*\n)+" "" example "${example}")
if(NOT example STREQUAL code)
  message(FATAL_ERROR "examples/readme_first_program.cpp no longer holds the README's first program; copy it from "
                      "README.md ('## A first program') below the file's header comment")
endif()
