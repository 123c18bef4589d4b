// fuzz_ops.cpp — the structured op fuzzer: the input bytes are decoded into a few small float64 leaf
// tensors and a sequence of up to 16 ops on them (views, broadcasts, reductions, matmul, softmax,
// masked_fill, embedding, cross_entropy, layer_norm), each op taking its operands, dims, shapes and
// constants from the next bytes.
//
// Every op is also computed by a reference written here as plain loops over float64 values, which decides
// whether the call is valid (PyTorch's rules). Checks:
//   - no crash and no sanitizer report;
//   - a valid call succeeds, and its values equal the reference's (to 1e-9, relative);
//   - an invalid call throws a std::exception with a one-line message (never a wrong answer);
//   - the gradients of the last tensor (through a weighted sum) pass float64 gradcheck (unless a
//     layer_norm row had a variance under 1e-2: then central differences are too coarse), at a step of
//     1e-6, else 1e-5 or 1e-4 (a large sum loses the smallest step's differences to rounding);
//   - the same sequence on the reference kernels (autograd/reference/, the plain loops behind the Backend
//     fence) gives the same values, to 1e-9 relative, as this file's reference does;
//   - the same sequence in float32 (the training kernels) stays within 1e-3 of the reference, or within
//     1e-5 of the largest value it was computed from (float32 keeps 6e-8 of that; what cancels, such as
//     a layer_norm's output and its bias, leaves it behind in a small result). The comparison stops at a
//     layer_norm of a row whose spread is under 1/100 of the values it was computed from: float32's
//     rounding of those, divided by that spread, goes beyond both however right the kernels are.
// Corpus: corpus/ops/ (byte strings that decode to one or two of each op). FUZZ_OPS_VERBOSE=1 prints
// each decoded op, its operands' shapes and the reference's verdict.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autograd/autograd.h"
#include "autograd/inspect/gradcheck.h"
#include "fuzz_common.h"

using namespace autograd;

namespace {

// ---------------------------------------------------------------- the bytes

struct Bytes {
  const uint8_t* p;
  size_t n;
  bool empty() const { return n == 0; }
  uint8_t next() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
  int64_t pick(int64_t count) { return count <= 0 ? 0 : int64_t(next()) % count; }  // [0, count)
  int64_t between(int64_t lo, int64_t hi) { return lo + pick(hi - lo + 1); }      // [lo, hi]
  double value() { return (double(next()) - 128.0) / 32.0; }                         // [-4, 4), exact in float32
};

// ---------------------------------------------------------------- the reference: values as plain loops

struct Ref {
  Shape shape;
  std::vector<double> v;  // row-major
  // The largest magnitude of any value on the way to these (leaves, operands, results): float32's
  // rounding errors in v are relative to it, not to v (a difference of two 60s that is 0 in float64 is
  // some 1e-6 in float32).
  double scale = 0;
};

double largest_magnitude(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

int64_t count(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// index of flat position `flat` in `shape`
std::vector<int64_t> unravel(int64_t flat, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    idx[i] = shape[i] ? flat % shape[i] : 0;
    flat = shape[i] ? flat / shape[i] : 0;
  }
  return idx;
}
int64_t ravel(const std::vector<int64_t>& idx, const Shape& shape) {
  int64_t flat = 0;
  for (size_t i = 0; i < shape.size(); ++i) flat = flat * shape[i] + idx[i];
  return flat;
}
// the element of `in` that broadcasting to a shape of rank out_rank reads at idx
int64_t broadcast_source(const std::vector<int64_t>& idx, const Shape& in) {
  std::vector<int64_t> j(in.size());
  const size_t lead = idx.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) j[i] = in[i] == 1 ? 0 : idx[lead + i];
  return ravel(j, in);
}

std::optional<Shape> broadcast(const Shape& a, const Shape& b) {
  const size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t x = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t y = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (x != y && x != 1 && y != 1) return std::nullopt;
    out[i] = x == 1 ? y : x;
  }
  return out;
}

Ref map2(const Ref& a, const Ref& b, const Shape& out, const std::function<double(double, double)>& f) {
  Ref r{out, std::vector<double>(size_t(count(out)))};
  for (int64_t i = 0; i < count(out); ++i) {
    auto idx = unravel(i, out);
    r.v[size_t(i)] = f(a.v[size_t(broadcast_source(idx, a.shape))], b.v[size_t(broadcast_source(idx, b.shape))]);
  }
  return r;
}
Ref map1(const Ref& a, const std::function<double(double)>& f) {
  Ref r = a;
  for (double& x : r.v) x = f(x);
  return r;
}

