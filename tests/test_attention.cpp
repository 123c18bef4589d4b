// test_attention.cpp — the attention layers of nn/attention.h and the character model of nn/char_model.h:
//
//   * gradients: autograd::gradcheck (float64 finite differences) through every layer, with respect to
//     the input and every parameter, and through the character model's loss;
//   * causal masking: changing a later token leaves every earlier output exactly as it was;
//   * dropout: active in train(), the identity in eval(), and drawing the same mask as F.dropout.
//
// PyTorch's values for these layers (initial weights, the seed programs' printed outputs) are checked in
// test_nn.cpp and by the seed programs themselves (tests/reference/seed_programs).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/inspect/dot.h"
#include "nn/nn.h"
#include "test_helpers.h"

using namespace autograd;
using testing_helpers::randish;

namespace {

// The test's `module.double()`: every parameter and buffer becomes float64 in place. The tensors keep
// their identity (the layers' member handles and the registered entries are one tensor), as Module::to
// does for devices, so the layer's forward now computes in float64 and gradcheck can poke its parameters.
void to_float64(nn::Module& module) {
  for (auto& [name, t] : module.state_dict()) {
    Tensor converted = t.detach().contiguous().to(DType::Float64);
    TensorImpl& impl = t.impl();
    impl.storage = converted.impl().storage;
    impl.dtype = DType::Float64;
    impl.strides = converted.strides();
    impl.offset = 0;
    impl.grad = nullptr;
  }
}

// gradcheck of `forward` with respect to the input x and every parameter of `module`. gradcheck perturbs
// each input in place, so the parameters are passed as inputs and the module reads them as usual.
void expect_gradients_correct(nn::Module& module, const Tensor& x,
                              const std::function<Tensor(const Tensor&)>& forward) {
  to_float64(module);
  std::vector<Tensor> inputs = {x};
  for (const Tensor& p : module.parameters()) {
    ASSERT_EQ(p.dtype(), DType::Float64);
    inputs.push_back(p);
  }
  EXPECT_GRADCHECK([&](const std::vector<Tensor>& in) { return forward(in[0]); }, inputs);
}

// ================================================================ gradients

TEST(AttentionGradients, SelfAttentionV1) {
  manual_seed(123);
  nn::SelfAttention_v1 attn(3, 2);
  expect_gradients_correct(attn, testing_helpers::leaf({4, 3}, 1), [&](const Tensor& x) { return attn(x); });
}

TEST(AttentionGradients, SelfAttentionV2) {
  for (bool qkv_bias : {false, true}) {
    SCOPED_TRACE(qkv_bias ? "with bias" : "no bias");
    manual_seed(789);
    nn::SelfAttention_v2 attn(3, 2, qkv_bias);
    expect_gradients_correct(attn, testing_helpers::leaf({4, 3}, 2), [&](const Tensor& x) { return attn(x); });
  }
}

TEST(AttentionGradients, CausalAttention) {
  manual_seed(123);
  nn::CausalAttention attn(3, 2, /*context_length=*/6, /*dropout=*/0.0, /*qkv_bias=*/true);
  // 4 of the 6 positions: the mask buffer is cut to the tokens present
  expect_gradients_correct(attn, testing_helpers::leaf({2, 4, 3}, 3), [&](const Tensor& x) { return attn(x); });
}

TEST(AttentionGradients, MultiHeadAttentionWrapper) {
  manual_seed(123);
  nn::MultiHeadAttentionWrapper attn(3, 2, 6, 0.0, 2);
  expect_gradients_correct(attn, testing_helpers::leaf({1, 5, 3}, 4), [&](const Tensor& x) { return attn(x); });
}

TEST(AttentionGradients, MultiHeadAttention) {
  manual_seed(123);
  nn::MultiHeadAttention attn(3, 4, 6, 0.0, /*num_heads=*/2);
  expect_gradients_correct(attn, testing_helpers::leaf({2, 4, 3}, 5), [&](const Tensor& x) { return attn(x); });
}

TEST(AttentionGradients, WorkshopMultiHeadAttentionWithMask) {
  manual_seed(1);
  nn::WorkshopMultiHeadAttention attn(4, 2);
  Tensor allowed = tril(ones({4, 4}, DType::Float64));
  expect_gradients_correct(attn, testing_helpers::leaf({1, 4, 4}, 6),
                           [&](const Tensor& x) { return attn(x, allowed); });
}

TEST(AttentionGradients, TorchMultiheadAttentionOutputAndWeights) {
  manual_seed(1);
  nn::MultiheadAttention attn(4, 2);
  Tensor blocked = triu(ones({3, 3}), 1).to_bool();
  expect_gradients_correct(attn, testing_helpers::leaf({1, 3, 4}, 7), [&](const Tensor& x) {
    auto [out, weights] = attn(x, x, x, blocked);  // both outputs, flattened side by side
    return cat({out.flatten(), weights.flatten()});
  });
}

TEST(AttentionGradients, CharModelLossWithRespectToEveryParameter) {
  for (int64_t heads : {1, 2}) {
    SCOPED_TRACE(std::to_string(heads) + " head(s)");
    manual_seed(7);
    nn::MiniSelfAttention model({.vocab = 5, .dim = 4, .context = 4, .heads = heads});
    to_float64(model);
    Tensor xb = tensor({{0, 1, 2, 3}, {4, 3, 2, 1}});
    Tensor yb = tensor({{1, 2, 3, 4}, {3, 2, 1, 0}});
    std::vector<Tensor> params = model.parameters();
    ASSERT_EQ(params.size(), 10u);
    EXPECT_GRADCHECK(
        [&](const std::vector<Tensor>&) { return cross_entropy(model(xb).view({-1, 5}), yb.view({-1})); }, params);
  }
}

// ================================================================ causal masking

// Runs `forward` on x and on x with every position from `changed` on replaced; the outputs before
// `changed` must be bit-identical, and some output at or after it must differ (the change was seen).
void expect_causal(const std::function<Tensor(const Tensor&)>& forward, const Tensor& x, int64_t changed) {
  Tensor later = x.clone();
  later.slice(1, changed, std::nullopt)
      .copy_(randish(later.slice(1, changed, std::nullopt).shape(), 99, -2, 2, x.dtype()));
  Tensor a = forward(x), b = forward(later);
  EXPECT_TRUE(equal(a.slice(1, 0, changed), b.slice(1, 0, changed))) << "an earlier position saw a later token";
  EXPECT_FALSE(equal(a.slice(1, changed, std::nullopt), b.slice(1, changed, std::nullopt)));
}

TEST(CausalMask, LaterTokensDoNotChangeEarlierOutputs) {
  manual_seed(123);
  const Tensor x = randish({2, 6, 3}, 10, -1, 1, DType::Float32);
  nn::CausalAttention causal(3, 2, 6, 0.0);
  nn::MultiHeadAttentionWrapper wrapper(3, 2, 6, 0.0, 2);
  nn::MultiHeadAttention mha(3, 4, 6, 0.0, 2);
  for (int64_t changed : {1, 3, 5}) {
    SCOPED_TRACE("tokens from position " + std::to_string(changed) + " on replaced");
    expect_causal([&](const Tensor& in) { return causal(in); }, x, changed);
    expect_causal([&](const Tensor& in) { return wrapper(in); }, x, changed);
    expect_causal([&](const Tensor& in) { return mha(in); }, x, changed);  // out_proj mixes heads, not positions
  }
}

TEST(CausalMask, ShorterInputsUseTheTopLeftOfTheMask) {
  // a 3-token input gives the same first three outputs as the 6-token input it starts
  manual_seed(123);
  nn::MultiHeadAttention mha(3, 4, 6, 0.0, 2);
  const Tensor x = randish({1, 6, 3}, 11, -1, 1, DType::Float32);
  EXPECT_TRUE(allclose(mha(x.slice(1, 0, 3)), mha(x).slice(1, 0, 3), 0, 1e-6));
}

TEST(CausalMask, WorkshopAndTorchMasks) {
  manual_seed(1);
  nn::WorkshopMultiHeadAttention workshop(8, 2);
  nn::MultiheadAttention torch_style(8, 2);
  const Tensor x = randish({1, 5, 8}, 12, -1, 1, DType::Float32);
  const Tensor allowed = tril(ones({5, 5}));  // the workshop's mask: 1 = may attend
  const Tensor blocked = allowed == 0.0;      // torch's attn_mask: true = may not attend
  for (int64_t changed : {1, 4}) {
    expect_causal([&](const Tensor& in) { return workshop(in, allowed); }, x, changed);
    expect_causal([&](const Tensor& in) { return torch_style(in, in, in, blocked).first; }, x, changed);
  }
  // the attention weights themselves: zero above the diagonal, rows summing to 1
  Tensor weights = torch_style(x, x, x, blocked).second[0];
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = i + 1; j < 5; ++j) EXPECT_EQ(weights[i][j].item(), 0.0) << i << ", " << j;
  EXPECT_TRUE(allclose(weights.sum(-1), ones({5}), 0, 1e-6));
}

