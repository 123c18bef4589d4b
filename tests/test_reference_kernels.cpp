// test_reference_kernels.cpp — the reference kernels (autograd/reference/) are the oracle for the CPU's
// (autograd/cpu/): every Backend entry, in both numerics, against the reference, called at the fence itself
// on random odd shapes with contiguous, transposed, sliced (step 2) and broadcast (stride 0) inputs where the
// entry takes them, and on empty tensors.
//
// Tolerance: float32 outputs agree within 1e-4·(1 + |reference|), float64 within 1e-12·(1 + |reference|).
// The two add in different orders (the CPU's lanes, blocks and cascades, FMA under fast numerics; the
// reference in index order), so float32 differs by a few hundred units in the last place at most on these
// sizes; integer and bool outputs, copies, fills, indices and comparisons agree exactly.
//
// Also the switch itself (numerics.h: set_kernels, KernelsGuard, SCRATCHGRAD_KERNELS) and the gradcheck
// suites, which ctest reruns on the reference kernels (tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autograd/autograd.h"
#include "autograd/cpu/kernels.h"
#include "autograd/reference/backend.h"

namespace {

using namespace autograd;
using Outputs = std::vector<Tensor>;

// What each entry is run with: fresh outputs made by the caller, on the kernels given.
using Entry = std::function<Outputs(Backend&)>;

// The largest |got − want| / (1 + |want|) over the elements (0 for exact equality, NaN where they differ).
double worst_difference(const Tensor& want, const Tensor& got) {
  EXPECT_EQ(want.shape(), got.shape());
  EXPECT_EQ(want.dtype(), got.dtype());
  const std::vector<double> w = want.to(DType::Float64).contiguous().to_vector<double>();
  const std::vector<double> g = got.to(DType::Float64).contiguous().to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    if (std::isnan(w[i]) || std::isnan(g[i]) || std::isinf(w[i]) || std::isinf(g[i])) {
      const bool same = (std::isnan(w[i]) && std::isnan(g[i])) || w[i] == g[i];
      if (!same) return std::numeric_limits<double>::infinity();
      continue;
    }
    worst = std::max(worst, std::abs(g[i] - w[i]) / (1 + std::abs(w[i])));
  }
  return worst;
}

double tolerance(DType dtype) {
  return dtype == DType::Float32 ? 1e-4 : dtype == DType::Float64 ? 1e-12 : 0.0;
}

// Runs `entry` on the reference kernels, then on the CPU's in exact and in fast numerics, and compares
// every output.
void expect_agree(const std::string& what, const Entry& entry) {
  Outputs want;
  {
    KernelsGuard reference(Kernels::reference);
    want = entry(reference::reference_backend());
  }
  for (Numerics mode : {Numerics::exact, Numerics::fast}) {
    NumericsGuard numerics(mode);
    const Outputs got = entry(cpu::cpu_backend());
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) {
      if (!want[i].defined()) continue;
      EXPECT_LE(worst_difference(want[i], got[i]), tolerance(want[i].dtype()))
          << what << ", " << numerics_name(mode) << " numerics, output " << i << " (shape " << want[i].shape_str()
          << ", " << dtype_name(want[i].dtype()) << ")";
    }
  }
}

// A random tensor: N(0, 1) floats, integers in [-4, 4], or bools.
Tensor random(const Shape& shape, DType dtype) {
  if (dtype == DType::Int64) return randint(-4, 5, shape);
  if (dtype == DType::Bool) return randint(0, 2, shape).to(DType::Bool);
  return randn(shape, dtype);
}

// A tensor of `shape` in each layout a kernel may be handed: contiguous; transposed (its last two dims
// swapped in memory); every other element of a longer last dim (a sliced view with an offset); and
// repeated along dim 0 (an expanded view, stride 0).
std::vector<std::pair<std::string, Tensor>> layouts(const Shape& shape, DType dtype) {
  std::vector<std::pair<std::string, Tensor>> out = {{"contiguous", random(shape, dtype)}};
  const size_t n = shape.size();
  if (n >= 2) {
    Shape swapped = shape;
    std::swap(swapped[n - 1], swapped[n - 2]);
    out.emplace_back("transposed", random(swapped, dtype).mT());
  }
  if (n >= 1) {
    Shape longer = shape;
    longer[n - 1] = 2 * shape[n - 1] + 1;
    out.emplace_back("sliced", random(longer, dtype).slice(int64_t(n) - 1, 1, std::nullopt, 2));
    Shape one = shape;
    one[0] = 1;
    out.emplace_back("broadcast", random(one, dtype).expand(shape));
  }
  return out;
}

