// bench_gpt2_train — one training step of GPT-2 at the real 124M shape (vocab 50257 with its head, context
// 1024, 12 blocks of width 768, 12 heads, q/k/v biases, the head tied to wte) at llm.c's CPU setting, B 4 and
// T 64: milliseconds a step and model-FLOPs utilisation (MFU). Its twin is bench/torch/gpt2_train.py;
// bench/gpt2_train.sh runs both, full and LoRA, on 1 and 2 threads.
//
//   build/bin/bench_gpt2_train [--mode full|lora] [--threads 1] [--steps 5] [--warmup 2] [--batch 4]
//                              [--context 64] [--layers 12] [--numerics fast] [--precision fp32|bf16]
//
// --precision bf16 runs the forward pass and the loss under AutocastGuard(DType::BFloat16) (autograd/autocast.h):
// the products take bfloat16 operands with float32 sums (cpu/kernels/matmul_bfloat16.cpp), the rest stays float32.
// Its MFU is over the bfloat16 peak (bench_ops' core_peak_bench/avx512_bf16_dot loop) where the CPU has one.
//
// The model is built from manual_seed(124) with its random initial weights (a step costs the same on any
// values, and nothing is read from disk). The batch: random ids, the same every step. full: every parameter
// trains, with AdamW as `scratchgrad train` sets it up (lr 3e-4, betas 0.9/0.95, weight decay 0.1 on the
// Linear weights only) and the gradient norm clipped to 1.0. lora: nn::add_lora(rank 8, alpha 16, attn and
// mlp), AdamW on the adapters alone. One timed step: forward, cross_entropy over the 50257 logits, zero_grad,
// backward, clip, AdamW (the clipping's scaling inside AdamW's pass, as the trainer does it).
//
// MFU = model FLOPs per step / the step's time / (one core's peak × threads). The FLOPs are nn/flops.h's
// count (6 per trained parameter and 4 per frozen one a token, the head's V·D included, plus attention's
// 12·L·D·T); the peak is bench_ops' core_peak FMA loop (autograd/cpu/runtime/core_peak.h), measured before the
// model exists and again after every step, outside its time: the best of those. A measurement that another
// process or the hypervisor interrupts reads low (one read 185 GFLOP/s where the others read 230), and a low
// peak would inflate MFU; the best of several is the core's.
// The last line is machine-readable:
//   RESULT mode=<full|lora> threads=<n> ms_per_step=<median> mfu=<fraction> cpu_ms_per_step=<median CPU time,
//          all threads> cpu_mfu=<MFU over the CPU time> gflop_per_step=<model FLOPs> peak_gflops=<one core>
//          isa=<avx512|avx2> numerics=<fast|exact> precision=<fp32|bf16> bf16_kernel=<the bfloat16 product's path>
//          rss_mb=<peak RSS> loss=<first step's>
//          products_ms=<median time in matrix products a step> products_util=<their FLOPs / that time / (peak ×
//          threads)>
// The products' line splits the step in two: the products (cpu/runtime/product_tally.h: their own FLOPs, not
// the model's count, over their time) and everything else (the elementwise ops, the loss, the optimizer).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "autograd/cpu/kernels.h"
#include "autograd/cpu/runtime/core_peak.h"
#include "autograd/cpu/runtime/product_tally.h"
#include "bench/common.h"
#include "nn/flops.h"
#include "nn/lora.h"
#include "nn/nn.h"
#include "optim/optim.h"

using namespace autograd;

