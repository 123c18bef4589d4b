// test_flash_attention.cpp — scaled_dot_product_attention (autograd/ops/flash_attention.cpp, the CPU
// kernel in autograd/cpu/kernels/flash_attention.cpp): FlashAttention's online softmax and recomputing backward
// against the composed ops (causal_scores/softmax/tril_matmul and the dense masked composition) and
// against PyTorch (fixtures/attention/sdpa.txt, tests/reference/make_attention_fixtures.py), in both
// numerics, float64 and float32; gradcheck; the same bits on any number of threads; what the node keeps
// for backward (O(T·d), no [T, T] tensor); and the refused inputs.
//
// The op is not bit-exact with the composed ops (another order of additions, a multiply by 1/√d instead
// of a division by √d), so the comparisons are within tolerances: relative to the largest value of the
// reference, 1e-13 in float64 and 2e-6 in float32 for outputs, a little more for gradients.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "autograd/cpu/runtime/buffer_cache.h"
#include "autograd/inspect/gradcheck.h"
#include "autograd/cpu/runtime/runtime.h"
#include "nn/nn.h"
#include "test_helpers.h"

using namespace autograd;
using testing_helpers::randish;

namespace {

const double kInf = std::numeric_limits<double>::infinity();
const Numerics kBothNumerics[] = {Numerics::exact, Numerics::fast};

// The definitions the op stands for, with the ordinary ops.
// Dense: the masked composition of PyTorch 2's documentation (the mask aligned to the top left).
Tensor dense_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale) {
  Tensor scores = matmul(q, k.mT()) * scale;
  if (causal) scores = scores.masked_fill(ones({q.size(-2), k.size(-2)}, DType::Bool).triu(1), -kInf);
  return matmul(softmax(scores, -1), v);
}
// What the char model runs past 32 positions: causal, T == S.
Tensor blocked_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale) {
  return tril_matmul(softmax(causal_scores(q, k, 1.0 / scale), -1), v);
}

// max |a − b| / max(1, max |b|): a norm-wise relative difference (values here are O(1)).
double relative_difference(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(shape_to_string(a.shape()), shape_to_string(b.shape()));
  const std::vector<double> x = a.contiguous().to_vector<double>(), y = b.contiguous().to_vector<double>();
  double diff = 0, scale = 1;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    diff = std::max(diff, std::abs(x[i] - y[i]));
    if (std::isnan(x[i]) != std::isnan(y[i])) diff = kInf;
    scale = std::max(scale, std::abs(y[i]));
  }
  return diff / scale;
}

double output_tolerance(DType dtype) { return dtype == DType::Float64 ? 1e-13 : 2e-6; }
double gradient_tolerance(DType dtype) { return dtype == DType::Float64 ? 1e-12 : 2e-5; }

struct Results {
  Tensor out, dq, dk, dv;
};

// Output and gradients of `attention` for fresh leaves with q0, k0, v0's values and layout, for grad_out g.
template <typename F> Results run(F attention, const Tensor& q0, const Tensor& k0, const Tensor& v0, const Tensor& g) {
  Tensor q = q0.detach().requires_grad_(), k = k0.detach().requires_grad_(), v = v0.detach().requires_grad_();
  Tensor out = attention(q, k, v);
  out.backward(g);
  return {out.detach(), q.grad(), k.grad(), v.grad()};
}

void expect_close(const Results& got, const Results& want, DType dtype, const std::string& what) {
  EXPECT_LE(relative_difference(got.out, want.out), output_tolerance(dtype)) << what << ": output";
  EXPECT_LE(relative_difference(got.dq, want.dq), gradient_tolerance(dtype)) << what << ": dq";
  EXPECT_LE(relative_difference(got.dk, want.dk), gradient_tolerance(dtype)) << what << ": dk";
  EXPECT_LE(relative_difference(got.dv, want.dv), gradient_tolerance(dtype)) << what << ": dv";
}

