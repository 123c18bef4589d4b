// exercises.h — what each rung of the exercise ladder asks you to write (docs/exercises.md).
//
// Every function below is declared here and defined in one file of this folder, NN_<name>.cpp, where
// its stub waits for you. The checker (check.cpp) calls them: `make exercise N=6` checks rung 6,
// `make exercises` the whole ladder. Reference solutions are in solutions/ (same file names): try first.
//
// The rules: only the public API (autograd/autograd.h, nn/, optim/), and each rung uses only the rungs
// below it plus the engine's own ops. A custom op is written the way the engine writes its own
// (autograd/ops/elementwise.cpp): compute the output with no graph, then
//
//   if (!needs_grad({a, b})) return out;
//   return record("MyMulBackward", out, /*inputs=*/{a, b}, /*saved=*/{a, b},
//                 [a, b](const Tensor& g) { return Grads{/* d/da */, /* d/db */}; });
//
// The closure gets g = dLoss/d(out) and returns dLoss/d(input) for each input, in order, each of the
// input's own shape.
#pragma once
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "nn/layers.h"

namespace exercises {

using namespace autograd;

// Thrown by every stub: the checker reports it as "exercise N: not implemented yet".
struct NotImplemented : std::logic_error {
  explicit NotImplemented(int rung_number)
      : std::logic_error("exercise " + std::to_string(rung_number) + ": not implemented yet"), rung(rung_number) {}
  int rung;
  std::string note;  // the checker's: printed under the message (which rungs below are not done either)
};
[[noreturn]] inline void not_implemented(int rung) { throw NotImplemented(rung); }

// ---- 1. mul with broadcasting (01_mul.cpp)
Tensor my_mul(const Tensor& a, const Tensor& b);

// ---- 2. sum and mean along a dim (02_sum_mean.cpp)
Tensor my_sum(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor my_mean(const Tensor& x, int64_t dim, bool keepdim = false);

// ---- 3. exp, log, tanh (03_exp_log_tanh.cpp)
Tensor my_exp(const Tensor& x);
Tensor my_log(const Tensor& x);
Tensor my_tanh(const Tensor& x);

// ---- 4. matmul's two gradients (04_matmul.cpp): a [..., n, k] @ b [..., k, m], batch dims broadcast
Tensor my_matmul(const Tensor& a, const Tensor& b);

// ---- 5. the engine itself (05_engine.cpp)
// Every node reachable from root.grad_fn(), each exactly once, every node before all the nodes it sends
// gradients to (its inputs' nodes).
std::vector<Node*> topological_order(const Tensor& root);
// Reverse mode from a scalar `root`: runs each node's backward closure in topological_order and adds
// the gradient of root into the .grad of every leaf that requires grad.
void run_backward(const Tensor& root);

// ---- 6. softmax's backward (06_softmax.cpp)
Tensor my_softmax(const Tensor& x, int64_t dim);

// ---- 7. cross-entropy as log_softmax + nll_loss, fused (07_cross_entropy.cpp)
// logits [N, C], targets int64 [N] → the mean over rows of −log softmax(logits)[i, targets[i]]
Tensor my_cross_entropy(const Tensor& logits, const Tensor& targets);

// ---- 8. masked_fill and the causal mask (08_masked_fill.cpp)
// x where mask is false, `value` where it is true (mask: bool, broadcastable to x's shape)
Tensor my_masked_fill(const Tensor& x, const Tensor& mask, double value);
// bool [T, T]: true where query row i must not see key column j (the future: j > i)
Tensor causal_mask(int64_t T);

// ---- 9. a Linear layer with PyTorch's initialisation (09_linear.cpp)
class MyLinear : public nn::Module {
 public:
  MyLinear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) const;  // x [..., in] → [..., out]
  Tensor operator()(const Tensor& x) const { return forward(x); }
  Tensor weight, bias;  // [out, in] and [out] (bias undefined without one)

  // The checker's, not part of the exercise: a layer of zeros made without your constructor, so that rung
  // 14 can tell whether its own stub is still untouched while rung 9 is not done yet.
  struct Zeros {};
  MyLinear(int64_t in_features, int64_t out_features, Zeros)
      : weight(zeros({out_features, in_features})), bias(zeros({out_features})) {}
};

// ---- 10. one causal attention head, forward and backward (10_attention_head.cpp)
// q, k, v [..., T, d] → softmax(mask(q kᵀ / √d)) v, each query seeing only the keys at or before it
Tensor my_attention_head(const Tensor& q, const Tensor& k, const Tensor& v);

// ---- 11. LayerNorm's backward (11_layer_norm.cpp): over the last dim, weight and bias [C]
Tensor my_layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);

// ---- 12. GELU's backward (12_gelu.cpp): the tanh form, GPT-2's (approximate="tanh")
Tensor my_gelu(const Tensor& x);

