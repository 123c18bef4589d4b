// gpt_step — one training step of a small GPT (nn/gpt.h: token and position embeddings, a pre-LN
// transformer block with causal attention, layer norms, the GELU feed-forward, the tied output head) on
// random tokens: cross-entropy, backward, one AdamW update. Its graph holds the GPT's nodes, for make step
// (docs/autograd.md); it prints the loss before and after the update.
#include <cstdio>

#include "nn/gpt.h"
#include "optim/optim.h"

using namespace autograd;

int main() {
  set_numerics(Numerics::exact);
  manual_seed(123);
  nn::GPTConfig config;
  config.vocab_size = 64;
  config.context_length = 8;
  config.emb_dim = 16;
  config.n_heads = 2;
  config.n_layers = 1;
  config.drop_rate = 0.0;
  nn::GPTModel model(config);
  optim::AdamW optimizer(model.parameters(), {.lr = 1e-2, .weight_decay = 0.1});

  const Tensor tokens = randint(0, config.vocab_size, {2, config.context_length + 1});
  const Tensor inputs = tokens.slice(1, 0, config.context_length), targets = tokens.slice(1, 1, std::nullopt);
  for (int step = 0; step < 2; ++step) {
    optimizer.zero_grad();
    const Tensor logits = model(inputs);
    const Tensor loss = cross_entropy(logits.reshape({-1, config.vocab_size}), targets.reshape({-1}));
    std::printf("step %d: loss %.4f\n", step, loss.item());
    if (step == 1) break;
    loss.backward();
    optimizer.step();
  }
}
