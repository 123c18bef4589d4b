// bench_llama — a Llama-family model at SmolLM2-135M's shape (30 blocks of width 576, 9 query heads and 3
// key/value heads of 64, SwiGLU feed-forward of 1536, 49,152 tokens, the head tied to the embedding), random
// weights, fast numerics: cached generation (tokens/s against the memory's bound) and a training step at
// B 4, T 64 (ms and MFU). Its twin is bench/torch/llama.py; bench/llama.sh runs both, 1 and 2 threads.
//
//   build/bin/bench_llama generate [--prompt 16] [--tokens 64] [--threads 1] [--layers 30] [--numerics fast]
//                                  [--layout packed|in-place]
//   build/bin/bench_llama train [--batch 4] [--context 64] [--steps 5] [--warmup 2] [--threads 1] [--layers 30]
// Both take --precision fp32|bf16 (docs/precision.md): bf16 runs the products under autocast (bfloat16
// operands, float32 sums); generate then keeps the matrices in bfloat16 (nn::keep_weights_in_bfloat16) and
// its bound is their bytes; train's MFU is over the bfloat16 path's peak (cpu::bfloat16_core_peak_flops).
// generate's --layout packed (the default, as `scratchgrad generate` runs a model in fast numerics)
// packs the Linear weights for generation (nn::pack_weights_for_generation); --layout in-place reads them as
// they are, to compare in the same run.
//
// The weights: manual_seed(135), then N(0, 0.02) for every matrix and 1 for the norms (nn::LlamaModel draws
// them so); a step costs the same on any values, and nothing is read from disk.
// generate: greedy, a prefill of --prompt ids, then --tokens cached steps, each timed. A cached step reads
// every weight once (the embedding rows aside, but the tied head reads the whole embedding), so it cannot
// beat the weights' bytes over the memory's read bandwidth, measured in the same run on the same threads
// (bench/bandwidth.h).
// train: forward, cross_entropy over the 49,152 logits, zero_grad, backward, the gradient norm clipped to 1,
// AdamW (lr 3e-4, betas 0.9/0.95, weight decay 0.1 on the 2-D weights) — as bench/torch/llama.py's step.
// MFU = (6 FLOPs a token per parameter + attention's 12·layers·T·heads·head_dim) × B·T over the step's time
// over one core's peak (the best of bench_ops' FMA loop, measured before the model and after every step)
// times the threads. The last line is machine-readable:
//   RESULT mode=generate tokens_per_s=<steps/s> ms_per_token=<median step> prefill_ms=<ms> threads=<n>
//          weights_mb=<float32 weights> rss_mb=<peak> read_gb_s=<bandwidth> bound_ms_per_token=<weights / bandwidth>
//          of_bound=<bound / median step> precision=<fp32|bf16> layout=<packed|in-place> packed=<weights packed>
//   RESULT mode=train threads=<n> ms_per_step=<median> mfu=<fraction> gflop_per_step=<model FLOPs>
//          peak_gflops=<one core> isa=<avx512|avx2|avx512_bf16> rss_mb=<peak> loss=<first step's> precision=<fp32|bf16>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "autograd/cpu/runtime/core_peak.h"
#include "bench/bandwidth.h"
#include "bench/common.h"
#include "nn/generation.h"
#include "nn/llama.h"
#include "optim/optim.h"

using namespace autograd;