// ---- 13. an Adam step, bit for bit with PyTorch's (13_adam.cpp)
struct AdamConfig {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
};
// One update of `param` in place from its .grad; exp_avg and exp_avg_sq (zeros at first) are the moment
// estimates, updated in place too; step counts from 1.
void my_adam_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, int64_t step,
                  const AdamConfig& config);

// ---- 14. the workshop's character model on your ops (14_char_model.cpp)
// Built in the workshop's order (tok, pos, q, k, v, head), so that after manual_seed(7) it holds the
// workshop's initial weights — if your MyLinear draws them as PyTorch does.
struct MyCharModel {
  MyCharModel(int64_t vocab, int64_t dim, int64_t context)
      : tok(std::make_shared<nn::Embedding>(vocab, dim)),
        pos(std::make_shared<nn::Embedding>(context, dim)),
        q(std::make_shared<MyLinear>(dim, dim)),
        k(std::make_shared<MyLinear>(dim, dim)),
        v(std::make_shared<MyLinear>(dim, dim)),
        head(std::make_shared<MyLinear>(dim, vocab)) {}
  // The checker's: the same model with layers of zeros (MyLinear::Zeros), built without rung 9's code.
  MyCharModel(int64_t vocab, int64_t dim, int64_t context, MyLinear::Zeros z)
      : tok(std::make_shared<nn::Embedding>(vocab, dim)),
        pos(std::make_shared<nn::Embedding>(context, dim)),
        q(std::make_shared<MyLinear>(dim, dim, z)),
        k(std::make_shared<MyLinear>(dim, dim, z)),
        v(std::make_shared<MyLinear>(dim, dim, z)),
        head(std::make_shared<MyLinear>(dim, vocab, z)) {}
  std::vector<Tensor> parameters() const {
    std::vector<Tensor> all{tok->weight, pos->weight};
    for (const auto& layer : {q, k, v, head})
      for (const Tensor& p : layer->parameters()) all.push_back(p);
    return all;
  }
  std::shared_ptr<nn::Embedding> tok, pos;
  std::shared_ptr<MyLinear> q, k, v, head;
};
// idx, targets: int64 [B, T] → the mean cross-entropy of the next-character predictions
Tensor char_model_loss(const MyCharModel& model, const Tensor& idx, const Tensor& targets);

// ---- 15. one GPT block of your own pieces (15_gpt_block.cpp)
// The book's TransformerBlock (nn/gpt.h) with one attention head and no dropout: two layer norms, the
// attention's three projections (no bias) and its output projection, the feed-forward's two Linears.
// Built in the book's order, so that after manual_seed(s) it holds nn::TransformerBlock's initial weights.
struct MyGptBlock {
  explicit MyGptBlock(int64_t dim)
      : norm1_scale(ones({dim}).requires_grad_()),
        norm1_shift(zeros({dim}).requires_grad_()),
        W_query(std::make_shared<MyLinear>(dim, dim, false)),
        W_key(std::make_shared<MyLinear>(dim, dim, false)),
        W_value(std::make_shared<MyLinear>(dim, dim, false)),
        out_proj(std::make_shared<MyLinear>(dim, dim)),
        norm2_scale(ones({dim}).requires_grad_()),
        norm2_shift(zeros({dim}).requires_grad_()),
        expand(std::make_shared<MyLinear>(dim, 4 * dim)),
        contract(std::make_shared<MyLinear>(4 * dim, dim)) {}
  // The checker's: the same block with layers of zeros (MyLinear::Zeros), built without rung 9's code.
  MyGptBlock(int64_t dim, MyLinear::Zeros z)
      : norm1_scale(ones({dim})),
        norm1_shift(zeros({dim})),
        W_query(std::make_shared<MyLinear>(dim, dim, z)),
        W_key(std::make_shared<MyLinear>(dim, dim, z)),
        W_value(std::make_shared<MyLinear>(dim, dim, z)),
        out_proj(std::make_shared<MyLinear>(dim, dim, z)),
        norm2_scale(ones({dim})),
        norm2_shift(zeros({dim})),
        expand(std::make_shared<MyLinear>(dim, 4 * dim, z)),
        contract(std::make_shared<MyLinear>(4 * dim, dim, z)) {}
  Tensor norm1_scale, norm1_shift;  // my_layer_norm's weight and bias before the attention
  std::shared_ptr<MyLinear> W_query, W_key, W_value, out_proj;
  Tensor norm2_scale, norm2_shift;  // and before the feed-forward
  std::shared_ptr<MyLinear> expand, contract;  // dim → 4·dim → dim
};
// x [B, T, dim] → [B, T, dim]: GPT-2's pre-norm block, x + attention(norm1(x)), then + feed_forward(norm2(x)),
// each piece yours: my_layer_norm (rung 11), MyLinear (rung 9), my_attention_head (rung 10), my_gelu (rung 12)
Tensor my_gpt_block(const MyGptBlock& block, const Tensor& x);

}  // namespace exercises
