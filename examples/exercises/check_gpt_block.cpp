// check_gpt_block.cpp — rung 15: one GPT block assembled from the learner's pieces (my_layer_norm, MyLinear,
// my_attention_head, my_gelu). Held to the book's nn::TransformerBlock (output and every gradient), then
// gradchecked, then trained inside the smallest GPT on the learner's engine (run_backward) and Adam step,
// beside the same model made of the engine's ops. The learner's layer norm and GELU are compositions of
// ops, which round otherwise than the fused kernels, so the comparisons are to float rounding, and the
// training runs in float64, where 301 chaotic steps still leave the printed digits alone.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "checks.h"
#include "exercises.h"
#include "nn/gpt.h"
#include "optim/optimizer.h"
#include "teacher.h"

using namespace autograd;
using namespace exercises;
using namespace teacher;

namespace checks {
namespace {

// The block's parameters, in this order everywhere below.
const std::vector<std::string> kBlockParameters = {
    "norm1_scale",     "norm1_shift",  "W_query.weight", "W_key.weight", "W_value.weight",
    "out_proj.weight", "out_proj.bias", "norm2_scale",   "norm2_shift",  "expand.weight",
    "expand.bias",     "contract.weight", "contract.bias"};

const char* kHint = "h = my_layer_norm(x, norm1_scale, norm1_shift); x = x + out_proj(my_attention_head(W_query(h), "
                    "W_key(h), W_value(h))); h = my_layer_norm(x, norm2_scale, norm2_shift); x + "
                    "contract(my_gelu(expand(h)))";

// A MyGptBlock holding these tensors (kBlockParameters' order): the checker's block of zeros, its tensors
// replaced, so that rung 9's constructor plays no part.
MyGptBlock block_holding(const std::vector<Tensor>& p) {
  MyGptBlock b(p[0].size(0), MyLinear::Zeros{});
  b.norm1_scale = p[0];
  b.norm1_shift = p[1];
  for (auto [layer, weight] : {std::pair{&b.W_query, 2}, {&b.W_key, 3}, {&b.W_value, 4}}) {
    (*layer)->weight = p[size_t(weight)];
    (*layer)->bias = Tensor();  // the book's attention has no bias in its three projections
  }
  b.out_proj->weight = p[5];
  b.out_proj->bias = p[6];
  b.norm2_scale = p[7];
  b.norm2_shift = p[8];
  b.expand->weight = p[9];
  b.expand->bias = p[10];
  b.contract->weight = p[11];
  b.contract->bias = p[12];
  return b;
}

std::vector<Tensor> parameters_of(const nn::TransformerBlock& b) {
  return {b.norm1->scale,          b.norm1->shift,         b.att->W_query->weight, b.att->W_key->weight,
          b.att->W_value->weight,  b.att->out_proj->weight, b.att->out_proj->bias,  b.norm2->scale,
          b.norm2->shift,          b.ff->expand->weight,    b.ff->expand->bias,     b.ff->contract->weight,
          b.ff->contract->bias};
}

// How a block is put together: GPT-2's, or one of the usual ways to get it wrong (for the diagnosis).
struct Assembly {
  bool pre_norm = true;               // x + f(norm(x)); false: norm(x + f(x)), the 2017 Transformer's
  bool attention_residual = true;     // x + attention(...); false: attention(...) alone
  bool feed_forward_residual = true;  // x + feed_forward(...); false: feed_forward(...) alone
  bool gelu = true;                   // contract(gelu(expand(h))); false: contract(expand(h))
};
Assembly without(bool Assembly::*part) {
  Assembly a;
  a.*part = false;
  return a;
}

// The block assembled as `a` says, of the engine's ops, on the parameters p (kBlockParameters' order).
Tensor block_reference(const std::vector<Tensor>& p, const Tensor& x, const Assembly& a = {}) {
  auto norm = [&](const Tensor& t, size_t scale) { return layer_norm(t, {t.size(-1)}, p[scale], p[scale + 1]); };
  auto attention = [&](const Tensor& h) {
    Tensor q = linear(h, p[2]);
    Tensor k = linear(h, p[3]);
    Tensor v = linear(h, p[4]);
    return linear(attention_reference(q, k, v), p[5], p[6]);
  };
  auto feed_forward = [&](const Tensor& h) {
    Tensor u = linear(h, p[9], p[10]);
    return linear(a.gelu ? gelu(u, "tanh") : u, p[11], p[12]);
  };
  auto sublayer = [&](const Tensor& in, size_t scale, bool residual, auto&& f) {
    if (!a.pre_norm) return norm(residual ? in + f(in) : f(in), scale);
    Tensor out = f(norm(in, scale));
    return residual ? in + out : out;
  };
  return sublayer(sublayer(x, 0, a.attention_residual, attention), 7, a.feed_forward_residual, feed_forward);
}

struct WrongAssembly {
  Assembly assembly;
  const char* diagnosis;
};
const WrongAssembly kWrongAssemblies[] = {
    {without(&Assembly::pre_norm),
     "each sublayer's output is added to x and the sum normalised, norm(x + f(x)): post-norm, the 2017 "
     "Transformer's. GPT-2's block normalises each sublayer's input instead, and adds the sublayer's output to x "
     "as it was"},
    {without(&Assembly::attention_residual),
     "the attention's residual connection is missing: its output replaces x instead of being added to it"},
    {without(&Assembly::feed_forward_residual),
     "the feed-forward's residual connection is missing: its output replaces x instead of being added to it"},
    {without(&Assembly::gelu), "no GELU stands between expand and contract: two Linears in a row are one linear map"},
};

// The learner's block against nn::TransformerBlock (one head, no dropout) in float32: its output, and every
// gradient for a random upstream gradient. A wrong output is held against the usual wrong assemblies.
void check_against_the_book() {
  const int64_t D = 8, T = 5;
  manual_seed(15);
  nn::TransformerBlock book({.vocab_size = 1, .context_length = T, .emb_dim = D, .n_heads = 1, .n_layers = 1,
                             .drop_rate = 0.0, .qkv_bias = false});
  std::vector<Tensor> params = parameters_of(book), mine;
  for (const Tensor& p : params) mine.push_back(leaf(p.detach().clone()));
  const Tensor x = leaf(randn({2, T, D})), x_mine = leaf(x.detach().clone()), g = randn({2, T, D});
  const std::string where = "my_gpt_block (against the book's TransformerBlock, float32)";
  Tensor out;
  try {
    out = my_gpt_block(block_holding(mine), x_mine);
  } catch (const NotImplemented&) {
    throw;
  } catch (const std::exception& e) {
    fail(fmt::format("{}, forward: your code threw: {}", where, e.what()), kHint);
  }
  Tensor want = book(x);
  if (!close(out, want.detach(), 1e-4, 1e-5)) {
    NoGradGuard no_grad;
    for (const WrongAssembly& wrong : kWrongAssemblies)
      if (close(out, block_reference(params, x, wrong.assembly), 1e-4, 1e-5))
        fail(fmt::format("{}: the output is that of a block where {}", where, wrong.diagnosis), kHint);
    expect_close(where + ": the output", out, want.detach(), 1e-4, 1e-5, kHint);
  }
  if (!out.requires_grad()) fail(fmt::format("{}: the output has no autograd node: no gradient reaches the block", where), kHint);
  out.backward(g);
  want.backward(g);
  expect_close(where + ": the gradient of x", x_mine.grad(), x.grad(), 1e-4, 1e-5, kHint);
  for (size_t i = 0; i < params.size(); ++i)
    expect_close(fmt::format("{}: the gradient of {}", where, kBlockParameters[i]), mine[i].grad(), params[i].grad(),
                 1e-4, 1e-5, "check the rung of the piece this parameter feeds");
  passed("my_gpt_block: the book's TransformerBlock's output and every gradient (float32, to float rounding)");
}

// The learner's block in float64, small enough for gradcheck, against block_reference.
void check_float64() {
  const int64_t D = 4;
  OpUnderTest op{"my_gpt_block", {},
                 [](const std::vector<Tensor>& in) {
                   return my_gpt_block(block_holding({in.begin() + 1, in.end()}), in[0]);
                 },
                 [](const std::vector<Tensor>& in) { return block_reference({in.begin() + 1, in.end()}, in[0]); },
                 kHint};
  op.inputs.push_back("x");
  op.inputs.insert(op.inputs.end(), kBlockParameters.begin(), kBlockParameters.end());
  const Shape shapes[] = {{D}, {D}, {D, D}, {D, D}, {D, D}, {D, D}, {D}, {D}, {D}, {4 * D, D}, {4 * D}, {D, 4 * D}, {D}};
  std::vector<Tensor> inputs{leaf(random_tensor({2, 3, D}, 151))};
  uint64_t seed = 152;
  for (const Shape& shape : shapes) inputs.push_back(leaf(random_tensor(shape, seed++)));
  inputs[1] = leaf(random_tensor({D}, 150, 0.5, 1.5));  // the norms' scales near 1
  inputs[8] = leaf(random_tensor({D}, 149, 0.5, 1.5));
  check_op(op, "float64, small", inputs);
}

// ---------------------------------------------------------------- training

// The smallest GPT around one block: token and position embeddings, the block, a final layer norm, a head
// without bias (the book's GPTModel with one layer), its parameters as float64 leaves.
struct TinyGpt {
  Tensor tok, pos;
  std::vector<Tensor> block;  // kBlockParameters' order
  Tensor final_scale, final_shift, head;
  std::vector<Tensor> parameters() const {
    std::vector<Tensor> all{tok, pos};
    all.insert(all.end(), block.begin(), block.end());
    for (const Tensor& t : {final_scale, final_shift, head}) all.push_back(t);
    return all;
  }
};

// nn::GPTModel's initial values after manual_seed(7), as float64 leaves.
TinyGpt tiny_gpt(int64_t V, int64_t D, int64_t T) {
  manual_seed(7);
  nn::GPTModel model({.vocab_size = V, .context_length = T, .emb_dim = D, .n_heads = 1, .n_layers = 1,
                      .drop_rate = 0.0, .qkv_bias = false});
  auto copy = [](const Tensor& t) { return leaf(t.detach().to(DType::Float64)); };
  TinyGpt m{copy(model.tok_emb->weight), copy(model.pos_emb->weight), {}, copy(model.final_norm->scale),
            copy(model.final_norm->shift), copy(model.out_head->weight)};
  for (const Tensor& p : parameters_of((*model.trf_blocks)[0])) m.block.push_back(copy(p));
  return m;
}

// The loss with the learner's pieces (the block, the final my_layer_norm, a MyLinear head, the cross-entropy)
Tensor loss_of_yours(const TinyGpt& m, const Tensor& xb, const Tensor& yb) {
  const int64_t B = xb.size(0), T = xb.size(1), V = m.head.size(0);
  Tensor x = embedding(m.tok, xb) + embedding(m.pos, arange(T));
  x = my_layer_norm(my_gpt_block(block_holding(m.block), x), m.final_scale, m.final_shift);
  MyLinear head(m.head.size(1), V, MyLinear::Zeros{});
  head.weight = m.head;
  head.bias = Tensor();
  return my_cross_entropy(head(x).view({B * T, V}), yb.view({B * T}));
}

// and with the engine's ops
Tensor loss_of_engine(const TinyGpt& m, const Tensor& xb, const Tensor& yb) {
  const int64_t B = xb.size(0), T = xb.size(1), V = m.head.size(0);
  Tensor x = embedding(m.tok, xb) + embedding(m.pos, arange(T));
  x = layer_norm(block_reference(m.block, x), {x.size(-1)}, m.final_scale, m.final_shift);
  return cross_entropy(linear(x, m.head).view({B * T, V}), yb.view({B * T}));
}

// 301 steps of Adam (lr 0.01) on the workshop's text, both models on the same batches: yours on your engine
// and your Adam step, the engine's model on backward() and optim::Adam. Prints the losses every 100 steps
// ("%.4f"), and fails where the two differ.
void train_beside_the_engine() {
  const WorkshopText text;
  const int64_t D = 16, T = 8, B = 16;
  TinyGpt yours = tiny_gpt(text.vocab, D, T), engine = tiny_gpt(text.vocab, D, T);
  std::vector<Tensor> params = yours.parameters(), exp_avg, exp_avg_sq;
  for (const Tensor& p : params) {
    exp_avg.push_back(zeros_like(p));
    exp_avg_sq.push_back(zeros_like(p));
  }
  optim::Adam adam(engine.parameters(), {.lr = 0.01});
  manual_seed(8);  // the batches
  std::string table;
  for (int64_t step = 0; step < 301; ++step) {
    const auto [xb, yb] = text.batch(B, T);
    Tensor loss = loss_of_yours(yours, xb, yb), engine_loss = loss_of_engine(engine, xb, yb);
    for (const Tensor& p : params) p.set_grad(Tensor());
    run_backward(loss);  // your engine (rung 5)
    adam.zero_grad();
    engine_loss.backward();
    for (size_t i = 0; i < params.size(); ++i)
      my_adam_step(params[i], params[i].grad(), exp_avg[i], exp_avg_sq[i], step + 1, AdamConfig{.lr = 0.01});
    adam.step();
    if (step % 100 != 0) continue;
    const std::string mine = fmt::format("{:.4f}", loss.item()), theirs = fmt::format("{:.4f}", engine_loss.item());
    table += fmt::format("\n        step {:3} | loss {}   (the engine's: {})", step, mine, theirs);
    if (mine != theirs) {
      std::printf("  the smallest GPT with your block, trained on your engine (float64):%s\n", table.c_str());
      fail(fmt::format("training: at step {} your model's loss is {}, the same model of the engine's ops has {}. "
                       "Your block passed the checks above, so look at what trains it: run_backward (rung 5) and "
                       "my_adam_step (rung 13), here on float64 parameters",
                       step, mine, theirs));
    }
  }
  std::printf("  the smallest GPT with your block, trained 301 steps on your engine (float64):%s\n", table.c_str());
  passed("trained: the engine's losses, to the last printed digit");
}

}  // namespace

void rung_15() {
  check_started(15, {5, 7, 9, 10, 11, 12, 13},
                [] { my_gpt_block(MyGptBlock(4, MyLinear::Zeros{}), zeros({1, 2, 4}).requires_grad_()); });
  check_against_the_book();
  check_float64();
  train_beside_the_engine();
}

}  // namespace checks