// Odd sizes, a size 1, and an empty dim.
const std::vector<Shape> kShapes = {{}, {7}, {0}, {3, 5}, {1, 13}, {4, 0}, {2, 3, 5}, {3, 1, 17}, {2, 0, 3}};
const std::vector<DType> kAllTypes = {DType::Float32, DType::Float64, DType::Int64, DType::Bool};
const std::vector<DType> kFloats = {DType::Float32, DType::Float64};

std::string label(const Shape& shape, DType dtype, const std::string& layout) {
  return fmt::format("{} {} {}", Tensor(empty(shape)).shape_str(), dtype_name(dtype), layout);
}

class ReferenceKernels : public ::testing::Test {
 protected:
  void SetUp() override { manual_seed(33); }
};

// ---------------------------------------------------------------- elementwise

TEST_F(ReferenceKernels, CopyBetweenEveryPairOfDtypesAndLayouts) {
  for (const Shape& shape : kShapes)
    for (DType from : kAllTypes)
      for (DType to : kAllTypes)
        for (const auto& [name, src] : layouts(shape, from)) {
          expect_agree("copy " + label(shape, from, name) + " to " + std::string(dtype_name(to)), [&](Backend& b) {
            Tensor dst = empty(shape, to);
            b.copy(src, dst);
            // and into a destination with its strides swapped
            Tensor strided_dst = shape.size() == 2 ? empty({shape[1], shape[0]}, to).t() : empty(shape, to);
            b.copy(src, strided_dst);
            return Outputs{dst, strided_dst};
          });
        }
}

TEST_F(ReferenceKernels, Fill) {
  for (DType dtype : kAllTypes)
    for (double value : {0.0, -0.0, 1.5, -3.0})
      expect_agree(fmt::format("fill {} {}", dtype_name(dtype), value), [&](Backend& b) {
        Tensor whole = empty({3, 5}, dtype), every_other = zeros({3, 10}, dtype);
        b.fill(whole, value);
        b.fill(every_other.slice(1, 0, std::nullopt, 2), value);
        return Outputs{whole, every_other};
      });
}

const std::vector<UnaryOp> kUnaryOps = {
    UnaryOp::Neg,       UnaryOp::Exp,        UnaryOp::Log,        UnaryOp::Sqrt,       UnaryOp::Tanh,
    UnaryOp::Relu,      UnaryOp::Abs,        UnaryOp::AddScalar,  UnaryOp::MulScalar,  UnaryOp::DivScalar,
    UnaryOp::PowScalar, UnaryOp::RSubScalar, UnaryOp::RDivScalar, UnaryOp::ReluMask,   UnaryOp::EqScalar,
    UnaryOp::NeScalar,  UnaryOp::LtScalar,   UnaryOp::LeScalar,   UnaryOp::GtScalar,   UnaryOp::GeScalar};

// Whether the CPU's kernel takes op on dtype (the reference must then too, and refuse the same others).
bool defined_for(UnaryOp op, DType dtype) {
  try {
    cpu::cpu_backend().unary(op, zeros({1}, dtype), empty({1}, is_comparison(op) ? DType::Bool : dtype), 1.0);
    return true;
  } catch (const std::invalid_argument&) {
    return false;
  }
}

TEST_F(ReferenceKernels, EveryUnaryOpOnEveryDtypeAndLayout) {
  for (UnaryOp op : kUnaryOps)
    for (DType dtype : kAllTypes) {
      if (!defined_for(op, dtype)) {
        EXPECT_THROW(reference::reference_backend().unary(op, zeros({1}, dtype), empty({1}, dtype), 1.0),
                     std::invalid_argument)
            << "unary op " << int(op) << " on " << dtype_name(dtype);
        continue;
      }
      for (double scalar : {0.5, 2.0, 3.0, -1.25})
        for (const Shape& shape : {Shape{3, 5}, Shape{2, 0, 3}, Shape{17}})
          for (auto [name, x] : layouts(shape, dtype)) {
            if (op == UnaryOp::Log || op == UnaryOp::Sqrt || op == UnaryOp::PowScalar) x = x.abs();
            expect_agree(fmt::format("unary op {} scalar {} on {}", int(op), scalar, label(shape, dtype, name)),
                         [&](Backend& b) {
                           Tensor out = empty(shape, is_comparison(op) ? DType::Bool : dtype);
                           b.unary(op, x, out, scalar);
                           return Outputs{out};
                         });
          }
    }
}

