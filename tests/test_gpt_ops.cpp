// test_gpt_ops.cpp — the GPT's ops against PyTorch 1.13 (fixtures/gpt/ops.txt, float32, bit for bit),
// and their gradients against finite differences (float64) on plain, broadcast-like (weight/bias) and
// non-contiguous inputs.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <fmt/format.h>

#include "optim/clip.h"
#include "tests/gpt_fixtures.h"
#include "tests/test_helpers.h"

namespace {

using namespace autograd;
using gpt_fixtures::Recorded;
using gpt_fixtures::Section;
using testing_helpers::leaf;
using testing_helpers::sliced_leaf;
using testing_helpers::transposed_leaf;
using Inputs = std::vector<Tensor>;

const std::vector<Section>& ops_fixture() {
  static const std::vector<Section> sections = gpt_fixtures::read_sections("ops.txt");
  return sections;
}

std::vector<const Section*> cases_starting(const std::string& prefix) {
  std::vector<const Section*> out;
  for (const Section& s : ops_fixture())
    if (s.label.rfind(prefix, 0) == 0) out.push_back(&s);
  EXPECT_FALSE(out.empty()) << prefix;
  return out;
}

Tensor input(const Section& c, const std::string& name) { return c.get(name).tensor().requires_grad_(); }

// ---------------------------------------------------------------- layer_norm

TEST(GptOpsFixture, LayerNormForwardAndBackwardBitExact) {
  for (const Section* c : cases_starting("layer_norm_")) {
    const std::string what = c->label.substr(0, c->label.find(' '));
    const int64_t n = std::stoll(c->option("normalized_shape"));
    const double eps = std::stod(c->option("eps"));
    Tensor x = input(*c, "x");
    Tensor w = c->option("weight") == "yes" ? input(*c, "weight") : Tensor();
    Tensor b = c->option("bias") == "yes" ? input(*c, "bias") : Tensor();
    auto [y, mean, rstd] = native_layer_norm(x, {n}, w, b, eps);
    EXPECT_STREQ(y.grad_fn()->name, "NativeLayerNormBackward0");
    EXPECT_BITS(y, c->get("y"), what + " y");
    EXPECT_BITS(mean, c->get("mean"), what + " mean");
    EXPECT_BITS(rstd, c->get("rstd"), what + " rstd");
    y.backward(c->get("up").tensor());
    EXPECT_BITS(x.grad(), c->get("grad_x"), what + " grad_x");
    if (w.defined()) {
      EXPECT_BITS(w.grad(), c->get("grad_weight"), what + " grad_weight");
    }
    if (b.defined()) {
      EXPECT_BITS(b.grad(), c->get("grad_bias"), what + " grad_bias");
    }
  }
}

TEST(GptOpsGradcheck, LayerNorm) {
  // plain, with weight and bias (broadcast over the rows); 20 = two vectors and a tail
  EXPECT_GRADCHECK([](const Inputs& v) { return layer_norm(v[0], {20}, v[1], v[2], 1e-5); },
                   Inputs{leaf({3, 20}, 1, -2, 2), leaf({20}, 2), leaf({20}, 3)});
  // over two trailing dims, without affine parameters, and with a weight only
  EXPECT_GRADCHECK([](const Inputs& v) { return layer_norm(v[0], {3, 5}, Tensor(), Tensor(), 1e-3); },
                   Inputs{leaf({2, 3, 5}, 4)});
  EXPECT_GRADCHECK([](const Inputs& v) { return layer_norm(v[0], {7}, v[1], Tensor(), 1e-5); },
                   Inputs{leaf({4, 7}, 5), leaf({7}, 6)});
  // non-contiguous inputs: a transposed x, a strided weight
  EXPECT_GRADCHECK([](const Inputs& v) { return layer_norm(v[0], {6}, v[1], v[2], 1e-5); },
                   Inputs{transposed_leaf({5, 6}, 7), sliced_leaf({6}, 8), leaf({6}, 9)});
}

TEST(GptOpsErrors, LayerNormNamesTheShapes) {
  Tensor x = zeros({2, 5});
  EXPECT_THROW_WITH(layer_norm(x, {4}), std::invalid_argument, "layer_norm", "[4]", "[2, 5]");
  EXPECT_THROW_WITH(layer_norm(x, {5}, zeros({4})), std::invalid_argument, "layer_norm", "[5]", "[4]");
}

// ---------------------------------------------------------------- gelu

TEST(GptOpsFixture, GeluBitExact) {
  const Section& c = gpt_fixtures::find_section(ops_fixture(), "gelu");
  for (const std::string approximate : {"none", "tanh"}) {
    Tensor x = input(c, "x");
    Tensor y = gelu(x, approximate);
    EXPECT_STREQ(y.grad_fn()->name, "GeluBackward0");
    EXPECT_BITS(y, c.get("y_" + approximate), "gelu " + approximate);
    y.backward(c.get("dy").tensor());
    EXPECT_BITS(x.grad(), c.get("grad_x_" + approximate), "gelu backward " + approximate);
  }
}

TEST(GptOpsGradcheck, Gelu) {
  for (const std::string approximate : {"none", "tanh"}) {
    auto f = [approximate](const Inputs& v) { return gelu(v[0], approximate); };
    EXPECT_GRADCHECK(f, Inputs{leaf({3, 4}, 10, -3, 3)});
    EXPECT_GRADCHECK(f, Inputs{transposed_leaf({3, 4}, 11, -3, 3)});
    EXPECT_GRADCHECK(f, Inputs{sliced_leaf({5}, 12, -3, 3)});
  }
  EXPECT_THROW_WITH(gelu(zeros({2}), "fast"), std::invalid_argument, "gelu", "fast");
}

// ---------------------------------------------------------------- var / std

TEST(GptOpsFixture, VarStdBitExact) {
  for (const Section* c : cases_starting("var_std_")) {
    for (const std::string fn : {"var", "std"})
      for (const std::string dim : {"-1", "0", "all"})
        for (const std::string kind : {"unbiased", "biased"}) {
          const std::string name = fn + ".dim" + dim + "." + kind, what = c->label + " " + name;
          const bool unbiased = kind == "unbiased";
          Tensor x = input(*c, "x");
          Tensor r = dim == "all" ? (fn == "var" ? var(x, unbiased) : autograd::std(x, unbiased))
                                  : (fn == "var" ? var(x, std::stoll(dim), unbiased) : autograd::std(x, std::stoll(dim), unbiased));
          EXPECT_STREQ(r.grad_fn()->name, fn == "var" ? "VarBackward0" : "StdBackward0");
          EXPECT_BITS(r, c->get(name), what);
          r.backward(c->get(name + ".up").tensor());
          EXPECT_BITS(x.grad(), c->get(name + ".grad_x"), what + " grad_x");
        }
  }
}

TEST(GptOpsGradcheck, VarStd) {
  for (bool unbiased : {true, false}) {
    auto v0 = [unbiased](const Inputs& v) { return var(v[0], 0, unbiased); };
    auto v1 = [unbiased](const Inputs& v) { return var(v[0], -1, unbiased, true); };
    auto s1 = [unbiased](const Inputs& v) { return autograd::std(v[0], 1, unbiased); };
    auto va = [unbiased](const Inputs& v) { return var(v[0], unbiased); };
    auto sa = [unbiased](const Inputs& v) { return autograd::std(v[0], unbiased); };
    for (const Inputs& in : {Inputs{leaf({4, 5}, 20)}, Inputs{transposed_leaf({4, 5}, 21)}, Inputs{sliced_leaf({3, 5}, 22)}})
      for (const auto& f : std::vector<std::function<Tensor(const Inputs&)>>{v0, v1, s1, va, sa}) EXPECT_GRADCHECK(f, in);
  }
  // a 3-D input reduced along its middle dim
  EXPECT_GRADCHECK([](const Inputs& v) { return autograd::std(v[0], 1, true, true); }, Inputs{leaf({2, 3, 4}, 23)});
}

// ---------------------------------------------------------------- split / chunk

TEST(GptOpsFixture, SplitAndChunkPieces) {
  const Section& c = gpt_fixtures::find_section(ops_fixture(), "split_chunk");
  Tensor x = c.get("x").tensor();
  auto expect_pieces = [&](const std::vector<Tensor>& pieces, const std::string& prefix, size_t count) {
    ASSERT_EQ(pieces.size(), count) << prefix;
    for (size_t i = 0; i < count; ++i) EXPECT_BITS(pieces[i], c.get(prefix + "." + std::to_string(i)), prefix);
  };
  expect_pieces(split(x, 3, 1), "split3_dim1", 3);
  expect_pieces(split(x, std::vector<int64_t>{1, 4, 2}, 1), "split_1_4_2_dim1", 3);
  expect_pieces(chunk(x, 3, 1), "chunk3_dim1", 3);
  expect_pieces(chunk(x, 2, 0), "chunk2_dim0", 2);
  EXPECT_THROW_WITH(split(x, std::vector<int64_t>{1, 2}, 1), std::invalid_argument, "split", "[1, 2]", "[2, 7]");
  EXPECT_THROW_WITH(split(x, 0, 1), std::invalid_argument, "split", "[2, 7]");
}

TEST(GptOpsGradcheck, SplitAndChunk) {
  // every piece used with its own weight, so a misplaced gradient shows
  auto pieces_sum = [](const std::vector<Tensor>& pieces) {
    Tensor total = zeros({}, DType::Float64);
    for (size_t i = 0; i < pieces.size(); ++i) total = total + (pieces[i] * double(i + 1)).sum();
    return total;
  };
  for (const Tensor& x : {leaf({2, 7}, 30), transposed_leaf({2, 7}, 31)}) {
    EXPECT_GRADCHECK([&](const Inputs& v) { return pieces_sum(split(v[0], 3, 1)); }, Inputs{x});
    EXPECT_GRADCHECK([&](const Inputs& v) { return pieces_sum(split(v[0], std::vector<int64_t>{1, 4, 2}, -1)); }, Inputs{x});
    EXPECT_GRADCHECK([&](const Inputs& v) { return pieces_sum(chunk(v[0], 2, 0)); }, Inputs{x});
  }
}

// ---------------------------------------------------------------- the 2-norm and clip_grad_norm_

TEST(GptOpsFixture, Norm2BitExact) {
  for (const Section* c : cases_starting("norm2_")) EXPECT_BITS(vector_norm(c->get("x").tensor()), c->get("norm"), c->label);
}

TEST(GptOpsGradcheck, Norm2) {
  auto f = [](const Inputs& v) { return vector_norm(v[0]); };
  EXPECT_GRADCHECK(f, Inputs{leaf({3, 5}, 40)});
  EXPECT_GRADCHECK(f, Inputs{transposed_leaf({3, 5}, 41)});
  EXPECT_GRADCHECK(f, Inputs{sliced_leaf({9}, 42)});
}

// vector_norms: every norm2 fixture's tensor (1 to 300 elements) in one call, each entry with PyTorch's norm
TEST(GptOpsFixture, VectorNormsBitExact) {
  std::vector<Tensor> xs;
  const std::vector<const Section*> cases = cases_starting("norm2_");
  for (const Section* c : cases) xs.push_back(c->get("x").tensor());
  ASSERT_FALSE(xs.empty());
  const Tensor norms = vector_norms(xs);
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_BITS(norms[int64_t(i)], cases[i]->get("norm"), cases[i]->label);
}

// The CPU spreads the tensors over its threads, largest first: each entry must keep vector_norm's bits on one
// thread and two (with every entry written), for contiguous, transposed, sliced and empty tensors, in float and
// double; and the norms of tensors that want gradients are recorded (the same bits, and a backward).
TEST(GptOps, VectorNormsHaveTheBitsOfEachNormOnAnyThreads) {
  const testing_helpers::PoisonedBuffers poisoned;  // an entry no thread wrote reads NaN
  const int before = get_num_threads();
  for (DType dtype : {DType::Float32, DType::Float64}) {
    const Tensor big = testing_helpers::randish({300, 257}, 70, -1, 1, dtype);
    const std::vector<Tensor> xs = {testing_helpers::randish({70001}, 71, -1, 1, dtype), big.t(), big.slice(1, 3, 250, 2),
                                    testing_helpers::randish({17}, 72, -1, 1, dtype), zeros({0, 4}, dtype),
                                    testing_helpers::randish({40000}, 73, -1, 1, dtype)};
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      const Tensor norms = vector_norms(xs);
      ASSERT_EQ(norms.shape(), Shape{int64_t(xs.size())});
      for (size_t i = 0; i < xs.size(); ++i)
        testing_helpers::expect_same_float_bits(norms[int64_t(i)], vector_norm(xs[i]),
                                                fmt::format("{} tensor {} on {} threads", dtype_name(dtype), i, threads));
    }
  }
  set_num_threads(before);
  Tensor a = leaf({3, 5}, 74), b = transposed_leaf({4, 2}, 75);
  Tensor recorded = vector_norms({a, b});
  testing_helpers::expect_same_float_bits(recorded, stack({vector_norm(a), vector_norm(b)}), "with gradients");
  recorded.sum().backward();
  EXPECT_TRUE(a.grad().defined() && b.grad().defined());
}

