// float_functions.h — the float functions whose last bits the exact numerics depend on, the same on every CPU.
//
// PyTorch's portable kernels take tanh and erf of a float from the C library (tanhf, erff), and so do the
// exact numerics here (docs/parity.md). But C libraries differ in the last bits: glibc's aarch64 build
// compiles the same C with fused multiply-adds, so its tanhf, erff, expm1f and log1pf round differently
// from x86-64's on a fraction of a percent of inputs, and a model trained on ARM drifts away from one
// trained on x86. These are the project's own: x86-64 glibc 2.36's algorithms (Debian 12), every operation
// a float or double operation rounded as it is there, compiled without contraction (-ffp-contract=off),
// so they give x86-64 glibc's bits on every CPU (float_functions.cpp says how; tests/test_float_functions.cpp
// checks them against the library on x86-64 and against fixtures written there on any CPU).
#pragma once
#include <cmath>

namespace autograd::cpu {

// tanhf(x) as x86-64 glibc 2.36 computes it (fdlibm's algorithm in float arithmetic).
float tanh_float(float x);
// expm1f(x) (e^x − 1), x86-64 glibc 2.36's (fdlibm's); tanh_float is built on it.
float expm1_float(float x);
// erff(x) as x86-64 glibc 2.36 computes it (fdlibm's rational approximations, and expf's FMA build).
float erf_float(float x);

// For the kernels' templates: a float takes the functions above, a double the C library's (float64 runs
// are compared with tolerances, not bits).
inline float exact_tanh(float x) { return tanh_float(x); }
inline double exact_tanh(double x) { return std::tanh(x); }
inline float exact_erf(float x) { return erf_float(x); }
inline double exact_erf(double x) { return std::erf(x); }

}  // namespace autograd::cpu