TEST_F(ReferenceKernels, EveryBinaryOpOnEveryDtypeWithBroadcastAndStridedOperands) {
  const std::vector<BinaryOp> ops = {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Eq,
                                     BinaryOp::Ne,  BinaryOp::Lt,  BinaryOp::Le,  BinaryOp::Gt,  BinaryOp::Ge};
  for (BinaryOp op : ops)
    for (DType dtype : kAllTypes) {
      if (op == BinaryOp::Div && !is_floating(dtype)) {
        EXPECT_THROW(reference::reference_backend().binary(op, zeros({1}, dtype), zeros({1}, dtype), empty({1}, dtype)),
                     std::invalid_argument);
        continue;
      }
      for (const Shape& shape : {Shape{3, 5}, Shape{0, 4}, Shape{2, 3, 7}}) {
        const auto as = layouts(shape, dtype), bs = layouts(shape, dtype);
        for (size_t i = 0; i < as.size(); ++i) {
          const Tensor& a = as[i].second;
          const Tensor& b_in = bs[(i + 1) % bs.size()].second;  // each layout against another
          expect_agree(fmt::format("binary op {} on {} and {}", int(op), label(shape, dtype, as[i].first),
                                   bs[(i + 1) % bs.size()].first),
                       [&](Backend& b) {
                         Tensor out = empty(shape, is_comparison(op) ? DType::Bool : dtype);
                         b.binary(op, a, b_in, out);
                         return Outputs{out};
                       });
        }
      }
    }
}

TEST_F(ReferenceKernels, WhereAndMaskedFill) {
  for (DType dtype : kAllTypes)
    for (const Shape& shape : {Shape{3, 5}, Shape{2, 4, 3}, Shape{0, 2}}) {
      const auto xs = layouts(shape, dtype), masks = layouts(shape, DType::Bool);
      for (size_t i = 0; i < xs.size(); ++i) {
        const Tensor& x = xs[i].second;
        const Tensor& mask = masks[(i + 2) % masks.size()].second;
        const Tensor other = random(shape, dtype);
        expect_agree("where/masked_fill " + label(shape, dtype, xs[i].first), [&](Backend& b) {
          Tensor chosen = empty(shape, dtype), filled = empty(shape, dtype);
          b.where(mask, x, other, chosen);
          b.masked_fill(x, mask, -2.0, filled);
          return Outputs{chosen, filled};
        });
      }
    }
}

// ---------------------------------------------------------------- reductions

TEST_F(ReferenceKernels, SumToEveryPatternOfReducedDims) {
  for (DType dtype : kAllTypes)
    for (const Shape& shape : {Shape{7}, Shape{3, 5}, Shape{2, 3, 5}, Shape{4, 0, 3}, Shape{33, 17}})
      for (const auto& [name, x] : layouts(shape, dtype))
        for (int64_t pattern = 0; pattern < (int64_t(1) << shape.size()); ++pattern)
          for (size_t dropped = 0; dropped <= shape.size(); ++dropped) {
            Shape target;  // dims in `pattern` reduced to size 1; the first `dropped` of them removed
            for (size_t d = 0; d < shape.size(); ++d) {
              const bool reduced = (pattern >> d) & 1;
              if (d < dropped && !reduced) break;
              if (d >= dropped) target.push_back(reduced ? 1 : shape[d]);
            }
            if (target.size() + dropped != shape.size()) continue;
            expect_agree(fmt::format("sum_to {} of {}", Tensor(empty(target)).shape_str(), label(shape, dtype, name)),
                         [&](Backend& b) {
                           Tensor out = empty(target, dtype == DType::Bool ? DType::Bool : dtype);
                           b.sum_to(x, out);
                           return Outputs{out};
                         });
          }
}

