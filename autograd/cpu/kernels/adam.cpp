// cpu/kernels/adam.cpp — the Adam/AdamW update as one loop per parameter.
//
// PyTorch 1.13 (single-tensor Adam) runs this as a chain of tensor ops, each rounding to float:
//   g  = grad·scale (+ wd·θ)                 m  = β1·m + (1−β1)·g        v = β2·v + (1−β2)·g·g
//   denom = sqrt(v) / sqrt(1 − β2^t) + eps   θ  = θ − (lr / (1 − β1^t)) · m / denom
// (scale is clip_grad_norm_'s coefficient, when the clipping is fused into the step: g.mul_(coef) first, 1
// otherwise.) The loop below keeps that order of operations and the float rounding of every single op, as PyTorch's
// portable kernels (ATEN_CPU_CAPABILITY=default) compute them: `a.add_(b, alpha)` is a + (alpha·b),
// addcmul_ is v + ((value·g)·g), addcdiv_ is p + ((value·m)/denom) — every product and quotient rounded
// on its own, no fused multiply-add (the portable build is compiled for baseline x86-64, which has none;
// PyTorch's AVX2 build fuses a + alpha·b and lands a bit away in about half of the updates).
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "autograd/backend.h"
#include "autograd/cpu/kernels.h"
#include "autograd/cpu/kernels/bfloat16_runs.h"
#include "autograd/cpu/kernels/loops.h"
#include "autograd/cpu/runtime/runtime.h"

namespace autograd::cpu {

// The scalars of one step, each rounded to the parameter's type once, as PyTorch does when a Python
// float meets a tensor.
template <typename F> struct AdamScalars {
  F step_size, bc2_sqrt, beta1, beta2, one_minus_beta1, one_minus_beta2, eps, wd, decay, grad_scale;
  explicit AdamScalars(const AdamStep& s) {
    const double bias_correction1 = 1.0 - std::pow(s.beta1, double(s.step));
    const double bias_correction2 = 1.0 - std::pow(s.beta2, double(s.step));
    step_size = F(s.lr / bias_correction1);
    bc2_sqrt = F(std::sqrt(bias_correction2));
    beta1 = F(s.beta1), beta2 = F(s.beta2);
    one_minus_beta1 = F(1.0 - s.beta1), one_minus_beta2 = F(1.0 - s.beta2);
    eps = F(s.eps), wd = F(s.weight_decay);
    decay = F(1.0 - s.lr * s.weight_decay);
    grad_scale = F(s.grad_scale);
  }
};

// One element's update. Decay says which weight decay applies and AmsGrad whether the running maximum
// of v is kept (and divided by), chosen once per tensor so the loop below has no branch and the
// compiler can run it on vectors (sqrt and / are exact in vector form too; this file is built with
// -fno-math-errno so that std::sqrt needs no errno check).
enum class Decay { none, l2, decoupled };

template <typename F, Decay decay, bool amsgrad>
[[gnu::always_inline]] inline void adam_element(const AdamScalars<F>& c, F& p, F g, F& m, F& v, F* vmax) {
  g = g * c.grad_scale;                                               // clipping: grad.mul_(coef)
  if constexpr (decay == Decay::decoupled) p = p * c.decay;
  if constexpr (decay == Decay::l2) g = g + c.wd * p;                 // grad.add(param, alpha=wd)
  m = m * c.beta1 + c.one_minus_beta1 * g;                            // exp_avg.mul_(β1).add_(g, alpha=1−β1)
  v = v * c.beta2 + c.one_minus_beta2 * g * g;                        // .mul_(β2).addcmul_(g, g, value=1−β2)
  F second = v;
  if constexpr (amsgrad) second = *vmax = std::max(*vmax, v);         // torch.maximum(max_exp_avg_sq, v)
  const F denom = std::sqrt(second) / c.bc2_sqrt + c.eps;             // (sqrt(v) / √bc2).add_(eps)
  p = p + (-c.step_size) * m / denom;                                 // addcdiv_(m, denom, value=−step_size)
}

template <typename F, Decay decay, bool amsgrad>
[[gnu::always_inline]] inline void adam_loop_body(const AdamScalars<F>& c, int64_t n, F* __restrict p,
                                                  const F* __restrict g, F* __restrict m, F* __restrict v,
                                                  F* __restrict vmax) {
  for (int64_t i = 0; i < n; ++i)
    adam_element<F, decay, amsgrad>(c, p[i], g[i], m[i], v[i], amsgrad ? vmax + i : nullptr);
}

// The same loop compiled three times: for baseline x86-64 (4 floats per instruction) and, where the CPU
// has it, AVX2 (8) or AVX-512 (16). Every operation is still one IEEE-rounded multiply, add, divide or
// square root, so all give the same bits (-ffp-contract=off: no fused multiply-add in any).
#if defined(__x86_64__) && defined(__GNUC__)
template <typename F, Decay decay, bool amsgrad>
[[gnu::target("avx512f")]] void adam_loop_avx512(const AdamScalars<F>& c, int64_t n, F* p, const F* g, F* m, F* v,
                                                 F* vmax) {
  adam_loop_body<F, decay, amsgrad>(c, n, p, g, m, v, vmax);
}
template <typename F, Decay decay, bool amsgrad>
[[gnu::target("avx2")]] void adam_loop_avx2(const AdamScalars<F>& c, int64_t n, F* p, const F* g, F* m, F* v,
                                            F* vmax) {
  adam_loop_body<F, decay, amsgrad>(c, n, p, g, m, v, vmax);
}
#endif

template <typename F, Decay decay, bool amsgrad>
void adam_run(const AdamScalars<F>& c, int64_t n, F* p, const F* g, F* m, F* v, F* vmax) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (avx512_kernels()) return adam_loop_avx512<F, decay, amsgrad>(c, n, p, g, m, v, vmax);
  if (has_avx2()) return adam_loop_avx2<F, decay, amsgrad>(c, n, p, g, m, v, vmax);
#endif
  adam_loop_body<F, decay, amsgrad>(c, n, p, g, m, v, vmax);
}

