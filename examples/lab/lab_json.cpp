// lab_json.cpp — the lab's computations from the command line, natively: `lab_json FUNCTION [JSON]`
// prints what the page's WebAssembly build answers to the same call (lab.h), so tests can compare them.
#include <iostream>

#include "examples/lab/lab.h"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::cerr << "usage: lab_json FUNCTION [JSON request]   (functions: see examples/lab/lab.h)\n";
    return 2;
  }
  const std::string answer = lab::call(argv[1], argc == 3 ? argv[2] : "{}");
  std::cout << answer << "\n";
  return answer.starts_with("{\"error\"") ? 1 : 0;
}