TEST(CausalMask, CharModelPredictsFromThePastOnly) {
  manual_seed(7);
  nn::MiniSelfAttention one_head({.vocab = 13, .dim = 24, .context = 8});
  nn::MiniSelfAttention two_heads({.vocab = 13, .dim = 24, .context = 8, .heads = 2});
  const Tensor idx = tensor({{1, 5, 7, 2, 9, 0, 3, 12}});
  Tensor changed = idx.clone();
  changed.slice(1, 4, std::nullopt).copy_(tensor({{11, 11, 11, 11}}));
  for (nn::MiniSelfAttention* model : {&one_head, &two_heads}) {
    Tensor a = (*model)(idx), b = (*model)(changed);
    EXPECT_TRUE(equal(a.slice(1, 0, 4), b.slice(1, 0, 4)));
    EXPECT_FALSE(equal(a.slice(1, 4, std::nullopt), b.slice(1, 4, std::nullopt)));
  }
}

// Past kSkipMaskedHalfAbove positions the char model skips the masked half of its attention products
// (causal_scores / tril_matmul): the logits, the loss and every parameter's gradient must be the same
// bits as with the workshop's dense ops, for one head and for several.
TEST(CausalMask, CharModelSkippingTheMaskedHalfGivesTheDenseBits) {
  for (int64_t heads : {1, 4}) {
    SCOPED_TRACE(std::to_string(heads) + " head(s)");
    manual_seed(8);
    nn::MiniSelfAttention model({.vocab = 13, .dim = 32, .context = 100, .heads = heads});
    model.attention = nn::AttentionKernel::composed;  // not the flash op, which fast numerics take past 128
    Tensor xb = randint(0, 13, {3, 100}), yb = randint(0, 13, {3, 100});
    auto run = [&](bool skip) {
      model.skip_masked_half = skip;
      model.zero_grad();
      Tensor logits = model(xb);
      cross_entropy(logits.view({-1, 13}), yb.view({-1})).backward();
      std::vector<Tensor> results{logits.detach()};
      for (const Tensor& p : model.parameters()) results.push_back(p.grad().clone());
      return results;
    };
    std::vector<Tensor> dense = run(false), skipping = run(true);
    ASSERT_EQ(dense.size(), skipping.size());
    EXPECT_TRUE(equal(skipping[0], dense[0])) << "logits";
    for (size_t i = 1; i < dense.size(); ++i) EXPECT_TRUE(equal(skipping[i], dense[i])) << "gradient " << i;
    // and the fast path really ran: its nodes are in the graph, the dense path's are not
    model.skip_masked_half = true;
    const std::string graph = to_dot(model(xb));
    EXPECT_NE(graph.find("CausalScoresBackward"), std::string::npos);
    EXPECT_EQ(graph.find("MaskedFillBackward0"), std::string::npos);
  }
}

