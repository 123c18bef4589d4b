// bench_libtorch_gpt — libtorch (PyTorch's C++ API) twin of bench/gpt.cpp and bench/torch/gpt.py: the
// book's chapter-4 GPT (tests/reference/make_gpt_fixtures.py's classes, line for line), torch::manual_seed(7),
// the workshop's text, the same batches, AdamW lr 3e-3 (betas 0.9/0.95, eps 1e-8, weight decay 0.1 on the
// Linear weights only), clip_grad_norm_ 1.0, the same flags and the same last line. Dropout is 0 in every
// twin, so its modules (the identity then, drawing no random numbers) are left out here.
//
//   build/bin/bench_libtorch_gpt [--layers 3] [--dim 96] [--heads 4] [--context 64] [--batch 16] [--threads 1]
//                                [--steps 50] [--warmup 5]
//   ...
//   ms_per_step=<median> ms_mean=<mean> rss_mb=<peak RSS of the process> rss_base_mb=<RSS before the model>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "bench/common.h"
#include "bench/libtorch/common.h"

namespace {

namespace nn = torch::nn;

// Every module's members are declared, so constructed, in the Python class's order: that is the order of
// the random draws, which makes the initial weights those of PyTorch (and scratchgrad) for the same seed.
struct MultiHeadAttentionImpl : nn::Module {
  MultiHeadAttentionImpl(int64_t d_in, int64_t d_out, int64_t context_length, int64_t num_heads)
      : d_out(d_out), num_heads(num_heads), head_dim(d_out / num_heads),
        W_query(register_module("W_query", nn::Linear(nn::LinearOptions(d_in, d_out).bias(false)))),
        W_key(register_module("W_key", nn::Linear(nn::LinearOptions(d_in, d_out).bias(false)))),
        W_value(register_module("W_value", nn::Linear(nn::LinearOptions(d_in, d_out).bias(false)))),
        out_proj(register_module("out_proj", nn::Linear(d_out, d_out))),
        mask(register_buffer("mask", torch::triu(torch::ones({context_length, context_length}), 1))) {}

  torch::Tensor forward(const torch::Tensor& x) {
    const int64_t b = x.size(0), num_tokens = x.size(1);
    const std::vector<int64_t> shape = {b, num_tokens, num_heads, head_dim};
    torch::Tensor keys = W_key(x).view(shape).transpose(1, 2);  // (b, heads, T, head_dim)
    torch::Tensor queries = W_query(x).view(shape).transpose(1, 2);
    torch::Tensor values = W_value(x).view(shape).transpose(1, 2);
    torch::Tensor attn_scores = queries.matmul(keys.transpose(2, 3));
    attn_scores.masked_fill_(mask.to(torch::kBool).slice(0, 0, num_tokens).slice(1, 0, num_tokens),
                             -std::numeric_limits<double>::infinity());
    torch::Tensor attn_weights = torch::softmax(attn_scores / std::pow(double(keys.size(-1)), 0.5), -1);
    torch::Tensor context = attn_weights.matmul(values).transpose(1, 2);  // (b, T, heads, head_dim)
    return out_proj(context.contiguous().view({b, num_tokens, d_out}));
  }