namespace {

struct Options {
  std::string mode, numerics = "fast", precision = "fp32", layout = "packed";
  int64_t prompt = 16, tokens = 64, threads = 1, layers = 30, batch = 4, context = 64, steps = 5, warmup = 2;
};

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

std::unique_ptr<nn::LlamaModel> smollm2_135m_shape(int64_t layers) {
  manual_seed(135);
  nn::LlamaConfig cfg;  // its defaults are SmolLM2-135M's
  cfg.num_hidden_layers = layers;
  return std::make_unique<nn::LlamaModel>(cfg);
}

int generate(const Options& o) {
  const auto model = smollm2_135m_shape(o.layers);
  model->eval();
  if (o.precision == "bf16") nn::keep_weights_in_bfloat16(*model);
  const int64_t packed = o.layout == "packed" ? nn::pack_weights_for_generation(*model) : 0;
  double weights_bytes = 0;
  for (const Tensor& p : model->parameters()) weights_bytes += double(p.numel()) * double(dtype_size(p.dtype()));
  const double weights_mb = weights_bytes / 1e6;
  std::printf("SmolLM2-135M shape, %lld blocks, %lld parameters (%.1f MB, %s), %lld thread(s)\n", (long long)o.layers,
              (long long)model->num_parameters(), weights_mb, o.precision == "bf16" ? "matrices in bfloat16" : "float32",
              (long long)o.threads);
  std::vector<int64_t> prompt;
  for (int64_t i = 0; i < o.prompt; ++i) prompt.push_back((i * 7919) % model->vocab_size());
  nn::GenerationOptions options;
  options.sampling.temperature = 0;
  options.max_new_tokens = o.tokens;
  Generator gen(0);
  std::vector<double> step_ms;
  auto last = std::chrono::steady_clock::now();
  const auto start = last;
  nn::generate(*model, prompt, options, gen, [&](int64_t, const Tensor&) {
    step_ms.push_back(ms_since(last));
    last = std::chrono::steady_clock::now();
  });
  const double total_ms = ms_since(start), prefill_ms = step_ms.front();  // the first token: the prefill's
  step_ms.erase(step_ms.begin());
  const bench::Times steps = bench::summarize(step_ms);
  const double tokens_per_s = double(step_ms.size()) / ((total_ms - prefill_ms) / 1e3);
  std::printf("generated %lld tokens after a prompt of %lld: prefill %.1f ms, then median %.2f ms a token (min %.2f, max %.2f)\n",
              (long long)o.tokens, (long long)o.prompt, prefill_ms, steps.median, steps.min, steps.max);
  const double rss_mb = bench::peak_rss_mb();  // before the bandwidth's buffer
  const double gb_s = bench::read_bandwidth_gb_s(weights_mb * 1e6, o.threads);
  const double bound_ms = weights_mb / gb_s;
  std::printf("bandwidth bound: %.1f MB of weights a token / %.2f GB/s = %.2f ms a token; the median step is at %.0f%% of it\n",
              weights_mb, gb_s, bound_ms, 100 * bound_ms / steps.median);
  std::printf("RESULT mode=generate tokens_per_s=%.2f ms_per_token=%.2f prefill_ms=%.1f threads=%lld weights_mb=%.1f "
              "rss_mb=%.1f read_gb_s=%.2f bound_ms_per_token=%.2f of_bound=%.2f precision=%s layout=%s packed=%lld\n",
              tokens_per_s, steps.median, prefill_ms, (long long)o.threads, weights_mb, rss_mb, gb_s, bound_ms,
              bound_ms / steps.median, o.precision.c_str(), packed > 0 ? "packed" : "in-place", (long long)packed);
  return 0;
}

// The model FLOPs of a step's tokens: 6 per parameter (forward 2, backward 4; the tied head's product is
// the embedding's parameters once) plus the attention's scores and weighted sums, 12·layers·T·(heads·head_dim).
double training_flops_per_token(const nn::LlamaModel& model, int64_t T) {
  const nn::LlamaConfig& c = model.cfg;
  return 6.0 * double(model.num_parameters()) +
         12.0 * double(c.num_hidden_layers * T * c.num_attention_heads * c.head_size());
}

int train(const Options& o) {
  const bool bf16 = o.precision == "bf16";
  auto measure_peak = [bf16] { return bf16 ? cpu::measure_bfloat16_core_peak_flops() : cpu::measure_core_peak_flops(); };
  const char* peak_isa = bf16 ? cpu::bfloat16_core_peak_isa() : cpu::core_peak_isa();
  std::vector<double> peaks{measure_peak()};  // before the model exists; then after every step
  const auto model = smollm2_135m_shape(o.layers);
  model->train();
  std::vector<Tensor> decay, no_decay;
  for (const Tensor& p : model->parameters()) (p.dim() == 2 ? decay : no_decay).push_back(p);
  optim::AdamW opt(decay, {.lr = 3e-4, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1});
  opt.add_param_group(no_decay, {{"weight_decay", 0.0}});
  const std::vector<Tensor> trained = model->parameters();
  const int64_t B = o.batch, T = o.context, V = model->vocab_size();
  const Tensor ids = randint(0, V, {B, T + 1});
  const Tensor x = ids.narrow(1, 0, T).contiguous(), y = ids.narrow(1, 1, T).contiguous();
  const double flops_per_step = training_flops_per_token(*model, T) * double(B * T);
  std::printf("SmolLM2-135M shape, %lld blocks, %lld parameters, B %lld T %lld, %lld thread(s), numerics %s; "
              "model FLOPs a step: %.1f GFLOP\n",
              (long long)o.layers, (long long)model->num_parameters(), (long long)B, (long long)T, (long long)o.threads,
              o.numerics.c_str(), flops_per_step / 1e9);
  std::vector<double> ms;
  double first_loss = 0;
  for (int64_t step = 0; step < o.warmup + o.steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    {
      Tensor loss = cross_entropy((*model)(x).view({-1, V}), y.view({-1}));
      opt.zero_grad();
      loss.backward();
      const optim::ClipCoefficient clip = optim::clip_coefficient(trained, 1.0);
      opt.step(clip.coefficient);
      if (step == 0) first_loss = loss.item();
    }
    if (step >= o.warmup) ms.push_back(ms_since(start));
    peaks.push_back(measure_peak());
  }
  const double peak = *std::max_element(peaks.begin(), peaks.end());
  const bench::Times t = bench::summarize(ms);
  const double mfu = peak > 0 ? flops_per_step / (t.median / 1e3) / (peak * double(o.threads)) : 0;
  std::printf("one core's peak (%s loop): best of %zu, %.1f GFLOP/s; %zu timed steps: median %.1f ms (min %.1f, "
              "max %.1f); MFU %.1f%%\n",
              peak_isa, peaks.size(), peak / 1e9, ms.size(), t.median, t.min, t.max, 100 * mfu);
  std::printf("RESULT mode=train threads=%lld ms_per_step=%.1f mfu=%.3f gflop_per_step=%.2f peak_gflops=%.1f isa=%s "
              "rss_mb=%.1f loss=%.4f precision=%s\n",
              (long long)o.threads, t.median, mfu, flops_per_step / 1e9, peak / 1e9, peak_isa, bench::peak_rss_mb(),
              first_loss, o.precision.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  auto usage = [](const std::string& problem) {
    std::fprintf(stderr, "bench_llama: %s\nusage: bench_llama generate|train [flags] (see bench/llama.cpp)\n",
                 problem.c_str());
    std::exit(problem == "help" ? 0 : 2);
  };
  if (argc < 2) usage("which mode? generate or train");
  o.mode = argv[1];
  if (o.mode != "generate" && o.mode != "train") usage("the mode must be generate or train, got '" + o.mode + "'");
  bench::parse_flags(argc - 1, argv + 1,
                     {.ints = {{"--prompt", &o.prompt}, {"--tokens", &o.tokens}, {"--threads", &o.threads},
                               {"--layers", &o.layers}, {"--batch", &o.batch}, {"--context", &o.context},
                               {"--steps", &o.steps}, {"--warmup", &o.warmup}},
                      .strings = {{"--numerics", &o.numerics}, {"--precision", &o.precision}, {"--layout", &o.layout}},
                      .switches = {}},
                     usage);
  if (o.mode == "generate" && o.tokens < 2) usage("--tokens needs at least 2 (one from the prefill, one cached step)");
  try {
    set_numerics(parse_numerics(o.numerics, "--numerics"));
  } catch (const std::invalid_argument& e) {
    usage(e.what());
  }
  if (o.precision != "fp32" && o.precision != "bf16") usage("--precision must be fp32 or bf16, got '" + o.precision + "'");
  if (o.layout != "packed" && o.layout != "in-place") usage("--layout must be packed or in-place, got '" + o.layout + "'");
  if (o.precision == "bf16") set_autocast(DType::BFloat16);  // the products of both modes, process-wide
  set_num_threads(int(o.threads));
  return o.mode == "generate" ? generate(o) : train(o);
}
