// cpu/cpu_backend.cpp — the CPU kernels: plain loops over strided memory, nothing about graphs.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "autograd/backend.h"
#include "autograd/cpu/cpu.h"
#include "autograd/cpu/loops.h"

namespace autograd::cpu {

namespace {

template <typename T> T* ptr(const Tensor& t) { return static_cast<T*>(t.raw_data()); }

// out = f(in), elementwise over same-shaped strided tensors.
template <typename In, typename Out, typename F> void map1(const Tensor& in, const Tensor& out, F f) {
  auto plan = make_plan<2>(out.shape(), {&out.strides(), &in.strides()});
  Out* po = ptr<Out>(out);
  const In* pi = ptr<In>(in);
  for_each_run(plan, out.numel(), [&](const auto& off, int64_t n, const auto& st) {
    Out* o = po + off[0];
    const In* a = pi + off[1];
    if (st[0] == 1 && st[1] == 1) {
      for (int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) o[i * st[0]] = f(a[i * st[1]]);
    }
  });
}

// out = f(a, b), elementwise; the inner loop is specialised for "b is one scalar" (stride 0).
template <typename T, typename Out, typename F> void map2(const Tensor& a, const Tensor& b, const Tensor& out, F f) {
  auto plan = make_plan<3>(out.shape(), {&out.strides(), &a.strides(), &b.strides()});
  Out* po = ptr<Out>(out);
  const T* pa = ptr<T>(a);
  const T* pb = ptr<T>(b);
  for_each_run(plan, out.numel(), [&](const auto& off, int64_t n, const auto& st) {
    Out* o = po + off[0];
    const T* x = pa + off[1];
    const T* y = pb + off[2];
    if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
    } else if (st[0] == 1 && st[1] == 1 && st[2] == 0) {
      const T yv = *y;
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], yv);
    } else {
      for (int64_t i = 0; i < n; ++i) o[i * st[0]] = f(x[i * st[1]], y[i * st[2]]);
    }
  });
}

template <typename T> T relu_of(T x) { return x > T(0) ? x : T(0); }

template <typename T> void unary_typed(UnaryOp op, const Tensor& in, const Tensor& out, double scalar) {
  const T s = T(scalar);
  switch (op) {
    case UnaryOp::Neg: return map1<T, T>(in, out, [](T x) { return T(-x); });
    case UnaryOp::Abs: return map1<T, T>(in, out, [](T x) { return x < T(0) ? T(-x) : x; });
    case UnaryOp::Relu: return map1<T, T>(in, out, [](T x) { return relu_of(x); });
    case UnaryOp::ReluMask: return map1<T, T>(in, out, [](T x) { return x > T(0) ? T(1) : T(0); });
    case UnaryOp::AddScalar: return map1<T, T>(in, out, [s](T x) { return T(x + s); });
    case UnaryOp::MulScalar: return map1<T, T>(in, out, [s](T x) { return T(x * s); });
    case UnaryOp::RSubScalar: return map1<T, T>(in, out, [s](T x) { return T(s - x); });
    case UnaryOp::EqScalar: return map1<T, bool>(in, out, [s](T x) { return x == s; });
    case UnaryOp::NeScalar: return map1<T, bool>(in, out, [s](T x) { return x != s; });
    case UnaryOp::LtScalar: return map1<T, bool>(in, out, [s](T x) { return x < s; });
    case UnaryOp::LeScalar: return map1<T, bool>(in, out, [s](T x) { return x <= s; });
    case UnaryOp::GtScalar: return map1<T, bool>(in, out, [s](T x) { return x > s; });
    case UnaryOp::GeScalar: return map1<T, bool>(in, out, [s](T x) { return x >= s; });
    default: break;
  }
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case UnaryOp::Exp: return map1<T, T>(in, out, [](T x) { return std::exp(x); });
      case UnaryOp::Log: return map1<T, T>(in, out, [](T x) { return std::log(x); });
      case UnaryOp::Sqrt: return map1<T, T>(in, out, [](T x) { return std::sqrt(x); });
      case UnaryOp::Tanh: return map1<T, T>(in, out, [](T x) { return std::tanh(x); });
      case UnaryOp::DivScalar: return map1<T, T>(in, out, [s](T x) { return x / s; });
      case UnaryOp::RDivScalar: return map1<T, T>(in, out, [s](T x) { return s / x; });
      case UnaryOp::PowScalar:
        if (scalar == 2.0) return map1<T, T>(in, out, [](T x) { return x * x; });
        if (scalar == 0.5) return map1<T, T>(in, out, [](T x) { return std::sqrt(x); });
        return map1<T, T>(in, out, [s](T x) { return std::pow(x, s); });
      default: break;
    }
  }
  throw std::invalid_argument(fmt::format("unary op {} is not defined for dtype {}", int(op), dtype_name(in.dtype())));
}

