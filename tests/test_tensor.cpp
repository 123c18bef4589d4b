// test_tensor.cpp — the Tensor handle without gradients: construction, dtypes, copies, element access,
// views versus copies, negative dims, joining, comparisons and where.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/test_helpers.h"

namespace {

using namespace autograd;
using testing_helpers::expect_values;
using testing_helpers::values;

bool shares_storage(const Tensor& a, const Tensor& b) { return a.impl().storage == b.impl().storage; }

// ---------------------------------------------------------------- construction

TEST(TensorConstruction, NestedListsInferDtypeAndShape) {
  Tensor i = tensor({{1, 2, 3}, {4, 5, 6}});
  EXPECT_EQ(i.dtype(), DType::Int64);  // integer literals → int64, as torch.tensor
  EXPECT_EQ(i.shape(), (Shape{2, 3}));
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(i.is_contiguous());

  Tensor f = tensor({{1.5, 2}, {3, 4}});  // one float literal makes it float32
  EXPECT_EQ(f.dtype(), DType::Float32);
  expect_values(f, {2, 2}, {1.5, 2, 3, 4});

  Tensor s = tensor(3.25);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.shape_str(), "[]");
  EXPECT_DOUBLE_EQ(s.item(), 3.25);

  Tensor d = tensor({0.1, 0.2}, DType::Float64);  // explicit dtype keeps full precision
  EXPECT_EQ(d.to_vector<double>(), (std::vector<double>{0.1, 0.2}));
  EXPECT_EQ(tensor({1, 0, 2}, DType::Bool).to_vector<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(tensor({{{1}}, {{2}}}).shape(), (Shape{2, 1, 1}));
}

TEST(TensorConstruction, RaggedListsAreErrors) {
  EXPECT_THROW_WITH(tensor({{1, 2}, {3}}), std::invalid_argument, "ragged", "expected 2");
  EXPECT_THROW_WITH(tensor({{1, 2}, 3}), std::invalid_argument, "ragged");
  EXPECT_THROW_WITH(tensor({1, {2}}), std::invalid_argument, "ragged");  // torch.tensor([1, [2]]) fails too
  EXPECT_THROW_WITH(tensor({1, {2, 3}}), std::invalid_argument, "ragged");
  EXPECT_THROW_WITH(tensor({{1, 2}, {3, {4, 5}}}), std::invalid_argument, "ragged");
}

TEST(TensorConstruction, Factories) {
  expect_values(zeros({2, 3}), {2, 3}, std::vector<double>(6, 0.0));
  expect_values(ones({4}, DType::Float64), {4}, {1, 1, 1, 1});
  Tensor f = full({2, 2}, -1.5, DType::Float64);
  EXPECT_EQ(f.dtype(), DType::Float64);
  expect_values(f, {2, 2}, {-1.5, -1.5, -1.5, -1.5});
  EXPECT_EQ(zeros({2}, DType::Int64).dtype(), DType::Int64);
  EXPECT_EQ(zeros({}).shape(), Shape{});
  EXPECT_EQ(zeros({0, 3}).numel(), 0);
  EXPECT_EQ(zeros_like(f).dtype(), DType::Float64);
  expect_values(ones_like(tensor({1, 2, 3})), {3}, {1, 1, 1});
  expect_values(scalar_tensor(2.0, DType::Float64), {}, {2.0});
  EXPECT_EQ(zeros({2, 3}).dtype(), DType::Float32);  // float32 is the default
}

TEST(TensorConstruction, Arange) {
  EXPECT_EQ(arange(5).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(5).dtype(), DType::Int64);
  EXPECT_EQ(arange(2, 9, 3).to_vector<int64_t>(), (std::vector<int64_t>{2, 5, 8}));
  EXPECT_EQ(arange(5, 0, -2).to_vector<int64_t>(), (std::vector<int64_t>{5, 3, 1}));
  EXPECT_EQ(arange(3, 3).numel(), 0);
  EXPECT_EQ(arange(4, 1).numel(), 0);
  Tensor r = arange(0.0, 1.0, 0.25, DType::Float64);
  expect_values(r, {4}, {0, 0.25, 0.5, 0.75});
  EXPECT_EQ(arange(0.0, 1.0, 0.3, DType::Float32).numel(), 4);  // ceil((1-0)/0.3)
  EXPECT_THROW_WITH(arange(0, 5, 0), std::invalid_argument, "arange", "step");
}

TEST(TensorConstruction, EyeTrilTriu) {
  expect_values(eye(3), {3, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1});
  EXPECT_EQ(eye(2, DType::Int64).dtype(), DType::Int64);
  Tensor m = arange(1.0, 10.0, 1.0, DType::Float32).view({3, 3});
  expect_values(m.tril(), {3, 3}, {1, 0, 0, 4, 5, 0, 7, 8, 9});
  expect_values(m.triu(), {3, 3}, {1, 2, 3, 0, 5, 6, 0, 0, 9});
  expect_values(m.tril(-1), {3, 3}, {0, 0, 0, 4, 0, 0, 7, 8, 0});
  expect_values(m.triu(1), {3, 3}, {0, 2, 3, 0, 0, 6, 0, 0, 0});
  expect_values(tril(ones({2, 3}), 1), {2, 3}, {1, 1, 0, 1, 1, 1});
  // a causal mask: true above the diagonal
  Tensor mask = ones({3, 3}, DType::Bool).triu(1);
  EXPECT_EQ(mask.dtype(), DType::Bool);
  EXPECT_EQ(mask.to_vector<bool>(), (std::vector<bool>{false, true, true, false, false, true, false, false, false}));
  // batched and transposed
  Tensor b = arange(0.0, 8.0, 1.0, DType::Float64).view({2, 2, 2});
  expect_values(b.tril(), {2, 2, 2}, {0, 0, 2, 3, 4, 0, 6, 7});
  expect_values(m.t().triu(), {3, 3}, {1, 4, 7, 0, 5, 8, 0, 0, 9});
}

// ---------------------------------------------------------------- dtype conversion and copies

TEST(TensorCopies, ToDtype) {
  Tensor d = tensor({0.1, -2.7, 3.5}, DType::Float64);
  Tensor f = d.to(DType::Float32);
  EXPECT_EQ(f.dtype(), DType::Float32);
  EXPECT_EQ(f.to_vector<float>(), (std::vector<float>{0.1f, -2.7f, 3.5f}));  // rounded to nearest float
  EXPECT_EQ(f.to(DType::Float64).to_vector<double>(), (std::vector<double>{double(0.1f), double(-2.7f), 3.5}));
  EXPECT_EQ(d.to(DType::Int64).to_vector<int64_t>(), (std::vector<int64_t>{0, -2, 3}));  // truncates toward 0
  EXPECT_EQ(d.to(DType::Bool).to_vector<bool>(), (std::vector<bool>{true, true, true}));
  EXPECT_EQ(tensor({0, 2}).to_bool().to_vector<bool>(), (std::vector<bool>{false, true}));
  EXPECT_EQ(tensor({true, false}, DType::Bool).to(DType::Float32).to_vector<float>(), (std::vector<float>{1, 0}));
  EXPECT_TRUE(d.to(DType::Float64).same(d));  // same dtype: the same tensor, no copy
  // conversion of a transposed tensor keeps the logical order
  Tensor t = tensor({{1, 2}, {3, 4}}).t().to(DType::Float64);
  expect_values(t, {2, 2}, {1, 3, 2, 4});
}

TEST(TensorCopies, CloneAndContiguous) {
  Tensor a = tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}});
  Tensor c = a.clone();
  EXPECT_FALSE(shares_storage(a, c));
  c.fill_(0.0);
  expect_values(a, {2, 3}, {1, 2, 3, 4, 5, 6});  // the clone is independent

  EXPECT_TRUE(a.contiguous().same(a));  // already contiguous: the same tensor
  Tensor t = a.t();
  EXPECT_FALSE(t.is_contiguous());
  Tensor tc = t.contiguous();
  EXPECT_TRUE(tc.is_contiguous());
  EXPECT_FALSE(shares_storage(t, tc));
  EXPECT_EQ(tc.strides(), (Shape{2, 1}));
  expect_values(tc, {3, 2}, {1, 4, 2, 5, 3, 6});
  Tensor cl = t.clone();  // a clone of a view is a fresh contiguous tensor
  EXPECT_TRUE(cl.is_contiguous());
  expect_values(cl, {3, 2}, {1, 4, 2, 5, 3, 6});
  // size-1 dims do not break contiguity whatever their stride
  EXPECT_TRUE(a[0].unsqueeze(0).is_contiguous());
  EXPECT_FALSE(a.slice(1, 0, std::nullopt, 2).is_contiguous());
  EXPECT_FALSE(tensor({1.0f}).expand({3}).is_contiguous());
}

