// test_anomaly.cpp — anomaly mode (DetectAnomalyGuard): the first NaN/Inf produced in forward or backward
// raises an error naming the op, the node and where it was recorded; masks and carried-over values don't.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "nn/nn.h"
#include "test_helpers.h"

namespace {

using namespace autograd;

// Runs `f`, expects std::runtime_error, returns its message ("" when nothing was thrown).
template <typename F> std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an anomaly error";
  return "";
}

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "expected '" << part << "' in: " << text;
}

TEST(Anomaly, OffByDefaultAndTheGuardRestores) {
  EXPECT_FALSE(is_anomaly_enabled());
  {
    DetectAnomalyGuard guard;
    EXPECT_TRUE(is_anomaly_enabled());
    {
      DetectAnomalyGuard nested;
      EXPECT_TRUE(is_anomaly_enabled());
    }
    EXPECT_TRUE(is_anomaly_enabled());
  }
  EXPECT_FALSE(is_anomaly_enabled());
  // without the guard a NaN passes silently, as in PyTorch
  Tensor x = tensor({-1.0, 2.0}).requires_grad_();
  EXPECT_NO_THROW((void)x.log());
}

TEST(Anomaly, ForwardLogOfANegativeNumberNamesOpNodeAndSite) {
  DetectAnomalyGuard guard;
  Tensor x = tensor({2.0, -1.0}).requires_grad_();  // float32: reading it must not record a conversion node
  std::string message = error_of([&] {
    CallSite here("y = x.log()  # test line");
    (void)x.log();
  });
  expect_contains(message, "forward of log produced nan");
  expect_contains(message, "flat index 1");
  expect_contains(message, "LogBackward0");
  expect_contains(message, "elementwise.cpp:");
  expect_contains(message, "y = x.log()  # test line");
  EXPECT_EQ(message.find("ToCopy"), std::string::npos) << message;
}

TEST(Anomaly, ForwardLogOfZeroIsMinusInf) {
  DetectAnomalyGuard guard;
  Tensor x = tensor({0.5, 0.0}, DType::Float64).requires_grad_();
  std::string message = error_of([&] { (void)(x * 2.0).log(); });
  expect_contains(message, "produced -inf");
  expect_contains(message, "LogBackward0");
  expect_contains(message, "flat index 1");
}

TEST(Anomaly, BackwardSqrtAtZeroGivesAnInfiniteGradient) {
  DetectAnomalyGuard guard;
  Tensor x = tensor({4.0, 0.0}).requires_grad_();
  Tensor y;
  {
    CallSite here("y = x.sqrt()");
    y = x.sqrt();  // forward is fine: sqrt(0) = 0
  }
  std::string message = error_of([&] { y.sum().backward(); });
  expect_contains(message, "backward of SqrtBackward0 returned inf");
  expect_contains(message, "gradient for input 0");
  expect_contains(message, "flat index 1");
  expect_contains(message, "sqrt() in elementwise.cpp:");
  expect_contains(message, "y = x.sqrt()");
  EXPECT_FALSE(x.grad().defined()) << "the error stops backward before the leaf is touched";
}

TEST(Anomaly, BackwardNanFromZeroOverZero) {
  DetectAnomalyGuard guard;
  Tensor x = tensor({1.0, 0.0}).requires_grad_();
  Tensor y = x.sqrt() * 0.0;  // gradient of sqrt at 0: 0 / (2·0) = nan
  std::string message = error_of([&] { y.sum().backward(); });
  expect_contains(message, "SqrtBackward0 returned nan");
}

TEST(Anomaly, MaskedFillInfinityIsACausalMaskNotAnAnomaly) {
  DetectAnomalyGuard guard;
  Tensor scores = testing_helpers::leaf({3, 3}, 1);
  Tensor blocked = tril(ones({3, 3})) == 0.0;
  Tensor masked = scores.masked_fill(blocked, -std::numeric_limits<double>::infinity());
  Tensor p = softmax(masked, -1);
  Tensor shifted = masked + 1.0;  // -inf carried over from the input: not produced here
  EXPECT_NO_THROW((p.sum() + shifted.softmax(-1).sum()).backward());
  EXPECT_TRUE(std::isfinite(scores.grad().abs().sum().item()));
}

TEST(Anomaly, CausalScoresInfinityIsACausalMaskNotAnAnomaly) {
  DetectAnomalyGuard guard;
  Tensor q = testing_helpers::leaf({40, 3}, 3), k = testing_helpers::leaf({40, 3}, 4);
  Tensor v = testing_helpers::leaf({40, 3}, 5);
  EXPECT_NO_THROW(tril_matmul(softmax(causal_scores(q, k, 2.0), -1), v).sum().backward());
  EXPECT_TRUE(std::isfinite(q.grad().abs().sum().item()));
}

TEST(Anomaly, NanFromAnInfiniteInputIsStillCaught) {
  DetectAnomalyGuard guard;
  Tensor scores = testing_helpers::leaf({2, 2}, 2);
  Tensor blocked = tensor({{0, 1}, {0, 0}}) == 1;
  Tensor masked = scores.masked_fill(blocked, -std::numeric_limits<double>::infinity());
  std::string message = error_of([&] { (void)(masked * 0.0); });  // -inf · 0 = nan
  expect_contains(message, "produced nan");
  expect_contains(message, "MulBackward0");
}

TEST(Anomaly, AFullyMaskedRowMakesSoftmaxNan) {
  // the classic bug: a row with every position masked has no probabilities to share out
  DetectAnomalyGuard guard;
  Tensor scores = testing_helpers::leaf({2, 3}, 3);
  Tensor blocked = tensor({{1, 1, 1}, {0, 0, 1}}) == 1;
  Tensor masked = scores.masked_fill(blocked, -std::numeric_limits<double>::infinity());
  std::string message = error_of([&] { (void)softmax(masked, -1); });
  expect_contains(message, "produced nan");
  expect_contains(message, "Softmax");
}

TEST(Anomaly, TheCharModelTrainsCleanlyUnderAnomalyMode) {
  for (int64_t heads : {1, 2}) {
    manual_seed(7);
    nn::MiniSelfAttention model({.vocab = 5, .dim = 8, .context = 4, .heads = heads});
    Tensor idx = tensor({{0, 1, 2, 3}, {4, 3, 2, 1}});
    Tensor targets = tensor({{1, 2, 3, 4}, {3, 2, 1, 0}});
    DetectAnomalyGuard guard;
    Tensor loss = cross_entropy(model(idx).view({-1, 5}), targets.view({-1}));
    EXPECT_NO_THROW(loss.backward()) << heads << " heads";
    EXPECT_TRUE(model.q->weight.grad().defined());
  }
}

TEST(Anomaly, ErrorsInsideTheModelNameTheModelsLine) {
  manual_seed(7);
  nn::MiniSelfAttention model({.vocab = 5, .dim = 8, .context = 4});
  {
    NoGradGuard no_grad;
    model.q->weight.fill_(std::numeric_limits<double>::infinity());
  }
  DetectAnomalyGuard guard;
  std::string message = error_of([&] { (void)model(tensor({{0, 1, 2, 3}})); });
  expect_contains(message, "att = (q(x) @ k(x).transpose(-2, -1)) / D**0.5");
}

}  // namespace
