// test_gradcheck_ops.cpp — every differentiable op's backward against finite differences (float64).
//
// Each op is checked on a plain case, a broadcast case where broadcasting applies, and a non-contiguous
// input (a transposed or strided-slice leaf), because backward formulas most often go wrong where the
// gradient has to be summed over broadcast dims or written back through strides.
#include <gtest/gtest.h>

#include <limits>

#include "tests/test_helpers.h"

namespace {

using namespace autograd;
using testing_helpers::away_from_zero;
using testing_helpers::as_leaf;
using testing_helpers::leaf;
using testing_helpers::randish;
using testing_helpers::sliced_leaf;
using testing_helpers::transposed_leaf;

using Inputs = std::vector<Tensor>;

// The checker itself must be able to fail: an op whose recorded backward is off by a factor of 2.
TEST(GradcheckSelfTest, CatchesAWrongBackward) {
  auto wrong_double = [](const Inputs& x) {
    Tensor out = x[0].detach() * 2.0;
    return record("WrongBackward", out, {x[0]}, {}, [](const Tensor& g) { return Grads{g * 4.0}; });
  };
  GradcheckResult r = gradcheck(wrong_double, Inputs{testing_helpers::leaf({2, 2}, 0)});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("Jacobian mismatch"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("[2, 2]"), std::string::npos) << r.message;
  // and a float32 input is refused, since finite differences in float32 are too coarse
  EXPECT_THROW(gradcheck(wrong_double, Inputs{ones({2}).requires_grad_()}), std::invalid_argument);
}

// ---------------------------------------------------------------- elementwise, tensor ⊕ tensor

TEST(GradcheckElementwise, AddSubMulPlain) {
  Inputs in{leaf({2, 3}, 1), leaf({2, 3}, 2)};
  EXPECT_GRADCHECK([](const Inputs& x) { return add(x[0], x[1]); }, in);
  EXPECT_GRADCHECK([](const Inputs& x) { return sub(x[0], x[1]); }, in);
  EXPECT_GRADCHECK([](const Inputs& x) { return mul(x[0], x[1]); }, in);
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0] * x[0] + x[1] - x[0] * x[1]; }, in);  // operators
}

TEST(GradcheckElementwise, AddSubMulBroadcast) {
  // [2,3,4] with [3,1] (inner stretch) and with [4] (missing leading dims)
  Inputs a{leaf({2, 3, 4}, 3), leaf({3, 1}, 4)};
  Inputs b{leaf({4}, 5), leaf({2, 1, 4}, 6)};
  for (const Inputs& in : {a, b}) {
    EXPECT_GRADCHECK([](const Inputs& x) { return add(x[0], x[1]); }, in);
    EXPECT_GRADCHECK([](const Inputs& x) { return sub(x[0], x[1]); }, in);
    EXPECT_GRADCHECK([](const Inputs& x) { return mul(x[0], x[1]); }, in);
  }
  // a 0-d tensor against a matrix
  Inputs c{leaf({}, 7), leaf({2, 3}, 8)};
  EXPECT_GRADCHECK([](const Inputs& x) { return mul(x[0], x[1]); }, c);
}

TEST(GradcheckElementwise, AddSubMulNonContiguous) {
  Inputs in{transposed_leaf({3, 4}, 9), sliced_leaf({3, 4}, 10)};
  EXPECT_GRADCHECK([](const Inputs& x) { return add(x[0], x[1]); }, in);
  EXPECT_GRADCHECK([](const Inputs& x) { return sub(x[0], x[1]); }, in);
  EXPECT_GRADCHECK([](const Inputs& x) { return mul(x[0], x[1]); }, in);
  Inputs bc{transposed_leaf({3, 4}, 11), sliced_leaf({1, 4}, 12)};
  EXPECT_GRADCHECK([](const Inputs& x) { return mul(x[0], x[1]); }, bc);
}

TEST(GradcheckElementwise, Div) {
  // denominators kept in [0.5, 1.5] so the quotient is smooth
  EXPECT_GRADCHECK([](const Inputs& x) { return div(x[0], x[1]); }, Inputs{leaf({2, 3}, 13), leaf({2, 3}, 14, 0.5, 1.5)});
  EXPECT_GRADCHECK([](const Inputs& x) { return div(x[0], x[1]); },
                   Inputs{leaf({2, 3, 4}, 15), leaf({3, 1}, 16, 0.5, 1.5)});
  EXPECT_GRADCHECK([](const Inputs& x) { return div(x[0], x[1]); },
                   Inputs{leaf({4}, 17, 0.5, 1.5), leaf({2, 4}, 18, 0.5, 1.5)});  // broadcast numerator
  EXPECT_GRADCHECK([](const Inputs& x) { return div(x[0], x[1]); },
                   Inputs{sliced_leaf({3, 4}, 19), transposed_leaf({3, 4}, 20, 0.5, 1.5)});
}