// out[idx] = in[source(idx)] for every idx of `out_shape`
Ref gather(const Ref& in, const Shape& out_shape, const std::function<std::vector<int64_t>(const std::vector<int64_t>&)>& source) {
  Ref r{out_shape, std::vector<double>(size_t(count(out_shape)))};
  for (int64_t i = 0; i < count(out_shape); ++i) r.v[size_t(i)] = in.v[size_t(ravel(source(unravel(i, out_shape)), in.shape))];
  return r;
}

// Along dim d: calls f(values of one line) → values of that line.
Ref along(const Ref& in, int64_t d, const std::function<std::vector<double>(const std::vector<double>&)>& f) {
  Ref r = in;
  const int64_t n = in.shape[size_t(d)];
  for (int64_t i = 0; i < count(in.shape); ++i) {
    auto idx = unravel(i, in.shape);
    if (idx[size_t(d)] != 0 || n == 0) continue;
    std::vector<double> line(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) {
      idx[size_t(d)] = k;
      line[size_t(k)] = in.v[size_t(ravel(idx, in.shape))];
    }
    line = f(line);
    for (int64_t k = 0; k < n; ++k) {
      idx[size_t(d)] = k;
      r.v[size_t(ravel(idx, in.shape))] = line[size_t(k)];
    }
  }
  return r;
}

// ---------------------------------------------------------------- the program

enum Kind : uint8_t {
  kAdd, kSub, kMul, kTanh, kExp, kScale, kSquare, kSumDim, kMeanDim, kSumAll, kReshape, kTranspose, kPermute,
  kUnsqueeze, kSqueeze, kExpand, kNarrow, kSelect, kContiguous, kMatmul, kSoftmax, kLogSoftmax, kMaskedFill,
  kEmbedding, kCrossEntropy, kLayerNorm, kKinds
};
const char* kNames[] = {"add", "sub", "mul", "tanh", "exp", "mul(scalar)", "pow(2)", "sum(dim)", "mean(dim)", "sum",
                        "reshape", "transpose", "permute", "unsqueeze", "squeeze", "expand", "narrow", "select",
                        "contiguous", "matmul", "softmax", "log_softmax", "masked_fill", "embedding",
                        "cross_entropy", "layer_norm"};

struct Op {
  Kind kind;
  int a = 0, b = 0;          // operand slots
  int64_t i0 = 0, i1 = 0, i2 = 0;
  bool flag = false;
  double x = 0;
  Shape shape;               // reshape / expand / permute dims / normalized_shape
  Shape const_shape;         // mask / indices / targets
  std::vector<int64_t> ints; // indices / targets / mask (0, 1)
  int weight = -1, bias = -1;  // layer_norm's, as leaf numbers
  bool binary() const { return kind <= kMul || kind == kMatmul; }
  std::string describe(const std::vector<Shape>& shapes) const {
    std::string s = fmt::format("{}(slot {} {}", kNames[kind], a, shape_to_string(shapes[size_t(a)]));
    if (binary()) s += fmt::format(", slot {} {}", b, shape_to_string(shapes[size_t(b)]));
    s += fmt::format(", {}, {}, {}, shape {}, const {})", i0, i1, i2, shape_to_string(shape), shape_to_string(const_shape));
    return s;
  }
};

Tensor int_tensor(const Op& op) { return from_vector(op.ints, op.const_shape); }
Tensor bool_tensor(const Op& op) {
  std::vector<double> v(op.ints.begin(), op.ints.end());
  return from_vector(v, op.const_shape, DType::Bool);
}

// The op on tensors (what is being tested). Leaves are the layer_norm weights and biases.
Tensor apply(const Op& op, const std::vector<Tensor>& slots, const std::vector<Tensor>& leaves) {
  const Tensor& a = slots[size_t(op.a)];
  const Tensor& b = slots[size_t(op.b)];
  switch (op.kind) {
    case kAdd: return a + b;
    case kSub: return a - b;
    case kMul: return a * b;
    case kTanh: return a.tanh();
    case kExp: return a.exp();
    case kScale: return a * op.x;
    case kSquare: return a.pow(2.0);
    case kSumDim: return a.sum(op.i0, op.flag);
    case kMeanDim: return a.mean(op.i0, op.flag);
    case kSumAll: return a.sum();
    case kReshape: return a.reshape(op.shape);
    case kTranspose: return a.transpose(op.i0, op.i1);
    case kPermute: return a.permute(op.shape);
    case kUnsqueeze: return a.unsqueeze(op.i0);
    case kSqueeze: return op.flag ? a.squeeze(op.i0) : a.squeeze();
    case kExpand: return a.expand(op.shape);
    case kNarrow: return a.narrow(op.i0, op.i1, op.i2);
    case kSelect: return a.select(op.i0, op.i1);
    case kContiguous: return a.contiguous();
    case kMatmul: return matmul(a, b);
    case kSoftmax: return softmax(a, op.i0);
    case kLogSoftmax: return log_softmax(a, op.i0);
    case kMaskedFill: return masked_fill(a, bool_tensor(op), op.x);
    case kEmbedding: return embedding(a, int_tensor(op));
    case kCrossEntropy: return cross_entropy(a, int_tensor(op), -100);
    case kLayerNorm:
      return layer_norm(a, op.shape, op.weight >= 0 ? leaves[size_t(op.weight)] : Tensor(),
                        op.bias >= 0 ? leaves[size_t(op.bias)] : Tensor(), 1e-5);
    case kKinds: break;
  }
  fuzz::fail("unknown op");
}