void expect_same_bits(const Results& a, const Results& b, const std::string& what) {
  EXPECT_TRUE(equal(a.out, b.out)) << what << ": output";
  EXPECT_TRUE(equal(a.dq, b.dq)) << what << ": dq";
  EXPECT_TRUE(equal(a.dk, b.dk)) << what << ": dk";
  EXPECT_TRUE(equal(a.dv, b.dv)) << what << ": dv";
}

// The op against the dense composition for q [..., T, d], k [..., S, d], v [..., S, dv] given as values
// (any layout), in both numerics; the composition runs in float64 on the same values, so a float32 run is
// measured against the true value, not against float32's other rounding.
void expect_matches_composition(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                                const std::string& what, std::optional<double> scale = std::nullopt) {
  const double s = scale.value_or(1.0 / std::sqrt(double(q.size(-1))));
  Shape out_shape = broadcast_shapes(Shape(q.shape().begin(), q.shape().end() - 2),
                                     Shape(v.shape().begin(), v.shape().end() - 2), "test");
  out_shape.push_back(q.size(-2));
  out_shape.push_back(v.size(-1));
  const Tensor g = randish(out_shape, 99, -1, 1, q.dtype());
  auto f64 = [](const Tensor& t) { return t.to(DType::Float64); };
  const Results want = run([&](auto& a, auto& b, auto& c) { return dense_attention(a, b, c, causal, s); }, f64(q),
                           f64(k), f64(v), f64(g));
  for (Numerics n : kBothNumerics) {
    NumericsGuard guard(n);
    const Results got = run([&](auto& a, auto& b, auto& c) { return scaled_dot_product_attention(a, b, c, causal, scale); },
                            q, k, v, g);
    expect_close(got, want, q.dtype(), what + " " + std::string(dtype_name(q.dtype())) + " " + numerics_name(n));
  }
}

// q, k, v of shapes [..., T, d] (v [..., T, dv]) with values in [-1, 1), as float64 or float32.
struct Qkv {
  Tensor q, k, v;
};
Qkv make_qkv(const Shape& batch, int64_t t, int64_t s, int64_t d, int64_t dv, DType dtype, uint32_t seed) {
  auto shape = [&](int64_t rows, int64_t cols) {
    Shape sh = batch;
    sh.push_back(rows);
    sh.push_back(cols);
    return sh;
  };
  return {randish(shape(t, d), seed, -1, 1, dtype), randish(shape(s, d), seed + 1, -1, 1, dtype),
          randish(shape(s, dv), seed + 2, -1, 1, dtype)};
}

TEST(FlashAttention, CausalMatchesTheDenseComposition) {
  // T within a block, exactly one, one past; several blocks with T not a multiple of the block (64); T 1
  // and d 1; batched heads [B, H, T, d]; dv != d.
  struct Case {
    Shape batch;
    int64_t t, d, dv;
  };
  const Case cases[] = {{{}, 1, 1, 1},   {{}, 1, 5, 3},       {{}, 6, 1, 1},       {{}, 5, 3, 4},
                        {{2}, 63, 8, 8}, {{2}, 64, 8, 8},     {{2}, 65, 8, 5},     {{}, 130, 16, 16},
                        {{2, 3}, 70, 8, 8}, {{1, 2}, 200, 4, 4}, {{}, 129, 1, 1}};
  uint32_t seed = 1;
  for (DType dtype : {DType::Float64, DType::Float32})
    for (const Case& c : cases) {
      const Qkv x = make_qkv(c.batch, c.t, c.t, c.d, c.dv, dtype, seed += 3);
      expect_matches_composition(x.q, x.k, x.v, true,
                                 fmt::format("batch {} T {} d {} dv {}", shape_to_string(c.batch), c.t, c.d, c.dv));
    }
}