// ---------------------------------------------------------------- tensor ⊕ scalar

TEST(GradcheckElementwise, ScalarForms) {
  for (const Tensor& t : {leaf({2, 3}, 21, 0.5, 1.5), transposed_leaf({2, 3}, 22, 0.5, 1.5)}) {
    Inputs in{t};
    EXPECT_GRADCHECK([](const Inputs& x) { return add(x[0], 2.5); }, in);
    EXPECT_GRADCHECK([](const Inputs& x) { return sub(x[0], 2.5); }, in);
    EXPECT_GRADCHECK([](const Inputs& x) { return rsub(2.5, x[0]); }, in);
    EXPECT_GRADCHECK([](const Inputs& x) { return mul(x[0], -1.5); }, in);
    EXPECT_GRADCHECK([](const Inputs& x) { return div(x[0], 4.0); }, in);
    EXPECT_GRADCHECK([](const Inputs& x) { return rdiv(3.0, x[0]); }, in);
    // the operator spellings reach the same functions
    EXPECT_GRADCHECK([](const Inputs& x) { return 1.0 - x[0] * 2.0 + 3.0 / x[0] - x[0] / 2.0 + (1.0 + x[0]); }, in);
  }
}

// ---------------------------------------------------------------- unary functions

TEST(GradcheckUnary, PlainAndNonContiguous) {
  for (bool strided : {false, true}) {
    SCOPED_TRACE(strided ? "transposed input" : "contiguous input");
    auto any = [&](uint32_t seed) { return strided ? transposed_leaf({3, 4}, seed) : leaf({3, 4}, seed); };
    auto positive = [&](uint32_t seed) {
      return strided ? transposed_leaf({3, 4}, seed, 0.3, 2.0) : leaf({3, 4}, seed, 0.3, 2.0);
    };
    auto nonzero = [&](uint32_t seed) {
      Tensor v = away_from_zero({4, 3}, seed);
      return strided ? as_leaf(v.t()) : as_leaf(v.t().contiguous());
    };
    EXPECT_GRADCHECK([](const Inputs& x) { return neg(x[0]); }, Inputs{any(30)});
    EXPECT_GRADCHECK([](const Inputs& x) { return -x[0]; }, Inputs{any(31)});
    EXPECT_GRADCHECK([](const Inputs& x) { return exp(x[0]); }, Inputs{any(32)});
    EXPECT_GRADCHECK([](const Inputs& x) { return log(x[0]); }, Inputs{positive(33)});
    EXPECT_GRADCHECK([](const Inputs& x) { return sqrt(x[0]); }, Inputs{positive(34)});
    EXPECT_GRADCHECK([](const Inputs& x) { return tanh(x[0]); }, Inputs{any(35)});
    EXPECT_GRADCHECK([](const Inputs& x) { return relu(x[0]); }, Inputs{nonzero(36)});
    EXPECT_GRADCHECK([](const Inputs& x) { return abs(x[0]); }, Inputs{nonzero(37)});
    EXPECT_GRADCHECK([](const Inputs& x) { return x[0].exp().log().tanh(); }, Inputs{any(38)});  // methods
  }
}

TEST(GradcheckUnary, PowScalar) {
  for (double p : {2.0, 3.0, 1.0, 0.0, 0.5, -1.5, 2.5}) {
    SCOPED_TRACE("exponent " + std::to_string(p));
    EXPECT_GRADCHECK([p](const Inputs& x) { return pow(x[0], p); }, Inputs{leaf({2, 3}, 40, 0.3, 2.0)});
    EXPECT_GRADCHECK([p](const Inputs& x) { return x[0].pow(p); }, Inputs{transposed_leaf({2, 3}, 41, 0.3, 2.0)});
  }
  // integer exponents on negative bases
  EXPECT_GRADCHECK([](const Inputs& x) { return pow(x[0], 3.0); }, Inputs{leaf({5}, 42, -2.0, -0.5)});
}

TEST(GradcheckElementwise, Where) {
  Tensor cond = tensor({{true, false, true}, {false, false, true}}).to(DType::Bool);
  EXPECT_GRADCHECK([cond](const Inputs& x) { return where(cond, x[0], x[1]); }, Inputs{leaf({2, 3}, 50), leaf({2, 3}, 51)});
  // broadcast: condition [2,1,3] against a [4,1] and b [3]; both gradients must be summed back
  Tensor cond3 = gt(randish({2, 1, 3}, 52), 0.0);
  EXPECT_GRADCHECK([cond3](const Inputs& x) { return where(cond3, x[0], x[1]); }, Inputs{leaf({4, 1}, 53), leaf({3}, 54)});
  // scalar form and a non-contiguous input
  EXPECT_GRADCHECK([cond](const Inputs& x) { return where(cond, x[0], -2.0); }, Inputs{transposed_leaf({2, 3}, 55)});
  EXPECT_GRADCHECK([cond](const Inputs& x) { return where(cond.t(), x[0], x[1]); },
                   Inputs{transposed_leaf({3, 2}, 56), sliced_leaf({3, 2}, 57)});
}