// The verdict of the reference on a call.
struct Verdict {
  enum { valid, invalid, unsure } kind;  // unsure: PyTorch's rule is not what this reference knows; skip
  Ref out;
};
Verdict valid(Ref r) { return {Verdict::valid, std::move(r)}; }
Verdict invalid() { return {Verdict::invalid, {}}; }
Verdict unsure() { return {Verdict::unsure, {}}; }

bool dim_ok(int64_t d, size_t rank) { return d >= -int64_t(rank) && d < int64_t(rank); }
int64_t wrap(int64_t d, size_t rank) { return d < 0 ? d + int64_t(rank) : d; }

// Set by a layer_norm of a row with a tiny variance: its gradients (up to 1/(var + eps)) are then too
// steep for central differences with eps 1e-6 to agree to rtol 1e-3, so gradcheck is skipped.
bool ill_conditioned = false;

// Set by a layer_norm of a row whose spread is under 1/100 of its operand's scale: the float32 run is
// compared only on the ops before it.
bool float32_ill_conditioned = false;

Verdict reference(const Op& op, const std::vector<Ref>& slots, const std::vector<Ref>& leaves) {
  const Ref& a = slots[size_t(op.a)];
  const Ref& b = slots[size_t(op.b)];
  const size_t r = a.shape.size();
  switch (op.kind) {
    case kAdd: case kSub: case kMul: {
      auto s = broadcast(a.shape, b.shape);
      if (!s) return invalid();
      if (op.kind == kAdd) return valid(map2(a, b, *s, [](double x, double y) { return x + y; }));
      if (op.kind == kSub) return valid(map2(a, b, *s, [](double x, double y) { return x - y; }));
      return valid(map2(a, b, *s, [](double x, double y) { return x * y; }));
    }
    case kTanh: return valid(map1(a, [](double x) { return std::tanh(x); }));
    case kExp: return valid(map1(a, [](double x) { return std::exp(x); }));
    case kScale: return valid(map1(a, [&](double x) { return x * op.x; }));
    case kSquare: return valid(map1(a, [](double x) { return x * x; }));
    case kSumDim: case kMeanDim: {
      if (r == 0) return unsure();
      if (!dim_ok(op.i0, r)) return invalid();
      const int64_t d = wrap(op.i0, r), n = a.shape[size_t(d)];
      Shape out = a.shape;
      out[size_t(d)] = 1;
      Ref res{out, std::vector<double>(size_t(count(out)), 0.0)};
      for (int64_t i = 0; i < count(a.shape); ++i) {
        auto idx = unravel(i, a.shape);
        idx[size_t(d)] = 0;
        res.v[size_t(ravel(idx, out))] += a.v[size_t(i)];
      }
      if (op.kind == kMeanDim)
        for (double& x : res.v) x /= double(n);  // 0/0 = nan, as PyTorch's mean over nothing
      if (!op.flag) res.shape.erase(res.shape.begin() + d);
      return valid(res);
    }
    case kSumAll: {
      double s = 0;
      for (double x : a.v) s += x;
      return valid({{}, {s}});
    }
    case kReshape: {
      int64_t known = 1, unknown = -1;
      for (size_t i = 0; i < op.shape.size(); ++i) {
        if (op.shape[i] == -1) {
          if (unknown >= 0) return invalid();
          unknown = int64_t(i);
        } else if (op.shape[i] < 0) {
          return invalid();
        } else {
          known *= op.shape[i];
        }
      }
      Shape s = op.shape;
      if (unknown >= 0) {
        if (known == 0) return unsure();
        if (count(a.shape) % known) return invalid();
        s[size_t(unknown)] = count(a.shape) / known;
      }
      if (count(s) != count(a.shape)) return invalid();
      return valid({s, a.v});
    }
    case kTranspose: {
      if (r == 0) return unsure();
      if (!dim_ok(op.i0, r) || !dim_ok(op.i1, r)) return invalid();
      const size_t d0 = size_t(wrap(op.i0, r)), d1 = size_t(wrap(op.i1, r));
      Shape s = a.shape;
      std::swap(s[d0], s[d1]);
      return valid(gather(a, s, [&](std::vector<int64_t> idx) {
        std::swap(idx[d0], idx[d1]);
        return idx;
      }));
    }
    case kPermute: {
      if (op.shape.size() != r) return invalid();
      std::vector<bool> used(r, false);
      Shape p(r);
      for (size_t i = 0; i < r; ++i) {
        if (!dim_ok(op.shape[i], r)) return invalid();
        p[i] = wrap(op.shape[i], r);
        if (used[size_t(p[i])]) return invalid();
        used[size_t(p[i])] = true;
      }
      Shape s(r);
      for (size_t i = 0; i < r; ++i) s[i] = a.shape[size_t(p[i])];
      return valid(gather(a, s, [&](const std::vector<int64_t>& idx) {
        std::vector<int64_t> j(r);
        for (size_t i = 0; i < r; ++i) j[size_t(p[i])] = idx[i];
        return j;
      }));
    }
    case kUnsqueeze: {
      if (op.i0 < -int64_t(r) - 1 || op.i0 > int64_t(r)) return invalid();
      const int64_t d = op.i0 < 0 ? op.i0 + int64_t(r) + 1 : op.i0;
      Shape s = a.shape;
      s.insert(s.begin() + d, 1);
      return valid({s, a.v});
    }
    case kSqueeze: {
      Shape s;
      if (op.flag) {
        if (r == 0) return unsure();
        if (!dim_ok(op.i0, r)) return invalid();
        s = a.shape;
        if (s[size_t(wrap(op.i0, r))] == 1) s.erase(s.begin() + wrap(op.i0, r));
      } else {
        for (int64_t d : a.shape)
          if (d != 1) s.push_back(d);
      }
      return valid({s, a.v});
    }
    case kExpand: {
      if (op.shape.size() < r) return invalid();
      const size_t lead = op.shape.size() - r;
      Shape s = op.shape;
      for (size_t i = 0; i < s.size(); ++i) {
        if (i < lead) {
          if (s[i] < 0) return invalid();
          continue;
        }
        const int64_t have = a.shape[i - lead];
        if (s[i] == -1) s[i] = have;
        else if (s[i] < 0 || (s[i] != have && have != 1)) return invalid();
      }
      return valid(gather(a, s, [&](const std::vector<int64_t>& idx) {
        std::vector<int64_t> j(r);
        for (size_t i = 0; i < r; ++i) j[i] = a.shape[i] == 1 ? 0 : idx[lead + i];
        return j;
      }));
    }
    case kNarrow: {
      if (r == 0) return invalid();
      if (!dim_ok(op.i0, r)) return invalid();
      const size_t d = size_t(wrap(op.i0, r));
      const int64_t n = a.shape[d];
      if (op.i1 < 0) return unsure();  // PyTorch wraps a negative start; not generated as valid here
      if (op.i1 > n || op.i2 < 0 || op.i1 + op.i2 > n) return invalid();
      Shape s = a.shape;
      s[d] = op.i2;
      return valid(gather(a, s, [&](std::vector<int64_t> idx) {
        idx[d] += op.i1;
        return idx;
      }));
    }
    case kSelect: {
      if (r == 0) return invalid();
      if (!dim_ok(op.i0, r)) return invalid();
      const size_t d = size_t(wrap(op.i0, r));
      const int64_t n = a.shape[d];
      if (op.i1 < -n || op.i1 >= n) return invalid();
      const int64_t at = op.i1 < 0 ? op.i1 + n : op.i1;
      Shape s = a.shape;
      s.erase(s.begin() + int64_t(d));
      return valid(gather(a, s, [&](std::vector<int64_t> idx) {
        idx.insert(idx.begin() + int64_t(d), at);
        return idx;
      }));
    }
    case kContiguous: return valid(a);
    case kMatmul: {
      if (a.shape.empty() || b.shape.empty()) return invalid();
      Shape sa = a.shape, sb = b.shape;
      const bool va = sa.size() == 1, vb = sb.size() == 1;
      if (va) sa.insert(sa.begin(), 1);
      if (vb) sb.push_back(1);
      const int64_t n = sa[sa.size() - 2], k = sa.back(), m = sb.back();
      if (sb[sb.size() - 2] != k) return invalid();
      auto batch = broadcast(Shape(sa.begin(), sa.end() - 2), Shape(sb.begin(), sb.end() - 2));
      if (!batch) return invalid();
      Shape full = *batch;
      full.push_back(n);
      full.push_back(m);
      Ref res{full, std::vector<double>(size_t(count(full)))};
      for (int64_t i = 0; i < count(full); ++i) {
        auto idx = unravel(i, full);
        std::vector<int64_t> bi(idx.begin(), idx.end() - 2);
        double s = 0;
        for (int64_t p = 0; p < k; ++p) {
          std::vector<int64_t> ia = bi, ib = bi;
          ia.push_back(idx[idx.size() - 2]), ia.push_back(p);
          ib.push_back(p), ib.push_back(idx.back());
          s += a.v[size_t(broadcast_source(ia, sa))] * b.v[size_t(broadcast_source(ib, sb))];
        }
        res.v[size_t(i)] = s;
      }
      Shape s = *batch;
      if (!va) s.push_back(n);
      if (!vb) s.push_back(m);
      res.shape = s;
      return valid(res);
    }
    case kSoftmax: case kLogSoftmax: {
      if (r == 0) return unsure();
      if (!dim_ok(op.i0, r)) return invalid();
      const bool log = op.kind == kLogSoftmax;
      return valid(along(a, wrap(op.i0, r), [&](std::vector<double> line) {
        double mx = -INFINITY, s = 0;
        for (double x : line) mx = std::max(mx, x);
        for (double x : line) s += std::exp(x - mx);
        for (double& x : line) x = log ? x - mx - std::log(s) : std::exp(x - mx) / s;
        return line;
      }));
    }
    case kMaskedFill: {
      auto s = broadcast(a.shape, op.const_shape);
      if (!s || *s != a.shape) return invalid();
      Ref res = a;
      for (int64_t i = 0; i < count(a.shape); ++i)
        if (op.ints[size_t(broadcast_source(unravel(i, a.shape), op.const_shape))]) res.v[size_t(i)] = op.x;
      return valid(res);
    }
    case kEmbedding: {
      if (r != 2) return invalid();
      const int64_t rows = a.shape[0], dim = a.shape[1];
      for (int64_t id : op.ints)
        if (id < 0 || id >= rows) return invalid();
      Shape s = op.const_shape;
      s.push_back(dim);
      Ref res{s, {}};
      for (int64_t id : op.ints)
        for (int64_t j = 0; j < dim; ++j) res.v.push_back(a.v[size_t(id * dim + j)]);
      return valid(res);
    }
    case kCrossEntropy: {
      if (r != 2) return invalid();
      const int64_t N = a.shape[0], C = a.shape[1];
      if (op.const_shape != Shape{N}) return invalid();
      for (int64_t t : op.ints)
        if (t != -100 && (t < 0 || t >= C)) return invalid();
      double total = 0;
      int64_t used = 0;
      for (int64_t i = 0; i < N; ++i) {
        const int64_t t = op.ints[size_t(i)];
        if (t == -100) continue;
        double mx = -INFINITY, s = 0;
        for (int64_t c = 0; c < C; ++c) mx = std::max(mx, a.v[size_t(i * C + c)]);
        for (int64_t c = 0; c < C; ++c) s += std::exp(a.v[size_t(i * C + c)] - mx);
        total += -(a.v[size_t(i * C + t)] - mx - std::log(s));
        ++used;
      }
      if (used == 0) return unsure();  // PyTorch: nan (0 / 0)
      return valid({{}, {total / double(used)}});
    }
    case kLayerNorm: {
      const size_t k = op.shape.size();
      if (k == 0) return unsure();
      if (k > r) return invalid();
      for (size_t i = 0; i < k; ++i)
        if (op.shape[i] != a.shape[r - k + i]) return invalid();
      const int64_t M = count(op.shape);
      if (M == 0) return unsure();
      const Ref* w = op.weight >= 0 ? &leaves[size_t(op.weight)] : nullptr;
      const Ref* bb = op.bias >= 0 ? &leaves[size_t(op.bias)] : nullptr;
      Ref res = a;
      for (int64_t row = 0; row * M < count(a.shape); ++row) {
        double mean = 0, var = 0;
        for (int64_t j = 0; j < M; ++j) mean += a.v[size_t(row * M + j)];
        mean /= double(M);
        for (int64_t j = 0; j < M; ++j) var += (a.v[size_t(row * M + j)] - mean) * (a.v[size_t(row * M + j)] - mean);
        var /= double(M);
        if (var + 1e-5 < 1e-2) ill_conditioned = true;
        // Values far larger than their spread (a row of 1e300 ± 1e290): x − mean cancels, and any two
        // summation orders give different, equally right, float64 answers. Nothing to compare there.
        double largest = 0;
        for (int64_t j = 0; j < M; ++j) largest = std::max(largest, std::abs(a.v[size_t(row * M + j)]));
        if (std::sqrt(var) * 1e6 < largest) return unsure();
        if (std::sqrt(var + 1e-5) * 100 < a.scale) float32_ill_conditioned = true;
        const double rstd = 1.0 / std::sqrt(var + 1e-5);
        for (int64_t j = 0; j < M; ++j) {
          double y = (a.v[size_t(row * M + j)] - mean) * rstd;
          if (w) y *= w->v[size_t(j)];
          if (bb) y += bb->v[size_t(j)];
          res.v[size_t(row * M + j)] = y;
        }
      }
      return valid(res);
    }
    case kKinds: break;
  }
  fuzz::fail("unknown op");
}

