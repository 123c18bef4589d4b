// bench_gpt — milliseconds per training step of the GPT (nn/gpt.h, the book's chapter 4) trained as
// `scratchgrad train --model gpt` trains it, the C++ side of bench/compare.sh's GPT sizes. Its twins are
// bench/torch/gpt.py (PyTorch) and bench/libtorch/gpt.cpp: same model, seed, batches, optimizer and output.
//
//   build/bin/bench_gpt [--layers 3] [--dim 96] [--heads 4] [--context 64] [--batch 16] [--threads 1]
//                       [--steps 50] [--warmup 5] [--numerics exact|fast] [--device cpu|cuda]
//                       [--attention auto|composed|flash] [--phases]
//
// The model: GPTConfig{vocab = the workshop text's 13 characters, context_length = --context, emb_dim = --dim,
// n_heads = --heads, n_layers = --layers, dropout 0, no qkv bias}, built after manual_seed(7) (so its
// initial weights are PyTorch's for the same seed). The recipe is the trainer's: AdamW (lr 3e-3, betas
// 0.9/0.95, eps 1e-8) with weight decay 0.1 on the Linear weights only (nn::weight_decay_groups), the
// global gradient norm clipped to 1.0; the learning rate stays at 3e-3 (the trainer's warm-up and cosine
// schedule cost nothing worth timing). One timed step: draw a batch of random windows (nn::random_windows),
// forward, cross_entropy, zero_grad, backward, clip_grad_norm_, AdamW step.
//
// --numerics as in bench_char_model (without it SCRATCHGRAD_NUMERICS decides, else fast). --attention sets
// every block's nn::AttentionKernel (auto: the model's default; composed: causal_scores, softmax and
// tril_matmul at every length; flash: scaled_dot_product_attention at every length). The last line
// is machine-readable (bench/common.h):
//   ms_per_step=<median> ms_mean=<mean> rss_mb=<peak RSS of the process> rss_base_mb=<RSS before the model>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/common.h"
#include "nn/nn.h"
#include "optim/optim.h"

using namespace autograd;

namespace {

struct Options {
  int64_t layers = 3, dim = 96, heads = 4, context = 64, batch = 16, threads = 1, steps = 50, warmup = 5;
  std::string numerics;  // exact|fast; empty: SCRATCHGRAD_NUMERICS, else fast
  std::string kernels;   // cpu|reference; empty: SCRATCHGRAD_KERNELS, else cpu
  std::string device = "cpu";
  std::string attention = "auto";  // auto, composed or flash (nn::AttentionKernel)
  bool phases = false;   // print the mean time of each phase of a step
};

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr,
               "bench_gpt: %s\n"
               "usage: bench_gpt [--layers L] [--dim D] [--heads H] [--context T] [--batch B] [--threads N]\n"
               "                 [--steps N] [--warmup N] [--numerics exact|fast] [--device cpu|cuda]\n"
               "                 [--kernels cpu|reference]\n"
               "                 [--attention auto|composed|flash] [--phases]\n",
               problem.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  bench::Flags flags;
  flags.ints = {{"--layers", &o.layers},   {"--dim", &o.dim},     {"--heads", &o.heads},  {"--context", &o.context},
                {"--batch", &o.batch},     {"--threads", &o.threads}, {"--steps", &o.steps}, {"--warmup", &o.warmup}};
  flags.strings = {{"--numerics", &o.numerics}, {"--kernels", &o.kernels}, {"--device", &o.device},
                   {"--attention", &o.attention}};
  flags.switches = {{"--phases", &o.phases}};
  bench::parse_flags(argc, argv, flags, [](const std::string& problem) { usage(problem); });
  if (o.dim % o.heads != 0) usage("--heads must divide --dim");
  if (o.attention != "auto" && o.attention != "composed" && o.attention != "flash")
    usage("--attention must be auto, composed or flash");
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  Device device;
  try {
    device = parse_device(o.device);
    if (!o.numerics.empty()) set_numerics(parse_numerics(o.numerics, "--numerics"));
    if (!o.kernels.empty()) set_kernels(parse_kernels(o.kernels, "--kernels"));
  } catch (const std::invalid_argument& e) {
    usage(e.what());
  }
  if (!has_backend(device)) usage("--device " + o.device + ": this build has no backend for it");
  set_num_threads(int(o.threads));
  const double rss_base = bench::peak_rss_mb();