// ---------------------------------------------------------------- reductions

TEST(GradcheckReduce, Sum) {
  Inputs in{leaf({2, 3, 4}, 60)};
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].sum(); }, in);
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].sum(1); }, in);
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].sum(-1, true); }, in);
  EXPECT_GRADCHECK([](const Inputs& x) { return sum(x[0], {0, 2}, false); }, in);
  EXPECT_GRADCHECK([](const Inputs& x) { return sum(x[0], {-1, 0}, true); }, in);
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].sum(0) * x[0].sum(0); }, in);  // non-linear use
  Inputs nc{transposed_leaf({3, 4}, 61)};
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].sum(0); }, nc);
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].sum(1, true); }, nc);
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].sum(); }, Inputs{sliced_leaf({3, 4}, 62)});
}

TEST(GradcheckReduce, SumTo) {
  Inputs in{leaf({2, 3, 4}, 63)};
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].sum_to({3, 1}); }, in);
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].sum_to({4}); }, in);
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].sum_to({2, 1, 4}); }, in);
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].sum_to({}); }, in);
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].sum_to({1, 4}); }, Inputs{transposed_leaf({3, 4}, 64)});
}

TEST(GradcheckReduce, Mean) {
  Inputs in{leaf({2, 3, 4}, 65)};
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].mean(); }, in);
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].mean(1); }, in);
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].mean(-1, true); }, in);
  EXPECT_GRADCHECK([](const Inputs& x) { return mean(x[0], 0, false); }, in);
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].mean(0); }, Inputs{transposed_leaf({3, 4}, 66)});
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].mean(); }, Inputs{sliced_leaf({3, 4}, 67)});
}

TEST(GradcheckReduce, Max) {
  // random values are distinct (no ties), so the max is differentiable
  Inputs in{leaf({2, 3, 4}, 70)};
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].max(1).first; }, in);
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].max(-1, true).first; }, in);
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].max(0).first; }, in);
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].max(); }, in);
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].max(0).first; }, Inputs{transposed_leaf({3, 4}, 71)});
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].max(1, true).first; }, Inputs{sliced_leaf({3, 4}, 72)});
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].max(); }, Inputs{transposed_leaf({3, 4}, 73)});
}

// ---------------------------------------------------------------- matmul

TEST(GradcheckMatmul, VectorCases) {
  EXPECT_GRADCHECK([](const Inputs& x) { return matmul(x[0], x[1]); }, Inputs{leaf({4}, 80), leaf({4}, 81)});     // dot
  EXPECT_GRADCHECK([](const Inputs& x) { return matmul(x[0], x[1]); }, Inputs{leaf({3}, 82), leaf({3, 4}, 83)});  // row
  EXPECT_GRADCHECK([](const Inputs& x) { return matmul(x[0], x[1]); }, Inputs{leaf({3, 4}, 84), leaf({4}, 85)});  // column
  EXPECT_GRADCHECK([](const Inputs& x) { return matmul(x[0], x[1]); }, Inputs{leaf({3}, 86), leaf({2, 3, 4}, 87)});
  EXPECT_GRADCHECK([](const Inputs& x) { return matmul(x[0], x[1]); }, Inputs{leaf({2, 3, 4}, 88), leaf({4}, 89)});
  EXPECT_GRADCHECK([](const Inputs& x) { return matmul(x[0], x[1]); },
                   Inputs{as_leaf(randish({8}, 90).slice(0, 0, std::nullopt, 2)), leaf({4, 2}, 91)});  // strided vector
}

TEST(GradcheckMatmul, Matrices) {
  EXPECT_GRADCHECK([](const Inputs& x) { return matmul(x[0], x[1]); }, Inputs{leaf({3, 4}, 92), leaf({4, 2}, 93)});
  // transposed operands go to the kernel as strides, not copies
  EXPECT_GRADCHECK([](const Inputs& x) { return matmul(x[0], x[1]); },
                   Inputs{transposed_leaf({3, 4}, 94), transposed_leaf({4, 2}, 95)});
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].matmul(x[1].t()); }, Inputs{leaf({3, 4}, 96), leaf({2, 4}, 97)});
  EXPECT_GRADCHECK([](const Inputs& x) { return matmul(x[0], x[1]); },
                   Inputs{sliced_leaf({3, 4}, 98), leaf({4, 2}, 99)});
  // the same input on both sides: both gradient contributions must arrive
  EXPECT_GRADCHECK([](const Inputs& x) { return matmul(x[0], x[0].t()); }, Inputs{leaf({3, 4}, 100)});
}