  int64_t d_out, num_heads, head_dim;
  nn::Linear W_query, W_key, W_value, out_proj;
  torch::Tensor mask;
};
TORCH_MODULE(MultiHeadAttention);

// The book's LayerNorm (scale = 1, shift = 0, eps 1e-5) as the fused op, as the Python twin calls it.
struct LayerNormImpl : nn::Module {
  explicit LayerNormImpl(int64_t emb_dim)
      : scale(register_parameter("scale", torch::ones({emb_dim}))),
        shift(register_parameter("shift", torch::zeros({emb_dim}))) {}
  torch::Tensor forward(const torch::Tensor& x) { return torch::layer_norm(x, {x.size(-1)}, scale, shift, 1e-5); }
  torch::Tensor scale, shift;
};
TORCH_MODULE(LayerNorm);

// Linear(D, 4D) -> GELU (tanh approximation) -> Linear(4D, D).
struct FeedForwardImpl : nn::Module {
  explicit FeedForwardImpl(int64_t d)
      : expand(register_module("expand", nn::Linear(d, 4 * d))),
        contract(register_module("contract", nn::Linear(4 * d, d))) {}
  torch::Tensor forward(const torch::Tensor& x) { return contract(torch::gelu(expand(x), "tanh")); }
  nn::Linear expand, contract;
};
TORCH_MODULE(FeedForward);

// Pre-LN: x + att(norm1(x)), then x + ff(norm2(x)).
struct TransformerBlockImpl : nn::Module {
  TransformerBlockImpl(int64_t emb_dim, int64_t context_length, int64_t n_heads)
      : att(register_module("att", MultiHeadAttention(emb_dim, emb_dim, context_length, n_heads))),
        ff(register_module("ff", FeedForward(emb_dim))),
        norm1(register_module("norm1", LayerNorm(emb_dim))),
        norm2(register_module("norm2", LayerNorm(emb_dim))) {}
  torch::Tensor forward(torch::Tensor x) {
    x = att(norm1(x)) + x;
    return ff(norm2(x)) + x;
  }
  MultiHeadAttention att;
  FeedForward ff;
  LayerNorm norm1, norm2;
};
TORCH_MODULE(TransformerBlock);

struct GPTModelImpl : nn::Module {
  GPTModelImpl(int64_t vocab_size, int64_t context_length, int64_t emb_dim, int64_t n_heads, int64_t n_layers)
      : tok_emb(register_module("tok_emb", nn::Embedding(vocab_size, emb_dim))),
        pos_emb(register_module("pos_emb", nn::Embedding(context_length, emb_dim))),
        trf_blocks(register_module("trf_blocks", nn::ModuleList())) {
    for (int64_t i = 0; i < n_layers; ++i) {
      blocks.push_back(TransformerBlock(emb_dim, context_length, n_heads));
      trf_blocks->push_back(blocks.back());
    }
    final_norm = register_module("final_norm", LayerNorm(emb_dim));
    out_head = register_module("out_head", nn::Linear(nn::LinearOptions(emb_dim, vocab_size).bias(false)));
  }
  torch::Tensor forward(const torch::Tensor& in_idx) {
    const int64_t seq_len = in_idx.size(1);
    torch::Tensor x = tok_emb(in_idx) + pos_emb(torch::arange(seq_len, torch::TensorOptions(torch::kLong)));
    for (auto& block : blocks) x = block(x);
    return out_head(final_norm(x));
  }
  nn::Embedding tok_emb, pos_emb;
  nn::ModuleList trf_blocks;
  std::vector<TransformerBlock> blocks;  // trf_blocks' items, with their types
  LayerNorm final_norm{nullptr};
  nn::Linear out_head{nullptr};
};
TORCH_MODULE(GPTModel);

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr,
               "bench_libtorch_gpt: %s\n"
               "usage: bench_libtorch_gpt [--layers L] [--dim D] [--heads H] [--context T] [--batch B] [--threads N]\n"
               "                          [--steps N] [--warmup N]\n",
               problem.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t layers = 3, dim = 96, heads = 4, context = 64, batch_size = 16, threads = 1, steps = 50, warmup = 5;
  bench::Flags flags;
  flags.ints = {{"--layers", &layers}, {"--dim", &dim},         {"--heads", &heads}, {"--context", &context},
                {"--batch", &batch_size}, {"--threads", &threads}, {"--steps", &steps}, {"--warmup", &warmup}};
  bench::parse_flags(argc, argv, flags, [](const std::string& problem) { usage(problem); });
  if (dim % heads != 0) usage("--heads must divide --dim");

  bench::libtorch::set_up(threads);
  const double rss_base = bench::peak_rss_mb();

  const int64_t T = context, B = batch_size;
  const bench::Text text = bench::workshop_text(T);
  const torch::Tensor data = torch::tensor(text.ids, torch::kLong);
  const int64_t V = int64_t(text.chars.size());

  torch::manual_seed(7);
  GPTModel model(V, T, dim, heads, layers);
  // AdamW's groups (make_gpt_fixtures.py's param_groups): the Linear weights decayed, the rest not, each in
  // parameters() order.
  std::set<const void*> linear_weights;
  for (const auto& m : model->modules())
    if (auto* linear = m->as<nn::LinearImpl>()) linear_weights.insert(linear->weight.unsafeGetTensorImpl());
  std::vector<torch::Tensor> decay, no_decay;
  const std::vector<torch::Tensor> params = model->parameters();
  for (const auto& p : params) (linear_weights.count(p.unsafeGetTensorImpl()) ? decay : no_decay).push_back(p);
  auto adamw = [](double weight_decay) {
    return torch::optim::AdamWOptions(3e-3).betas({0.9, 0.95}).eps(1e-8).weight_decay(weight_decay);
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(adamw(0.1)));
  groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(adamw(0.0)));
  torch::optim::AdamW opt(std::move(groups), adamw(0.1));

  int64_t n_params = 0;
  for (const auto& p : params) n_params += p.numel();
  std::printf("libtorch %d.%d.%d gpt: V %lld layers %lld D %lld T %lld B %lld heads %lld, %lld parameters, "
              "%d thread(s), device cpu\n",
              TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR, TORCH_VERSION_PATCH, (long long)V, (long long)layers,
              (long long)dim, (long long)T, (long long)B, (long long)heads, (long long)n_params,
              torch::get_num_threads());

  std::vector<double> ms;
  double first_loss = 0, last_loss = 0;
  const int64_t last_step = warmup + steps - 1;
  for (int64_t step = 0; step <= last_step; ++step) {
    const auto start = std::chrono::steady_clock::now();
    double loss_value = 0;
    {  // the whole step, freeing its tensors and graph included
      auto [xb, yb] = bench::libtorch::batch(data, B, T);
      torch::Tensor logits = model(xb);
      torch::Tensor loss = torch::nn::functional::cross_entropy(logits.view({-1, V}), yb.view({-1}));
      bench::libtorch::zero_grad_set_to_none(opt);
      loss.backward();
      torch::nn::utils::clip_grad_norm_(params, 1.0);
      opt.step();
      if (step == 0 || step == last_step) loss_value = loss.item<double>();
    }
    const auto stop = std::chrono::steady_clock::now();
    if (step == 0) first_loss = loss_value;
    if (step == last_step) last_loss = loss_value;
    if (step >= warmup) ms.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
  }

  const bench::Times t = bench::summarize(ms);
  bench::print_losses_and_times(first_loss, last_step, last_loss, t, ms.size(), warmup);
  bench::print_last_line(t, rss_base);
}