TEST_F(ReferenceKernels, MaxAlongEachDimWithTiesAndNaN) {
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int64})
    for (const Shape& shape : {Shape{7}, Shape{3, 5}, Shape{2, 3, 5}})
      for (auto [name, x] : layouts(shape, dtype)) {
        if (is_floating(dtype)) x = x.contiguous().masked_fill(random(shape, DType::Float32) > 1.5, NAN);
        else x = x.contiguous().masked_fill(random(shape, DType::Bool), 4.0);  // ties: the first wins
        for (int64_t dim = 0; dim < int64_t(shape.size()); ++dim)
          expect_agree(fmt::format("max_dim {} of {}", dim, label(shape, dtype, name)), [&](Backend& b) {
            Shape kept = shape;
            kept[size_t(dim)] = 1;
            Tensor values = empty(kept, dtype), indices = empty(kept, DType::Int64);
            b.max_dim(x, dim, values, indices);
            return Outputs{values, indices};
          });
      }
}

TEST_F(ReferenceKernels, VarianceStandardDeviationAndNorm) {
  for (DType dtype : kFloats)
    for (const Shape& shape : {Shape{1, 7}, Shape{4, 33}, Shape{3, 1}, Shape{1, 0}}) {
      const Tensor x = random(shape, dtype) * 3.0 + 1.0;
      for (double correction : {0.0, 1.0})
        for (bool take_sqrt : {false, true})
          expect_agree(fmt::format("var {} correction {} sqrt {}", x.shape_str(), correction, take_sqrt),
                       [&](Backend& b) {
                         Tensor rows = empty({shape[0]}, dtype), norm = empty({}, dtype);
                         b.var(x, correction, take_sqrt, shape[0] == 1, rows);
                         b.norm2(x, norm);
                         return Outputs{rows, norm};
                       });
    }
  // the norms of several tensors in one call (the base class's loop on the reference kernels, the CPU's threads)
  for (DType dtype : kFloats) {
    const std::vector<Tensor> xs = {random({4, 33}, dtype), random({1, 0}, dtype), random({70000}, dtype) * 3.0};
    expect_agree(fmt::format("norm2_each {}", dtype_name(dtype)), [&](Backend& b) {
      Tensor norms = empty({3}, dtype);
      b.norm2_each(xs, norms);
      return Outputs{norms};
    });
  }
}

// ---------------------------------------------------------------- products

TEST_F(ReferenceKernels, MatmulAndAddmmOnTransposedSlicedAndBroadcastOperands) {
  for (DType dtype : kFloats)
    for (const Shape& mkn : {Shape{1, 1, 1}, Shape{3, 5, 7}, Shape{17, 33, 9}, Shape{0, 4, 3}, Shape{4, 0, 3},
                             Shape{5, 3, 0}, Shape{8, 24, 24}})
      for (const Shape& batch : {Shape{}, Shape{3}, Shape{2, 2}}) {
        auto with = [&](int64_t r, int64_t c) { Shape s = batch; s.push_back(r); s.push_back(c); return s; };
        const int64_t M = mkn[0], K = mkn[1], N = mkn[2];
        const auto as = layouts(with(M, K), dtype), bs = layouts(with(K, N), dtype);
        for (size_t i = 0; i < as.size(); ++i) {
          const Tensor& a = as[i].second;
          const Tensor& bm = bs[(i + 1) % bs.size()].second;
          expect_agree("matmul " + label(with(M, K), dtype, as[i].first) + " @ " + bs[(i + 1) % bs.size()].first,
                       [&](Backend& b) {
                         Tensor out = empty(with(M, N), dtype);
                         b.matmul(a, bm, out);
                         return Outputs{out};
                       });
          if (!batch.empty()) continue;
          const Tensor bias = random({N}, dtype);
          expect_agree("addmm " + label(with(M, K), dtype, as[i].first), [&](Backend& b) {
            Tensor out = empty({M, N}, dtype);
            b.addmm(bias, a, bm, out);
            return Outputs{out};
          });
        }
      }
}