TEST(GradcheckMatmul, Batched) {
  EXPECT_GRADCHECK([](const Inputs& x) { return matmul(x[0], x[1]); },
                   Inputs{leaf({2, 3, 4}, 101), leaf({2, 4, 2}, 102)});
  EXPECT_GRADCHECK([](const Inputs& x) { return matmul(x[0], x[1]); },
                   Inputs{leaf({2, 2, 2, 3}, 103), leaf({2, 2, 3, 2}, 104)});  // 4-D
  EXPECT_GRADCHECK([](const Inputs& x) { return matmul(x[0], x[1]); },
                   Inputs{leaf({2, 1, 3, 4}, 105), leaf({5, 4, 2}, 106)});     // broadcast batch → [2,5,3,2]
  EXPECT_GRADCHECK([](const Inputs& x) { return matmul(x[0], x[1]); },
                   Inputs{leaf({1, 3, 4}, 107), leaf({3, 4, 2}, 108)});        // size-1 batch broadcast
  EXPECT_GRADCHECK([](const Inputs& x) { return matmul(x[0], x[1]); },
                   Inputs{leaf({3, 4}, 109), leaf({2, 4, 2}, 110)});           // 2-D @ 3-D: 2-D broadcasts
  EXPECT_GRADCHECK([](const Inputs& x) { return matmul(x[0], x[1].mT()); },
                   Inputs{transposed_leaf({2, 3, 4}, 111), leaf({2, 2, 4}, 112)});
}

TEST(GradcheckMatmul, FoldPath) {
  // [..., M, K] @ [K, N] folds the batch into the rows
  EXPECT_GRADCHECK([](const Inputs& x) { return matmul(x[0], x[1]); },
                   Inputs{leaf({2, 3, 4}, 113), leaf({4, 2}, 114)});
  EXPECT_GRADCHECK([](const Inputs& x) { return matmul(x[0], x[1]); },
                   Inputs{leaf({2, 2, 3, 4}, 115), transposed_leaf({4, 2}, 116)});
  // a non-contiguous batched operand must be copied by the fold's reshape, not viewed wrongly
  EXPECT_GRADCHECK([](const Inputs& x) { return matmul(x[0], x[1]); },
                   Inputs{transposed_leaf({2, 3, 4}, 117), leaf({4, 2}, 118)});
  EXPECT_GRADCHECK([](const Inputs& x) { return matmul(x[0].transpose(0, 1), x[1]); },
                   Inputs{leaf({3, 2, 4}, 119), leaf({4, 2}, 120)});
}

// ---------------------------------------------------------------- softmax family

TEST(GradcheckNN, SoftmaxAndLogSoftmax) {
  Tensor w = randish({2, 3, 4}, 130);  // a fixed weighting so the Jacobian is not trivially rank-deficient
  for (int64_t dim : {0, 1, 2, -1}) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    EXPECT_GRADCHECK([dim](const Inputs& x) { return x[0].softmax(dim); }, Inputs{leaf({2, 3, 4}, 131, -2, 2)});
    EXPECT_GRADCHECK([dim](const Inputs& x) { return x[0].log_softmax(dim); }, Inputs{leaf({2, 3, 4}, 132, -2, 2)});
    EXPECT_GRADCHECK([dim, w](const Inputs& x) { return (softmax(x[0], dim) * w).sum(); }, Inputs{leaf({2, 3, 4}, 133)});
    EXPECT_GRADCHECK([dim, w](const Inputs& x) { return (log_softmax(x[0], dim) * w).sum(); },
                     Inputs{leaf({2, 3, 4}, 134)});
  }
  Inputs nc{transposed_leaf({3, 4}, 135, -2, 2)};
  for (int64_t dim : {0, 1}) {
    EXPECT_GRADCHECK([dim](const Inputs& x) { return x[0].softmax(dim); }, nc);
    EXPECT_GRADCHECK([dim](const Inputs& x) { return x[0].log_softmax(dim); }, nc);
  }
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].softmax(-1); }, Inputs{sliced_leaf({3, 4}, 136)});
  // a non-contiguous incoming gradient (softmax then transpose)
  EXPECT_GRADCHECK([w](const Inputs& x) { return x[0].softmax(-1).transpose(0, 2) * w.transpose(0, 2); },
                   Inputs{leaf({2, 3, 4}, 137)});
}

