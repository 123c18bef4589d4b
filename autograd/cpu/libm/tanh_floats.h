// tanh_floats.h — tanhf over a whole array, 16 values per instruction, with the C library's bits.
//
// GELU's tanh form (the GPT's activation) needs one tanh per element forward and another backward, and
// PyTorch's portable kernel takes it from the C library's tanhf (docs/parity.md). Called once per element,
// tanhf was over a third of an exact-numerics GPT step; tanh_floats computes the same function on 16
// floats at once and gives the same bits (tanh_floats.cpp says how, tests/test_tanh_floats.cpp checks it).
#pragma once
#include <cstdint>

namespace autograd::cpu {

// y[i] = std::tanh(x[i]) for 0 <= i < n, bit for bit. x and y may be the same array.
void tanh_floats(const float* x, float* y, int64_t n);

// True when tanh_floats runs on vectors (16 lanes with AVX-512, 8 with AVX2) and a start-up check found
// the vector code agreeing with this process's tanhf. False: tanh_floats is a loop over std::tanh.
bool tanh_floats_vectorised();

}  // namespace autograd::cpu