TEST_F(ReferenceKernels, TheCausalEntries) {
  for (DType dtype : kFloats)
    for (int64_t t : {1, 5, 17, 33}) {
      const Tensor a = random({2, t, 7}, dtype), bt = random({2, 7, t}, dtype);
      const Tensor lower = random({2, t, t}, dtype).tril(), full = random({2, t, t}, dtype);
      expect_agree(fmt::format("causal entries t={} {}", t, dtype_name(dtype)), [&](Backend& b) {
        Tensor scores = empty({2, t, t}, dtype), scaled = empty({2, t, t}, dtype);
        b.causal_product(a, bt, scores, 2.5, -INFINITY);
        b.causal_scale(scaled, full, 3.0, -7.0);
        Tensor below = empty({2, t, t}, dtype), from_lower = empty({2, t, 7}, dtype);
        b.matmul_structured(a, bt, below, MatmulStructure::lower_c);
        b.matmul_structured(lower, a, from_lower, MatmulStructure::lower_a);
        const double zeros_lower = b.zero_above_diagonal(lower), zeros_full = b.zero_above_diagonal(full);
        // (above the diagonal `below` holds whatever the memory held: only its lower half is compared)
        return Outputs{scores, scaled, below.masked_fill(ones({t, t}, DType::Bool).triu(1), 0.0), from_lower,
                       from_vector(std::vector<double>{zeros_lower, zeros_full}, {2})};
      });
    }
}

TEST_F(ReferenceKernels, FlashAttentionForwardAndBackward) {
  for (DType dtype : kFloats)
    for (bool causal : {false, true})
      for (const Shape& tsd : {Shape{1, 1, 1}, Shape{5, 5, 3}, Shape{7, 13, 4}, Shape{33, 33, 8}, Shape{3, 0, 2}}) {
        const int64_t T = tsd[0], S = tsd[1], d = tsd[2], dv = d + 1;
        const Tensor q = random({2, 2, T, d}, dtype), k = random({2, 1, S, d}, dtype).expand({2, 2, S, d});
        const Tensor v = random({2, 2, S, 2 * dv}, dtype).slice(-1, 0, dv);  // rows with a stride past them
        const Tensor g = random({2, 2, T, dv}, dtype);
        expect_agree(fmt::format("flash attention T={} S={} d={} causal {} {}", T, S, d, causal, dtype_name(dtype)),
                     [&](Backend& b) {
                       Tensor out = empty({2, 2, T, dv}, dtype), lse = empty({2, 2, T}, dtype);
                       b.flash_attention(q, k, v, causal, 0.7, out, lse);
                       Tensor dq = empty(q.shape(), dtype), dk = empty(k.shape(), dtype), dvv = empty(v.shape(), dtype);
                       b.flash_attention_backward(q, k, v, out, lse, g, causal, 0.7, dq, dk, dvv);
                       return Outputs{out, lse, dq, dk, dvv};
                     });
      }
}

// ---------------------------------------------------------------- softmax

TEST_F(ReferenceKernels, SoftmaxAndLogSoftmaxAlongEachDim) {
  for (DType dtype : kFloats)
    for (const Shape& shape : {Shape{7}, Shape{3, 5}, Shape{2, 9, 17}, Shape{4, 0}, Shape{2, 33}})
      for (bool log : {false, true})
        for (auto [name, x] : layouts(shape, dtype)) {
          x = x.masked_fill(random(shape, DType::Float32) > 1.0, -INFINITY);  // masked scores
          for (int64_t dim = 0; dim < int64_t(shape.size()); ++dim)
            expect_agree(fmt::format("{} dim {} of {}", log ? "log_softmax" : "softmax", dim, label(shape, dtype, name)),
                         [&](Backend& b) {
                           Tensor y = empty(shape, dtype);
                           b.softmax(x, dim, log, y);
                           return Outputs{y};
                         });
        }
}

TEST_F(ReferenceKernels, SoftmaxBackward) {
  for (DType dtype : kFloats)
    for (const Shape& shape : {Shape{7}, Shape{3, 5}, Shape{2, 9, 17}, Shape{4, 0}, Shape{2, 33}})
      for (bool log : {false, true})
        for (int64_t dim = 0; dim < int64_t(shape.size()); ++dim) {
          Tensor y = empty(shape, dtype);
          cpu::cpu_backend().softmax(random(shape, dtype), dim, log, y);
          const Tensor g = random(shape, dtype);
          expect_agree(fmt::format("{} backward dim {} of {}", log ? "log_softmax" : "softmax", dim,
                                   label(shape, dtype, "contiguous")),
                       [&](Backend& b) {
                         Tensor gx = empty(shape, dtype);
                         b.softmax_backward(y, g, dim, log, gx);
                         return Outputs{gx};
                       });
        }
}

// ---------------------------------------------------------------- rows by index, the loss

