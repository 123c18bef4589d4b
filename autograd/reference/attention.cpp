// reference/attention.cpp — scaled dot-product attention, softmax(q·kᵀ·scale)·v, computed the plain way:
// one row of scores at a time, in full. (The CPU kernel computes the same in blocks with an online
// softmax; docs/autograd.md explains that algorithm. This is what it must agree with.)
//
// For each batch index, q is [T, d], k [S, d], v [S, dv]; query i sees key j unless causal and j > i.
#include <cmath>
#include <limits>
#include <vector>

#include "autograd/reference/kernels.h"
#include "autograd/reference/strided.h"

namespace autograd::reference {

namespace {

// s_ij = scale · Σ_c q_ic · k_jc for the keys query i sees (j ≤ i if causal); −∞ for the others.
template <typename T> std::vector<T> scores(Matrix<const T> q, Matrix<const T> k, int64_t i, int64_t S, int64_t d,
                                            bool causal, double scale) {
  std::vector<T> s(size_t(S), -std::numeric_limits<T>::infinity());
  for (int64_t j = 0; j < S && !(causal && j > i); ++j) {
    T dot = 0;
    for (int64_t c = 0; c < d; ++c) dot = dot + q(i, c) * k(j, c);
    s[size_t(j)] = dot * T(scale);
  }
  return s;
}

}  // namespace

// lse_i = log Σ_j exp(s_ij)                   (as m + log Σ_j exp(s_ij − m), m = max_j s_ij)
// out_i = Σ_j P_ij · v_j, P_ij = exp(s_ij − lse_i)    (P is softmax(s), row by row)
template <typename T> void flash_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, bool causal, double scale,
                     const Tensor& out_in, const Tensor& lse_in) {
  const int64_t T_ = q_in.size(-2), S = k_in.size(-2), d = q_in.size(-1), dv = v_in.size(-1);
  for (Index n(leading(q_in, 2)); n.valid(); n.next()) {
    const Matrix<const T> q = matrix<const T>(q_in, n), k = matrix<const T>(k_in, n), v = matrix<const T>(v_in, n);
    const Matrix<T> out = matrix<T>(out_in, n), lse = vector<T>(lse_in, n);
    for (int64_t i = 0; i < T_; ++i) {
      const std::vector<T> s = scores(q, k, i, S, d, causal, scale);
      T m = -std::numeric_limits<T>::infinity();
      for (T x : s) m = x > m ? x : m;
      T sum = 0;
      for (T x : s) sum = sum + std::exp(x - m);
      lse(i, 0) = m + std::log(sum);
      for (int64_t c = 0; c < dv; ++c) {
        T o = 0;
        for (int64_t j = 0; j < S; ++j) o = o + std::exp(s[size_t(j)] - lse(i, 0)) * v(j, c);
        out(i, c) = o;
      }
    }
  }
}

void flash_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, bool causal, double scale,
                     const Tensor& out_in, const Tensor& lse_in) {
  floating(q_in, "scaled_dot_product_attention", flash_attention<float>, flash_attention<double>)(q_in, k_in, v_in, causal, scale, out_in, lse_in);
}

// With P_ij = exp(s_ij − lse_i) recomputed and dO the gradient of out:
//   dv_j  = Σ_i P_ij · dO_i
//   dP_ij = dO_i · v_j
//   D_i   = Σ_c dO_ic · out_ic                 (= Σ_j P_ij · dP_ij)
//   dS_ij = P_ij · (dP_ij − D_i)               (softmax's backward)
//   dq_i  = scale · Σ_j dS_ij · k_j,   dk_j = scale · Σ_i dS_ij · q_i
template <typename T> void flash_attention_backward(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const Tensor& out_in,
                              const Tensor& lse_in, const Tensor& grad_out, bool causal, double scale,
                              const Tensor& dq_out, const Tensor& dk_out, const Tensor& dv_out) {
  const int64_t T_ = q_in.size(-2), S = k_in.size(-2), d = q_in.size(-1), dv_size = v_in.size(-1);
  for (Index n(leading(q_in, 2)); n.valid(); n.next()) {
    const Matrix<const T> q = matrix<const T>(q_in, n), k = matrix<const T>(k_in, n), v = matrix<const T>(v_in, n);
    const Matrix<const T> out = matrix<const T>(out_in, n), dO = matrix<const T>(grad_out, n);
    const Matrix<const T> lse = vector<const T>(lse_in, n);
    const Matrix<T> dq = matrix<T>(dq_out, n), dk = matrix<T>(dk_out, n), dv = matrix<T>(dv_out, n);
    for (int64_t i = 0; i < T_; ++i) {
      const std::vector<T> s = scores(q, k, i, S, d, causal, scale);
      T D = 0;
      for (int64_t c = 0; c < dv_size; ++c) D = D + dO(i, c) * out(i, c);
      for (int64_t j = 0; j < S; ++j) {
        const T P = std::exp(s[size_t(j)] - lse(i, 0));
        T dP = 0;
        for (int64_t c = 0; c < dv_size; ++c) dP = dP + dO(i, c) * v(j, c);
        const T dS = P * (dP - D);
        for (int64_t c = 0; c < dv_size; ++c) dv(j, c) = dv(j, c) + P * dO(i, c);
        for (int64_t c = 0; c < d; ++c) dq(i, c) = dq(i, c) + T(scale) * dS * k(j, c);
        for (int64_t c = 0; c < d; ++c) dk(j, c) = dk(j, c) + T(scale) * dS * q(i, c);
      }
    }
  }
}

void flash_attention_backward(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const Tensor& out_in,
                              const Tensor& lse_in, const Tensor& grad_out, bool causal, double scale,
                              const Tensor& dq_out, const Tensor& dk_out, const Tensor& dv_out) {
  fill(dq_out, 0.0);
  fill(dk_out, 0.0);
  fill(dv_out, 0.0);
  floating(q_in, "scaled_dot_product_attention backward", flash_attention_backward<float>, flash_attention_backward<double>)(q_in, k_in, v_in, out_in, lse_in, grad_out, causal, scale, dq_out, dk_out, dv_out);
}

}  // namespace autograd::reference
