// test_concurrency.cpp — two threads, each training its own model at the same time, compute exactly what
// each computes alone. CI also runs this suite in a ThreadSanitizer build (.ci/run), which fails on any
// data race between the two, in the engine, the allocator caches, the kernels or the optimizer.
#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "autograd/autograd.h"
#include "nn/gpt.h"
#include "optim/optim.h"

using namespace autograd;

namespace {

struct TrainingRun {
  std::vector<double> losses;
  std::vector<std::vector<char>> parameters;  // the bytes of every parameter after training
};

// A small GPT (dropout on, so the generator matters) trained with AdamW on random tokens; every draw
// comes from this thread's own generator.
TrainingRun train_a_gpt(uint64_t seed, int steps) {
  Generator generator(seed);
  ThreadDefaultGenerator use(generator);
  nn::GPTModel model({.vocab_size = 17, .context_length = 8, .emb_dim = 16, .n_heads = 2, .n_layers = 2, .drop_rate = 0.1});
  optim::AdamW opt(model.parameters(), {.lr = 3e-3});
  const Tensor tokens = randint(0, 17, {4, 9});
  TrainingRun run;
  for (int step = 0; step < steps; ++step) {
    opt.zero_grad();
    Tensor logits = model(tokens.narrow(1, 0, 8));
    Tensor loss = cross_entropy(logits.view({-1, 17}), tokens.narrow(1, 1, 8).contiguous().view({-1}));
    loss.backward();
    opt.step();
    run.losses.push_back(loss.item());
  }
  for (const Tensor& p : model.parameters()) {
    const Tensor c = p.detach().contiguous();
    const char* bytes = static_cast<const char*>(c.raw_data());
    run.parameters.emplace_back(bytes, bytes + c.numel() * int64_t(dtype_size(c.dtype())));
  }
  return run;
}

}  // namespace

TEST(Concurrency, TwoModelsTrainedAtOnceGiveTheBitsOfEachTrainedAlone) {
  constexpr int kSteps = 12;
  const TrainingRun alone_a = train_a_gpt(1, kSteps), alone_b = train_a_gpt(2, kSteps);
  ASSERT_NE(alone_a.losses, alone_b.losses) << "two seeds must give two different runs";
  TrainingRun together_a, together_b;
  std::thread a([&] { together_a = train_a_gpt(1, kSteps); });
  std::thread b([&] { together_b = train_a_gpt(2, kSteps); });
  a.join();
  b.join();
  EXPECT_EQ(together_a.losses, alone_a.losses);
  EXPECT_EQ(together_b.losses, alone_b.losses);
  EXPECT_TRUE(together_a.parameters == alone_a.parameters) << "model 1's parameters differ by a bit or more";
  EXPECT_TRUE(together_b.parameters == alone_b.parameters) << "model 2's parameters differ by a bit or more";
}

TEST(Concurrency, AThreadsOwnGeneratorLeavesTheProcessWideOneAlone) {
  manual_seed(5);
  const Tensor expected = rand({3});
  manual_seed(5);
  std::thread([] {
    Generator mine(99);
    ThreadDefaultGenerator use(mine);
    manual_seed(7);  // seeds `mine`, not the process-wide generator
    (void)rand({1000});
  }).join();
  EXPECT_TRUE(equal(rand({3}), expected));
}