TEST(GradcheckNN, SoftmaxWithMaskedEntries) {
  // -inf entries (an attention mask) get probability 0 and no gradient; the rest must still check out
  Tensor mask = tensor({{false, true, false, true}, {false, false, false, true}}).to(DType::Bool);
  auto inf = std::numeric_limits<double>::infinity();
  EXPECT_GRADCHECK([mask, inf](const Inputs& x) { return x[0].masked_fill(mask, -inf).softmax(-1); },
                   Inputs{leaf({2, 4}, 138)});
  EXPECT_GRADCHECK([mask, inf](const Inputs& x) { return x[0].masked_fill(mask, -inf).log_softmax(-1).masked_fill(mask, 0.0); },
                   Inputs{leaf({2, 4}, 139)});
}

// ---------------------------------------------------------------- masked_fill

TEST(GradcheckNN, MaskedFill) {
  Tensor mask = tensor({{true, false, false}, {false, true, false}}).to(DType::Bool);
  EXPECT_GRADCHECK([mask](const Inputs& x) { return x[0].masked_fill(mask, 5.0); }, Inputs{leaf({2, 3}, 140)});
  // a [3] and a [1,3] mask broadcast over the rows of [2,2,3]
  Tensor row = tensor({false, true, false}).to(DType::Bool);
  EXPECT_GRADCHECK([row](const Inputs& x) { return masked_fill(x[0], row, -1.0); }, Inputs{leaf({2, 2, 3}, 141)});
  EXPECT_GRADCHECK([row](const Inputs& x) { return masked_fill(x[0], row.view({1, 3}), -1.0) * x[0]; },
                   Inputs{leaf({2, 3}, 142)});
  EXPECT_GRADCHECK([mask](const Inputs& x) { return x[0].masked_fill(mask, 0.5); }, Inputs{transposed_leaf({2, 3}, 143)});
  EXPECT_GRADCHECK([mask](const Inputs& x) { return x[0].masked_fill(mask.t(), 0.5); }, Inputs{transposed_leaf({3, 2}, 144)});
}

TEST(GradcheckNN, MaskedFillInPlaceOnNonLeaf) {
  Tensor mask = tensor({{true, false, false}, {false, true, true}}).to(DType::Bool);
  Tensor row = tensor({true, false, false}).to(DType::Bool);
  // masked_fill_ replaces the tensor's history: the gradient must flow through the ops before it
  EXPECT_GRADCHECK([mask](const Inputs& x) {
    Tensor y = x[0] * x[1] + 1.0;
    y.masked_fill_(mask, 7.0);
    return y * x[1];
  }, Inputs{leaf({2, 3}, 145), leaf({2, 3}, 146)});
  EXPECT_GRADCHECK([row](const Inputs& x) {
    Tensor y = matmul(x[0], x[1]);  // [2,3]
    y.masked_fill_(row, -3.0);
    return y.softmax(-1);
  }, Inputs{leaf({2, 4}, 147), transposed_leaf({4, 3}, 148)});
}

// ---------------------------------------------------------------- embedding and losses

TEST(GradcheckNN, Embedding) {
  Tensor idx = tensor({{0, 2, 2}, {4, 0, 2}});  // repeated rows must accumulate
  EXPECT_GRADCHECK([idx](const Inputs& x) { return embedding(x[0], idx); }, Inputs{leaf({5, 3}, 150)});
  EXPECT_GRADCHECK([idx](const Inputs& x) { return embedding(x[0], idx) * embedding(x[0], idx); },
                   Inputs{leaf({5, 3}, 151)});
  EXPECT_GRADCHECK([idx](const Inputs& x) { return embedding(x[0], idx); }, Inputs{transposed_leaf({5, 3}, 152)});
  Tensor flat = tensor({1, 1, 1, 3});
  EXPECT_GRADCHECK([flat](const Inputs& x) { return embedding(x[0], flat).sum(0); }, Inputs{leaf({4, 2}, 153)});
  // strided indices (every other element) and a non-contiguous incoming gradient
  Tensor strided = tensor({3, 9, 0, 9, 3, 9}).slice(0, 0, std::nullopt, 2);
  EXPECT_GRADCHECK([strided](const Inputs& x) { return embedding(x[0], strided).t(); }, Inputs{leaf({4, 2}, 154)});
}