TEST(FlashAttention, CausalMatchesCausalScoresSoftmaxTrilMatmul) {
  for (DType dtype : {DType::Float64, DType::Float32}) {
    const Qkv x = make_qkv({2, 2}, 100, 100, 8, 8, dtype, 40);
    const Tensor g = randish({2, 2, 100, 8}, 41, -1, 1, dtype);
    const double s = 1.0 / std::sqrt(8.0);
    NumericsGuard exact(Numerics::exact);
    const Results want = run([&](auto& a, auto& b, auto& c) { return blocked_attention(a, b, c, s); }, x.q, x.k, x.v, g);
    for (Numerics n : kBothNumerics) {
      NumericsGuard guard(n);
      const Results got = run([](auto& a, auto& b, auto& c) { return scaled_dot_product_attention(a, b, c, true); },
                              x.q, x.k, x.v, g);
      // both round in dtype: twice the tolerance of one against the true value
      EXPECT_LE(relative_difference(got.out, want.out), 2 * output_tolerance(dtype)) << numerics_name(n);
      EXPECT_LE(relative_difference(got.dq, want.dq), 2 * gradient_tolerance(dtype)) << numerics_name(n);
      EXPECT_LE(relative_difference(got.dk, want.dk), 2 * gradient_tolerance(dtype)) << numerics_name(n);
      EXPECT_LE(relative_difference(got.dv, want.dv), 2 * gradient_tolerance(dtype)) << numerics_name(n);
    }
  }
}

TEST(FlashAttention, FullAndRectangularMatchTheComposition) {
  for (DType dtype : {DType::Float64, DType::Float32}) {
    Qkv x = make_qkv({2}, 9, 70, 4, 5, dtype, 50);  // fewer queries than keys, keys over two blocks
    expect_matches_composition(x.q, x.k, x.v, false, "full T 9 S 70");
    expect_matches_composition(x.q, x.k, x.v, true, "causal T 9 S 70");
    x = make_qkv({2}, 130, 7, 4, 3, dtype, 53);  // more queries than keys: rows past S see every key
    expect_matches_composition(x.q, x.k, x.v, false, "full T 130 S 7");
    expect_matches_composition(x.q, x.k, x.v, true, "causal T 130 S 7");
    x = make_qkv({3}, 20, 20, 6, 6, dtype, 56);
    expect_matches_composition(x.q, x.k, x.v, false, "full, scale 0.3", 0.3);
    expect_matches_composition(x.q, x.k, x.v, true, "causal, scale 3 (a peaked softmax)", 3.0);
  }
}

TEST(FlashAttention, NonContiguousAndBroadcastInputs) {
  for (DType dtype : {DType::Float64, DType::Float32}) {
    // The multi-head layout: [B, T, H, hd] viewed as [B, H, T, hd] (rows strided by H·hd).
    auto heads = [&](uint32_t seed) { return randish({2, 70, 3, 4}, seed, -1, 1, dtype).transpose(1, 2); };
    expect_matches_composition(heads(60), heads(61), heads(62), true, "transposed heads");
    // Column-major q and a k whose rows are every other value (no unit stride: copied for the kernel).
    Tensor q = randish({2, 8, 66}, 63, -1, 1, dtype).mT();
    Tensor k = randish({2, 66, 16}, 64, -1, 1, dtype).slice(2, 0, std::nullopt, 2);
    Tensor v = randish({2, 66, 5}, 65, -1, 1, dtype);
    EXPECT_FALSE(q.is_contiguous());
    EXPECT_FALSE(k.is_contiguous());
    expect_matches_composition(q, k, v, true, "column-major q, strided k");
    // Broadcast batch dims: one k/v for every batch item, and a size-1 dim against 2.
    Qkv x = make_qkv({2, 3}, 40, 40, 4, 4, dtype, 66);
    expect_matches_composition(x.q, x.k.select(0, 0), x.v.slice(0, 0, 1), true, "broadcast k and v");
    expect_matches_composition(x.q.slice(0, 0, 1), x.k, x.v, false, "broadcast q");
    expect_matches_composition(x.q.select(0, 0).select(0, 0), x.k.select(0, 0).select(0, 0), x.v, true,
                               "2-D q and k against batched v");
  }
}

