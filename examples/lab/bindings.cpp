// bindings.cpp — the WebAssembly entry point: lab::call (lab.h) for JavaScript, through embind.
//
//   const lab = await createLab();                       // lab.js
//   JSON.parse(lab.call("attention", JSON.stringify({source: "act1", mask: true})));
//
// Everything crosses as JSON text, and every exception has become {"error": "..."} before it gets
// here, so JavaScript never sees a C++ exception.
#include <emscripten/bind.h>

#include "examples/lab/lab.h"

EMSCRIPTEN_BINDINGS(scratchgrad_lab) { emscripten::function("call", &lab::call); }
