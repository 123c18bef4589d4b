// check_char_model.cpp — rung 14: the workshop's character model on the learner's pieces (MyLinear, the
// attention head, the cross-entropy), trained on the learner's engine (run_backward, rung 5) with the
// learner's Adam step, held to PyTorch's printed losses. After a hundred steps training is chaotic, so
// only PyTorch's bits at every step give PyTorch's digits: when they are not, the checker finds which piece
// rounds otherwise.
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "checks.h"
#include "exercises.h"
#include "nn/char_model.h"
#include "teacher.h"

using namespace autograd;
using namespace exercises;
using namespace teacher;

namespace checks {
namespace {

const char* kPyTorchLosses[] = {"2.655", "0.219", "0.172", "0.131"};  // the workshop's run, PyTorch 1.13
const char* kParameterNames[] = {"tok.weight", "pos.weight", "q.weight", "q.bias", "k.weight", "k.bias",
                                 "v.weight", "v.bias", "head.weight", "head.bias"};

// The workshop's run: manual_seed(7), the model, then 301 steps of Adam (lr 0.01) on batches of 16 windows
// of 8 characters, with char_model_loss, run_backward and my_adam_step. Returns the losses printed at steps
// 0, 100, 200 and 300 ("%.3f"); `after_first_backward` sees the model after step 0's backward.
std::vector<std::string> train_workshop_model(
    const std::function<void(const MyCharModel&, const Tensor&, const Tensor&)>& after_first_backward) {
  const WorkshopText text;
  const int64_t D = 24, T = 8, B = 16;
  manual_seed(7);
  MyCharModel model(text.vocab, D, T);
  std::vector<Tensor> params = model.parameters(), exp_avg, exp_avg_sq;
  for (const Tensor& p : params) {
    exp_avg.push_back(zeros_like(p));
    exp_avg_sq.push_back(zeros_like(p));
  }
  std::vector<std::string> printed;
  for (int64_t step = 0; step < 301; ++step) {
    const auto [xb, yb] = text.batch(B, T);
    Tensor loss = char_model_loss(model, xb, yb);
    for (const Tensor& p : params) p.set_grad(Tensor());
    run_backward(loss);  // your engine (rung 5)
    if (step == 0) after_first_backward(model, xb, yb);
    for (size_t i = 0; i < params.size(); ++i)
      my_adam_step(params[i], params[i].grad(), exp_avg[i], exp_avg_sq[i], step + 1, AdamConfig{.lr = 0.01});
    if (step % 100 == 0) {
      printed.push_back(fmt::format("{:.3f}", loss.item()));
      if (!std::isfinite(loss.item())) fail(fmt::format("training: the loss is {} at step {}", loss.item(), step));
    }
  }
  return printed;
}

std::string loss_table(const std::vector<std::string>& printed) {
  std::string lines;
  for (size_t i = 0; i < printed.size(); ++i)
    lines += fmt::format("\n        step {:3} | loss {}   (PyTorch: {})", 100 * i, printed[i], kPyTorchLosses[i]);
  return lines;
}

// f's value on fresh leaves copied from `inputs` (int64 ones stay constants), and their gradients for the
// upstream gradient g (undefined: f's value is a scalar, and backward() starts from 1).
struct ValueAndGradients {
  Tensor value;
  std::vector<Tensor> grads;
};
ValueAndGradients value_and_gradients(const Fn& f, const std::vector<Tensor>& inputs, const Tensor& g = {}) {
  std::vector<Tensor> leaves;
  for (const Tensor& x : inputs) leaves.push_back(x.dtype() == DType::Int64 ? x : leaf(x));
  ValueAndGradients r{f(leaves), {}};
  if (g.defined()) r.value.backward(g);
  else r.value.backward();
  for (const Tensor& l : leaves) r.grads.push_back(l.requires_grad() ? l.grad() : Tensor());
  return r;
}

// "" when `mine` has `theirs`'s bits in the value and every gradient, else which of them does not.
std::string first_bits_differing(const ValueAndGradients& mine, const ValueAndGradients& theirs,
                                 const std::vector<std::string>& inputs) {
  if (!same_bits(mine.value, theirs.value)) return "its value";
  for (size_t i = 0; i < inputs.size(); ++i)
    if (theirs.grads[i].defined() && !same_bits(mine.grads[i], theirs.grads[i])) return "the gradient of " + inputs[i];
  return "";
}

// The gradient of every parameter for char_model_loss on this batch, as `run` computes it (run_backward, or
// the engine's backward()). The parameters' .grad are left as they were.
std::vector<Tensor> gradients_by(void (*run)(const Tensor&), const MyCharModel& m, const Tensor& xb, const Tensor& yb) {
  const std::vector<Tensor> params = m.parameters();
  std::vector<Tensor> kept, grads;
  for (const Tensor& p : params) {
    kept.push_back(p.grad());
    p.set_grad(Tensor());
  }
  run(char_model_loss(m, xb, yb));
  for (size_t i = 0; i < params.size(); ++i) {
    grads.push_back(params[i].grad());
    params[i].set_grad(kept[i]);
  }
  return grads;
}

void engine_backward(const Tensor& loss) { loss.backward(); }

// Why some gradient of step 0 is right to float rounding but not PyTorch's to the bit: which of the learner's
// pieces rounds differently from the engine's kernels (PyTorch's), tried one at a time on this batch with
// everything else the engine's; then the learner's engine against the engine's backward(). `differing` names
// the parameters whose gradient bits differ. A Failure's diagnosis and hint, not thrown.
Failure why_the_bits_differ(const MyCharModel& m, const Tensor& xb, const Tensor& yb,
                            const std::vector<std::string>& differing) {
  const int64_t T = xb.size(1), V = m.head->weight.size(0);
  Tensor x, qx, kx, vx, logits;
  {
    NoGradGuard no_grad;
    x = (*m.tok)(xb) + (*m.pos)(arange(T));
    qx = linear(x, m.q->weight, m.q->bias);
    kx = linear(x, m.k->weight, m.k->bias);
    vx = linear(x, m.v->weight, m.v->bias);
    logits = linear(attention_reference(qx, kx, vx), m.head->weight, m.head->bias).view({-1, V});
  }
  auto upstream = [](const Tensor& like, uint64_t seed) { return random_tensor(like.shape(), seed).to(DType::Float32); };
  // rung 9: MyLinear's forward (its backward is whatever engine ops it is made of)
  const std::vector<Tensor> layer{x, m.q->weight, m.q->bias};
  const std::string in_linear = first_bits_differing(
      value_and_gradients([](const std::vector<Tensor>& in) {
        MyLinear probe(in[1].size(1), in[1].size(0), MyLinear::Zeros{});
        probe.weight = in[1];
        probe.bias = in[2];
        return probe(in[0]);
      }, layer, upstream(qx, 141)),
      value_and_gradients([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); }, layer, upstream(qx, 141)),
      {"x", "weight", "bias"});
  if (!in_linear.empty())
    return Failure(fmt::format("MyLinear (rung 9) is right to float rounding, but {} is not torch.nn.Linear's to the "
                               "bit",
                               in_linear),
                   "linear(x, weight, bias) is PyTorch's (one addmm over the rows of x as a matrix)");
  // rung 10: the attention head, against the workshop's chain of nodes
  const std::vector<Tensor> qkv{qx, kx, vx};
  const std::string in_attention = first_bits_differing(
      value_and_gradients([](const std::vector<Tensor>& in) { return my_attention_head(in[0], in[1], in[2]); }, qkv,
                          upstream(qx, 142)),
      value_and_gradients([](const std::vector<Tensor>& in) { return attention_reference(in[0], in[1], in[2]); }, qkv,
                          upstream(qx, 142)),
      {"q", "k", "v"});
  if (!in_attention.empty())
    return Failure(fmt::format("my_attention_head (rung 10) is right to float rounding, but {} is not the bits of "
                               "PyTorch's chain of nodes (the workshop's: matmul, division by √d, masked_fill, softmax, "
                               "matmul)",
                               in_attention),
                   "round as they do, in this order: dv = pᵀ g and dp = g vᵀ; ds = p ⊙ (dp − Σ_row dp ⊙ p); ds / √d, "
                   "a division (not a product with 1/√d); dq = ds k and dk = dsᵀ q");
  // rung 7: the loss
  const std::string in_loss = first_bits_differing(
      value_and_gradients([](const std::vector<Tensor>& in) { return my_cross_entropy(in[0], in[1]); },
                          {logits, yb.view({-1})}),
      value_and_gradients([](const std::vector<Tensor>& in) { return cross_entropy(in[0], in[1]); }, {logits, yb.view({-1})}),
      {"logits"});
  if (!in_loss.empty())
    return Failure(fmt::format("my_cross_entropy (rung 7) is right to float rounding, but {} is not the bits of "
                               "PyTorch's log_softmax and nll_loss",
                               in_loss),
                   "the value nll_loss(log_softmax(logits, 1), targets); the gradient exp(log_probs) · (g / N) − "
                   "onehot · (g / N), in that order");
  // rung 5: your engine against the engine's own, both on your pieces
  const std::vector<Tensor> by_yours = gradients_by(run_backward, m, xb, yb), by_engine = gradients_by(engine_backward, m, xb, yb);
  for (size_t i = 0; i < by_yours.size(); ++i)
    if (!same_bits(by_yours[i], by_engine[i]))
      return Failure(fmt::format("run_backward (rung 5) adds the gradients in another order than the engine's "
                                 "backward(): on your pieces, the engine's backward() gives the workshop's bits and "
                                 "yours does not (the gradient of {}). x feeds q, k and v, so its gradient is a sum of "
                                 "three, added in the order your engine runs those layers' nodes, and float addition "
                                 "rounds otherwise in another order",
                                 kParameterNames[i]),
                     "PyTorch's engine runs, among the nodes whose gradient is complete, the newest first: here v's "
                     "layer, then k's, then q's. The reverse of a depth-first post-order that visits each node's "
                     "inputs in their order, inputs[0] first, runs them so here");
  if (differing == std::vector<std::string>{"tok.weight", "pos.weight"})
    return Failure("the gradients of tok.weight and pos.weight are not the workshop's to the bit, while every other "
                   "parameter's is, and each of your pieces and your engine round as PyTorch's: x's gradient is the "
                   "sum of three, from q(x), k(x) and v(x), and your char_model_loss makes your engine add them in "
                   "another order than the workshop's model",
                   "call the layers as the workshop does, q, k, then v, one statement each: in "
                   "my_attention_head((*m.q)(x), (*m.k)(x), (*m.v)(x)) C++ leaves the order to the compiler");
  return Failure(fmt::format("the gradients of {} are not the workshop's to the bit, though each of your pieces and "
                             "your engine round as PyTorch's: char_model_loss composes them otherwise than the "
                             "workshop's model",
                             fmt::join(differing, ", ")),
                 "x = tok(idx) + pos(arange(T)); q(x), k(x), then v(x); head; cross-entropy over [B·T, V]");
}

}  // namespace