TEST(FlashAttention, EmptyKeysGiveZerosAndEmptyQueriesGiveNothing) {
  Tensor q = randish({3, 4}, 70).requires_grad_(), k = randish({0, 4}, 71).requires_grad_();
  Tensor v = randish({0, 2}, 72).requires_grad_();
  Tensor out = scaled_dot_product_attention(q, k, v);
  EXPECT_TRUE(equal(out, zeros({3, 2}, DType::Float64)));  // softmax(q kᵀ) @ v with no keys: the empty sum
  out.sum().backward();
  EXPECT_TRUE(equal(q.grad(), zeros({3, 4}, DType::Float64)));
  EXPECT_EQ(shape_to_string(scaled_dot_product_attention(randish({0, 4}, 73), randish({5, 4}, 74), randish({5, 2}, 75), true)
                                .shape()),
            "[0, 2]");
}

// ---------------------------------------------------------------- against PyTorch

struct FixtureCase {
  std::string name;
  bool causal = false;
  std::optional<double> scale;
  std::map<std::string, testing_helpers::Recorded> tensors;  // "q", "k", "v", "out", "grad_out", "dq", ...
};

std::vector<FixtureCase> read_fixture() {
  const std::string path = std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/reference/fixtures/attention/sdpa.txt";
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::vector<FixtureCase> cases;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string kind;
    words >> kind;
    if (kind == "case") {
      FixtureCase c;
      std::string scale;
      int causal = 0;
      words >> c.name >> causal >> scale;
      c.causal = causal != 0;
      if (scale != "default") c.scale = std::strtod(scale.c_str(), nullptr);
      cases.push_back(c);
    } else if (kind == "tensor") {
      testing_helpers::Recorded r = testing_helpers::read_recorded(words, kind, line);
      const std::string field = r.name.substr(r.name.find('.') + 1);
      cases.back().tensors[field] = r;
    }
  }
  return cases;
}

TEST(FlashAttention, MatchesPyTorchFloat64) {
  const std::vector<FixtureCase> cases = read_fixture();
  ASSERT_EQ(cases.size(), 11u);
  for (const FixtureCase& c : cases) {
    auto get = [&](const std::string& name) { return c.tensors.at(name).tensor(DType::Float64); };
    for (Numerics n : kBothNumerics) {
      NumericsGuard guard(n);
      const std::string what = c.name + " " + numerics_name(n);
      Tensor q = get("q").requires_grad_(), k = get("k").requires_grad_(), v = get("v").requires_grad_();
      Tensor out = scaled_dot_product_attention(q, k, v, c.causal, c.scale);
      EXPECT_LE(relative_difference(out, get("out")), 1e-14) << what;
      if (!c.tensors.count("grad_out")) continue;
      out.backward(get("grad_out"));
      EXPECT_LE(relative_difference(q.grad(), get("dq")), 1e-13) << what << ": dq";
      EXPECT_LE(relative_difference(k.grad(), get("dk")), 1e-13) << what << ": dk";
      EXPECT_LE(relative_difference(v.grad(), get("dv")), 1e-13) << what << ": dv";
    }
  }
}

TEST(FlashAttention, MatchesPyTorchFloat32) {
  for (const FixtureCase& c : read_fixture()) {
    auto get = [&](const std::string& name) { return c.tensors.at(name).tensor(DType::Float32); };
    for (Numerics n : kBothNumerics) {
      NumericsGuard guard(n);
      // float32 inputs are the float64 ones rounded: the reference differs from their true result by
      // about that rounding too, hence the looser bound
      Tensor out = scaled_dot_product_attention(get("q"), get("k"), get("v"), c.causal, c.scale);
      EXPECT_LE(relative_difference(out, c.tensors.at("out").tensor(DType::Float64)), 2e-6)
          << c.name << " " << numerics_name(n);
    }
  }
}

