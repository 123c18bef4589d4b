// tanh_floats.h — tanhf over a whole array, 16 values per instruction, with x86-64 glibc's bits on any CPU.
//
// GELU's tanh form (the GPT's activation) needs one tanh per element forward and another backward, and
// PyTorch's portable kernel takes it from the C library's tanhf (docs/parity.md). Called once per element,
// tanhf was over a third of an exact-numerics GPT step; tanh_floats computes the same function on 16
// floats at once and gives the same bits (tanh_floats.cpp says how, tests/test_tanh_floats.cpp checks it).
#pragma once
#include <cstdint>

namespace autograd::cpu {

// y[i] = tanh_float(x[i]) for 0 <= i < n, bit for bit (float_functions.h: x86-64 glibc 2.36's tanhf, on any
// CPU). x and y may be the same array.
void tanh_floats(const float* x, float* y, int64_t n);

// True when tanh_floats runs on vectors (16 lanes with AVX-512, 8 with AVX2) and a start-up check found
// the vector code agreeing with tanh_float. False: tanh_floats is a loop over tanh_float.
bool tanh_floats_vectorised();

}  // namespace autograd::cpu
