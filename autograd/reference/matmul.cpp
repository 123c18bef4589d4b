// reference/matmul.cpp — the matrix product as the textbook triple loop, causal attention's product (only
// the entries on and below the diagonal), its scaling and its zero check.
#include "autograd/reference/kernels.h"
#include "autograd/reference/strided.h"

namespace autograd::reference {

// C(i, j) = start_j + Σ_p A(i, p) · B(p, j) for each matrix of the batch: the i-j-p loop, one sum per
// entry of C, its products added in the order of p. start_j is bias[j], or 0 without a bias.
template <typename T> void product(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out) {
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  const Shape batch = leading(out, 2);
  for (int64_t n = 0; n < shape_numel(batch); ++n) {
    const Matrix<const T> A = matrix<const T>(a, index_of(n, batch)), B = matrix<const T>(b, index_of(n, batch));
    const Matrix<T> C = matrix<T>(out, index_of(n, batch));
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        T sum = bias.defined() ? at<T>(bias, {j}) : T(0);
        for (int64_t p = 0; p < K; ++p)
          sum = sum + A(i, p) * B(p, j);
        C(i, j) = sum;
      }
    }
  }
}

// Each entry picks its loop's instantiation for the dtype (strided.h: floating) and calls it.

// out[..., i, j] = Σ_p a[..., i, p] · b[..., p, j]
void matmul(const Tensor& a, const Tensor& b, const Tensor& out) {
  const Tensor no_bias;  // each sum starts at 0
  floating(a, "matmul", product<float>, product<double>)(a, b, no_bias, out);
}

// What a float32 sum is stored as: itself in a float32 out (or, `rounded`, rounded to bfloat16 and widened
// back), rounded once in a bfloat16 out.
inline void store(float& to, float sum, bool rounded) { to = rounded ? widen(round_to_bfloat16(sum)) : sum; }
inline void store(bfloat16& to, float sum, bool) { to = round_to_bfloat16(sum); }

// out[..., i, j] = Σ_p a[..., i, p] · b[..., p, j] (+ bias[j]) with a and b bfloat16 and out float32 (or
// bfloat16: the sum rounded once): every term is the product of two widened bfloat16 numbers (exact in
// float32: 8 + 8 significant bits), added into a float32 sum in the order of p, then the bias. The fast
// kernels (cpu/kernels/matmul_bfloat16.cpp) are held to this loop.
template <typename C> void bfloat16_product(const Tensor& a, const Tensor& b, const Tensor& out, const ProductStore& how) {
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  const Shape batch = leading(out, 2);
  const Tensor bias = how.bias.defined() ? how.bias.contiguous() : Tensor();
  const float* bias_of = bias.defined() ? bias.data_ptr<float>() : nullptr;
  for (int64_t n = 0; n < shape_numel(batch); ++n) {
    const Matrix<const bfloat16> A = matrix<const bfloat16>(a, index_of(n, batch));
    const Matrix<const bfloat16> B = matrix<const bfloat16>(b, index_of(n, batch));
    const Matrix<C> Out = matrix<C>(out, index_of(n, batch));
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        float sum = 0;
        for (int64_t p = 0; p < K; ++p)
          sum = sum + widen(A(i, p)) * widen(B(p, j));
        if (bias_of) sum = sum + bias_of[j];
        store(Out(i, j), sum, how.rounded);
      }
    }
  }
}

void bfloat16_matmul(const Tensor& a, const Tensor& b, const Tensor& out, const ProductStore& how) {
  if (out.dtype() == DType::BFloat16) bfloat16_product<bfloat16>(a, b, out, how);
  else bfloat16_product<float>(a, b, out, how);
}

// out[i, j] = bias[j] + Σ_p a[i, p] · b[p, j]
void addmm(const Tensor& bias, const Tensor& a, const Tensor& b, const Tensor& out) {
  floating(a, "addmm", product<float>, product<double>)(a, b, bias, out);
}

// out[..., i, j] = (Σ_p a[..., i, p] · b[..., p, j]) / divisor where j ≤ i, `above` where j > i: causal
// attention's scores (q·kᵀ/√d, −∞ above), and tril(g·vᵀ) in its backward (divisor 1, 0 above)
template <typename T>
void causal_product(const Tensor& a, const Tensor& b, const Tensor& out, double divisor, double above) {
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  const Shape batch = leading(out, 2);
  for (int64_t n = 0; n < shape_numel(batch); ++n) {
    const Matrix<const T> A = matrix<const T>(a, index_of(n, batch)), B = matrix<const T>(b, index_of(n, batch));
    const Matrix<T> C = matrix<T>(out, index_of(n, batch));
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        if (j > i) {
          C(i, j) = T(above);
          continue;
        }
        T sum = T(0);
        for (int64_t p = 0; p < K; ++p)
          sum = sum + A(i, p) * B(p, j);
        C(i, j) = sum / T(divisor);
      }
    }
  }
}

void causal_product(const Tensor& a, const Tensor& b, const Tensor& out, double divisor, double above) {
  floating(a, "causal_scores", causal_product<float>, causal_product<double>)(a, b, out, divisor, above);
}

// dst[..., i, j] = src[..., i, j] / divisor where j ≤ i, `above` where j > i (causal scores: a key after the
// query is masked out)
template <typename T> void causal_scale(const Tensor& dst, const Tensor& src, double divisor, double above) {
  const size_t row = dst.shape().size() - 2, col = row + 1;
  for (Index i(dst.shape()); i.valid(); i.next())
    at<T>(dst, i) = i[col] <= i[row] ? at<T>(src, i) / T(divisor) : T(above);
}

void causal_scale(const Tensor& dst, const Tensor& src, double divisor, double above) {
  floating(dst, "causal_scores", causal_scale<float>, causal_scale<double>)(dst, src, divisor, above);
}

// whether p[..., i, j] == 0 wherever j > i
template <typename T> bool zero_above_diagonal(const Tensor& p) {
  const size_t row = p.shape().size() - 2, col = row + 1;
  for (Index i(p.shape()); i.valid(); i.next())
    if (i[col] > i[row] && at<T>(p, i) != T(0)) return false;
  return true;
}

bool zero_above_diagonal(const Tensor& p) {
  return floating(p, "tril_matmul", zero_above_diagonal<float>, zero_above_diagonal<double>)(p);
}

}  // namespace autograd::reference