// ---------------------------------------------------------------- gradients

TEST(FlashAttention, GradcheckInBothNumerics) {
  using testing_helpers::leaf;
  using testing_helpers::sliced_leaf;
  using testing_helpers::transposed_leaf;
  for (Numerics n : kBothNumerics) {
    NumericsGuard guard(n);
    SCOPED_TRACE(numerics_name(n));
    for (bool causal : {true, false}) {
      SCOPED_TRACE(causal ? "causal" : "full");
      auto f = [causal](const std::vector<Tensor>& in) { return scaled_dot_product_attention(in[0], in[1], in[2], causal); };
      // contiguous, two key blocks, T not a multiple of the block
      EXPECT_GRADCHECK(f, {leaf({70, 3}, 1), leaf({70, 3}, 2), leaf({70, 2}, 3)});
      // batched heads, T != S
      EXPECT_GRADCHECK(f, {leaf({2, 5, 3}, 4), leaf({2, 9, 3}, 5), leaf({2, 9, 4}, 6)});
      // non-contiguous: transposed q, strided k and v
      EXPECT_GRADCHECK(f, {transposed_leaf({2, 67, 3}, 7), sliced_leaf({2, 67, 3}, 8), transposed_leaf({2, 67, 2}, 9)});
      // broadcast batch: k and v shared by both batch items
      EXPECT_GRADCHECK(f, {leaf({2, 6, 3}, 10), leaf({6, 3}, 11), leaf({1, 6, 2}, 12)});
    }
    auto scaled = [](const std::vector<Tensor>& in) { return scaled_dot_product_attention(in[0], in[1], in[2], true, 2.5); };
    EXPECT_GRADCHECK(scaled, {leaf({12, 3}, 13), leaf({12, 3}, 14), leaf({12, 3}, 15)});
  }
}

TEST(FlashAttention, SameBitsOnAnyNumberOfThreads) {
  // One head (the backward splits it in two passes across threads) and four heads (one pass per head).
  // Big enough to be split: the kernels run threads above 2^18 multiply-adds.
  const int previous = get_num_threads();
  for (const Shape& batch : {Shape{1}, Shape{4}}) {
    for (Numerics n : kBothNumerics) {
      NumericsGuard guard(n);
      const Qkv x = make_qkv(batch, 300, 300, 32, 32, DType::Float32, 80);
      const Tensor g = randish(Shape{batch[0], 300, 32}, 81, -1, 1, DType::Float32);
      auto attention = [](auto& a, auto& b, auto& c) { return scaled_dot_product_attention(a, b, c, true); };
      set_num_threads(1);
      const Results one = run(attention, x.q, x.k, x.v, g);
      set_num_threads(2);
      const Results two = run(attention, x.q, x.k, x.v, g);
      set_num_threads(3);
      const Results three = run(attention, x.q, x.k, x.v, g);
      const std::string what = fmt::format("{} heads, {}", batch[0], numerics_name(n));
      expect_same_bits(two, one, what + ", 2 threads");
      expect_same_bits(three, one, what + ", 3 threads");
    }
  }
  set_num_threads(previous);
}

TEST(FlashAttention, FastNumericsFuseAndExactDoNot) {
  // Same inputs, both numerics: within rounding of each other, and (on a CPU with FMA, where fast has
  // kernels of its own) not the same bits — the fused multiply-adds did run.
  const Qkv x = make_qkv({2}, 100, 100, 20, 13, DType::Float32, 85);
  const Tensor g = randish({2, 100, 13}, 86, -1, 1, DType::Float32);
  auto attention = [](auto& a, auto& b, auto& c) { return scaled_dot_product_attention(a, b, c, true); };
  Results exact, fast;
  {
    NumericsGuard guard(Numerics::exact);
    exact = run(attention, x.q, x.k, x.v, g);
  }
  {
    NumericsGuard guard(Numerics::fast);
    fast = run(attention, x.q, x.k, x.v, g);
  }
  expect_close(fast, exact, DType::Float32, "fast against exact");
  // the fast kernels fuse where they have an FMA build (AVX2 + FMA); elsewhere fast numerics run the exact ones
  if (cpu::has_avx2() && cpu::has_fma()) {
    EXPECT_FALSE(equal(fast.out, exact.out));
    EXPECT_FALSE(equal(fast.dq, exact.dq));
  }
}

