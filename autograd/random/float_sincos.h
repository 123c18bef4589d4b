// random/float_sincos.h — sin and cos of a float angle with the bits of glibc's sinf/cosf, on any platform.
//
// The portable normal kernel (Box-Muller over blocks of 16 floats, docs/random.md section 3) needs sin θ
// and cos θ of a float θ in [0, 2π). PyTorch calls the C library's sinf/cosf, and the fixtures were made
// with glibc's. Other C libraries round differently: Emscripten's musl (the WebAssembly lab) gives other
// last bits for 1.3% of the 2^24 angles the kernel can draw, and so does rounding the double sin/cos to
// float. float_sincos computes what glibc computes, in portable double arithmetic, so every build draws
// glibc's normals. It is checked against glibc on all 2^24 angles (tests/test_random.cpp) and against the
// native build in the WebAssembly lab (tests/lab/core.test.mjs).
#pragma once

namespace autograd::random {

struct SinCos {
  float sin;
  float cos;
};

// sin x and cos x, each bit for bit what glibc's (2.28 and later) sinf(x) and cosf(x) return: on x86-64,
// for every float with |x| < 120 against glibc's plain build, and for every float in [0, 2π) against the
// build with FMA that glibc picks on CPUs that have it (which fuses steps and so differs on 34 floats
// beyond 17). Defined for |x| < 120, the range of glibc's one-step reduction; throws std::domain_error
// otherwise (Box-Muller only asks for [0, 2π)).
SinCos float_sincos(float x);

}  // namespace autograd::random