void rung_14() {
  NumericsGuard exact(Numerics::exact);  // PyTorch's bits, as the workshop's run
  const int64_t V = WorkshopText().vocab, D = 24, T = 8;
  check_started(14, {5, 7, 9, 10, 13}, [&] {
    const MyCharModel zeros_model(V, D, T, MyLinear::Zeros{});
    const Tensor idx = from_vector(std::vector<int64_t>(size_t(2 * T), 0), {2, T});
    char_model_loss(zeros_model, idx, idx);
  });
  // The same seed gives the engine's model (nn::MiniSelfAttention) the same weights.
  manual_seed(7);
  MyCharModel first(V, D, T);
  manual_seed(7);
  nn::MiniSelfAttention engine({.vocab = V, .dim = D, .context = T});
  const std::vector<Tensor> theirs = engine.parameters();
  for (size_t i = 0; i < theirs.size(); ++i)
    expect_same_bits(fmt::format("MyCharModel's parameter {} after manual_seed(7)", kParameterNames[i]),
                     first.parameters()[i], theirs[i],
                     "the layers are built in the workshop's order; MyLinear must draw as torch.nn.Linear (rung 9)");
  passed("after manual_seed(7): the workshop's initial weights");

  std::optional<Failure> why_not_bits;  // set at step 0 when a gradient is right but not PyTorch's bits
  auto compare_step_0 = [&](const MyCharModel& model, const Tensor& xb, const Tensor& yb) {
    Tensor engine_loss = cross_entropy(engine(xb).view({-1, V}), yb.view({-1}));
    Tensor loss;
    {
      NoGradGuard no_grad;
      loss = char_model_loss(model, xb, yb);
    }
    if (!close(loss, engine_loss.detach(), 1e-6, 0))
      fail(fmt::format("char_model_loss at step 0: {:.7g}, the workshop's model gives {:.7g} (PyTorch prints 2.655): "
                       "the forward differs",
                       loss.item(), engine_loss.item()),
           "x = tok(idx) + pos(arange(T)); head(attention(q(x), k(x), v(x))); cross-entropy over [B·T, V]");
    engine_loss.backward();
    const std::vector<Tensor> mine = model.parameters();
    std::vector<std::string> differing;
    for (size_t i = 0; i < mine.size(); ++i) {
      expect_close(fmt::format("step 0: the gradient of {} (your ops and your engine against the engine's model, to "
                               "float rounding)",
                               kParameterNames[i]),
                   mine[i].grad(), theirs[i].grad(), 1e-4, 1e-6, "check the rung of the op that feeds this parameter");
      if (!same_bits(mine[i].grad(), theirs[i].grad())) differing.push_back(kParameterNames[i]);
    }
    if (!differing.empty()) why_not_bits = why_the_bits_differ(model, xb, yb, differing);
    passed(fmt::format("step 0: loss {:.3f}, and every parameter's gradient is the workshop model's{}", loss.item(),
                       differing.empty() ? ", bit for bit" : ", to float rounding"));
  };
  const std::vector<std::string> yours = train_workshop_model(compare_step_0);
  std::printf("  the workshop's model, trained 301 steps on your ops and your engine:%s\n", loss_table(yours).c_str());
  size_t first_different = 0;
  while (first_different < yours.size() && yours[first_different] == kPyTorchLosses[first_different]) ++first_different;
  if (first_different == yours.size()) return passed("2.655 -> 0.131: PyTorch's losses, to the last printed digit");
  const std::string chaos = fmt::format(
      "training: at step {} the loss is {}, PyTorch's is {}. After the first hundred steps training is chaotic: "
      "only the same float roundings in the same order give the same digits",
      100 * first_different, yours[first_different], kPyTorchLosses[first_different]);
  if (why_not_bits) fail(fmt::format("{}, and yours differ from step 0 on: {}", chaos, why_not_bits->what()), why_not_bits->hint);
  fail(fmt::format("{}; step 0's gradients were PyTorch's to the bit, so the updates or a later step differ", chaos),
       "my_adam_step (rung 13) must be PyTorch's bit for bit, and char_model_loss must not change from step to step");
}

}  // namespace checks