TEST(FlashAttention, EveryOutputEntryIsWritten) {
  // Outputs start as NaN bytes here: an entry the kernels forgot would show.
  cpu::set_poison_allocations(true);
  const Qkv x = make_qkv({2}, 131, 131, 5, 3, DType::Float32, 90);
  Results r = run([](auto& a, auto& b, auto& c) { return scaled_dot_product_attention(a, b, c, true); }, x.q, x.k, x.v,
                  randish({2, 131, 3}, 91, -1, 1, DType::Float32));
  cpu::set_poison_allocations(false);
  for (const Tensor* t : {&r.out, &r.dq, &r.dk, &r.dv})
    for (float value : t->to_vector<float>()) ASSERT_FALSE(std::isnan(value));
}

// ---------------------------------------------------------------- memory

// What the node keeps for backward: q, k, v, the output and lse — O(T·d) per head — and no [T, T] tensor.
// (The composition keeps the [T, T] probabilities: checked too, so the test shows the difference.)
size_t saved_bytes(const Tensor& out) {
  size_t total = 0;
  for (const SavedVersion& s : out.grad_fn()->saved) total += s.storage->nbytes;
  return total;
}

TEST(FlashAttention, SavesOnlyTdStateForBackward) {
  const int64_t B = 2, T = 512, d = 16;
  Qkv x = make_qkv({B}, T, T, d, d, DType::Float32, 100);
  Tensor q = x.q.requires_grad_(), k = x.k.requires_grad_(), v = x.v.requires_grad_();
  Tensor out = scaled_dot_product_attention(q, k, v, true);
  ASSERT_TRUE(out.grad_fn());
  EXPECT_STREQ(out.grad_fn()->name, "ScaledDotProductAttentionBackward");
  for (const Edge& e : out.grad_fn()->inputs) EXPECT_TRUE(e.leaf) << "one node: its edges go straight to q, k, v";
  const size_t per_head_row = sizeof(float) * (3 * d + d + 1);  // q, k, v, out rows and one lse value
  EXPECT_LE(saved_bytes(out), size_t(B * T) * per_head_row);
  for (const SavedVersion& s : out.grad_fn()->saved)
    EXPECT_LT(s.storage->nbytes, size_t(B * T * T) * sizeof(float) / 8) << "a saved tensor as big as the scores";

  // the composition: its softmax node keeps [B, T, T] probabilities
  Tensor composed = dense_attention(q, k, v, true, 0.25);
  size_t largest = 0;
  for (const SavedVersion& s : composed.grad_fn()->saved) largest = std::max(largest, s.storage->nbytes);
  EXPECT_GE(largest, size_t(B * T * T) * sizeof(float));
  out.sum().backward();  // and the backward runs with what was kept
  EXPECT_EQ(shape_to_string(q.grad().shape()), "[2, 512, 16]");
}

// ---------------------------------------------------------------- in the models

bool graph_has(const Tensor& out, const std::string& node) { return to_dot(out).find(node) != std::string::npos; }

// Output and every parameter's gradient for a sum-of-squares loss (any model, any input).
template <typename Model, typename Input> std::vector<Tensor> outputs_and_grads(Model& model, const Input& x) {
  model.zero_grad();
  Tensor out = model(x);
  (out * out).sum().backward();
  std::vector<Tensor> results{out.detach()};
  for (const Tensor& p : model.parameters()) results.push_back(p.grad().clone());
  return results;
}