TEST(GradcheckNN, CrossEntropy) {
  Tensor targets = tensor({1, 0, 4, 2});
  EXPECT_GRADCHECK([targets](const Inputs& x) { return cross_entropy(x[0], targets); }, Inputs{leaf({4, 5}, 160, -2, 2)});
  EXPECT_GRADCHECK([targets](const Inputs& x) { return cross_entropy(x[0], targets); },
                   Inputs{transposed_leaf({4, 5}, 161, -2, 2)});
  // ignored rows contribute nothing and do not count in the mean
  Tensor ignored = tensor({1, -100, 4, -100});
  EXPECT_GRADCHECK([ignored](const Inputs& x) { return cross_entropy(x[0], ignored); }, Inputs{leaf({4, 5}, 162, -2, 2)});
  Tensor custom = tensor({1, 3, 3, 0});
  EXPECT_GRADCHECK([custom](const Inputs& x) { return cross_entropy(x[0], custom, 3); }, Inputs{leaf({4, 5}, 163)});
  // logits computed from a view of a 3-D tensor, as a language model flattens them
  EXPECT_GRADCHECK([targets](const Inputs& x) { return cross_entropy(x[0].view({-1, 5}), targets); },
                   Inputs{leaf({2, 2, 5}, 164)});
}

TEST(GradcheckNN, NllLoss) {
  Tensor targets = tensor({2, 0, 3});
  EXPECT_GRADCHECK([targets](const Inputs& x) { return nll_loss(x[0], targets); }, Inputs{leaf({3, 4}, 170)});
  EXPECT_GRADCHECK([targets](const Inputs& x) { return nll_loss(x[0].log_softmax(1), targets); }, Inputs{leaf({3, 4}, 171)});
  EXPECT_GRADCHECK([targets](const Inputs& x) { return nll_loss(x[0], targets); }, Inputs{transposed_leaf({3, 4}, 172)});
  Tensor ignored = tensor({2, -100, 3});
  EXPECT_GRADCHECK([ignored](const Inputs& x) { return nll_loss(x[0], ignored) * 3.0; }, Inputs{leaf({3, 4}, 173)});
}

TEST(GradcheckNN, Linear) {
  Inputs in{leaf({2, 3}, 180), leaf({4, 3}, 181), leaf({4}, 182)};
  EXPECT_GRADCHECK([](const Inputs& x) { return linear(x[0], x[1], x[2]); }, in);
  EXPECT_GRADCHECK([](const Inputs& x) { return linear(x[0], x[1]); }, in);  // no bias
  EXPECT_GRADCHECK([](const Inputs& x) { return linear(x[0], x[1], x[2]); },
                   Inputs{leaf({2, 2, 3}, 183), leaf({4, 3}, 184), leaf({4}, 185)});  // batched input
  EXPECT_GRADCHECK([](const Inputs& x) { return linear(x[0], x[1], x[2]); },
                   Inputs{leaf({3}, 186), leaf({4, 3}, 187), leaf({4}, 188)});  // a single vector
  EXPECT_GRADCHECK([](const Inputs& x) { return linear(x[0], x[1], x[2]); },
                   Inputs{transposed_leaf({2, 3}, 189), transposed_leaf({4, 3}, 190), sliced_leaf({4}, 191)});
}

// ---------------------------------------------------------------- views

TEST(GradcheckViews, ViewAndReshape) {
  Tensor w = randish({2, 6}, 200);  // weighting makes each output element's gradient distinct
  EXPECT_GRADCHECK([w](const Inputs& x) { return x[0].view({2, 6}) * w; }, Inputs{leaf({3, 4}, 201)});
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].view({-1}); }, Inputs{leaf({2, 3}, 202)});
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].view({4, 1, 3}); }, Inputs{leaf({2, 6}, 203)});
  EXPECT_GRADCHECK([w](const Inputs& x) { return x[0].reshape({2, 6}) * w; }, Inputs{leaf({3, 4}, 204)});
  // reshape of a transposed tensor cannot be a view: it copies, and the gradient must still map back
  EXPECT_GRADCHECK([w](const Inputs& x) { return x[0].reshape({2, 6}) * w; }, Inputs{transposed_leaf({3, 4}, 205)});
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].flatten(); }, Inputs{transposed_leaf({3, 4}, 206)});
  // flatten(start, end): a view of a contiguous input, a copy of a transposed or sliced one
  EXPECT_GRADCHECK([w](const Inputs& x) { return x[0].flatten(1) * w; }, Inputs{leaf({2, 3, 2}, 209)});
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].flatten(0, 1); }, Inputs{leaf({2, 3, 2}, 210)});
  EXPECT_GRADCHECK([](const Inputs& x) { return flatten(x[0], -2, -1); }, Inputs{transposed_leaf({2, 3, 4}, 211)});
  EXPECT_GRADCHECK([w](const Inputs& x) { return x[0].transpose(0, 2).flatten(1) * w; }, Inputs{leaf({2, 3, 2}, 212)});
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].flatten(0, 1); }, Inputs{sliced_leaf({2, 3, 4}, 213)});
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].flatten(); }, Inputs{sliced_leaf({2, 3, 4}, 214)});
  // view that splits a dim of a transposed tensor (allowed) and of a sliced tensor
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].view({2, 2, 3}); }, Inputs{transposed_leaf({4, 3}, 207)});
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].view({3, 2, 2}); }, Inputs{sliced_leaf({3, 4}, 208)});
}