// Elements updated before their bfloat16 copy is written: a block's new values are still in L1 when they
// are rounded, so the copy costs its writes and not a second read of the parameter from memory; and those
// are streaming stores, which do not read the copy's old lines first (the next forward pass reads it).
constexpr int64_t kRoundingBlock = 2048;

// A big parameter's elements are split over threads: each element's update stands alone, so no bit moves.
// `rounded`, when given (float32 only), gets each new value rounded to bfloat16 (autocast's kept copy).
template <typename F, Decay decay, bool amsgrad>
void adam_loop(const AdamScalars<F>& c, int64_t n, F* p, const F* g, F* m, F* v, F* vmax, bfloat16* rounded) {
  parallel_ranges(n, 1, [&](int64_t i0, int64_t i1) {
    if (!rounded) return adam_run<F, decay, amsgrad>(c, i1 - i0, p + i0, g + i0, m + i0, v + i0, vmax ? vmax + i0 : nullptr);
    for (int64_t b0 = i0; b0 < i1; b0 += kRoundingBlock) {
      const int64_t k = std::min(kRoundingBlock, i1 - b0);
      adam_run<F, decay, amsgrad>(c, k, p + b0, g + b0, m + b0, v + b0, vmax ? vmax + b0 : nullptr);
      if constexpr (std::is_same_v<F, float>) round_run_streaming(p + b0, rounded + b0, k);
    }
  });
}

template <typename F, bool amsgrad>
void adam_loop_for_decay(const AdamStep& s, const AdamScalars<F>& c, int64_t n, F* p, const F* g, F* m, F* v,
                         F* vmax, bfloat16* rounded) {
  if (s.decoupled_weight_decay) return adam_loop<F, Decay::decoupled, amsgrad>(c, n, p, g, m, v, vmax, rounded);
  if (s.weight_decay != 0.0) return adam_loop<F, Decay::l2, amsgrad>(c, n, p, g, m, v, vmax, rounded);
  adam_loop<F, Decay::none, amsgrad>(c, n, p, g, m, v, vmax, rounded);
}

inline bool same_options_and_step(const AdamStep& a, const AdamStep& b) {
  return a.lr == b.lr && a.beta1 == b.beta1 && a.beta2 == b.beta2 && a.eps == b.eps &&
         a.weight_decay == b.weight_decay && a.step == b.step && a.grad_scale == b.grad_scale;
}

template <typename F>
static void adam_update_typed(const AdamStep& s, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                              const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, bfloat16* rounded) {
  const int64_t n = param.numel();
  F* p = param.data_ptr<F>();
  const F* g = grad.data_ptr<F>();
  F* m = exp_avg.data_ptr<F>();
  F* v = exp_avg_sq.data_ptr<F>();
  // The scalars depend only on the options and the step: the same for every parameter of a group, so
  // the last ones are kept rather than recomputed (two pow calls each) for each parameter.
  thread_local AdamStep last_step{};
  thread_local AdamScalars<F> last_scalars{last_step};
  if (!same_options_and_step(s, last_step)) {
    last_scalars = AdamScalars<F>(s);
    last_step = s;
  }
  const AdamScalars<F>& c = last_scalars;
  if (s.amsgrad) return adam_loop_for_decay<F, true>(s, c, n, p, g, m, v, max_exp_avg_sq.data_ptr<F>(), rounded);
  adam_loop_for_decay<F, false>(s, c, n, p, g, m, v, nullptr, rounded);
}

void adam_update_cpu(const AdamStep& s, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                     const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, const Tensor& rounded) {
  if (param.dtype() == DType::Float64)
    return adam_update_typed<double>(s, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, nullptr);
  adam_update_typed<float>(s, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq,
                           rounded.defined() ? rounded.data_ptr<bfloat16>() : nullptr);
}

}  // namespace autograd::cpu