void expect_close_lists(const std::vector<Tensor>& got, const std::vector<Tensor>& want, double tol,
                        const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_LE(relative_difference(got[i], want[i]), tol) << what << (i == 0 ? ": output" : ": gradient ") << i;
}

TEST(FlashAttentionModels, MultiHeadAttentionTakesTheFlashOpOnlyWhereAllowed) {
  manual_seed(5);
  nn::MultiHeadAttention att(16, 16, 256, /*dropout=*/0.0, /*num_heads=*/4);
  const Tensor long_x = randish({2, nn::kFlashAttentionAbove + 32, 16}, 110, -1, 1, DType::Float32);
  const Tensor short_x = randish({2, nn::kFlashAttentionAbove, 16}, 111, -1, 1, DType::Float32);
  const std::string flash = "ScaledDotProductAttentionBackward";
  {
    NumericsGuard fast(Numerics::fast);
    EXPECT_TRUE(graph_has(att(long_x), flash)) << "automatic, fast numerics, past kFlashAttentionAbove tokens";
    EXPECT_FALSE(graph_has(att(short_x), flash)) << "kFlashAttentionAbove tokens: the book's ops";
    att.attention = nn::AttentionKernel::composed;
    EXPECT_FALSE(graph_has(att(long_x), flash));
    att.attention = nn::AttentionKernel::flash;
    EXPECT_TRUE(graph_has(att(short_x), flash));
    att.attention = nn::AttentionKernel::automatic;
    // one head of 256: past kFlashAttentionAbove tokens but not past the head dim, where the composition
    // keeps less
    nn::MultiHeadAttention wide(16, 256, 300, 0.0, 1);
    EXPECT_FALSE(graph_has(wide(long_x), flash)) << long_x.size(1) << " tokens, a head of 256";
    EXPECT_TRUE(graph_has(wide(randish({1, 257, 16}, 112, -1, 1, DType::Float32)), flash)) << "257 tokens";
  }
  {
    NumericsGuard exact(Numerics::exact);
    EXPECT_FALSE(graph_has(att(long_x), flash)) << "exact numerics keep the book's ops (PyTorch's bits)";
  }
  // dropout on the weights: the book's ops while training, the flash op in eval(); flash itself refuses it
  NumericsGuard fast(Numerics::fast);
  nn::MultiHeadAttention dropping(16, 16, 256, 0.1, 4);
  EXPECT_FALSE(graph_has(dropping(long_x), flash));
  dropping.eval();
  EXPECT_TRUE(graph_has(dropping(long_x), flash));
}

TEST(FlashAttentionModels, MultiHeadAttentionAndGptAgreeWithTheComposedOps) {
  manual_seed(6);
  nn::MultiHeadAttention att(24, 24, 160, 0.0, 3);
  const Tensor x = randish({2, 150, 24}, 120, -1, 1, DType::Float32);
  for (Numerics n : kBothNumerics) {
    NumericsGuard guard(n);
    att.attention = nn::AttentionKernel::composed;
    const std::vector<Tensor> want = outputs_and_grads(att, x);
    att.attention = nn::AttentionKernel::flash;
    expect_close_lists(outputs_and_grads(att, x), want, 2e-5, std::string("MultiHeadAttention ") + numerics_name(n));
  }
  // a small GPT at 160 tokens: every block's attention through the flash op, the logits and gradients
  // within float32 rounding of the composed ops'
  manual_seed(7);
  nn::GPTModel gpt({.vocab_size = 11, .context_length = 160, .emb_dim = 16, .n_heads = 2, .n_layers = 2,
                    .drop_rate = 0.0});
  const Tensor ids = randint(0, 11, {2, 160});
  auto set = [&](nn::AttentionKernel kernel) {
    for (const auto& block : *gpt.trf_blocks) block->att->attention = kernel;
  };
  NumericsGuard fast(Numerics::fast);
  set(nn::AttentionKernel::composed);
  const std::vector<Tensor> want = outputs_and_grads(gpt, ids);
  set(nn::AttentionKernel::automatic);
  EXPECT_TRUE(graph_has(gpt(ids), "ScaledDotProductAttentionBackward"));
  expect_close_lists(outputs_and_grads(gpt, ids), want, 1e-4, "GPT");
}

