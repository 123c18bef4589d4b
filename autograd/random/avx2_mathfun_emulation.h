// cpu/avx2_mathfun_emulation.h — scalar re-creations of the float log and sin/cos that PyTorch 1.13's
// AVX2 normal kernel uses, bit for bit.
//
// With ATEN_CPU_CAPABILITY=avx2, torch.randn and Tensor.normal_ on a contiguous float32 tensor of 16 or
// more elements run Box-Muller through vectorised Cephes-style approximations of logf and sinf/cosf
// (PyTorch's aten/src/ATen/native/cpu/avx_mathfun.h, after Julien Pommier's avx_mathfun). They are not
// the C library's functions, so their last bits differ from std::log/std::sin/std::cos. The functions
// below perform the same float operations in the same order, one lane at a time, including the places
// where GCC (PyTorch is built with -mavx2 -mfma) contracts a multiply and an add into one fused
// multiply-add. They were re-implemented from a description of the algorithm (Cephes' logf/sinf: the
// constants and the order of the steps); no code was copied.
//
// Only random::normal uses them, and only when random::cpu_kernels() == CpuKernels::avx2 (see random.h and
// docs/random.md). Arguments are those the normal kernel produces: log takes a float in (0, 1], sincos
// an angle in [0, 2π). Both work for other finite positive / moderate arguments too, with the
// accuracy of the original (about 1e-7 relative for log, 1e-7 absolute for |x| < 8192 for sin/cos).
#pragma once

namespace autograd::random::avx2_emulation {

// Natural logarithm of x > 0 as PyTorch's log256_ps computes it (x <= 0 is not supported: the vector
// code returns NaN there, we never call it so).
float log(float x);

// Sine and cosine of x as PyTorch's sincos256_ps computes them.
void sincos(float x, float& sin_out, float& cos_out);

}  // namespace autograd::random::avx2_emulation
