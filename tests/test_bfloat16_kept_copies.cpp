// test_bfloat16_kept_copies.cpp — autocast keeps each trained weight's bfloat16 copy from step to step
// (autograd/autocast.h: autocast_operand), and AdamW writes it in the same pass as the weight
// (Backend::adam_update_rounding). A kept copy must never change a bit of training: these tests hold every
// way a weight can change (AdamW, an in-place write, a graph still holding the old copy) to the rounding a
// fresh conversion would make.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/autograd.h"
#include "nn/gpt.h"
#include "optim/optim.h"

namespace {

using namespace autograd;

// Same dtype, shape and bytes.
void expect_same_bits(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const Tensor g = got.contiguous(), w = want.contiguous();
  EXPECT_EQ(std::memcmp(g.raw_data(), w.raw_data(), size_t(g.numel()) * dtype_size(g.dtype())), 0) << what;
}

// A weight's copy as autocast_operand hands it out (no history needed to look at it).
Tensor operand(const Tensor& w) {
  AutocastGuard bf16(DType::BFloat16);
  NoGradGuard no_grad;
  return autocast_operand(w);
}

// Keeping copies on for one test, whatever the process had, and dropping what it kept afterwards.
struct Keeping {
  bool before = keep_bfloat16_copies();
  explicit Keeping(bool on) { set_keep_bfloat16_copies(on); }
  ~Keeping() { set_keep_bfloat16_copies(before); }
};

TEST(KeptCopies, AWeightIsRoundedOnceAndReadFromItsCopyAfterwards) {
  Keeping on(true);
  manual_seed(7);
  const Tensor w = randn({24, 40}).requires_grad_(true);
  const Tensor first = operand(w), second = operand(w);
  expect_same_bits(first, w.detach().to(DType::BFloat16), "the copy");
  EXPECT_EQ(first.raw_data(), second.raw_data());  // the same memory: not rounded again
  // an activation (no leaf) and a frozen weight are rounded afresh each time, never kept
  const Tensor activation = w * 2.0, frozen = w.detach().clone();
  EXPECT_NE(operand(activation).raw_data(), operand(activation).raw_data());
  EXPECT_NE(operand(frozen).raw_data(), operand(frozen).raw_data());
  // with keeping off, the weight too
  set_keep_bfloat16_copies(false);
  EXPECT_NE(operand(w).raw_data(), operand(w).raw_data());
}

TEST(KeptCopies, AnInPlaceWriteIsSeenByTheNextProduct) {
  Keeping on(true);
  manual_seed(8);
  const Tensor w = randn({16, 16}).requires_grad_(true);
  const void* memory = operand(w).raw_data();
  {
    NoGradGuard no_grad;
    Tensor(w).mul_(3.0);  // moves w's version counter
  }
  const Tensor after = operand(w);
  expect_same_bits(after, w.detach().to(DType::BFloat16), "after mul_");
  EXPECT_EQ(after.raw_data(), memory);  // rounded again into the same memory: nothing else held it
}

// AdamW writes the copy in its own pass: afterwards the copy is the new weight rounded, in the same memory.
TEST(KeptCopies, AdamWWritesTheCopyWithTheWeight) {
  Keeping on(true);
  manual_seed(9);
  const Tensor w = randn({33, 70}).requires_grad_(true);  // 2,310 values: a block of 2,048 and a part block
  const Tensor x = randn({5, 70});
  optim::AdamW opt({w}, {.lr = 0.05, .weight_decay = 0.1});
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    {
      AutocastGuard bf16(DType::BFloat16);
      linear(x, w, Tensor()).pow(2.0).sum().backward();
    }
    const void* memory = operand(w).raw_data();
    opt.step();
    const Tensor copy = operand(w);
    EXPECT_EQ(copy.raw_data(), memory) << "step " << step;
    expect_same_bits(copy, w.detach().to(DType::BFloat16), "after step " + std::to_string(step));
  }
}

// A graph that still holds the copy (its product saved it) keeps the values it was made with: AdamW leaves
// that copy alone, and the next product rounds the new weight into fresh memory.
TEST(KeptCopies, AGraphHoldingTheCopyKeepsItsValues) {
  Keeping on(true);
  manual_seed(10);
  const Tensor w = randn({8, 12}).requires_grad_(true);
  const Tensor x = randn({3, 12}).requires_grad_(true);
  optim::AdamW opt({w}, {.lr = 0.1});
  w.set_grad(ones({8, 12}));
  Tensor loss;
  {
    AutocastGuard bf16(DType::BFloat16);
    loss = linear(x, w, Tensor()).sum();
  }
  const Tensor old_copy = w.detach().to(DType::BFloat16);
  opt.step();  // the graph above holds w's copy
  loss.backward();
  // dx = g·W with W as it was rounded when the graph was made (g is ones: dx[i, p] = Σ_j W[j, p], float32
  // sums of bfloat16 values, rounded to bfloat16)
  const Tensor want = ones({3, 8}).to(DType::BFloat16).matmul(old_copy).to(DType::Float32);
  expect_same_bits(x.grad(), want, "x's gradient");
  expect_same_bits(operand(w), w.detach().to(DType::BFloat16), "the copy after the step");
}

// Training with kept copies changes no bit: a GPT trained three steps with AdamW (the clipping inside its
// pass), keeping copies and not, on the fast kernels and the reference loops.
std::map<std::string, Tensor> train_three_steps(bool keep) {
  Keeping keeping(keep);
  manual_seed(123);
  nn::GPTModel model(nn::GPTConfig{.vocab_size = 61, .context_length = 8, .emb_dim = 32, .n_heads = 4,
                                   .n_layers = 2, .drop_rate = 0.0, .qkv_bias = true});
  optim::AdamW opt(model.parameters(), {.lr = 1e-2, .weight_decay = 0.1});
  const Tensor x = randint(0, 61, {2, 8}), y = randint(0, 61, {2, 8});
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    Tensor loss;
    {
      AutocastGuard bf16(DType::BFloat16);
      const Tensor logits = model.forward(x);
      loss = cross_entropy(logits.reshape({-1, 61}), y.reshape({-1}));
    }
    loss.backward();
    opt.step(optim::clip_coefficient(model.parameters(), 1.0).coefficient);
  }
  std::map<std::string, Tensor> out;
  for (const auto& [name, p] : model.named_parameters()) out[name] = p.detach().clone();
  return out;
}

TEST(KeptCopies, TrainingGivesTheSameBitsWithAndWithoutThem) {
  for (Kernels kernels : {Kernels::cpu, Kernels::reference}) {
    KernelsGuard guard(kernels);
    SCOPED_TRACE(kernels == Kernels::cpu ? "cpu" : "reference");
    const auto kept = train_three_steps(true), fresh = train_three_steps(false);
    for (const auto& [name, p] : kept) expect_same_bits(p, fresh.at(name), name);
  }
}

}  // namespace