TEST(FlashAttentionModels, CharModelAgreesWithTheComposedOps) {
  for (int64_t heads : {1, 4}) {
    manual_seed(8);
    nn::MiniSelfAttention model({.vocab = 13, .dim = 32, .context = 160, .heads = heads});
    const Tensor xb = randint(0, 13, {3, 160});
    NumericsGuard fast(Numerics::fast);
    EXPECT_TRUE(graph_has(model(xb), "ScaledDotProductAttentionBackward"));
    EXPECT_FALSE(graph_has(model(xb.slice(1, 0, nn::kFlashAttentionAbove)), "ScaledDotProductAttentionBackward"));
    model.attention = nn::AttentionKernel::composed;
    const std::vector<Tensor> want = outputs_and_grads(model, xb);
    model.attention = nn::AttentionKernel::flash;
    expect_close_lists(outputs_and_grads(model, xb), want, 2e-5, fmt::format("{} head(s)", heads));
  }
}

// ---------------------------------------------------------------- refused inputs

TEST(FlashAttentionErrors, BadInputsAreNamedErrors) {
  const Tensor q = randish({2, 5, 4}, 1), k = randish({2, 7, 4}, 2), v = randish({2, 7, 3}, 3);
  EXPECT_THROW_WITH(scaled_dot_product_attention(randish({4}, 1), k, v), std::invalid_argument,
                    "scaled_dot_product_attention", "at least 2 dims", "[4]");
  EXPECT_THROW_WITH(scaled_dot_product_attention(q, randish({2, 7, 5}, 2), v), std::invalid_argument,
                    "scaled_dot_product_attention", "differ in d", "[2, 5, 4]", "[2, 7, 5]");
  EXPECT_THROW_WITH(scaled_dot_product_attention(q, k, randish({2, 6, 3}, 3)), std::invalid_argument,
                    "scaled_dot_product_attention", "differ in S", "[2, 7, 4]", "[2, 6, 3]");
  EXPECT_THROW_WITH(scaled_dot_product_attention(randish({3, 5, 4}, 1), k, v), std::invalid_argument,
                    "scaled_dot_product_attention", "do not broadcast", "[3, 5, 4]", "[2, 7, 4]");
  EXPECT_THROW_WITH(scaled_dot_product_attention(q, k.to(DType::Float32), v), std::invalid_argument,
                    "scaled_dot_product_attention", "float64", "float32");
  EXPECT_THROW_WITH(scaled_dot_product_attention(q.to(DType::Int64), k, v), std::invalid_argument,
                    "scaled_dot_product_attention", "floating point", "int64");
  EXPECT_THROW_WITH(scaled_dot_product_attention(q, k, v, true, kInf), std::invalid_argument,
                    "scaled_dot_product_attention", "scale must be finite", "inf");
}

TEST(FlashAttentionErrors, FlashWithDropoutOnTheWeightsIsRefused) {
  manual_seed(5);
  nn::MultiHeadAttention att(16, 16, 128, /*dropout=*/0.1, /*num_heads=*/4);
  att.attention = nn::AttentionKernel::flash;
  EXPECT_THROW_WITH(att(randish({2, 100, 16}, 110, -1, 1, DType::Float32)), std::invalid_argument,
                    "attention kernel flash", "dropout", "eval()");
  att.eval();  // no dropout in eval mode: then it runs
  EXPECT_EQ(shape_to_string(att(randish({2, 100, 16}, 110, -1, 1, DType::Float32)).shape()), "[2, 100, 16]");
  EXPECT_THROW_WITH(nn::parse_attention_kernel("fast", "--attention"), std::invalid_argument, "--attention", "'fast'",
                    "automatic, composed or flash");
}

}  // namespace