template <typename T> void binary_typed(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  switch (op) {
    case BinaryOp::Add: return map2<T, T>(a, b, out, [](T x, T y) { return T(x + y); });
    case BinaryOp::Sub: return map2<T, T>(a, b, out, [](T x, T y) { return T(x - y); });
    case BinaryOp::Mul: return map2<T, T>(a, b, out, [](T x, T y) { return T(x * y); });
    case BinaryOp::Div:
      if constexpr (std::is_floating_point_v<T>) return map2<T, T>(a, b, out, [](T x, T y) { return x / y; });
      break;
    case BinaryOp::Eq: return map2<T, bool>(a, b, out, [](T x, T y) { return x == y; });
    case BinaryOp::Ne: return map2<T, bool>(a, b, out, [](T x, T y) { return x != y; });
    case BinaryOp::Lt: return map2<T, bool>(a, b, out, [](T x, T y) { return x < y; });
    case BinaryOp::Le: return map2<T, bool>(a, b, out, [](T x, T y) { return x <= y; });
    case BinaryOp::Gt: return map2<T, bool>(a, b, out, [](T x, T y) { return x > y; });
    case BinaryOp::Ge: return map2<T, bool>(a, b, out, [](T x, T y) { return x >= y; });
  }
  throw std::invalid_argument(fmt::format("binary op {} is not defined for dtype {}", int(op), dtype_name(a.dtype())));
}

// Visits every 1-D "row" along `dim`: row(in_offset, out_offset) with the dim's strides fixed.
template <typename Row> void for_each_row(const Tensor& in, const Tensor& out, int64_t dim, Row row) {
  Shape outer = in.shape();
  outer[size_t(dim)] = 1;
  auto plan = make_plan<2>(outer, {&in.strides(), &out.strides()});
  for_each_run(plan, shape_numel(outer), [&](const auto& off, int64_t n, const auto& st) {
    for (int64_t i = 0; i < n; ++i) row(off[0] + i * st[0], off[1] + i * st[1]);
  });
}

template <typename T>
void softmax_typed(const Tensor& in, int64_t dim, bool log, const Tensor& out) {
  const int64_t n = in.shape()[size_t(dim)];
  const int64_t si = in.strides()[size_t(dim)], so = out.strides()[size_t(dim)];
  const T* pi = ptr<T>(in);
  T* po = ptr<T>(out);
  for_each_row(in, out, dim, [&](int64_t oi, int64_t oo) {
    const T* x = pi + oi;
    T* y = po + oo;
    T m = -std::numeric_limits<T>::infinity();
    for (int64_t j = 0; j < n; ++j) m = std::max(m, x[j * si]);
    if (std::isnan(m) || m == -std::numeric_limits<T>::infinity()) m = x[0];  // NaN and all -inf rows give NaN, as in PyTorch
    T sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      T e = std::exp(x[j * si] - m);
      if (!log) y[j * so] = e;
      sum += e;
    }
    if (log) {
      T log_sum = std::log(sum);
      for (int64_t j = 0; j < n; ++j) y[j * so] = x[j * si] - m - log_sum;
    } else {
      T inv = T(1) / sum;
      for (int64_t j = 0; j < n; ++j) y[j * so] *= inv;
    }
  });
}

template <typename T>
void softmax_backward_typed(const Tensor& y, const Tensor& g, int64_t dim, bool log, const Tensor& gx) {
  // y, g and gx are contiguous (the op makes sure), so each row shares one offset and one stride.
  const int64_t n = y.shape()[size_t(dim)], s = y.strides()[size_t(dim)];
  const T* py = ptr<T>(y);
  const T* pg = ptr<T>(g);
  T* px = ptr<T>(gx);
  for_each_row(y, gx, dim, [&](int64_t o, int64_t) {
    const T* yr = py + o;
    const T* gr = pg + o;
    T* xr = px + o;
    T dot = 0;
    if (log) {
      for (int64_t j = 0; j < n; ++j) dot += gr[j * s];
      for (int64_t j = 0; j < n; ++j) xr[j * s] = gr[j * s] - std::exp(yr[j * s]) * dot;
    } else {
      for (int64_t j = 0; j < n; ++j) dot += gr[j * s] * yr[j * s];
      for (int64_t j = 0; j < n; ++j) xr[j * s] = yr[j * s] * (gr[j * s] - dot);
    }
  });
}

