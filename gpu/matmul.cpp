// gpu/matmul.cpp — batched matrix products through cuBLAS.
//
// cuBLAS is column-major; our matrices are row-major views with a row stride and a column stride. A
// row-major R×C matrix with unit column stride is, read column-major, its transpose with leading dimension
// = row stride; one with unit row stride (a transposed view, x.mT()) is a column-major matrix as it
// stands. So for C = A·B with C row-major we ask cuBLAS for Cᵀ = Bᵀ·Aᵀ and choose, per operand, "as is"
// or "transposed" from its strides — a transposed view costs nothing. Only a matrix with neither a unit
// row nor a unit column stride (every other column, an expanded row, ...) is first copied contiguous.
//
// Batch dims (all three operands have the same batch shape; broadcast ones arrive with stride 0) are
// merged where they line up; one batch dim becomes one cublas<S|D>gemmStridedBatched call (stride 0 is
// fine there), more are looped over on the host — or, when that loop would be long, the operands are
// copied contiguous so that the batch collapses to one dim.
#include <cuda_runtime_api.h>

#include <array>
#include <climits>
#include <vector>
#include <mutex>

#include <fmt/format.h>

#include "gpu/check.h"
#include "gpu/cublas_library.h"
#include "gpu/kernels.h"

namespace gpu::kernels {

namespace {

using autograd::DType;
using autograd::Shape;

void check_blas(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(fmt::format("gpu matmul: {} failed: {} ({})", call, cublas().status_string(status),
                                         cublas().status_name(status)));
}

cublasHandle_t handle() {
  // Made on first use (it needs a device) and kept for the life of the process.
  static cublasHandle_t h = [] {
    cublasHandle_t made = nullptr;
    check_blas(cublas().create(&made), "cublasCreate");
    // Plain FP32 arithmetic (no TF32), as PyTorch's default torch.backends.cuda.matmul.allow_tf32 = False.
    check_blas(cublas().set_math_mode(made, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    return made;
  }();
  return h;
}

// How one row-major-logical R×C matrix can be handed to cuBLAS.
struct Layout {
  bool ok = false;
  bool row_major = false;  // unit column stride: column-major storage of the transpose
  int64_t ld = 0;
};

Layout layout_of(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  // The stride of a size-1 dim never matters; give it the value that keeps cuBLAS happy.
  if (cols == 1) cs = 1;
  if (rows == 1) rs = cs == 1 ? std::max<int64_t>(cols, 1) : 1;
  Layout l;
  if (cs == 1 && rs >= std::max<int64_t>(cols, 1)) l = {true, true, rs};
  else if (rs == 1 && cs >= std::max<int64_t>(rows, 1)) l = {true, false, cs};
  return l;
}

Tensor contiguous_copy(const Tensor& t) {
  Tensor c = autograd::empty(t.shape(), t.dtype(), t.device());
  copy(t, c);
  return c;
}

int to_int(int64_t v, const char* what) {
  if (v > INT_MAX || v < INT_MIN)
    throw std::invalid_argument(fmt::format("gpu matmul: {} = {} does not fit cuBLAS's 32-bit int", what, v));
  return int(v);
}

// Batch dims merged across the three operands (out, a, b): sizes and per-operand strides, outermost first.
struct Batch {
  std::vector<int64_t> sizes;
  std::vector<std::array<int64_t, 3>> strides;
};

Batch merge_batch(const Tensor& out, const Tensor& a, const Tensor& b) {
  Batch batch;
  const size_t nb = size_t(out.dim() - 2);
  for (size_t d = 0; d < nb; ++d) {
    const int64_t size = out.shape()[d];
    if (size == 1) continue;
    std::array<int64_t, 3> s{out.strides()[d], a.strides()[d], b.strides()[d]};
    bool merge = !batch.sizes.empty();
    for (int k = 0; merge && k < 3; ++k) merge = batch.strides.back()[size_t(k)] == s[size_t(k)] * size;
    if (merge) {
      batch.sizes.back() *= size;
      batch.strides.back() = s;
    } else {
      batch.sizes.push_back(size);
      batch.strides.push_back(s);
    }
  }
  return batch;
}

template <typename T>
void gemm_strided_batched(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const T* a, int lda,
                          long long sa, const T* b, int ldb, long long sb, T* c, int ldc, long long sc, int count) {
  const T one = 1, zero = 0;
  if constexpr (std::is_same_v<T, float>)
    check_blas(cublas().sgemm_strided_batched(handle(), ta, tb, m, n, k, &one, a, lda, sa, b, ldb, sb, &zero, c, ldc,
                                             sc, count),
               "cublasSgemmStridedBatched");
  else
    check_blas(cublas().dgemm_strided_batched(handle(), ta, tb, m, n, k, &one, a, lda, sa, b, ldb, sb, &zero, c, ldc,
                                             sc, count),
               "cublasDgemmStridedBatched");
}

}  // namespace

void matmul(const Tensor& a_in, const Tensor& b_in, const Tensor& out_in) {
  const int64_t nd = out_in.dim();
  const size_t r = size_t(nd - 2), c = size_t(nd - 1);
  const int64_t m = out_in.shape()[r], n = out_in.shape()[c], k = a_in.shape()[c];
  if (out_in.numel() == 0) return;
  if (out_in.dtype() != DType::Float32 && out_in.dtype() != DType::Float64)
    throw std::invalid_argument(fmt::format("gpu matmul: expected float32 or float64, got {}",
                                            autograd::dtype_name(out_in.dtype())));
  if (k == 0) return fill(out_in, 0.0);  // an empty sum is zero

  Tensor a = a_in, b = b_in, out = out_in;
  Layout la = layout_of(m, k, a.strides()[r], a.strides()[c]);
  Layout lb = layout_of(k, n, b.strides()[r], b.strides()[c]);
  Layout lc = layout_of(m, n, out.strides()[r], out.strides()[c]);
  if (!la.ok) a = contiguous_copy(a), la = layout_of(m, k, k, 1);
  if (!lb.ok) b = contiguous_copy(b), lb = layout_of(k, n, n, 1);
  const bool out_direct = lc.ok && lc.row_major;  // cuBLAS writes Cᵀ column-major: C must have unit col stride
  if (!out_direct) out = autograd::empty(out_in.shape(), out_in.dtype(), out_in.device()), lc = layout_of(m, n, n, 1);

  Batch batch = merge_batch(out, a, b);
  int64_t outer = 1;
  for (size_t d = 0; d + 1 < batch.sizes.size(); ++d) outer *= batch.sizes[d];
  if (outer > 8) {  // a long host loop costs more than one copy per operand: make the batch collapse
    if (!a.is_contiguous()) a = contiguous_copy(a), la = layout_of(m, k, k, 1);
    if (!b.is_contiguous()) b = contiguous_copy(b), lb = layout_of(k, n, n, 1);
    batch = merge_batch(out, a, b);
    outer = 1;
    for (size_t d = 0; d + 1 < batch.sizes.size(); ++d) outer *= batch.sizes[d];
  }
  const int64_t count = batch.sizes.empty() ? 1 : batch.sizes.back();
  const std::array<int64_t, 3> inner = batch.sizes.empty() ? std::array<int64_t, 3>{0, 0, 0} : batch.strides.back();

  // Cᵀ (n×m) = op(B)ᵀ (n×k) · op(A)ᵀ (k×m), in cuBLAS's column-major terms.
  const cublasOperation_t op_b = lb.row_major ? CUBLAS_OP_N : CUBLAS_OP_T;
  const cublasOperation_t op_a = la.row_major ? CUBLAS_OP_N : CUBLAS_OP_T;
  const int im = to_int(n, "N"), in = to_int(m, "M"), ik = to_int(k, "K");
  const int lda = to_int(lb.ld, "ld(B)"), ldb = to_int(la.ld, "ld(A)"), ldc = to_int(lc.ld, "ld(C)");
  const int icount = to_int(count, "batch");

  auto run = [&](auto tag) {
    using T = decltype(tag);
    const size_t outer_dims = batch.sizes.empty() ? 0 : batch.sizes.size() - 1;
    std::vector<int64_t> counter(outer_dims, 0);
    std::array<int64_t, 3> off{0, 0, 0};
    for (int64_t it = 0; it < outer; ++it) {
      const T* pa = static_cast<const T*>(a.raw_data()) + off[1];
      const T* pb = static_cast<const T*>(b.raw_data()) + off[2];
      T* pc = static_cast<T*>(out.raw_data()) + off[0];
      gemm_strided_batched<T>(op_b, op_a, im, in, ik, pb, lda, inner[2], pa, ldb, inner[1], pc, ldc, inner[0],
                              icount);
      for (size_t d = outer_dims; d-- > 0;) {  // odometer over the outer batch dims
        for (int q = 0; q < 3; ++q) off[size_t(q)] += batch.strides[d][size_t(q)];
        if (++counter[d] < batch.sizes[d]) break;
        for (int q = 0; q < 3; ++q) off[size_t(q)] -= batch.strides[d][size_t(q)] * batch.sizes[d];
        counter[d] = 0;
      }
    }
  };
  if (out.dtype() == DType::Float32) run(float{});
  else run(double{});
  detail::check_launch("matmul");
  if (!out.same(out_in)) copy(out, out_in);
}

}  // namespace gpu::kernels