TEST(GradcheckViews, TransposePermute) {
  Tensor w = randish({4, 3}, 210);
  EXPECT_GRADCHECK([w](const Inputs& x) { return x[0].transpose(0, 1) * w; }, Inputs{leaf({3, 4}, 211)});
  EXPECT_GRADCHECK([w](const Inputs& x) { return x[0].t() * w; }, Inputs{transposed_leaf({3, 4}, 212)});
  Tensor w3 = randish({4, 2, 3}, 213);
  EXPECT_GRADCHECK([w3](const Inputs& x) { return x[0].permute({2, 0, 1}) * w3; }, Inputs{leaf({2, 3, 4}, 214)});
  EXPECT_GRADCHECK([w3](const Inputs& x) { return x[0].permute({-1, 0, 1}) * w3; }, Inputs{transposed_leaf({2, 3, 4}, 215)});
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].transpose(-1, 0).mT(); }, Inputs{leaf({2, 3, 4}, 216)});
}

TEST(GradcheckViews, SqueezeUnsqueezeExpand) {
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].unsqueeze(1); }, Inputs{leaf({2, 3}, 220)});
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].unsqueeze(-1) * x[0].unsqueeze(1); }, Inputs{transposed_leaf({2, 3}, 221)});
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].squeeze(); }, Inputs{leaf({1, 3, 1}, 222)});
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].squeeze(-1); }, Inputs{leaf({2, 3, 1}, 223)});
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].squeeze(0); }, Inputs{leaf({2, 3}, 224)});  // no-op
  Tensor w = randish({2, 3, 4}, 225);
  EXPECT_GRADCHECK([w](const Inputs& x) { return x[0].expand({2, 3, 4}) * w; }, Inputs{leaf({3, 1}, 226)});
  EXPECT_GRADCHECK([w](const Inputs& x) { return x[0].expand({2, -1, 4}) * w; }, Inputs{leaf({1, 3, 1}, 227)});
  EXPECT_GRADCHECK([w](const Inputs& x) { return x[0].unsqueeze(0).expand({2, 3, 4}) * w; }, Inputs{transposed_leaf({3, 4}, 228)});
}

TEST(GradcheckViews, NarrowSliceSelect) {
  Inputs in{leaf({4, 5}, 230)};
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].narrow(1, 1, 3); }, in);
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].narrow(0, -2, 2); }, in);
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].slice(1, 0, std::nullopt, 2); }, in);
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].slice(0, 1, 4, 2); }, in);
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].slice(-1, -3, std::nullopt); }, in);
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].select(0, 2); }, in);
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].select(1, -1); }, in);
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0][1] * x[0][3]; }, in);
  // overlapping slices of the same input: gradients from both must add up
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].narrow(1, 0, 3) * x[0].narrow(1, 2, 3); }, in);
  Inputs nc{transposed_leaf({4, 5}, 231)};
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].slice(0, 1, std::nullopt, 2); }, nc);
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].select(1, 2); }, nc);
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].narrow(1, 1, 2).slice(0, 0, std::nullopt, 3); }, nc);
}

// ---------------------------------------------------------------- joining, splitting, triangles

TEST(GradcheckShape, Cat) {
  EXPECT_GRADCHECK([](const Inputs& x) { return cat({x[0], x[1]}, 0); }, Inputs{leaf({2, 3}, 240), leaf({1, 3}, 241)});
  EXPECT_GRADCHECK([](const Inputs& x) { return cat({x[0], x[1], x[0]}, -1); }, Inputs{leaf({2, 3}, 242), leaf({2, 2}, 243)});
  EXPECT_GRADCHECK([](const Inputs& x) { return cat({x[0], x[1]}, 1); },
                   Inputs{transposed_leaf({2, 3}, 244), sliced_leaf({2, 2}, 245)});
  // an input that does not require grad in the middle
  Tensor c = randish({2, 3}, 246);
  EXPECT_GRADCHECK([c](const Inputs& x) { return cat({x[0], c, x[1]}, 0); }, Inputs{leaf({1, 3}, 247), leaf({2, 3}, 248)});
}

TEST(GradcheckShape, Stack) {
  Inputs in{leaf({2, 3}, 250), leaf({2, 3}, 251)};
  for (int64_t dim : {0, 1, 2, -1}) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    EXPECT_GRADCHECK([dim](const Inputs& x) { return stack({x[0], x[1], x[0]}, dim); }, in);
  }
  EXPECT_GRADCHECK([](const Inputs& x) { return stack({x[0], x[1]}, 1); }, Inputs{transposed_leaf({2, 3}, 252), leaf({2, 3}, 253)});
}