TEST(GptOpsGradcheck, VectorNorms) {
  auto f = [](const Inputs& v) { return vector_norms(v); };
  EXPECT_GRADCHECK(f, Inputs{leaf({3, 5}, 76), transposed_leaf({4, 3}, 77), sliced_leaf({9}, 78)});
}

TEST(GptOpsErrors, VectorNormsRefusesMixedOrEmptyLists) {
  EXPECT_THROW_WITH(vector_norms({}), std::invalid_argument, "vector_norms", "no tensors");
  EXPECT_THROW_WITH(vector_norms({zeros({2}), zeros({3}, DType::Float64)}), std::invalid_argument, "vector_norms",
                    "tensor 1 is float64", "shape [3]", "tensor 0 is float32");
  EXPECT_THROW_WITH(vector_norms({zeros({2}), zeros({3}, DType::Int64)}), std::invalid_argument, "vector_norms");
}

TEST(GptOpsFixture, ClipGradNormBitExact) {
  for (const Section* c : cases_starting("clip_grad_norm_")) {
    std::vector<Tensor> params;
    for (int i = 0; i < 3; ++i) {
      const Recorded& g = c->get("grad" + std::to_string(i));
      Tensor p = zeros(g.shape).requires_grad_();
      p.set_grad(g.tensor());
      params.push_back(p);
      EXPECT_BITS(vector_norm(g.tensor()), c->get("norm" + std::to_string(i)), c->label + " norm" + std::to_string(i));
    }
    Tensor total = optim::clip_grad_norm_(params, std::stod(c->option("max_norm")));
    EXPECT_BITS(total, c->get("total_norm"), c->label + " total_norm");
    for (int i = 0; i < 3; ++i)
      EXPECT_BITS(params[size_t(i)].grad(), c->get("clipped" + std::to_string(i)), c->label + " clipped" + std::to_string(i));
  }
}

TEST(GptOps, ClipGradNormSkipsParametersWithoutGradients) {
  Tensor a = zeros({2}).requires_grad_(), b = zeros({2}).requires_grad_();
  a.set_grad(from_vector(std::vector<float>{3, 4}, {2}));
  Tensor total = optim::clip_grad_norm_({a, b}, 10.0);
  EXPECT_EQ(total.item(), 5.0);
  EXPECT_FALSE(b.grad().defined());
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{3, 4}));  // coefficient clamped to 1
}

}  // namespace
