// bench_libtorch_char_model — libtorch (PyTorch's C++ API) twin of bench/char_model.cpp and
// bench/torch/char_model.py: the same model (the workshop's MiniSelfAttention, several heads split as
// nn/char_model.cpp splits them), torch::manual_seed(7), the same batches, Adam lr 0.01, the same flags and
// the same last line. It measures PyTorch's kernels without Python in between.
//
//   build/bin/bench_libtorch_char_model [--dim 24] [--context 8] [--batch 16] [--heads 1] [--threads 1]
//                                       [--steps 300] [--warmup 20]
//   ...
//   ms_per_step=<median> ms_mean=<mean> rss_mb=<peak RSS of the process> rss_base_mb=<RSS before the model>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "bench/common.h"
#include "bench/libtorch/common.h"

namespace {

// Members are constructed in the order they are declared, which is the Python class's order of random
// draws: tok, pos, q, k, v, head.
struct MiniSelfAttentionImpl : torch::nn::Module {
  MiniSelfAttentionImpl(int64_t V, int64_t D, int64_t T, int64_t H)
      : D(D), H(H),
        tok(register_module("tok", torch::nn::Embedding(V, D))),
        pos(register_module("pos", torch::nn::Embedding(T, D))),
        q(register_module("q", torch::nn::Linear(D, D))),
        k(register_module("k", torch::nn::Linear(D, D))),
        v(register_module("v", torch::nn::Linear(D, D))),
        head(register_module("head", torch::nn::Linear(D, V))),
        mask(register_buffer("mask", torch::tril(torch::ones({T, T})))) {}

  torch::Tensor forward(const torch::Tensor& idx) {
    const int64_t B = idx.size(0), t = idx.size(1);
    torch::Tensor x = tok(idx) + pos(torch::arange(t, torch::TensorOptions(torch::kLong).device(idx.device())));
    torch::Tensor blocked = mask.slice(0, 0, t).slice(1, 0, t) == 0;
    const double inf = std::numeric_limits<double>::infinity();
    if (H == 1) {  // the workshop's forward
      torch::Tensor att = q(x).matmul(k(x).transpose(-2, -1)) / std::pow(double(D), 0.5);
      att = att.masked_fill(blocked, -inf);
      return head(torch::softmax(att, -1).matmul(v(x)));
    }
    const int64_t hd = D / H;  // several heads: [B, t, D] -> [B, H, t, D/H], attend per head, stitch back
    auto split = [&](const torch::Tensor& y) { return y.view({B, t, H, hd}).transpose(1, 2); };
    torch::Tensor att = split(q(x)).matmul(split(k(x)).transpose(-2, -1)) / std::pow(double(hd), 0.5);
    att = att.masked_fill(blocked, -inf);
    torch::Tensor ctx = torch::softmax(att, -1).matmul(split(v(x))).transpose(1, 2).contiguous().view({B, t, D});
    return head(ctx);
  }

  int64_t D, H;
  torch::nn::Embedding tok, pos;
  torch::nn::Linear q, k, v, head;
  torch::Tensor mask;
};
TORCH_MODULE(MiniSelfAttention);

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr,
               "bench_libtorch_char_model: %s\n"
               "usage: bench_libtorch_char_model [--dim D] [--context T] [--batch B] [--heads H] [--threads N]\n"
               "                                 [--steps N] [--warmup N]\n",
               problem.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t dim = 24, context = 8, batch_size = 16, heads = 1, threads = 1, steps = 300, warmup = 20;
  bench::Flags flags;
  flags.ints = {{"--dim", &dim},         {"--context", &context}, {"--batch", &batch_size}, {"--heads", &heads},
                {"--threads", &threads}, {"--steps", &steps},     {"--warmup", &warmup}};
  bench::parse_flags(argc, argv, flags, [](const std::string& problem) { usage(problem); });
  if (dim % heads != 0) usage("--heads must divide --dim");

  bench::libtorch::set_up(threads);
  const double rss_base = bench::peak_rss_mb();

  const int64_t T = context, B = batch_size;
  const bench::Text text = bench::workshop_text(T);
  const torch::Tensor data = torch::tensor(text.ids, torch::kLong);
  const int64_t V = int64_t(text.chars.size());

  torch::manual_seed(7);
  MiniSelfAttention model(V, dim, T, heads);
  torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(0.01));

  int64_t n_params = 0;
  for (const auto& p : model->parameters()) n_params += p.numel();
  std::printf("libtorch %d.%d.%d char model: V %lld D %lld T %lld B %lld heads %lld, %lld parameters, %d thread(s), "
              "device cpu\n",
              TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR, TORCH_VERSION_PATCH, (long long)V, (long long)dim,
              (long long)T, (long long)B, (long long)heads, (long long)n_params, torch::get_num_threads());

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
