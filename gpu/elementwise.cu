// gpu/elementwise.cu — copy (with dtype conversion), fill, the unary and binary ops, where.
//
// One kernel template walks K strided operands (see common.cuh); the op itself is a small functor. Unary
// and binary ops pass their op code as a kernel argument and switch inside the kernel: every thread takes
// the same branch, and it keeps the number of compiled kernels (and build time) small.
#include <cmath>

#include "gpu/common.cuh"
#include "gpu/kernels.h"

namespace gpu::kernels {

using namespace gpu::detail;

namespace {

template <int K, typename F> __global__ void elementwise_kernel(int64_t n, Indexer<K> ix, F f) {
  GPU_GRID_STRIDE_LOOP(i, n) {
    int64_t off[K];
    ix.offsets(i, off);
    f(off);
  }
}

// One launch over up to kMaxDims coalesced dims; deeper layouts are split: the host walks the outermost
// dims and launches once per position, with each operand's base offset moved along.
template <int K, typename F>
void launch(const char* op, const Shape& shape, const std::array<const Shape*, K>& strides, F f) {
  const int64_t n = autograd::shape_numel(shape);
  if (n == 0) return;
  const Coalesced<K> c = coalesce<K>(shape, strides);
  if (c.sizes.size() <= size_t(kMaxDims)) {
    elementwise_kernel<K><<<blocks_for(n), kThreads>>>(n, indexer_from(c, 0), f);
    check_launch(op);
    return;
  }
  const size_t outer = c.sizes.size() - size_t(kMaxDims);
  Indexer<K> ix = indexer_from(c, outer);
  int64_t inner_n = 1;
  for (size_t d = outer; d < c.sizes.size(); ++d) inner_n *= c.sizes[d];
  std::vector<int64_t> counter(outer, 0);
  for (int64_t done = 0; done < n; done += inner_n) {
    for (int k = 0; k < K; ++k) {
      ix.base[k] = 0;
      for (size_t d = 0; d < outer; ++d) ix.base[k] += counter[d] * c.strides[d][size_t(k)];
    }
    elementwise_kernel<K><<<blocks_for(inner_n), kThreads>>>(inner_n, ix, f);
    check_launch(op);
    for (size_t d = outer; d-- > 0;) {  // odometer over the outer dims
      if (++counter[d] < c.sizes[d]) break;
      counter[d] = 0;
    }
  }
}

// ---------------------------------------------------------------- copy and fill

template <typename S, typename D> struct CopyF {
  const S* src;
  D* dst;
  __device__ void operator()(const int64_t (&off)[2]) const {
    if constexpr (std::is_same_v<D, bool>) dst[off[0]] = src[off[1]] != S(0);
    else dst[off[0]] = D(src[off[1]]);
  }
};

template <typename T> struct FillF {
  T* dst;
  T value;
  __device__ void operator()(const int64_t (&off)[1]) const { dst[off[0]] = value; }
};

// ---------------------------------------------------------------- unary

template <typename T> __device__ __forceinline__ T math_exp(T x) {
  if constexpr (std::is_same_v<T, float>) return expf(x); else return exp(x);
}
template <typename T> __device__ __forceinline__ T math_log(T x) {
  if constexpr (std::is_same_v<T, float>) return logf(x); else return log(x);
}
template <typename T> __device__ __forceinline__ T math_sqrt(T x) {
  if constexpr (std::is_same_v<T, float>) return sqrtf(x); else return sqrt(x);
}
template <typename T> __device__ __forceinline__ T math_tanh(T x) {
  if constexpr (std::is_same_v<T, float>) return tanhf(x); else return tanh(x);
}
template <typename T> __device__ __forceinline__ T math_pow(T x, T y) {
  if constexpr (std::is_same_v<T, float>) return powf(x, y); else return pow(x, y);
}

// ops whose result has the input's type
template <typename T> struct UnaryF {
  UnaryOp op;
  T s;
  const T* in;
  T* out;
  __device__ void operator()(const int64_t (&off)[2]) const {
    const T x = in[off[1]];
    T y = x;
    switch (op) {
      case UnaryOp::Neg: y = T(-x); break;
      case UnaryOp::Abs: y = x < T(0) ? T(-x) : x; break;
      case UnaryOp::Relu: y = x > T(0) ? x : T(0); break;
      case UnaryOp::ReluMask: y = x > T(0) ? T(1) : T(0); break;
      case UnaryOp::AddScalar: y = T(x + s); break;
      case UnaryOp::MulScalar: y = T(x * s); break;
      case UnaryOp::RSubScalar: y = T(s - x); break;
      default:
        if constexpr (std::is_floating_point_v<T>) {
          switch (op) {
            case UnaryOp::Exp: y = math_exp(x); break;
            case UnaryOp::Log: y = math_log(x); break;
            case UnaryOp::Sqrt: y = math_sqrt(x); break;
            case UnaryOp::Tanh: y = math_tanh(x); break;
            case UnaryOp::DivScalar: y = x / s; break;
            case UnaryOp::RDivScalar: y = s / x; break;
            case UnaryOp::PowScalar:
              y = s == T(2) ? x * x : s == T(0.5) ? math_sqrt(x) : math_pow(x, s);
              break;
            default: break;
          }
        }
        break;
    }
    out[off[0]] = y;
  }
};

// comparisons with a scalar → bool
template <typename T> struct CompareScalarF {
  UnaryOp op;
  T s;
  const T* in;
  bool* out;
  __device__ void operator()(const int64_t (&off)[2]) const {
    const T x = in[off[1]];
    bool y = false;
    switch (op) {
      case UnaryOp::EqScalar: y = x == s; break;
      case UnaryOp::NeScalar: y = x != s; break;
      case UnaryOp::LtScalar: y = x < s; break;
      case UnaryOp::LeScalar: y = x <= s; break;
      case UnaryOp::GtScalar: y = x > s; break;
      case UnaryOp::GeScalar: y = x >= s; break;
      default: break;
    }
    out[off[0]] = y;
  }
};

bool unary_defined(UnaryOp op, DType dtype) {
  switch (op) {
    case UnaryOp::Exp: case UnaryOp::Log: case UnaryOp::Sqrt: case UnaryOp::Tanh:
    case UnaryOp::DivScalar: case UnaryOp::RDivScalar: case UnaryOp::PowScalar:
      return autograd::is_floating(dtype);
    default: return true;
  }
}

// ---------------------------------------------------------------- binary

template <typename T> struct BinaryF {
  BinaryOp op;
  const T* a;
  const T* b;
  T* out;
  __device__ void operator()(const int64_t (&off)[3]) const {
    const T x = a[off[1]], y = b[off[2]];
    T r = x;
    switch (op) {
      case BinaryOp::Add: r = T(x + y); break;
      case BinaryOp::Sub: r = T(x - y); break;
      case BinaryOp::Mul: r = T(x * y); break;
      case BinaryOp::Div:
        if constexpr (std::is_floating_point_v<T>) r = x / y;
        break;
      default: break;
    }
    out[off[0]] = r;
  }
};

template <typename T> struct CompareF {
  BinaryOp op;
  const T* a;
  const T* b;
  bool* out;
  __device__ void operator()(const int64_t (&off)[3]) const {
    const T x = a[off[1]], y = b[off[2]];
    bool r = false;
    switch (op) {
      case BinaryOp::Eq: r = x == y; break;
      case BinaryOp::Ne: r = x != y; break;
      case BinaryOp::Lt: r = x < y; break;
      case BinaryOp::Le: r = x <= y; break;
      case BinaryOp::Gt: r = x > y; break;
      case BinaryOp::Ge: r = x >= y; break;
      default: break;
    }
    out[off[0]] = r;
  }
};

template <typename T> struct WhereF {
  const bool* cond;
  const T* a;
  const T* b;
  T* out;
  __device__ void operator()(const int64_t (&off)[4]) const { out[off[0]] = cond[off[1]] ? a[off[2]] : b[off[3]]; }
};

std::string op_error(const char* kind, int op, DType dtype) {
  return std::string("gpu ") + kind + " op " + std::to_string(op) + " is not defined for dtype " +
         std::string(autograd::dtype_name(dtype));
}

}  // namespace

void copy(const Tensor& src, const Tensor& dst) {
  dispatch(src.dtype(), [&](auto s) {
    using S = decltype(s);
    dispatch(dst.dtype(), [&](auto d) {
      using D = decltype(d);
      launch<2>("copy", dst.shape(), {&dst.strides(), &src.strides()}, CopyF<S, D>{ptr<S>(src), ptr<D>(dst)});
    });
  });
}

void fill(const Tensor& dst, double value) {
  dispatch(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T v;
    if constexpr (std::is_same_v<T, bool>) v = value != 0.0; else v = T(value);
    launch<1>("fill", dst.shape(), {&dst.strides()}, FillF<T>{ptr<T>(dst), v});
  });
}