class CpuBackend final : public Backend {
 public:
  void* allocate(size_t nbytes) override {
    // 64-byte alignment suits AVX-512 loads; aligned_alloc wants a multiple of the alignment.
    size_t rounded = (std::max<size_t>(nbytes, 1) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    if (!p) throw std::bad_alloc();
    return p;
  }
  void deallocate(void* p, size_t) override { std::free(p); }

  void copy(const Tensor& src, const Tensor& dst) override {
    dispatch(src.dtype(), [&](auto s) {
      using S = decltype(s);
      dispatch(dst.dtype(), [&](auto d) {
        using D = decltype(d);
        if constexpr (std::is_same_v<D, bool>) map1<S, D>(src, dst, [](S x) { return x != S(0); });
        else map1<S, D>(src, dst, [](S x) { return D(x); });
      });
    });
  }

  void fill(const Tensor& dst, double value) override {
    dispatch(dst.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T v = T(value);
      map1<T, T>(dst, dst, [v](T) { return v; });
    });
  }

  void unary(UnaryOp op, const Tensor& in, const Tensor& out, double scalar) override {
    dispatch(in.dtype(), [&](auto tag) { unary_typed<decltype(tag)>(op, in, out, scalar); });
  }

  void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) override {
    dispatch(a.dtype(), [&](auto tag) { binary_typed<decltype(tag)>(op, a, b, out); });
  }

  void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) override {
    dispatch(a.dtype(), [&](auto tag) {
      using T = decltype(tag);
      auto plan = make_plan<4>(out.shape(), {&out.strides(), &cond.strides(), &a.strides(), &b.strides()});
      T* po = ptr<T>(out);
      const bool* pc = ptr<bool>(cond);
      const T* pa = ptr<T>(a);
      const T* pb = ptr<T>(b);
      for_each_run(plan, out.numel(), [&](const auto& off, int64_t n, const auto& st) {
        for (int64_t i = 0; i < n; ++i)
          po[off[0] + i * st[0]] = pc[off[1] + i * st[1]] ? pa[off[2] + i * st[2]] : pb[off[3] + i * st[3]];
      });
    });
  }

  void sum_to(const Tensor& in, const Tensor& out) override {
    // Accumulate in the element type, in index order, as PyTorch does for short reductions (so a row of
    // softmax weights sums to 0.99999994 or 1.0000001 just as it does there). `out` is contiguous; viewed
    // with stride 0 along the reduced dims, every input element lands on its output slot.
    fill(out, 0.0);
    Shape acc_strides(in.shape().size(), 0);
    const size_t lead = in.shape().size() - out.shape().size();
    for (size_t d = 0; d < out.shape().size(); ++d)
      acc_strides[d + lead] = out.shape()[d] == 1 ? 0 : out.strides()[d];
    dispatch(in.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* pi = ptr<T>(in);
      T* po = ptr<T>(out);
      auto plan = make_plan<2>(in.shape(), {&acc_strides, &in.strides()});
      for_each_run(plan, in.numel(), [&](const auto& off, int64_t n, const auto& st) {
        T* acc = po + off[0];
        const T* x = pi + off[1];
        if (st[0] == 0) {
          T s = *acc;
          for (int64_t i = 0; i < n; ++i) s += x[i * st[1]];
          *acc = s;
        } else {
          for (int64_t i = 0; i < n; ++i) acc[i * st[0]] += x[i * st[1]];
        }
      });
    });
  }

  void max_dim(const Tensor& in, int64_t dim, const Tensor& values, const Tensor& indices) override {
    dispatch(in.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const int64_t n = in.shape()[size_t(dim)], s = in.strides()[size_t(dim)];
      const T* pi = ptr<T>(in);
      T* pv = ptr<T>(values);
      int64_t* px = indices.defined() ? ptr<int64_t>(indices) : nullptr;
      // values and indices share a contiguous layout, so one offset addresses both
      for_each_row(in, values, dim, [&](int64_t oi, int64_t oo) {
        const T* x = pi + oi;
        T best = x[0];
        int64_t at = 0;
        for (int64_t j = 1; j < n; ++j) {
          T v = x[j * s];
          if constexpr (std::is_floating_point_v<T>) {
            if (std::isnan(best)) break;  // NaN wins, as in PyTorch
            if (std::isnan(v) || v > best) best = v, at = j;
          } else {
            if (v > best) best = v, at = j;
          }
        }
        pv[oo] = best;
        if (px) px[oo] = at;
      });
    });
  }

  void matmul(const Tensor& a, const Tensor& b, const Tensor& out) override { batched_matmul(a, b, out); }

  void softmax(const Tensor& in, int64_t dim, bool log, const Tensor& out) override {
    dispatch_floating(in.dtype(), "softmax", [&](auto tag) { softmax_typed<decltype(tag)>(in, dim, log, out); });
  }

  void softmax_backward(const Tensor& y, const Tensor& g, int64_t dim, bool log, const Tensor& gx) override {
    dispatch_floating(y.dtype(), "softmax_backward",
                      [&](auto tag) { softmax_backward_typed<decltype(tag)>(y, g, dim, log, gx); });
  }

  void index_select_rows(const Tensor& weight, const Tensor& index, const Tensor& out) override {
    dispatch(weight.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const int64_t n = index.numel(), d = weight.shape()[1];
      const int64_t r = weight.strides()[0], c = weight.strides()[1];
      const int64_t* idx = ptr<int64_t>(index);
      const T* w = ptr<T>(weight);
      T* o = ptr<T>(out);
      for (int64_t i = 0; i < n; ++i) {
        const T* row = w + idx[i] * r;
        if (c == 1) std::memcpy(o + i * d, row, size_t(d) * sizeof(T));
        else for (int64_t j = 0; j < d; ++j) o[i * d + j] = row[j * c];
      }
    });
  }

  void index_add_rows(const Tensor& grad, const Tensor& index, const Tensor& grad_weight) override {
    dispatch(grad.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const int64_t n = index.numel(), d = grad_weight.shape()[1];
      const int64_t* idx = ptr<int64_t>(index);
      const T* g = ptr<T>(grad);
      T* w = ptr<T>(grad_weight);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < d; ++j) w[idx[i] * d + j] += g[i * d + j];
    });
  }

  void gather_rows(const Tensor& values, const Tensor& index, int64_t skip, const Tensor& out) override {
    dispatch(values.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const int64_t n = index.numel(), c = values.shape()[1];
      const int64_t* idx = ptr<int64_t>(index);
      const T* v = ptr<T>(values);
      T* o = ptr<T>(out);
      for (int64_t i = 0; i < n; ++i) o[i] = idx[i] == skip ? T(0) : v[i * c + idx[i]];
    });
  }

  void scatter_rows(const Tensor& grad, const Tensor& index, int64_t skip, const Tensor& grad_values) override {
    dispatch(grad.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const int64_t n = index.numel(), c = grad_values.shape()[1];
      const int64_t* idx = ptr<int64_t>(index);
      const T* g = ptr<T>(grad);
      T* v = ptr<T>(grad_values);
      for (int64_t i = 0; i < n; ++i)
        if (idx[i] != skip) v[i * c + idx[i]] += g[i];
    });
  }

  void adam_update(const AdamStep& step, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                   const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq) override {
    adam_update_cpu(step, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq);
  }

  void copy_to_cpu(const Tensor& src, void* dst, size_t nbytes) override { std::memcpy(dst, src.raw_data(), nbytes); }
  void copy_from_cpu(const void* src, const Tensor& dst, size_t nbytes) override {
    std::memcpy(dst.raw_data(), src, nbytes);
  }
};

}  // namespace

Backend& cpu_backend() {
  static CpuBackend instance;
  return instance;
}

}  // namespace autograd::cpu

namespace autograd {

namespace {
Backend* cuda_backend = nullptr;
}

void register_backend(DeviceType type, Backend* b) {
  if (type == DeviceType::CUDA) cuda_backend = b;
}

Backend& backend(Device device) {
  if (device.is_cpu()) return cpu::cpu_backend();
  if (!cuda_backend)
    throw std::runtime_error(fmt::format("device {}: this build of scratchgrad has no CUDA support "
                                         "(configure with -DSCRATCHGRAD_CUDA=ON on a machine with nvcc)",
                                         device.str()));
  return *cuda_backend;
}

}  // namespace autograd