namespace {

struct Options {
  std::string mode = "full", numerics = "fast", precision = "fp32";
  int64_t threads = 1, steps = 5, warmup = 2, batch = 4, context = 64, layers = 12;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  auto usage = [](const std::string& problem) {
    std::fprintf(stderr, "bench_gpt2_train: %s\n", problem.c_str());
    std::exit(problem == "help" ? 0 : 2);
  };
  bench::parse_flags(argc, argv,
                     {.ints = {{"--threads", &o.threads}, {"--steps", &o.steps}, {"--warmup", &o.warmup},
                               {"--batch", &o.batch}, {"--context", &o.context}, {"--layers", &o.layers}},
                      .strings = {{"--mode", &o.mode}, {"--numerics", &o.numerics}, {"--precision", &o.precision}},
                      .switches = {}},
                     usage);
  if (o.mode != "full" && o.mode != "lora") usage("--mode must be full or lora, got '" + o.mode + "'");
  if (o.precision != "fp32" && o.precision != "bf16") usage("--precision must be fp32 or bf16, got '" + o.precision + "'");
  const bool bf16 = o.precision == "bf16";
  try {
    set_numerics(parse_numerics(o.numerics, "--numerics"));
  } catch (const std::invalid_argument& e) {
    usage(e.what());
  }
  set_num_threads(int(o.threads));
  // One core's peak for the step's products: the float32 FMA loop, or in a bf16 run the peak of the path the
  // bfloat16 products take (core_peak.h: the vdpbf16ps loop where the CPU has it, else the FMA loop).
  auto measure_peak = [bf16] { return bf16 ? cpu::measure_bfloat16_core_peak_flops() : cpu::measure_core_peak_flops(); };
  const char* peak_isa = bf16 ? cpu::bfloat16_core_peak_isa() : cpu::core_peak_isa();
  std::vector<double> peaks{measure_peak()};  // before the model exists; then after every step

  manual_seed(124);
  nn::GPTModel model({.vocab_size = 50257, .context_length = 1024, .emb_dim = 768, .n_heads = 12,
                      .n_layers = o.layers, .drop_rate = 0.0, .qkv_bias = true});
  model.tie_weights();
  model.train();
  {
    NoGradGuard no_grad;  // GPT-2's N(0, 0.02): the book's N(0, 1) embedding, as the tied head, gives logits in the hundreds
    for (Tensor& p : model.parameters())
      if (p.dim() == 2) normal_(p, 0.0, 0.02);
  }
  std::vector<Tensor> trained;
  std::unique_ptr<optim::AdamW> opt;
  if (o.mode == "full") {
    auto [decay, no_decay] = nn::weight_decay_groups(model);  // as examples/cli/train.cpp's gpt_optimizer
    opt = std::make_unique<optim::AdamW>(nn::tensors_of(decay), optim::AdamW::Options{.lr = 3e-4, .beta1 = 0.9, .beta2 = 0.95,
                                                                                .eps = 1e-8, .weight_decay = 0.1});
    opt->add_param_group(nn::tensors_of(no_decay), {{"weight_decay", 0.0}});
    trained = model.parameters();
  } else {
    trained = nn::tensors_of(nn::add_lora(model, {.rank = 8, .alpha = 16, .targets = {"attn", "mlp"}}));
    opt = std::make_unique<optim::AdamW>(trained, optim::AdamW::Options{.lr = 3e-4, .beta1 = 0.9, .beta2 = 0.95,
                                                                      .eps = 1e-8, .weight_decay = 0.0});
  }
  const int64_t B = o.batch, T = o.context, V = model.cfg.vocab_size;
  const Tensor ids = randint(0, V, {B, T + 1});
  const Tensor x = ids.narrow(1, 0, T).contiguous(), y = ids.narrow(1, 1, T).contiguous();
  const double flops_per_step = nn::gpt_training_flops_per_token(model, T) * double(B * T);
  std::printf("GPT-2 124M shape, %lld blocks, %lld parameters (%lld trained), B %lld T %lld, %s, %lld thread(s), "
              "numerics %s\n",
              (long long)o.layers, (long long)model.num_parameters(), (long long)[&] {
                int64_t n = 0;
                for (const Tensor& p : trained) n += p.numel();
                return n;
              }(), (long long)B, (long long)T, o.mode.c_str(), (long long)o.threads, o.numerics.c_str());
  std::printf("model FLOPs a step: %.1f GFLOP\n", flops_per_step / 1e9);

