// exp_floats.h — expf over a whole array, 16 values per instruction, with the C library's bits.
//
// Softmax, log_softmax and their gradients need one exp per element, and PyTorch's portable kernels
// take it from the C library's expf (docs/parity.md). Calling expf once per element was a fifth of a
// seed-size training step; exp_floats computes the same function on 16 floats at once (8 with AVX2) and
// gives the same bits (see exp_floats.cpp for how, and tests/test_exp_floats.cpp for the proof).
#pragma once
#include <cstdint>
#include <limits>

namespace autograd::cpu {

// y[i] = std::exp(x[i]) for 0 <= i < n, bit for bit. x and y may be the same array.
void exp_floats(const float* x, float* y, int64_t n);

// out[r] = the largest of the n values of row r (rows laid end to end: row r at x + r·n), NaN if the row
// holds a NaN — the maximum softmax subtracts. (Not the library's, but any order gives the same largest
// value; only which of +0 and -0 wins a tie could differ, and x − max has the same exp either way.)
void row_maxima(const float* x, int64_t rows, int64_t n, float* out);

// One row's maximum with row_maxima's meaning, one value at a time: inlined where n is a compile-time
// constant (softmax's short rows), it is straight-line code.
inline float row_maximum(const float* x, int64_t n) {
  float m = x[0];
  bool nan = false;
  for (int64_t j = 0; j < n; ++j) {
    nan |= x[j] != x[j];
    m = x[j] > m ? x[j] : m;
  }
  return nan ? std::numeric_limits<float>::quiet_NaN() : m;
}

// True when exp_floats runs on vectors (16 lanes with AVX-512, 8 with AVX2 and FMA) and a start-up check
// found the vector code agreeing with this process's expf. False: exp_floats is a loop over std::exp.
bool exp_floats_vectorised();

}  // namespace autograd::cpu
