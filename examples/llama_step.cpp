// llama_step — one training step of a small Llama-family model (nn/llama.h: token embeddings, pre-norm
// blocks with RMSNorm, grouped-query attention with rotary positions and Qwen3's per-head q/k norms, the
// SwiGLU feed-forward, an untied output head) on random tokens: cross-entropy, backward, one AdamW update.
// Its graph holds the nodes a Llama adds to a GPT's, for make step (docs/autograd.md); it prints the loss
// before and after the update.
#include <cstdio>

#include "nn/llama.h"
#include "optim/optim.h"

using namespace autograd;

int main() {
  set_numerics(Numerics::exact);
  manual_seed(123);
  nn::LlamaConfig config;
  config.vocab_size = 64;
  config.hidden_size = 16;
  config.intermediate_size = 32;
  config.num_hidden_layers = 1;
  config.num_attention_heads = 4;
  config.num_key_value_heads = 2;  // two query heads share each key/value head
  config.max_position_embeddings = 8;
  config.qk_norm = true;
  config.tie_word_embeddings = false;
  nn::LlamaModel model(config);
  optim::AdamW optimizer(model.parameters(), {.lr = 1e-2, .weight_decay = 0.1});

  const int64_t context = config.max_position_embeddings;
  const Tensor tokens = randint(0, config.vocab_size, {2, context + 1});
  const Tensor inputs = tokens.slice(1, 0, context), targets = tokens.slice(1, 1, std::nullopt);
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