  std::vector<double> ms, cpu, product_ms, product_gflop;
  bench::PhaseTimes phases({"forward+loss", "zero_grad", "backward", "clip", "adamw"});
  cpu::set_product_tally(true);
  double first_loss = 0;
  for (int64_t step = 0; step < o.warmup + o.steps; ++step) {
    cpu::take_product_tally();  // from zero for this step
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = bench::cpu_ms();
    phases.start();
    {
      Tensor loss;
      {
        AutocastGuard precision(bf16 ? DType::BFloat16 : DType::Float32);
        loss = cross_entropy(model(x).view({-1, V}), y.view({-1}));
      }
      phases.mark();
      opt->zero_grad();
      phases.mark();
      loss.backward();
      phases.mark();
      const optim::ClipCoefficient clip = optim::clip_coefficient(trained, 1.0);  // as the trainer clips
      phases.mark();
      opt->step(clip.coefficient);
      phases.mark();
      if (step == 0) first_loss = loss.item();
    }
    const double took = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    const cpu::ProductTally products = cpu::take_product_tally();
    if (step >= o.warmup) {
      ms.push_back(took), cpu.push_back(bench::cpu_ms() - cpu_start), phases.keep();
      product_ms.push_back(products.seconds * 1e3), product_gflop.push_back(products.flops / 1e9);
    }
    peaks.push_back(measure_peak());
  }
  const double peak = *std::max_element(peaks.begin(), peaks.end());
  std::printf("one core's peak (%s loop), measured %zu times: best %.1f GFLOP/s, lowest %.1f; bfloat16 products: %s\n",
              peak_isa, peaks.size(), peak / 1e9, *std::min_element(peaks.begin(), peaks.end()) / 1e9,
              cpu::bfloat16_kernel_name());
  const bench::Times t = bench::summarize(ms), c = bench::summarize(cpu);
  std::printf("median ms by phase:");
  for (size_t p = 0; p < phases.names.size(); ++p)
    std::printf(" %s %.1f", phases.names[p].c_str(), bench::summarize(phases.ms[p]).median);
  std::printf("\n");
  const double mfu = peak > 0 ? flops_per_step / (t.median / 1e3) / (peak * double(o.threads)) : 0;
  const double products = bench::summarize(product_ms).median, products_gflop = bench::summarize(product_gflop).median;
  const double products_util = peak > 0 && products > 0 ? products_gflop * 1e9 / (products / 1e3) / (peak * double(o.threads)) : 0;
  std::printf("matrix products: %.1f ms a step (median), %.2f GFLOP at %.1f GFLOP/s, %.1f%% of the peak; the rest of "
              "the step %.1f ms\n",
              products, products_gflop, products > 0 ? products_gflop / (products / 1e3) : 0.0, 100 * products_util,
              t.median - products);
  // the same over the step's CPU time (all threads): what MFU would be with the cores to ourselves
  const double cpu_mfu = peak > 0 ? flops_per_step / (c.median / 1e3) / peak : 0;
  std::printf("%zu timed steps after %lld warm-up: median %.1f ms (min %.1f, max %.1f), CPU time %.1f ms; MFU %.1f%% "
              "(%.1f%% of the CPU time)\n",
              ms.size(), (long long)o.warmup, t.median, t.min, t.max, c.median, 100 * mfu, 100 * cpu_mfu);
  std::printf("RESULT mode=%s threads=%lld ms_per_step=%.1f mfu=%.3f cpu_ms_per_step=%.1f cpu_mfu=%.3f "
              "gflop_per_step=%.2f peak_gflops=%.1f isa=%s numerics=%s precision=%s bf16_kernel=%s rss_mb=%.1f loss=%.4f products_ms=%.1f "
              "products_util=%.3f\n",
              o.mode.c_str(), (long long)o.threads, t.median, mfu, c.median, cpu_mfu, flops_per_step / 1e9, peak / 1e9,
              peak_isa, o.numerics.c_str(), o.precision.c_str(), bf16 ? cpu::bfloat16_kernel_name() : "none", bench::peak_rss_mb(), first_loss, products, products_util);
  return 0;
}