TEST(TensorCopies, FromVector) {
  Tensor a = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {3, 2});
  EXPECT_EQ(a.dtype(), DType::Float32);
  expect_values(a[2], {2}, {5, 6});
  EXPECT_EQ(from_vector(std::vector<int64_t>{7, 8}, {2}).dtype(), DType::Int64);
  EXPECT_EQ(from_vector(std::vector<double>{1, 2}, {2, 1}).dtype(), DType::Float64);
  EXPECT_THROW_WITH(from_vector(std::vector<double>{1, 2, 3}, {2, 2}), std::invalid_argument, "from_vector", "3 values",
                    "[2, 2]");
}

// ---------------------------------------------------------------- element access

TEST(TensorAccess, ItemIndexAndSelect) {
  Tensor a = tensor({{1, 2, 3}, {4, 5, 6}});
  EXPECT_EQ(a[1][2].item(), 6.0);
  EXPECT_EQ(a[1][2].item<int64_t>(), 6);
  EXPECT_EQ(a[-1][-3].item(), 4.0);  // negative indices count from the end
  expect_values(a[0], {3}, {1, 2, 3});
  expect_values(a.select(1, 1), {2}, {2, 5});
  expect_values(a.select(-1, 0), {2}, {1, 4});
  EXPECT_EQ(a.t()[2][0].item(), 3.0);  // through strides
  EXPECT_EQ(a[0].offset(), 0);
  EXPECT_EQ(a[1].offset(), 3);
  EXPECT_THROW_WITH(a.item(), std::invalid_argument, "item", "6 elements", "[2, 3]");
  EXPECT_EQ(tensor({{2.5}}).item(), 2.5);  // any single-element tensor
  EXPECT_EQ(tensor({true}, DType::Bool).item(), 1.0);
  // writing through an element view changes the tensor
  Tensor f = zeros({2, 2});
  f[1][0].fill_(9.0);
  expect_values(f, {2, 2}, {0, 0, 9, 0});
}