// ---------------------------------------------------------------- decoding

constexpr int64_t kMaxElements = 256;

Shape small_shape(Bytes& in, int64_t max_rank) {
  Shape s(size_t(in.pick(max_rank + 1)));
  for (int64_t& d : s) d = in.pick(5);  // 0 … 4
  while (count(s) > 48)
    for (int64_t& d : s) d = std::max<int64_t>(1, d / 2);
  return s;
}

Ref leaf_values(Bytes& in, const Shape& s) {
  Ref r{s, {}};
  for (int64_t i = 0; i < count(s); ++i) r.v.push_back(in.value());
  r.scale = largest_magnitude(r.v);
  return r;
}

// A dim of a tensor of rank r: mostly valid, sometimes one past either end.
int64_t some_dim(Bytes& in, size_t r) { return in.between(-int64_t(r) - 1, int64_t(r)); }

// Op `kind`'s parameters, mostly valid for the shapes at hand.
Op decode(Bytes& in, int nslots, const std::vector<Ref>& slots, std::vector<Ref>& leaves) {
  Op op;
  op.kind = Kind(in.pick(kKinds));
  op.a = int(in.pick(nslots));
  op.b = int(in.pick(nslots));
  const Shape& s = slots[size_t(op.a)].shape;
  const size_t r = s.size();
  switch (op.kind) {
    case kScale: op.x = in.value(); break;
    case kSumDim: case kMeanDim: case kSoftmax: case kLogSoftmax: case kUnsqueeze:
      op.i0 = some_dim(in, r);
      op.flag = in.next() & 1;
      break;
    case kSqueeze: op.flag = in.next() & 1, op.i0 = some_dim(in, r); break;
    case kTranspose: op.i0 = some_dim(in, r), op.i1 = some_dim(in, r); break;
    case kReshape: {
      const int64_t n = count(s);
      const int64_t mode = in.pick(4);
      if (mode == 0) op.shape = small_shape(in, 4);  // probably the wrong count
      else if (mode == 1) op.shape = {-1};
      else {
        // split the count in two factors, one of them maybe -1
        int64_t f = 1;
        for (int64_t c = 1 + in.pick(4); c <= 4; ++c)
          if (n % c == 0) {
            f = c;
            break;
          }
        op.shape = {f, f ? n / f : 0};
        if (mode == 3) op.shape[size_t(in.pick(2))] = -1;
      }
      break;
    }
    case kPermute: {
      op.shape.clear();
      for (size_t i = 0; i < r; ++i) op.shape.push_back(int64_t(i));
      for (size_t i = r; i > 1; --i) std::swap(op.shape[i - 1], op.shape[size_t(in.pick(int64_t(i)))]);
      if (in.pick(8) == 0 && r > 0) op.shape[0] = some_dim(in, r);  // maybe a repeat or out of range
      if (in.pick(16) == 0) op.shape.push_back(0);
      break;
    }
    case kExpand: {
      op.shape.clear();
      for (int64_t lead = in.pick(3); lead > 0; --lead) op.shape.push_back(in.pick(4));
      for (int64_t d : s) {
        int64_t m = in.pick(8);
        op.shape.push_back(m < 3 ? d : m == 3 ? -1 : d == 1 ? in.pick(5) : m == 7 ? in.pick(5) : d);
      }
      break;
    }
    case kNarrow: {
      op.i0 = some_dim(in, r);
      const int64_t n = r && dim_ok(op.i0, r) ? s[size_t(wrap(op.i0, r))] : 2;
      op.i1 = in.between(0, n);
      op.i2 = in.between(0, n - op.i1 + (in.pick(8) == 0 ? 1 : 0));
      break;
    }
    case kSelect: {
      op.i0 = some_dim(in, r);
      const int64_t n = r && dim_ok(op.i0, r) ? s[size_t(wrap(op.i0, r))] : 2;
      op.i1 = in.between(-n - 1, n);
      break;
    }
    case kMaskedFill: {
      op.x = in.value();
      op.const_shape.clear();
      const int64_t drop = in.pick(int64_t(r) + 1);
      for (size_t i = size_t(drop); i < r; ++i) op.const_shape.push_back(in.pick(3) == 0 ? 1 : s[i]);
      if (in.pick(8) == 0) op.const_shape.push_back(2);  // maybe wrong
      for (int64_t i = 0; i < count(op.const_shape); ++i) op.ints.push_back(in.next() & 1);
      break;
    }
    case kEmbedding: {
      const int64_t rows = r == 2 ? s[0] : 3;
      op.const_shape = small_shape(in, 2);
      for (int64_t i = 0; i < count(op.const_shape); ++i) op.ints.push_back(in.pick(16) == 0 ? in.between(-1, rows) : in.pick(rows));
      break;
    }
    case kCrossEntropy: {
      const int64_t N = r == 2 ? s[0] : 2, C = r == 2 ? s[1] : 2;
      op.const_shape = {N + (in.pick(16) == 0 ? 1 : 0)};
      for (int64_t i = 0; i < op.const_shape[0]; ++i) {
        const int64_t m = in.pick(16);
        op.ints.push_back(m == 0 ? -100 : m == 1 ? in.between(-1, C) : in.pick(C));
      }
      break;
    }
    case kLayerNorm: {
      const int64_t k = in.between(r ? 1 : 0, int64_t(r));
      op.shape = Shape(s.end() - k, s.end());
      if (in.pick(8) == 0 && !op.shape.empty()) op.shape[0] += 1;  // wrong
      const int64_t m = in.pick(4);
      if (m & 1) {
        op.weight = int(leaves.size());
        leaves.push_back(leaf_values(in, op.shape));
      }
      if (m & 2) {
        op.bias = int(leaves.size());
        leaves.push_back(leaf_values(in, op.shape));
      }
      break;
    }
    default: break;
  }
  return op;
}