void unary(UnaryOp op, const Tensor& in, const Tensor& out, double scalar) {
  if (!unary_defined(op, in.dtype())) throw std::invalid_argument(op_error("unary", int(op), in.dtype()));
  dispatch(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (autograd::is_comparison(op)) {
      launch<2>("unary", out.shape(), {&out.strides(), &in.strides()},
                CompareScalarF<T>{op, T(scalar), ptr<T>(in), ptr<bool>(out)});
    } else {
      launch<2>("unary", out.shape(), {&out.strides(), &in.strides()},
                UnaryF<T>{op, T(scalar), ptr<T>(in), ptr<T>(out)});
    }
  });
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  if (op == BinaryOp::Div && !autograd::is_floating(a.dtype()))
    throw std::invalid_argument(op_error("binary", int(op), a.dtype()));
  dispatch(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (autograd::is_comparison(op))
      launch<3>("binary", out.shape(), {&out.strides(), &a.strides(), &b.strides()},
                CompareF<T>{op, ptr<T>(a), ptr<T>(b), ptr<bool>(out)});
    else
      launch<3>("binary", out.shape(), {&out.strides(), &a.strides(), &b.strides()},
                BinaryF<T>{op, ptr<T>(a), ptr<T>(b), ptr<T>(out)});
  });
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  dispatch(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    launch<4>("where", out.shape(), {&out.strides(), &cond.strides(), &a.strides(), &b.strides()},
              WhereF<T>{ptr<bool>(cond), ptr<T>(a), ptr<T>(b), ptr<T>(out)});
  });
}

}  // namespace gpu::kernels