TEST(TensorAccess, SizeAndNegativeDims) {
  Tensor a = zeros({2, 3, 4});
  EXPECT_EQ(a.size(-1), 4);
  EXPECT_EQ(a.size(-3), 2);
  EXPECT_EQ(a.dim(), 3);
  EXPECT_EQ(a.transpose(-1, 0).shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(a.unsqueeze(-1).shape(), (Shape{2, 3, 4, 1}));
  EXPECT_EQ(a.unsqueeze(-4).shape(), (Shape{1, 2, 3, 4}));
  EXPECT_EQ(a.sum(-2).shape(), (Shape{2, 4}));
  EXPECT_EQ(a.permute({-1, -3, -2}).shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(a.softmax(-1).shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(a.narrow(-1, 1, 2).shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(cat({a, a}, -2).shape(), (Shape{2, 6, 4}));
  EXPECT_EQ(stack({a, a}, -1).shape(), (Shape{2, 3, 4, 2}));
  EXPECT_EQ(wrap_dim(-1, 3, "test"), 2);
  EXPECT_EQ(wrap_dim(0, 0, "test"), 0);  // a 0-d tensor accepts 0 and -1
  EXPECT_EQ(wrap_dim(-1, 0, "test"), 0);
  EXPECT_THROW_WITH(a.size(3), std::out_of_range, "size", "dimension 3", "[-3, 2]");
  EXPECT_THROW_WITH(a.sum(-4), std::out_of_range, "sum", "dimension -4");
}

// ---------------------------------------------------------------- views and copies

TEST(TensorViews, ViewSharesStorage) {
  Tensor a = arange(0.0, 12.0, 1.0, DType::Float32);
  Tensor v = a.view({3, 4});
  EXPECT_TRUE(shares_storage(a, v));
  EXPECT_EQ(v.strides(), (Shape{4, 1}));
  EXPECT_EQ(a.view({2, -1, 3}).shape(), (Shape{2, 2, 3}));
  // a view of a transposed tensor that only splits a dim is allowed
  Tensor t = v.t();  // [4,3], strides [1,4]
  Tensor split = t.view({2, 2, 3});
  EXPECT_TRUE(shares_storage(split, a));
  EXPECT_EQ(split.strides(), (Shape{2, 1, 4}));
  expect_values(split[1][0], {3}, {2, 6, 10});
  // size-1 dims can be added and removed freely
  EXPECT_EQ(t.view({4, 1, 3}).shape(), (Shape{4, 1, 3}));
  EXPECT_EQ(v.slice(1, 0, std::nullopt, 2).view({3, 2, 1}).shape(), (Shape{3, 2, 1}));
}

TEST(TensorViews, ViewRefusesWhatStridesForbid) {
  Tensor t = zeros({3, 4}).t();  // [4,3] transposed
  EXPECT_THROW_WITH(t.view({12}), std::invalid_argument, "view", "[12]", "[4, 3]", "[1, 4]", "reshape");
  EXPECT_THROW_WITH(t.view({3, 4}), std::invalid_argument, "view", "[3, 4]");
  Tensor first_cols = zeros({4, 6}).narrow(1, 0, 4);  // [4,4] strides [6,1]: a gap after each row
  EXPECT_THROW_WITH(first_cols.view({16}), std::invalid_argument, "view", "[16]", "[4, 4]", "[6, 1]");
  EXPECT_NO_THROW(first_cols.view({2, 2, 2, 2}));  // splitting dims never needs a merge across the gap
  // every other column of [4,6] has strides [6,2]: rows follow on evenly (6 = 3·2), so it flattens
  Tensor every_other = zeros({4, 6}).slice(1, 0, std::nullopt, 2);
  EXPECT_EQ(every_other.view({12}).strides(), (Shape{2}));
  EXPECT_THROW_WITH(zeros({2, 3}).view({4}), std::invalid_argument, "view", "[4]", "[2, 3]", "6 elements");
  EXPECT_THROW_WITH(zeros({2, 3}).view({-1, -1}), std::invalid_argument, "view", "-1");
  EXPECT_THROW_WITH(zeros({2, 3}).view({-1, 4}), std::invalid_argument, "view", "[2, 3]");
}

TEST(TensorViews, ReshapeCopiesOnlyWhenItMust) {
  Tensor a = arange(0.0, 6.0, 1.0, DType::Float32).view({2, 3});
  Tensor r = a.reshape({3, 2});
  EXPECT_TRUE(shares_storage(a, r));  // contiguous: a view
  Tensor t = a.t();                   // [3,2]
  Tensor r2 = t.reshape({6});
  EXPECT_FALSE(shares_storage(t, r2));  // transposed: a copy
  expect_values(r2, {6}, {0, 3, 1, 4, 2, 5});
  EXPECT_TRUE(shares_storage(t, t.reshape({3, 1, 2})));  // adding a size-1 dim needs no copy
  EXPECT_TRUE(shares_storage(t, t.reshape({3, 2})));
  a.fill_(1.0);
  expect_values(r, {3, 2}, {1, 1, 1, 1, 1, 1});  // the view follows its base
  expect_values(r2, {6}, {0, 3, 1, 4, 2, 5});     // the copy does not
  EXPECT_EQ(a.flatten().shape(), (Shape{6}));
  EXPECT_EQ(tensor(5.0).reshape({1, 1}).shape(), (Shape{1, 1}));
  EXPECT_EQ(tensor({{5.0}}).reshape({}).shape(), Shape{});
}

TEST(TensorViews, TransposePermuteSqueezeExpand) {
  Tensor a = arange(0.0, 24.0, 1.0, DType::Float64).view({2, 3, 4});
  Tensor p = a.permute({2, 0, 1});
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.strides(), (Shape{1, 12, 4}));
  EXPECT_EQ(p[3][1][2].item(), 12 + 8 + 3);
  EXPECT_EQ(a.mT().shape(), (Shape{2, 4, 3}));
  Tensor s = zeros({1, 3, 1});
  EXPECT_EQ(s.squeeze().shape(), (Shape{3}));
  EXPECT_EQ(s.squeeze(0).shape(), (Shape{3, 1}));
  EXPECT_EQ(s.squeeze(1).shape(), (Shape{1, 3, 1}));  // not size 1: unchanged, as in PyTorch
  Tensor col = tensor({{1.0f}, {2.0f}});
  Tensor e = col.expand({2, 3});
  EXPECT_EQ(e.strides(), (Shape{1, 0}));
  EXPECT_TRUE(shares_storage(e, col));
  expect_values(e, {2, 3}, {1, 1, 1, 2, 2, 2});
  expect_values(col.expand({2, 2, -1}), {2, 2, 1}, {1, 2, 1, 2});
  Tensor sl = a.slice(2, 1, std::nullopt, 2);  // columns 1 and 3
  expect_values(sl[1], {3, 2}, {13, 15, 17, 19, 21, 23});
  expect_values(a.narrow(1, 1, 2)[0], {2, 4}, {4, 5, 6, 7, 8, 9, 10, 11});
  EXPECT_EQ(a.slice(0, 5, 9).shape(), (Shape{0, 3, 4}));  // clamped, as Python slices are
  expect_values(a[0][0].slice(0, -2, std::nullopt), {2}, {2, 3});
}

// ---------------------------------------------------------------- joining and splitting

TEST(TensorJoin, CatStackChunk) {
  Tensor a = tensor({{1, 2}, {3, 4}});
  Tensor b = tensor({{5, 6}});
  Tensor c = cat({a, b});
  EXPECT_EQ(c.dtype(), DType::Int64);
  EXPECT_EQ(c.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(cat({a, a.t()}, 1).to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 1, 3, 3, 4, 2, 4}));
  EXPECT_EQ(cat({a}, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_FALSE(shares_storage(cat({a}, 0), a));  // always a new tensor
  Tensor s = stack({a, a * 10}, 1);
  EXPECT_EQ(s.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(s.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 10, 20, 3, 4, 30, 40}));
  Tensor s0 = stack({tensor(1.0f), tensor(2.0f)});  // 0-d tensors stack into a vector
  expect_values(s0, {2}, {1, 2});
  std::vector<Tensor> parts = chunk(arange(7), 3);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(parts[2].to_vector<int64_t>(), (std::vector<int64_t>{6}));
  EXPECT_TRUE(shares_storage(parts[1], parts[0]));  // chunks are views
  EXPECT_EQ(chunk(arange(6), 4).size(), 3u);        // like torch.chunk: ceil(6/4) = 2 per chunk
}

// ---------------------------------------------------------------- comparisons and where

TEST(TensorCompare, ComparisonsGiveBool) {
  Tensor a = tensor({1.0f, 2.0f, 3.0f});
  Tensor b = tensor({3.0f, 2.0f, 1.0f});
  EXPECT_EQ((a < b).dtype(), DType::Bool);
  EXPECT_EQ((a < b).to_vector<bool>(), (std::vector<bool>{true, false, false}));
  EXPECT_EQ((a <= b).to_vector<bool>(), (std::vector<bool>{true, true, false}));
  EXPECT_EQ((a > b).to_vector<bool>(), (std::vector<bool>{false, false, true}));
  EXPECT_EQ((a >= b).to_vector<bool>(), (std::vector<bool>{false, true, true}));
  EXPECT_EQ((a == b).to_vector<bool>(), (std::vector<bool>{false, true, false}));
  EXPECT_EQ((a != b).to_vector<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ((a == 2.0).to_vector<bool>(), (std::vector<bool>{false, true, false}));
  EXPECT_EQ((a > 1.5).to_vector<bool>(), (std::vector<bool>{false, true, true}));
  // broadcasting: [3,1] against [3]
  Tensor m = a.view({3, 1}) > b;
  EXPECT_EQ(m.shape(), (Shape{3, 3}));
  EXPECT_EQ(m.to_vector<bool>(), (std::vector<bool>{false, false, false, false, false, true, false, true, true}));
  // an integer tensor against a fractional scalar compares as floats (2 < 2.5), as PyTorch promotes
  Tensor i = tensor({1, 2, 3});
  EXPECT_EQ((i < 2.5).to_vector<bool>(), (std::vector<bool>{true, true, false}));
  EXPECT_EQ((i <= 2.5).to_vector<bool>(), (std::vector<bool>{true, true, false}));
  EXPECT_EQ((i > 2.5).to_vector<bool>(), (std::vector<bool>{false, false, true}));
  EXPECT_EQ((i >= 1.5).to_vector<bool>(), (std::vector<bool>{false, true, true}));
  EXPECT_EQ((i == 2.5).to_vector<bool>(), (std::vector<bool>{false, false, false}));
  EXPECT_EQ((i != 2.0).to_vector<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ((i == 2).dtype(), DType::Bool);
  // a float32 tensor compares with the scalar rounded to float32, as PyTorch does
  EXPECT_EQ((tensor({0.1f}) == 0.1).to_vector<bool>(), (std::vector<bool>{true}));
  Tensor bools = tensor({1, 0}).to_bool();
  EXPECT_EQ((bools == 0).to_vector<bool>(), (std::vector<bool>{false, true}));
}

TEST(TensorCompare, Where) {
  Tensor cond = tensor({true, false, true}, DType::Bool);
  Tensor a = tensor({1.0f, 2.0f, 3.0f});
  Tensor b = tensor({-1.0f, -2.0f, -3.0f});
  expect_values(where(cond, a, b), {3}, {1, -2, 3});
  expect_values(where(cond, a, 0.5), {3}, {1, 0.5, 3});
  // broadcast condition [2,1] with a [3] and b scalar tensor
  Tensor c2 = tensor({{true}, {false}}, DType::Bool);
  expect_values(where(c2, a, full({}, 9.0)), {2, 3}, {1, 2, 3, 9, 9, 9});
  expect_values(where(a > 1.5, a, a * 10.0), {3}, {10, 2, 3});
  Tensor ints = where(cond, tensor({1, 2, 3}), tensor({7, 8, 9}));
  EXPECT_EQ(ints.dtype(), DType::Int64);
  EXPECT_EQ(ints.to_vector<int64_t>(), (std::vector<int64_t>{1, 8, 3}));
}

TEST(TensorMisc, EqualAndAllclose) {
  Tensor a = tensor({1.0f, 2.0f});
  EXPECT_TRUE(equal(a, tensor({1.0f, 2.0f})));
  EXPECT_FALSE(equal(a, tensor({1.0f, 2.5f})));
  EXPECT_FALSE(equal(a, tensor({{1.0f, 2.0f}})));  // shape matters
  EXPECT_TRUE(allclose(a, a + 1e-7));
  EXPECT_FALSE(allclose(a, a + 1e-3));
  EXPECT_FALSE(allclose(tensor({std::nan("")}), tensor({std::nan("")})));
  auto inf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(allclose(tensor({inf, -inf}, DType::Float64), tensor({inf, -inf}, DType::Float64)));
}

TEST(TensorMisc, IntegerArithmetic) {
  Tensor i = tensor({1, 2, 3});
  EXPECT_EQ((i + i).dtype(), DType::Int64);
  EXPECT_EQ((i * 2.0).dtype(), DType::Int64);     // whole scalar: stays integer
  EXPECT_EQ((i * 0.5).dtype(), DType::Float32);   // fractional: promoted
  expect_values(i * 0.5, {3}, {0.5, 1, 1.5});
  EXPECT_EQ((i / 2.0).dtype(), DType::Float32);   // true division
  expect_values(i / i, {3}, {1, 1, 1});
  expect_values(tensor({true, false, true}, DType::Bool).sum(), {}, {2});
  EXPECT_EQ(tensor({true, false, true}, DType::Bool).sum().dtype(), DType::Int64);
}

}  // namespace