TEST_F(ReferenceKernels, EmbeddingRowsGatherScatterAndTheIndexCheck) {
  for (DType dtype : kAllTypes)
    for (int64_t n : {0, 1, 7, 40}) {
      const Tensor index = randint(0, 5, {n});  // repeated indices: the backward adds them up
      for (const auto& [name, weight] : layouts({5, 3}, dtype))
        expect_agree(fmt::format("index_select_rows n={} of {}", n, label({5, 3}, dtype, name)), [&](Backend& b) {
          Tensor out = empty({n, 3}, dtype);
          b.index_select_rows(weight, index.reshape({n}), out);
          return Outputs{out};
        });
      if (dtype == DType::Bool) continue;
      const Tensor grad = random({n, 3}, dtype), start = random({5, 3}, dtype);
      const Tensor values = random({n, 5}, dtype), per_row = random({n}, dtype);
      expect_agree(fmt::format("index_add_rows, gather_rows, scatter_rows n={} {}", n, dtype_name(dtype)),
                   [&](Backend& b) {
                     Tensor added = start.clone(), picked = empty({n}, dtype), scattered = values.clone();
                     b.index_add_rows(grad, index, added);
                     b.gather_rows(values, index, /*skip=*/2, picked);
                     b.scatter_rows(per_row, index, /*skip=*/2, scattered);
                     const double outside = double(b.find_index_outside(index, 3, 4));
                     return Outputs{added, picked, scattered, from_vector(std::vector<double>{outside}, {1})};
                   });
    }
}

TEST_F(ReferenceKernels, NllLossWithIgnoredRows) {
  for (DType dtype : kFloats)
    for (int64_t n : {1, 7, 33, 300})
      for (int64_t ignore : {-100, 2}) {
        const Tensor log_probs = random({n, 5}, dtype) - 2.0, targets = randint(0, 5, {n});
        const Tensor grad = full({}, 1.5, dtype);
        expect_agree(fmt::format("nll_loss n={} ignore {} {}", n, ignore, dtype_name(dtype)), [&](Backend& b) {
          Tensor loss = empty({}, dtype), grad_in = zeros({n, 5}, dtype);
          const int64_t count = b.nll_loss(log_probs, targets, ignore, loss);
          b.nll_loss_backward(grad, targets, ignore, std::max<int64_t>(count, 1), grad_in);
          return Outputs{loss, grad_in, from_vector(std::vector<double>{double(count)}, {1})};
        });
      }
}

// ---------------------------------------------------------------- the GPT's kernels

TEST_F(ReferenceKernels, LayerNormForwardAndBackwardWithAndWithoutAffine) {
  for (DType dtype : kFloats)
    for (const Shape& mn : {Shape{1, 1}, Shape{3, 7}, Shape{16, 48}, Shape{5, 97}, Shape{0, 4}})
      for (bool affine : {false, true}) {
        const int64_t M = mn[0], N = mn[1];
        const Tensor x = random(mn, dtype) * 2.0 + 0.5, g = random(mn, dtype);
        const Tensor w = affine ? random({N}, dtype) : Tensor(), bias = affine ? random({N}, dtype) : Tensor();
        expect_agree(fmt::format("layer_norm {} affine {} {}", x.shape_str(), affine, dtype_name(dtype)),
                     [&](Backend& b) {
                       Tensor y = empty(mn, dtype), mean = empty({M}, dtype), rstd = empty({M}, dtype);
                       b.layer_norm(x, w, bias, 1e-5, y, mean, rstd);
                       Tensor gx = empty(mn, dtype), gw = affine ? empty({N}, dtype) : Tensor(),
                              gb = affine ? empty({N}, dtype) : Tensor();
                       b.layer_norm_backward(g, x, mean, rstd, w, gx, gw, gb);
                       Tensor only_gw = affine ? empty({N}, dtype) : Tensor();
                       b.layer_norm_backward(g, x, mean, rstd, w, Tensor(), only_gw, Tensor());
                       return Outputs{y, mean, rstd, gx, gw, gb, only_gw};
                     });
      }
}

TEST_F(ReferenceKernels, GeluBothFormsForwardAndBackward) {
  for (DType dtype : kFloats)
    for (bool tanh : {false, true})
      for (const Shape& shape : {Shape{7}, Shape{3, 33}, Shape{0, 3}})
        for (const auto& [name, x] : layouts(shape, dtype)) {
          const Tensor spread = x * 3.0, g = random(shape, dtype);
          expect_agree(fmt::format("gelu tanh {} {}", tanh, label(shape, dtype, name)), [&](Backend& b) {
            Tensor y = empty(shape, dtype), gx = empty(shape, dtype);
            b.gelu(spread, tanh, y);
            b.gelu_backward(g, spread, tanh, gx);
            return Outputs{y, gx};
          });
        }
}