  const int64_t T = o.context, B = o.batch;
  const bench::Text text = bench::workshop_text(T);
  Tensor data = from_vector(text.ids, {int64_t(text.ids.size())});
  const int64_t V = int64_t(text.chars.size());

  manual_seed(7);
  nn::GPTModel model({.vocab_size = V, .context_length = T, .emb_dim = o.dim, .n_heads = o.heads,
                      .n_layers = o.layers, .drop_rate = 0.0, .qkv_bias = false});
  model.to(device);
  if (o.attention != "auto")
    for (const auto& block : *model.trf_blocks)
      block->att->attention = nn::parse_attention_kernel(o.attention, "--attention");
  auto [decay, no_decay] = nn::weight_decay_groups(model);  // as examples/cli/train.cpp's gpt_optimizer
  optim::AdamW opt(nn::tensors_of(decay), {.lr = 3e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1});
  opt.add_param_group(nn::tensors_of(no_decay), {{"weight_decay", 0.0}});
  const std::vector<Tensor> params = model.parameters();

  std::printf("scratchgrad gpt: V %lld layers %lld D %lld T %lld B %lld heads %lld, %lld parameters, %lld thread(s), "
              "device %s, numerics %s, BLIS kernels %s, SCRATCHGRAD_MATMUL=%s\n",
              (long long)V, (long long)o.layers, (long long)o.dim, (long long)T, (long long)B, (long long)o.heads,
              (long long)model.num_parameters(), (long long)o.threads, device.str().c_str(), numerics_name(numerics()),
              blis_kernel_name(), std::getenv("SCRATCHGRAD_MATMUL") ? std::getenv("SCRATCHGRAD_MATMUL") : "(unset)");
  std::printf("blis_kernel=%s\n", blis_kernel_name());

  // --phases: where a step's time goes (on CUDA the work may still be queued at a clock reading, so the
  // split is only meaningful on the CPU).
  bench::PhaseTimes phases({"batch", "forward", "loss", "zero_grad", "backward", "clip", "step", "free"});

  std::vector<double> ms;
  double first_loss = 0, last_loss = 0;
  const int64_t last_step = o.warmup + o.steps - 1;
  for (int64_t step = 0; step <= last_step; ++step) {
    phases.start();
    {  // the whole step, freeing its tensors and graph included
      auto [xb, yb] = nn::random_windows(data, B, T);
      xb = xb.to(device), yb = yb.to(device);
      phases.mark();
      Tensor logits = model(xb);
      phases.mark();
      Tensor loss = cross_entropy(logits.view({-1, V}), yb.view({-1}));
      phases.mark();
      opt.zero_grad();
      phases.mark();
      loss.backward();
      phases.mark();
      optim::clip_grad_norm_(params, 1.0);
      phases.mark();
      opt.step();
      if (device.is_cuda()) (void)loss.item();  // waits for the queued kernels, AdamW's included
      if (step == 0) first_loss = loss.item();
      if (step == last_step) last_loss = loss.item();
      phases.mark();
    }
    phases.mark();
    if (step < o.warmup) continue;
    ms.push_back(std::chrono::duration<double, std::milli>(phases.at.back() - phases.at.front()).count());
    phases.keep();
  }

  const bench::Times t = bench::summarize(ms);
  bench::print_losses_and_times(first_loss, last_step, last_loss, t, ms.size(), o.warmup);
  if (o.phases) {
    std::printf("mean ms per phase:");
    for (size_t p = 0; p < phases.names.size(); ++p)
      std::printf(" %s %.4f", phases.names[p].c_str(), bench::summarize(phases.ms[p]).mean);
    std::printf("\n");
  }
  bench::print_last_line(t, rss_base);
}