// An output shape too big for a fuzz step: skip the op (the reference would loop over it).
bool too_big(const Op& op, const std::vector<Ref>& slots) {
  const Ref& a = slots[size_t(op.a)];
  const Ref& b = slots[size_t(op.b)];
  switch (op.kind) {
    case kExpand: case kReshape: return count(op.shape) > kMaxElements || count(op.shape) < -kMaxElements;
    case kMatmul: return count(a.shape) * count(b.shape) > 64 * 64 || a.shape.size() + b.shape.size() > 7;
    case kAdd: case kSub: case kMul: return count(a.shape) * count(b.shape) > 64 * 64;
    case kExp: for (double x : a.v) if (std::abs(x) > 8) return true; return false;
    case kSquare: for (double x : a.v) if (std::abs(x) > 1e3) return true; return false;
    case kUnsqueeze: return a.shape.size() >= 5;
    default: return false;
  }
}

// ---------------------------------------------------------------- running and comparing

bool close(double got, double want, double tol) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::abs(got - want) <= tol * (1 + std::abs(want));
}

// Each element within tol of the reference (relative, plus tol absolute), or within floor absolute.
void compare(const Tensor& t, const Ref& want, double tol, const std::string& what, double floor = 0) {
  if (t.shape() != want.shape)
    fuzz::fail(fmt::format("{}: shape {}, the reference's {}", what, t.shape_str(), shape_to_string(want.shape)));
  std::vector<double> got = t.to(DType::Float64).contiguous().to_vector<double>();
  for (size_t i = 0; i < got.size(); ++i)
    if (!close(got[i], want.v[i], tol) && !(std::abs(got[i] - want.v[i]) <= floor))
      fuzz::fail(fmt::format("{}: element {} is {:.17g}, the reference's {:.17g}", what, i, got[i], want.v[i]));
}