TEST(CausalMask, CharModelWithALongContextPredictsFromThePastOnly) {
  manual_seed(9);
  nn::MiniSelfAttention model({.vocab = 13, .dim = 16, .context = 70, .heads = 2});
  Tensor idx = randint(0, 13, {1, 70});
  Tensor changed = idx.clone();
  changed.slice(1, 50, std::nullopt).fill_(12.0);
  Tensor a = model(idx), b = model(changed);
  EXPECT_TRUE(equal(a.slice(1, 0, 50), b.slice(1, 0, 50)));
  EXPECT_FALSE(equal(a.slice(1, 50, std::nullopt), b.slice(1, 50, std::nullopt)));
}

TEST(CausalMask, WithoutAMaskTheFutureIsSeen) {
  // the control: SelfAttention_v2 has no mask, so the same change reaches the first position
  manual_seed(789);
  nn::SelfAttention_v2 attn(3, 2);
  const Tensor x = randish({6, 3}, 13, -1, 1, DType::Float32);
  Tensor later = x.clone();
  later.slice(0, 3, std::nullopt).copy_(zeros({3, 3}));
  EXPECT_FALSE(equal(attn(x)[0], attn(later)[0]));
}

// ================================================================ dropout

TEST(AttentionDropout, TrainDropsEvalDoesNot) {
  manual_seed(123);
  nn::CausalAttention attn(3, 2, 6, /*dropout=*/0.5);
  nn::CausalAttention no_dropout(3, 2, 6, 0.0);
  no_dropout.load_state_dict(attn.state_dict());
  const Tensor x = randish({2, 6, 3}, 20, -1, 1, DType::Float32);

  // train (the default): F.dropout on the attention weights, with the generator's next mask
  manual_seed(5);
  Tensor trained = attn(x);
  manual_seed(5);
  EXPECT_TRUE(equal(attn(x), trained)) << "same seed, same mask";
  EXPECT_FALSE(equal(attn(x), trained)) << "the generator moved on: a new mask";
  EXPECT_FALSE(equal(trained, no_dropout(x)));

  // the same numbers by hand: weights as in the book, then dropout(weights, 0.5) drawn from seed 5
  {
    Tensor keys = (*attn.W_key)(x), queries = (*attn.W_query)(x), values = (*attn.W_value)(x);
    Tensor scores = queries.matmul(keys.transpose(1, 2)).masked_fill(triu(ones({6, 6}), 1).to_bool(), -INFINITY);
    Tensor weights = softmax(scores / std::sqrt(2.0), -1);
    manual_seed(5);
    EXPECT_TRUE(equal(dropout(weights, 0.5).matmul(values), trained));
  }

  // eval: the identity, so the output is the dropout-free layer's, and the same on every call
  attn.eval();
  EXPECT_TRUE(equal(attn(x), no_dropout(x)));
  EXPECT_TRUE(equal(attn(x), attn(x)));
  attn.train();
  EXPECT_FALSE(equal(attn(x), no_dropout(x)));
}

TEST(AttentionDropout, MultiHeadAttentionAndTheWrapper) {
  manual_seed(123);
  nn::MultiHeadAttention mha(3, 4, 6, 0.5, 2);
  nn::MultiHeadAttentionWrapper wrapper(3, 2, 6, 0.5, 2);
  const Tensor x = randish({1, 6, 3}, 21, -1, 1, DType::Float32);
  struct Layer {
    nn::Module& module;
    std::function<Tensor()> run;
  };
  for (const Layer& layer : {Layer{mha, [&] { return mha(x); }}, Layer{wrapper, [&] { return wrapper(x); }}}) {
    EXPECT_FALSE(equal(layer.run(), layer.run()));  // training: a new mask on every call
    layer.module.eval();
    EXPECT_TRUE(equal(layer.run(), layer.run()));
    layer.module.train();
  }
}

}  // namespace