TEST_F(ReferenceKernels, AdamAndAdamWOverThreeSteps) {
  for (DType dtype : kFloats)
    for (bool decoupled : {false, true})
      for (bool amsgrad : {false, true})
        for (double weight_decay : {0.0, 0.1}) {
          const Tensor param = random({5, 7}, dtype), m = random({5, 7}, dtype) * 0.1;
          const Tensor v = random({5, 7}, dtype).abs() * 0.1, vmax = v * 1.5;
          const std::vector<Tensor> grads = {random({5, 7}, dtype), random({5, 7}, dtype), random({5, 7}, dtype)};
          expect_agree(fmt::format("adam decoupled {} amsgrad {} wd {} {}", decoupled, amsgrad, weight_decay,
                                   dtype_name(dtype)),
                       [&](Backend& b) {
                         Tensor p = param.clone(), em = m.clone(), ev = v.clone(), emax = amsgrad ? vmax.clone() : Tensor();
                         for (int64_t step = 1; step <= 3; ++step)
                           b.adam_update(AdamStep{.lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                                                  .weight_decay = weight_decay, .amsgrad = amsgrad,
                                                  .decoupled_weight_decay = decoupled, .step = step,
                                                  .grad_scale = step == 2 ? 0.37 : 1.0},  // clipping fused
                                         p, grads[size_t(step - 1)], em, ev, emax);
                         return Outputs{p, em, ev, emax};
                       });
        }
}

// ---------------------------------------------------------------- the switch

TEST(KernelsSwitch, GuardSetAndParse) {
  const Kernels before = kernels();
  {
    KernelsGuard guard(Kernels::reference);
    EXPECT_EQ(kernels(), Kernels::reference);
    EXPECT_EQ(&backend(Device::cpu()), &reference::reference_backend());
    {
      KernelsGuard inner(Kernels::cpu);
      EXPECT_EQ(&backend(Device::cpu()), &cpu::cpu_backend());
    }
    EXPECT_EQ(kernels(), Kernels::reference);
  }
  EXPECT_EQ(kernels(), before);
  set_kernels(Kernels::reference);
  EXPECT_EQ(kernels(), Kernels::reference);
  set_kernels(before);
  EXPECT_EQ(parse_kernels("reference"), Kernels::reference);
  EXPECT_EQ(parse_kernels("cpu"), Kernels::cpu);
  EXPECT_STREQ(kernels_name(Kernels::reference), "reference");
  try {
    parse_kernels("fast", "--kernels");
    ADD_FAILURE() << "parse_kernels accepted 'fast'";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "--kernels: unknown kernels 'fast' (expected cpu or reference)");
  }
  EXPECT_THROW(set_kernels(Kernels(7)), std::invalid_argument);
}

// A tensor made under one set of kernels is used and freed under the other: memory is the CPU's.
TEST(KernelsSwitch, TensorsCrossTheSwitch) {
  Tensor made_by_cpu = randn({4, 6});
  Tensor made_by_reference;
  {
    KernelsGuard guard(Kernels::reference);
    made_by_reference = made_by_cpu.matmul(made_by_cpu.t()).relu();
    Tensor freed_here = made_by_cpu * 2.0;
  }
  EXPECT_TRUE(allclose(made_by_reference, made_by_cpu.matmul(made_by_cpu.t()).relu(), 1e-5, 1e-6));
}

// The gradients the engine computes on the reference kernels are the CPU's, through a small network.
TEST(KernelsSwitch, BackwardThroughAModelAgrees) {
  manual_seed(5);
  const Tensor x = randn({6, 10}), w = randn({10, 8}), target = randint(0, 8, {6});
  auto gradient = [&](Kernels choice) {
    KernelsGuard guard(choice);
    Tensor leaf = w.detach().requires_grad_();
    Tensor h = gelu(matmul(x, leaf), "tanh");
    Tensor loss = cross_entropy(layer_norm(h, {8}), target);
    loss.backward();
    return leaf.grad();
  };
  EXPECT_TRUE(allclose(gradient(Kernels::reference), gradient(Kernels::cpu), 1e-4, 1e-6));
}

}  // namespace