struct Program {
  std::vector<Op> ops;
  int first_leaves = 0;  // slots 0 … first_leaves-1 are the first leaves
};

// Runs the recorded ops; slots start as the first leaves.
std::vector<Tensor> run(const Program& p, const std::vector<Tensor>& leaves) {
  std::vector<Tensor> slots(leaves.begin(), leaves.begin() + p.first_leaves);
  for (const Op& op : p.ops) slots.push_back(apply(op, slots, leaves));
  return slots;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool verbose = std::getenv("FUZZ_OPS_VERBOSE") != nullptr;  // print each op as it is decoded
  Bytes in{data, size};
  ill_conditioned = false;
  float32_ill_conditioned = false;
  size_t float32_ops = 16;  // the ops the float32 run is compared on: those before an ill-conditioned one
  std::vector<Ref> leaves;  // reference values of every leaf: the first ones, then layer_norm's
  Program program;
  program.first_leaves = int(1 + in.pick(3));
  for (int i = 0; i < program.first_leaves; ++i) leaves.push_back(leaf_values(in, small_shape(in, 3)));
  std::vector<Ref> slots(leaves.begin(), leaves.end());
  std::vector<Tensor> leaf_tensors, tensors;
  auto make_leaf = [](const Ref& r) { return from_vector(r.v, r.shape, DType::Float64).requires_grad_(); };
  for (const Ref& r : leaves) leaf_tensors.push_back(make_leaf(r)), tensors.push_back(leaf_tensors.back());

  for (int step = 0; step < 16 && !in.empty(); ++step) {
    std::vector<Shape> shapes;
    for (const Ref& r : slots) shapes.push_back(r.shape);
    Op op = decode(in, int(slots.size()), slots, leaves);
    while (leaf_tensors.size() < leaves.size()) leaf_tensors.push_back(make_leaf(leaves[leaf_tensors.size()]));
    if (too_big(op, slots)) continue;
    const std::string what = op.describe(shapes);
    Verdict verdict = reference(op, slots, leaves);
    if (verbose) std::fprintf(stderr, "op %d: %s: %s\n", step, what.c_str(), verdict.kind == Verdict::valid ? "valid" : verdict.kind == Verdict::invalid ? "invalid" : "unsure");
    if (verdict.kind == Verdict::valid && count(verdict.out.shape) > kMaxElements) continue;
    Tensor out;
    try {
      out = apply(op, tensors, leaf_tensors);
    } catch (const std::exception& e) {
      fuzz::check_message(e, what + " threw");
      if (verdict.kind == Verdict::valid) fuzz::fail(fmt::format("{} is valid but threw: {}", what, e.what()));
      continue;
    } catch (...) {
      fuzz::fail(what + " threw something that is not a std::exception");
    }
    if (verdict.kind == Verdict::invalid) fuzz::fail(fmt::format("{} is invalid but gave {}", what, out.shape_str()));
    if (verdict.kind == Verdict::unsure) continue;
    compare(out, verdict.out, 1e-9, what);
    if (float32_ill_conditioned) float32_ops = std::min(float32_ops, program.ops.size());
    verdict.out.scale = std::max({largest_magnitude(verdict.out.v), slots[size_t(op.a)].scale,
                                  op.binary() ? slots[size_t(op.b)].scale : 0.0});
    program.ops.push_back(op);
    slots.push_back(verdict.out);
    tensors.push_back(out);
  }
  if (program.ops.empty()) return 0;

  // Everything finite and of moderate size: the float32 run and gradcheck are meaningful.
  for (const Ref& r : slots)
    for (double x : r.v)
      if (!std::isfinite(x) || std::abs(x) > 1e4) return 0;

  // the same program on the reference kernels
  {
    KernelsGuard reference_kernels(Kernels::reference);
    std::vector<Tensor> leaves64, out64;
    for (const Tensor& t : leaf_tensors) leaves64.push_back(t.detach().requires_grad_());
    try {
      out64 = run(program, leaves64);
    } catch (const std::exception& e) {
      fuzz::fail(fmt::format("a valid program threw on the reference kernels: {}", e.what()));
    }
    for (size_t i = size_t(program.first_leaves); i < out64.size(); ++i)
      compare(out64[i], slots[i], 1e-9,
              fmt::format("reference kernels {}", kNames[program.ops[i - size_t(program.first_leaves)].kind]));
  }

  // the same program in float32: the training kernels
  std::vector<Tensor> leaves32;
  for (const Tensor& t : leaf_tensors) leaves32.push_back(t.detach().to(DType::Float32).requires_grad_());
  std::vector<Tensor> out32;
  try {
    out32 = run(program, leaves32);
  } catch (const std::exception& e) {
    fuzz::fail(fmt::format("the float32 run of a valid program threw: {}", e.what()));
  }
  for (size_t i = size_t(program.first_leaves); i < size_t(program.first_leaves) + float32_ops && i < out32.size(); ++i) {
    fuzz::expect(out32[i].dtype() == DType::Float32, "a float32 program gave a tensor of another dtype");
    compare(out32[i], slots[i], 1e-3, fmt::format("float32 {}", kNames[program.ops[i - size_t(program.first_leaves)].kind]),
            1e-5 * slots[i].scale);
  }

  // gradcheck of a weighted sum of the last tensor, through every recorded op
  size_t inputs = 0;
  for (const Ref& r : leaves) inputs += r.v.size();
  if (inputs > 96 || ill_conditioned) return 0;
  const Ref& last = slots.back();
  std::vector<double> w;
  for (size_t i = 0; i < last.v.size(); ++i) w.push_back(0.5 + 0.25 * std::sin(double(i) + 1));
  const Tensor weights = from_vector(w, last.shape, DType::Float64);
  auto f = [&](const std::vector<Tensor>& xs) { return (run(program, xs).back() * weights).sum(); };
  inspect::GradcheckResult result, first;
  try {
    // A wrong backward disagrees at every step; rounding (in a sum of 1e4s) and curvature do at some.
    for (double step : {1e-6, 1e-5, 1e-4}) {
      result = inspect::gradcheck(f, leaf_tensors, {.eps = step, .atol = 1e-5, .rtol = 1e-3});
      if (step == 1e-6) first = result;
      if (result) break;
    }
  } catch (const std::exception& e) {
    fuzz::fail(fmt::format("backward (in gradcheck) of a valid program threw: {}", e.what()));
  }
  if (!result) {
    std::string ops;
    for (const Op& op : program.ops) ops += std::string(ops.empty() ? "" : " → ") + kNames[op.kind];
    fuzz::fail(fmt::format("gradcheck of {} (at steps 1e-6, 1e-5 and 1e-4): {}", ops, first.message));
  }
  return 0;
}
