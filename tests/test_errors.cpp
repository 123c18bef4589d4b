// test_errors.cpp — every error path throws, and its message names the op and the shapes or values
// involved, so a user can find the mistake from the message alone.
#include <gtest/gtest.h>

#include <stdexcept>

#include "tests/test_helpers.h"

namespace {

using namespace autograd;

Tensor f32(const Shape& shape) { return zeros(shape); }
Tensor f64(const Shape& shape) { return zeros(shape, DType::Float64); }
Tensor bool_mask(const Shape& shape) { return zeros(shape, DType::Bool); }

// ---------------------------------------------------------------- shape mismatches

TEST(Errors, ElementwiseShapeMismatch) {
  EXPECT_THROW_WITH(add(f32({2, 3}), f32({4})), std::invalid_argument, "add", "[2, 3]", "[4]", "broadcast");
  EXPECT_THROW_WITH(f32({2, 3}) - f32({3, 2}), std::invalid_argument, "sub", "[2, 3]", "[3, 2]");
  EXPECT_THROW_WITH(f32({2, 3, 4}) * f32({5, 1}), std::invalid_argument, "mul", "[2, 3, 4]", "[5, 1]", "3 vs 5");
  EXPECT_THROW_WITH(f32({2}) / f32({3}), std::invalid_argument, "div", "[2]", "[3]");
  EXPECT_THROW_WITH(f32({2}) < f32({3}), std::invalid_argument, "lt", "[2]", "[3]");
  EXPECT_THROW_WITH(where(bool_mask({2}), f32({3}), f32({3})), std::invalid_argument, "where", "[2]", "[3]");
}

TEST(Errors, MatmulShapeMismatch) {
  EXPECT_THROW_WITH(matmul(f32({2, 3}), f32({4, 5})), std::invalid_argument, "matmul", "[2, 3]", "[4, 5]", "3 != 4");
  EXPECT_THROW_WITH(matmul(f32({3}), f32({4})), std::invalid_argument, "matmul", "3", "4");
  // a vector operand is reported with the shape the caller passed
  EXPECT_THROW_WITH(matmul(f32({3}), f32({4, 5})), std::invalid_argument, "matmul", "[3]", "[4, 5]");
  EXPECT_THROW_WITH(matmul(f32({2, 3}), f32({4})), std::invalid_argument, "matmul", "[2, 3]", "[4]");
  EXPECT_THROW_WITH(matmul(f32({2, 3, 4}), f32({5, 2})), std::invalid_argument, "matmul", "[2, 3, 4]", "[5, 2]");
  // batch dims that do not broadcast
  EXPECT_THROW_WITH(matmul(f32({2, 3, 4}), f32({3, 4, 5})), std::invalid_argument, "matmul", "[2, 3, 4]", "[3, 4, 5]");
  EXPECT_THROW_WITH(matmul(f32({}), f32({3})), std::invalid_argument, "matmul", "[]", "[3]");
}

TEST(Errors, CatAndStackShapeMismatch) {
  EXPECT_THROW_WITH(cat({f32({2, 3}), f32({2, 4})}, 0), std::invalid_argument, "cat", "[2, 4]", "[2, 3]", "dimension 0");
  EXPECT_THROW_WITH(cat({f32({2, 3}), f32({2, 3, 1})}, 0), std::invalid_argument, "cat", "[2, 3, 1]", "[2, 3]");
  EXPECT_THROW_WITH(cat({f32({2}), f64({2})}), std::invalid_argument, "cat", "float64", "float32");
  EXPECT_THROW_WITH(cat({}), std::invalid_argument, "cat", "non-empty");
  EXPECT_THROW_WITH(cat({f32({}), f32({})}), std::invalid_argument, "cat", "zero-dimensional");
  EXPECT_THROW_WITH(cat({f32({2, 3})}, 2), std::out_of_range, "cat", "dimension 2");
  EXPECT_THROW_WITH(stack({f32({2, 3}), f32({3, 2})}), std::invalid_argument, "stack", "[2, 3]", "[3, 2]", "entry 1");
  EXPECT_THROW_WITH(stack({}), std::invalid_argument, "stack", "non-empty");
  EXPECT_THROW_WITH(stack({f32({2}), f32({2})}, 3), std::out_of_range, "stack", "dimension 3");
}

TEST(Errors, ViewReshapeExpand) {
  EXPECT_THROW_WITH(f32({2, 3}).view({4, 2}), std::invalid_argument, "view", "[4, 2]", "[2, 3]");
  EXPECT_THROW_WITH(f32({3, 4}).t().view({12}), std::invalid_argument, "view", "[12]", "[4, 3]", "reshape");
  EXPECT_THROW_WITH(f32({2, 3}).reshape({5}), std::invalid_argument, "reshape", "[5]", "[2, 3]");
  EXPECT_THROW_WITH(f32({2, 3}).reshape({-1, -1}), std::invalid_argument, "reshape", "-1");
  EXPECT_THROW_WITH(f32({2, 3}).view({2, -3}), std::invalid_argument, "view", "-3");
  EXPECT_THROW_WITH(f32({2, 3}).expand({2, 4}), std::invalid_argument, "expand", "[2, 3]", "[2, 4]", "dimension 1");
  EXPECT_THROW_WITH(f32({2, 3}).expand({3}), std::invalid_argument, "expand", "[3]", "[2, 3]");
  EXPECT_THROW_WITH(f32({3}).expand({-1, 3}), std::invalid_argument, "expand", "[-1, 3]");
  EXPECT_THROW_WITH(f32({2, 3}).sum_to({4}), std::invalid_argument, "sum_to", "[2, 3]", "[4]");
  EXPECT_THROW_WITH(f32({2, 3}).permute({1, 0, 2}), std::invalid_argument, "permute", "[2, 3]");
  EXPECT_THROW_WITH(f32({2, 3}).permute({1, 1}), std::invalid_argument, "permute", "repeat");
  EXPECT_THROW_WITH(f32({4}).tril(), std::invalid_argument, "tril", "[4]");
  EXPECT_THROW_WITH(f32({4}).triu(), std::invalid_argument, "triu", "[4]");
  EXPECT_THROW_WITH(empty({2, -1}), std::invalid_argument, "empty", "[2, -1]");
  EXPECT_THROW_WITH(f32({2, 3, 4}).flatten(2, 1), std::invalid_argument, "flatten", "start_dim 2", "end_dim 1", "[2, 3, 4]");
  EXPECT_THROW_WITH(f32({2, 3, 4}).flatten(-1, 0), std::invalid_argument, "flatten", "start_dim -1", "end_dim 0");
  EXPECT_THROW_WITH(f32({2, 3, 4}).flatten(3), std::out_of_range, "flatten", "start_dim 3", "[2, 3, 4]", "[-3, 2]");
  EXPECT_THROW_WITH(f32({2, 3, 4}).flatten(0, -4), std::out_of_range, "flatten", "end_dim -4", "[-3, 2]");
  EXPECT_THROW_WITH(f32({}).flatten(1), std::out_of_range, "flatten", "start_dim 1", "[-1, 0]");
}

TEST(Errors, MaskedFill) {
  EXPECT_THROW_WITH(f32({2, 2}).masked_fill(bool_mask({3}), 0.0), std::invalid_argument, "masked_fill", "[2, 2]", "[3]");
  // a mask that would make the result larger than the input
  EXPECT_THROW_WITH(f32({3}).masked_fill(bool_mask({2, 3}), 0.0), std::invalid_argument, "masked_fill", "[2, 3]", "[3]");
  EXPECT_THROW_WITH(f32({2, 2}).masked_fill(f32({2, 2}), 0.0), std::invalid_argument, "masked_fill", "bool", "float32",
                    "[2, 2]");
  EXPECT_THROW_WITH(f32({2, 2}).masked_fill(zeros({2, 2}, DType::Int64), 0.0), std::invalid_argument, "masked_fill",
                    "int64");
  Tensor x = f32({2, 2});
  EXPECT_THROW_WITH(x.masked_fill_(f32({2}), 0.0), std::invalid_argument, "masked_fill_", "bool", "[2]");
  EXPECT_THROW_WITH(where(f32({2}), f32({2}), f32({2})), std::invalid_argument, "where", "bool", "float32", "[2]");
}

TEST(Errors, Linear) {
  EXPECT_THROW_WITH(linear(f32({2, 3}), f32({4, 5})), std::invalid_argument, "linear", "[2, 3]", "[4, 5]");
  EXPECT_THROW_WITH(linear(f32({2, 3}), f32({3})), std::invalid_argument, "linear", "[3]", "2-D");
  EXPECT_THROW_WITH(linear(f32({2, 3}), f32({4, 3}), f32({5})), std::invalid_argument, "[5]");  // a bias of the wrong size
}

TEST(Errors, CrossEntropyAndNllLoss) {
  Tensor logits = f32({4, 5});
  EXPECT_THROW_WITH(cross_entropy(f32({2, 3, 4}), tensor({0, 1})), std::invalid_argument, "cross_entropy",
                    "[2, 3, 4]", "[N, C]");
  EXPECT_THROW_WITH(cross_entropy(logits, tensor({0, 1, 2})), std::invalid_argument, "[4, 5]", "[3]");
  EXPECT_THROW_WITH(cross_entropy(logits, tensor({{0, 1}, {2, 3}})), std::invalid_argument, "[2, 2]");
  // a target outside [0, C) names the value, its position and the class count
  EXPECT_THROW_WITH(cross_entropy(logits, tensor({0, 1, 7, 2})), std::out_of_range, "7", "position 2", "5 classes");
  EXPECT_THROW_WITH(cross_entropy(logits, tensor({0, -1, 1, 2})), std::out_of_range, "-1", "5 classes");
  EXPECT_THROW_WITH(cross_entropy(logits, tensor({0, 5, 1, 2}), /*ignore_index=*/4), std::out_of_range, "5");
  EXPECT_THROW_WITH(cross_entropy(logits, tensor({0.0f, 1.0f, 1.0f, 2.0f})), std::invalid_argument, "int64", "float32");
  EXPECT_THROW_WITH(nll_loss(f32({4}), tensor({0})), std::invalid_argument, "nll_loss", "[4]");
  EXPECT_THROW_WITH(nll_loss(zeros({2, 3}, DType::Int64), tensor({0, 1})), std::invalid_argument, "nll_loss", "int64");
}

// ---------------------------------------------------------------- dtypes

TEST(Errors, DtypeMismatch) {
  EXPECT_THROW_WITH(f32({2}) + f64({2}), std::invalid_argument, "add", "dtype", "float32", "float64", "[2]");
  EXPECT_THROW_WITH(f32({2}) * tensor({1, 2}), std::invalid_argument, "mul", "float32", "int64");
  EXPECT_THROW_WITH(where(bool_mask({2}), f32({2}), f64({2})), std::invalid_argument, "where", "float32", "float64");
  EXPECT_THROW_WITH(matmul(f32({2, 2}), f64({2, 2})), std::invalid_argument, "matmul", "float32", "float64", "[2, 2]");
  EXPECT_THROW_WITH(matmul(tensor({{1, 2}, {3, 4}}), tensor({{1, 2}, {3, 4}})), std::invalid_argument, "matmul", "int64",
                    "[2, 2]");
  Tensor x = f32({2});
  EXPECT_THROW_WITH(x.add_(f64({2})), std::invalid_argument, "add_", "float64");
  EXPECT_THROW_WITH(tensor({1, 2}).exp(), std::invalid_argument, "exp", "int64", "[2]");
  EXPECT_THROW_WITH(tensor({1, 2}).log(), std::invalid_argument, "log", "int64");
  EXPECT_THROW_WITH(tensor({1, 2}).softmax(0), std::invalid_argument, "softmax", "int64", "[2]");
  EXPECT_THROW_WITH(tensor({1, 2}).log_softmax(0), std::invalid_argument, "log_softmax", "int64");
  EXPECT_THROW_WITH(tensor({1, 2}).requires_grad_(), std::invalid_argument, "requires_grad_", "int64");
  EXPECT_THROW_WITH(f32({2}).data_ptr<double>(), std::invalid_argument, "data_ptr", "float32", "float64");
  EXPECT_THROW_WITH(gradcheck([](const std::vector<Tensor>& in) { return in[0]; }, {f32({2}).requires_grad_()}),
                    std::invalid_argument, "gradcheck", "float32", "float64");
}

// ---------------------------------------------------------------- indices

TEST(Errors, IndexOutOfRange) {
  Tensor weight = f32({5, 3});
  EXPECT_THROW_WITH(embedding(weight, tensor({{0, 5}, {1, 2}})), std::out_of_range, "embedding", "index 5", "[2, 2]",
                    "5 embedding rows");
  EXPECT_THROW_WITH(embedding(weight, tensor({-1})), std::out_of_range, "embedding", "-1");
  EXPECT_THROW_WITH(embedding(weight, tensor({0.0f})), std::invalid_argument, "embedding", "int64", "float32");
  EXPECT_THROW_WITH(embedding(f32({5}), tensor({0})), std::invalid_argument, "embedding", "[5]");
  Tensor a = f32({3, 2});
  EXPECT_THROW_WITH(a.select(0, 3), std::out_of_range, "select", "index 3", "size 3", "[3, 2]");
  EXPECT_THROW_WITH(a.select(1, -3), std::out_of_range, "select", "-3", "[3, 2]");
  EXPECT_THROW_WITH(a[7], std::out_of_range, "select", "7");
  EXPECT_THROW_WITH(a.narrow(0, 2, 2), std::out_of_range, "narrow", "start 2", "length 2", "size 3", "[3, 2]");
  EXPECT_THROW_WITH(a.narrow(1, -3, 1), std::out_of_range, "narrow", "[3, 2]");
  EXPECT_THROW_WITH(a.slice(0, 0, 2, 0), std::invalid_argument, "slice", "step", "0");
  EXPECT_THROW_WITH(a.item(), std::invalid_argument, "item", "[3, 2]");
  EXPECT_THROW_WITH(chunk(a, 0), std::invalid_argument, "chunk", "0");
  EXPECT_THROW_WITH(f32({0, 3}).max(0), std::invalid_argument, "max", "[0, 3]");
  EXPECT_THROW_WITH(f32({0}).max(), std::invalid_argument, "max", "empty");
}

TEST(Errors, BadDim) {
  Tensor a = f32({2, 3});
  EXPECT_THROW_WITH(a.sum(2), std::out_of_range, "sum", "dimension 2", "2 dimensions", "[-2, 1]");
  EXPECT_THROW_WITH(a.mean(-3), std::out_of_range, "dimension -3");
  EXPECT_THROW_WITH(a.max(5), std::out_of_range, "max", "dimension 5");
  EXPECT_THROW_WITH(a.softmax(2), std::out_of_range, "softmax", "dimension 2");
  EXPECT_THROW_WITH(a.log_softmax(-3), std::out_of_range, "log_softmax", "dimension -3");
  EXPECT_THROW_WITH(a.transpose(0, 2), std::out_of_range, "transpose", "dimension 2");
  EXPECT_THROW_WITH(a.unsqueeze(4), std::out_of_range, "unsqueeze", "dimension 4");
  EXPECT_THROW_WITH(a.squeeze(2), std::out_of_range, "squeeze", "dimension 2");
  EXPECT_THROW_WITH(a.permute({0, 2}), std::out_of_range, "permute", "dimension 2");
  EXPECT_THROW_WITH(a.select(2, 0), std::out_of_range, "select", "dimension 2");
  EXPECT_THROW_WITH(a.slice(-3, 0, 1), std::out_of_range, "slice", "dimension -3");
  EXPECT_THROW_WITH(a.narrow(2, 0, 1), std::out_of_range, "narrow", "dimension 2");
  EXPECT_THROW_WITH(chunk(a, 2, 2), std::out_of_range, "chunk", "dimension 2");
  EXPECT_THROW_WITH(a.argmax(2), std::out_of_range, "max", "dimension 2");
  EXPECT_THROW_WITH(sum(a, {0, 3}, false), std::out_of_range, "sum", "dimension 3");
}

// ---------------------------------------------------------------- autograd misuse

TEST(Errors, AutogradMisuse) {
  Tensor x = f64({2, 3}).requires_grad_();
  EXPECT_THROW_WITH((x * 2.0).backward(), std::runtime_error, "backward", "[2, 3]", "scalar");
  EXPECT_THROW_WITH((x * 2.0).backward(f64({3, 2})), std::runtime_error, "backward", "[3, 2]", "[2, 3]");
  EXPECT_THROW_WITH(f64({2}).sum().backward(), std::runtime_error, "backward", "does not require grad");

  Tensor f = x.exp().sum();
  f.backward();
  EXPECT_THROW_WITH(f.backward(), std::runtime_error, "backward", "SumBackward0", "already been freed");

  Tensor y = x.tanh();  // TanhBackward saves its output
  Tensor g = y.sum();
  {
    NoGradGuard guard;
    y.fill_(0.0);
  }
  EXPECT_THROW_WITH(g.backward(), std::runtime_error, "TanhBackward", "modified in place", "version 1 now, 0");

  EXPECT_THROW_WITH(x.mul_(2.0), std::runtime_error, "mul_", "leaf", "[2, 3]");
  Tensor z = x * 2.0;
  EXPECT_THROW_WITH(z.add_(f64({2, 3})), std::runtime_error, "add_", "autograd history", "[2, 3]");
  EXPECT_THROW_WITH(z.requires_grad_(false), std::invalid_argument, "requires_grad_", "detach");
  EXPECT_THROW_WITH(x.set_grad(f64({3})), std::invalid_argument, "set_grad", "[3]", "[2, 3]");
  EXPECT_THROW_WITH(Tensor().shape(), std::logic_error, "undefined Tensor");
}

}  // namespace

// size(dim) is inline now; its errors still name the op and the dims at fault.
TEST(Errors, SizeOfADimensionThatDoesNotExist) {
  Tensor a = zeros({2, 3});
  EXPECT_EQ(a.size(-1), 3);
  EXPECT_EQ(a.size(-2), 2);
  EXPECT_THROW_WITH(a.size(2), std::out_of_range, "size", "dimension 2", "2 dimensions");
  EXPECT_THROW_WITH(a.size(-3), std::out_of_range, "size", "dimension -3");
  EXPECT_THROW_WITH(scalar_tensor(1.0).size(0), std::out_of_range, "size", "0-d tensor", "dimension 0");
  EXPECT_THROW_WITH(Tensor().size(0), std::logic_error, "undefined Tensor");
}
