// lab.h — everything the lab page computes, as one call: a function name and a JSON request in, a JSON
// answer out. The page calls it through WebAssembly (bindings.cpp); the native program lab_json calls the
// very same code, so tests can compare the two byte for byte.
//
//   call("attention", R"({"source": "act1", "mask": true, "temperature": 0.5})")
//
// Functions (requests and answers are described in docs/lab.md):
//   acts          the four acts, printed by examples/attention_from_scratch.cpp itself
//   attention     the lab's attention matrix: scores, mask, temperature, weights
//   cell          one query meets one key: q_i·k_j, ÷√d_k, the softmax row, the weight
//   key_dimension the d_k slider: unscaled and scaled softmax of random scores
//   backward      a loss on the context vectors, every node as backward runs it, each weight's gradient
//   train_start / train_steps / train_sample   the workshop's character model, a few steps per call
//   train         all of the above in one call (for the tests)
//   gradcheck     the page's ops against finite differences, in float64
//   float_repr    Python's repr of a double (the printer's shortest round-trip digits)
//   randn_fingerprint       randn of a big tensor: a fingerprint of its bits (the block path's sin, cos, log)
//   box_muller_fingerprint  fingerprints of sin/cos and log on all 2^24 arguments the float block can draw
// Bad input answers {"error": "<the exception's message>"}; call never throws.
#pragma once
#include <string>

namespace lab {

std::string call(const std::string& function, const std::string& request_json);

}  // namespace lab
