// bench_gpt2_generate — GPT-2 at the real 124M shape (vocab 50257, context 1024, 12 blocks of width 768,
// 12 heads): how long a model.safetensors takes to load, and how fast cached generation runs. Its twin is
// bench/torch/gpt2_generate.py (the same model and cache in PyTorch).
//
//   build/bin/bench_gpt2_generate [--file /tmp/gpt2_124M_random.safetensors] [--prompt 16] [--tokens 64]
//                                 [--threads 1] [--loads 3] [--layers 12] [--numerics fast]
//                                 [--precision fp32|bf16] [--layout packed|in-place]
//
// --layout packed (the default, as `scratchgrad generate` runs GPT-2 in fast numerics) packs the weights for
// generation (nn::pack_weights_for_generation: the Linears', and the head with wte, float32 or bfloat16);
// --layout in-place reads them as they are, to compare in the same run.
// --precision bf16 keeps the weights in bfloat16 (nn::load_gpt2 with DType::BFloat16: the matrices' bytes
// halved, each float32 value of the file rounded as it is read; norms and biases float32) and runs under
// autocast: each one-row product reads bfloat16 weights and sums in float32 (cpu/kernels/matmul_bfloat16.cpp's
// row path). The bound is then the bfloat16 bytes over the bandwidth.
//
// The file is made here once (random weights, N(0, 0.02) as GPT-2 is initialised, in Hugging Face's
// layout through nn::gpt2_state_dict) and reused when it exists: nothing is downloaded. Loading is timed
// --loads times (the file is then in the page cache: this measures parsing and copying, not the disk).
// Generation is greedy from a prompt of --prompt ids: a prefill, then --tokens cached steps, timed as a
// whole (the prefill included) and per step, in --numerics (fast, as `scratchgrad` runs a GPT, or exact).
// A cached step reads every weight once (the embedding's position rows aside), so it cannot beat the
// weights' bytes over the memory's read bandwidth: the bench measures that bandwidth in the same run, on
// the same --threads OpenMP threads, by reading a buffer of the weights' size (best of 10 passes, after the
// steps: read_bandwidth_gb_s) and prints the bound beside the step. The last line is machine-readable:
//   RESULT load_ms=<median> tokens_per_s=<steps/s> ms_per_token=<median step> prefill_ms=<ms> threads=<n>
//          weights_mb=<the weights' bytes a step reads> rss_mb=<peak RSS> numerics=<fast|exact> read_gb_s=<bandwidth>
//          bound_ms_per_token=<weights / bandwidth> of_bound=<bound / median step>
//          cpu_ms_per_token=<median step in the process's CPU time, all threads> precision=<fp32|bf16>
//          layout=<packed|in-place> packed=<weights packed>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "autograd/cpu/kernels.h"
#include "bench/bandwidth.h"
#include "bench/common.h"
#include "nn/generation.h"
#include "nn/gpt2.h"

using namespace autograd;

namespace {

struct Options {
  std::string file = "/tmp/gpt2_124M_random.safetensors";
  int64_t prompt = 16, tokens = 64, threads = 1, loads = 3, layers = 12;
  std::string numerics = "fast", precision = "fp32", layout = "packed";
};

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

void make_file(const Options& o) {
  std::printf("writing %s (random GPT-2 124M-shape weights)\n", o.file.c_str());
  manual_seed(124);
  nn::GPTModel model(nn::GPTConfig{.vocab_size = 50257, .context_length = 1024, .emb_dim = 768, .n_heads = 12,
                                   .n_layers = o.layers, .drop_rate = 0.0, .qkv_bias = true});
  model.tie_weights();
  NoGradGuard no_grad;
  for (Tensor& p : model.parameters()) {
    if (p.dim() == 1) continue;  // LayerNorm 1 / 0 and the biases as drawn
    normal_(p, 0.0, 0.02);
  }
  nn::save_safetensors(o.file, nn::gpt2_state_dict(model), nn::gpt2_metadata(model));
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  bench::parse_flags(argc, argv,
                     {.ints = {{"--prompt", &o.prompt}, {"--tokens", &o.tokens}, {"--threads", &o.threads},
                               {"--loads", &o.loads}, {"--layers", &o.layers}},
                      .strings = {{"--file", &o.file}, {"--numerics", &o.numerics}, {"--precision", &o.precision},
                                  {"--layout", &o.layout}},
                      .switches = {}},
                     [](const std::string& problem) {
                       std::fprintf(stderr, "bench_gpt2_generate: %s\n", problem.c_str());
                       std::exit(problem == "help" ? 0 : 2);
                     });
  if (o.tokens < 2) {
    std::fprintf(stderr, "bench_gpt2_generate: --tokens needs at least 2 (one from the prefill, one cached step)\n");
    return 2;
  }
  if (o.precision != "fp32" && o.precision != "bf16") {
    std::fprintf(stderr, "bench_gpt2_generate: --precision must be fp32 or bf16, got '%s'\n", o.precision.c_str());
    return 2;
  }
  if (o.layout != "packed" && o.layout != "in-place") {
    std::fprintf(stderr, "bench_gpt2_generate: --layout must be packed or in-place, got '%s'\n", o.layout.c_str());
    return 2;
  }
  const bool bf16 = o.precision == "bf16";
  set_num_threads(int(o.threads));
  try {
    set_numerics(parse_numerics(o.numerics, "--numerics"));
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "bench_gpt2_generate: %s\n", e.what());
    return 2;
  }
  if (!std::filesystem::exists(o.file)) make_file(o);