TEST(GradcheckShape, Chunk) {
  EXPECT_GRADCHECK([](const Inputs& x) {
    std::vector<Tensor> parts = chunk(x[0], 3, 1);  // 7 columns → 3, 3, 1
    EXPECT_EQ(parts.size(), 3u);
    return parts[0] * parts[1] + parts[2];
  }, Inputs{leaf({2, 7}, 260)});
  EXPECT_GRADCHECK([](const Inputs& x) {
    std::vector<Tensor> parts = chunk(x[0], 2, 0);
    return parts[1] - parts[0] * 2.0;
  }, Inputs{transposed_leaf({4, 3}, 261)});
}

TEST(GradcheckShape, TrilTriu) {
  for (int64_t d : {0, 1, -1}) {
    SCOPED_TRACE("diagonal " + std::to_string(d));
    EXPECT_GRADCHECK([d](const Inputs& x) { return x[0].tril(d); }, Inputs{leaf({3, 4}, 270)});
    EXPECT_GRADCHECK([d](const Inputs& x) { return x[0].triu(d); }, Inputs{leaf({3, 4}, 271)});
    EXPECT_GRADCHECK([d](const Inputs& x) { return tril(x[0], d); }, Inputs{leaf({2, 3, 3}, 272)});
    EXPECT_GRADCHECK([d](const Inputs& x) { return triu(x[0], d); }, Inputs{transposed_leaf({2, 4, 3}, 273)});
  }
}

// ---------------------------------------------------------------- copies and conversions

TEST(GradcheckCopies, CloneContiguous) {
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].clone() * x[0]; }, Inputs{leaf({2, 3}, 280)});
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].clone(); }, Inputs{transposed_leaf({2, 3}, 281)});
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].contiguous(); }, Inputs{transposed_leaf({2, 3}, 282)});
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].contiguous() * 2.0; }, Inputs{leaf({2, 3}, 283)});  // no-op
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].contiguous(); }, Inputs{sliced_leaf({2, 3}, 284)});
}

TEST(GradcheckCopies, ToDtype) {
  // Through float32 the function is still the identity, but rounding to float32 (~6e-8 relative) needs
  // a larger step than the default eps to keep finite differences accurate.
  GradcheckOptions coarse;
  coarse.eps = 1e-2;
  coarse.atol = 1e-4;
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].to(DType::Float32).to(DType::Float64) * 3.0; },
                   Inputs{leaf({2, 3}, 290)}, coarse);
  EXPECT_GRADCHECK([](const Inputs& x) { return (x[0].to(DType::Float32) * 2.0f).to(DType::Float64); },
                   Inputs{transposed_leaf({2, 3}, 291)}, coarse);
  EXPECT_GRADCHECK([](const Inputs& x) { return x[0].to(DType::Float64); }, Inputs{leaf({2, 3}, 292)});  // no-op

  // The gradient arrives in the leaf's own dtype with the right values.
  Tensor x = leaf({3}, 293);
  Tensor y = x.to(DType::Float32);
  EXPECT_EQ(y.dtype(), DType::Float32);
  (y * tensor({1.0f, 2.0f, 3.0f})).sum().backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().dtype(), DType::Float64);
  testing_helpers::expect_values(x.grad(), {3}, {1, 2, 3});
  // and a float32 leaf gets float32 gradients back through a float64 computation
  Tensor f = tensor({0.5f, -1.25f}).requires_grad_();
  (f.to(DType::Float64).pow(2.0)).sum().backward();
  EXPECT_EQ(f.grad().dtype(), DType::Float32);
  testing_helpers::expect_values(f.grad(), {2}, {1.0, -2.5});
}

// ---------------------------------------------------------------- a composite: one attention head

TEST(GradcheckComposite, AttentionHead) {
  // q, k, v projections, causal mask, softmax, weighted sum, output projection, cross-entropy
  Tensor mask = ones({3, 3}, DType::Bool).triu(1);
  Tensor targets = tensor({1, 0, 3, 2, 0, 1});
  auto inf = std::numeric_limits<double>::infinity();
  EXPECT_GRADCHECK([=](const Inputs& x) {
    Tensor h = embedding(x[0], tensor({{0, 1, 2}, {2, 2, 1}}));  // [2,3,4]
    Tensor q = linear(h, x[1]), k = linear(h, x[2]), v = h;
    Tensor scores = matmul(q, k.mT()) / 2.0;
    scores = scores.masked_fill(mask, -inf);
    Tensor out = matmul(scores.softmax(-1), v) + h;
    return cross_entropy(out.reshape({-1, 4}), targets);
  }, Inputs{leaf({3, 4}, 300), leaf({4, 4}, 301), leaf({4, 4}, 302)});
}

}  // namespace
