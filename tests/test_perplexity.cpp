// test_perplexity.cpp — the sliding-window loss (nn/perplexity.h) against scoring every token on its own:
// each target j is predicted from exactly the ids its window gives it, counted once.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "nn/gpt2.h"
#include "nn/perplexity.h"

#ifndef SCRATCHGRAD_SOURCE_DIR
#define SCRATCHGRAD_SOURCE_DIR "/work/main"
#endif

namespace {

using namespace autograd;

std::unique_ptr<nn::GPTModel> model() {
  return nn::load_gpt2(std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/reference/fixtures/gpt2/tiny_gpt2.safetensors");
}

std::vector<int64_t> some_ids(int64_t n) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back((i * 17 + i * i) % 50);
  return ids;
}

// −ln p(ids[j] | ids[begin..j)), from a forward over just those ids.
double nll_of(const nn::GPTModel& m, const std::vector<int64_t>& ids, int64_t begin, int64_t j) {
  NoGradGuard no_grad;
  const std::vector<int64_t> input(ids.begin() + begin, ids.begin() + j);
  const Tensor logits = m(from_vector(input, {1, j - begin}))[0].select(0, -1);
  return -log_softmax(logits, 0)[ids[size_t(j)]].item();
}

// The definition, token by token: window k starts at k·stride and predicts up to min(k·stride + context,
// n − 1); target j belongs to the first window that reaches it.
double by_definition(const nn::GPTModel& m, const std::vector<int64_t>& ids, int64_t context, int64_t stride) {
  const int64_t last = int64_t(ids.size()) - 1;
  double total = 0;
  for (int64_t j = 1; j <= last; ++j) {
    int64_t begin = 0;
    while (std::min(begin + context, last) < j) begin += stride;
    total += nll_of(m, ids, begin, j);
  }
  return total;
}

auto forward_of(const nn::GPTModel& m) {
  return [&m](const Tensor& ids) { return m(ids); };
}

TEST(SlidingWindowLoss, EveryTokenOnceWithTheContextItsWindowGives) {
  auto m = model();
  const std::vector<int64_t> ids = some_ids(40);
  for (auto [context, stride] : {std::pair<int64_t, int64_t>{16, 16}, {16, 8}, {16, 5}, {16, 1}, {7, 3}}) {
    const nn::TextLoss loss = nn::sliding_window_loss(forward_of(*m), ids, context, stride);
    EXPECT_EQ(loss.predictions, 39);
    const double want = by_definition(*m, ids, context, stride);
    EXPECT_NEAR(loss.total_nll, want, 1e-4 * want) << context << " " << stride;
  }
}

TEST(SlidingWindowLoss, AShortTextIsOneForward) {
  auto m = model();
  const std::vector<int64_t> ids = some_ids(12);
  const nn::TextLoss loss = nn::sliding_window_loss(forward_of(*m), ids, 16, 4);
  NoGradGuard no_grad;
  const Tensor logits = (*m)(from_vector(std::vector<int64_t>(ids.begin(), ids.end() - 1), {1, 11}))[0];
  const double mean = cross_entropy(logits, from_vector(std::vector<int64_t>(ids.begin() + 1, ids.end()), {11})).item();
  EXPECT_NEAR(loss.mean(), mean, 1e-6);
  EXPECT_NEAR(loss.perplexity(), std::exp(mean), 1e-5);
  EXPECT_NEAR(loss.bits_per_byte(22), loss.total_nll / std::log(2.0) / 22, 1e-12);
}

TEST(SlidingWindowLoss, BadArgumentsAreRefused) {
  auto m = model();
  EXPECT_THROW(nn::sliding_window_loss(forward_of(*m), {3}, 16, 4), std::invalid_argument);
  EXPECT_THROW(nn::sliding_window_loss(forward_of(*m), some_ids(20), 16, 17), std::invalid_argument);
  EXPECT_THROW(nn::sliding_window_loss(forward_of(*m), some_ids(20), 16, 0), std::invalid_argument);
}

}  // namespace