  std::vector<double> load_ms;
  std::unique_ptr<nn::GPTModel> model;
  for (int64_t i = 0; i < o.loads; ++i) {
    model.reset();
    const auto start = std::chrono::steady_clock::now();
    model = nn::load_gpt2(o.file, 0, bf16 ? DType::BFloat16 : DType::Float32);
    load_ms.push_back(ms_since(start));
  }
  if (bf16) set_autocast(DType::BFloat16);
  const int64_t packed = o.layout == "packed" ? nn::pack_weights_for_generation(*model) : 0;
  double weights_bytes = 0;
  for (const Tensor& p : model->parameters()) weights_bytes += double(p.numel()) * double(dtype_size(p.dtype()));
  const double weights_mb = weights_bytes / 1e6;
  std::printf("model: %lld blocks, %lld parameters (%.1f MB, %s), loaded in %.1f ms (median of %lld)%s\n",
              (long long)model->cfg.n_layers, (long long)model->num_parameters(), weights_mb,
              bf16 ? "matrices in bfloat16" : "float32", bench::summarize(load_ms).median, (long long)o.loads,
              bf16 ? (std::string("; bfloat16 products: ") + cpu::bfloat16_kernel_name()).c_str() : "");

  std::vector<int64_t> prompt;
  for (int64_t i = 0; i < o.prompt; ++i) prompt.push_back((i * 7919) % model->cfg.vocab_size);
  nn::GenerationOptions options;
  options.sampling.temperature = 0;
  options.max_new_tokens = o.tokens;
  Generator gen(0);
  std::vector<double> step_ms, step_cpu_ms;
  double last_cpu = bench::cpu_ms();
  auto last = std::chrono::steady_clock::now();
  const auto start = last;
  nn::generate(*model, prompt, options, gen, [&](int64_t, const Tensor&) {
    step_ms.push_back(ms_since(last));
    step_cpu_ms.push_back(bench::cpu_ms() - last_cpu);
    last = std::chrono::steady_clock::now();
    last_cpu = bench::cpu_ms();
  });
  const double total_ms = ms_since(start);
  const double prefill_ms = step_ms.front();  // the first token comes from the prefill
  step_ms.erase(step_ms.begin());
  step_cpu_ms.erase(step_cpu_ms.begin());
  const bench::Times steps = bench::summarize(step_ms);
  const double tokens_per_s = double(step_ms.size()) / ((total_ms - prefill_ms) / 1e3);
  std::printf("generated %lld tokens after a prompt of %lld: prefill %.1f ms, then median %.2f ms a token (min %.2f, max %.2f)\n",
              (long long)o.tokens, (long long)o.prompt, prefill_ms, steps.median, steps.min, steps.max);
  const double rss_mb = bench::peak_rss_mb();  // before the bandwidth's buffer
  const double gb_s = bench::read_bandwidth_gb_s(weights_mb * 1e6, o.threads);
  const double bound_ms = weights_mb / 1e3 / gb_s * 1e3;
  std::printf("bandwidth bound: %.1f MB of weights a token / %.2f GB/s = %.2f ms a token; the median step is at %.0f%% of it\n",
              weights_mb, gb_s, bound_ms, 100 * bound_ms / steps.median);
  std::printf("RESULT load_ms=%.1f tokens_per_s=%.2f ms_per_token=%.2f prefill_ms=%.1f threads=%lld weights_mb=%.1f rss_mb=%.1f "
              "numerics=%s read_gb_s=%.2f bound_ms_per_token=%.2f of_bound=%.2f cpu_ms_per_token=%.2f precision=%s layout=%s "
              "packed=%lld\n",
              bench::summarize(load_ms).median, tokens_per_s, steps.median, prefill_ms, (long long)o.threads, weights_mb,
              rss_mb, o.numerics.c_str(), gb_s, bound_ms, bound_ms / steps.median, bench::summarize(step_cpu_ms).median,
              o.precision.c_str(), packed > 0 ? "packed" : "in-place", (long long)packed);
  return 0;
}
