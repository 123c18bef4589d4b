// bench_char_model — milliseconds per training step of the workshop's character model (nn::MiniSelfAttention)
// trained with Adam, the C++ side of bench/compare.sh. Its twin is bench/torch/char_model.py: same model,
// same seed, same batches, same optimizer, same output format.
//
//   build/bin/bench_char_model [--dim 24] [--context 8] [--batch 16] [--heads 1] [--threads 1]
//                              [--steps 300] [--warmup 20] [--numerics exact|fast] [--device cpu|cuda]
//                              [--attention auto|blocked|dense|flash] [--phases]
//
// One timed step is everything a training loop does: draw the batch, forward, cross_entropy, zero_grad,
// backward, Adam step. --numerics picks the kernels' numerics (autograd/numerics.h: exact is PyTorch's
// bits, fast fused multiply-adds); without it SCRATCHGRAD_NUMERICS decides, else fast. The header line
// says which. The last line is machine-readable (bench/common.h):
//   ms_per_step=<median> ms_mean=<mean> rss_mb=<peak RSS of the process> rss_base_mb=<RSS before the model>
//
// --attention: auto, the model's default (the composed ops, the masked half skipped past 32 positions, the
// flash op past 128 and the head dim under fast numerics); blocked, the composed ops with the masked half
// skipped past 32; dense, the workshop's ops at every length; flash, scaled_dot_product_attention at every
// length.
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
  int64_t dim = 24, context = 8, batch = 16, heads = 1, threads = 1, steps = 300, warmup = 20;
  std::string device = "cpu";
  std::string attention = "auto";  // blocked, dense, flash: one kind of attention at every length (before/after figures)
  std::string numerics;            // exact|fast; empty: SCRATCHGRAD_NUMERICS, else fast
  std::string kernels;   // cpu|reference; empty: SCRATCHGRAD_KERNELS, else cpu
  bool phases = false;             // print the mean time of each phase of a step
};

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr,
               "bench_char_model: %s\n"
               "usage: bench_char_model [--dim D] [--context T] [--batch B] [--heads H] [--threads N]\n"
               "                        [--steps N] [--warmup N] [--numerics exact|fast] [--device cpu|cuda]\n"
               "                        [--kernels cpu|reference]\n"
               "                        [--attention auto|blocked|dense|flash] [--phases]\n",
               problem.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  bench::Flags flags;
  flags.ints = {{"--dim", &o.dim},         {"--context", &o.context}, {"--batch", &o.batch}, {"--heads", &o.heads},
                {"--threads", &o.threads}, {"--steps", &o.steps},     {"--warmup", &o.warmup}};
  flags.strings = {{"--device", &o.device}, {"--attention", &o.attention}, {"--numerics", &o.numerics},
                   {"--kernels", &o.kernels}};
  flags.switches = {{"--phases", &o.phases}};
  bench::parse_flags(argc, argv, flags, [](const std::string& problem) { usage(problem); });
  if (o.dim % o.heads != 0) usage("--heads must divide --dim");
  if (o.attention != "auto" && o.attention != "blocked" && o.attention != "dense" && o.attention != "flash")
    usage("--attention must be auto, blocked, dense or flash");
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  Device device;
  try {
    device = parse_device(o.device);
  } catch (const std::invalid_argument&) {
    usage("--device must be cpu or cuda, got '" + o.device + "'");
  }
  if (!has_backend(device)) usage("--device " + o.device + ": this build has no backend for it");
  try {
    if (!o.numerics.empty()) set_numerics(parse_numerics(o.numerics, "--numerics"));
    if (!o.kernels.empty()) set_kernels(parse_kernels(o.kernels, "--kernels"));
  } catch (const std::invalid_argument& e) {
    usage(e.what());
  }
  set_num_threads(int(o.threads));
  const double rss_base = bench::peak_rss_mb();

  const int64_t T = o.context, B = o.batch;
  const bench::Text text = bench::workshop_text(T);
  Tensor data = from_vector(text.ids, {int64_t(text.ids.size())});
  const int64_t V = int64_t(text.chars.size());

  manual_seed(7);
  nn::MiniSelfAttention model({.vocab = V, .dim = o.dim, .context = T, .heads = o.heads});
  model.to(device);
  model.skip_masked_half = o.attention != "dense";
  if (o.attention == "blocked" || o.attention == "dense") model.attention = nn::AttentionKernel::composed;
  if (o.attention == "flash") model.attention = nn::AttentionKernel::flash;
  optim::Adam opt(model.parameters(), {.lr = 0.01});

  auto batch = [&] {  // the workshop's batch() (nn::random_windows), moved to the device
    auto [xb, yb] = nn::random_windows(data, B, T);
    return std::pair{xb.to(device), yb.to(device)};
  };

  std::printf("scratchgrad char model: V %lld D %lld T %lld B %lld heads %lld, %lld parameters, %lld thread(s), "
              "device %s, numerics %s, BLIS kernels %s, SCRATCHGRAD_MATMUL=%s\n",
              (long long)V, (long long)o.dim, (long long)T, (long long)B, (long long)o.heads,
              (long long)model.num_parameters(), (long long)o.threads, device.str().c_str(), numerics_name(numerics()),
              blis_kernel_name(),
              std::getenv("SCRATCHGRAD_MATMUL") ? std::getenv("SCRATCHGRAD_MATMUL") : "(unset)");
  std::printf("blis_kernel=%s attention=%s numerics=%s\n", blis_kernel_name(), o.attention.c_str(),
              numerics_name(numerics()));

  // --phases: where a step's time goes. Each phase ends with a clock reading (on CUDA the work may
  // still be queued then, so the split is only meaningful on the CPU).
  const char* phase_names[] = {"batch", "forward", "loss", "zero_grad", "backward", "step", "free"};
  constexpr int kPhases = 7;
  double phase_ms[kPhases] = {};
  using Clock = std::chrono::steady_clock;
  auto ms_between = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };

  std::vector<double> ms;
  double first_loss = 0, last_loss = 0;
  const int64_t last_step = o.warmup + o.steps - 1;
  for (int64_t step = 0; step <= last_step; ++step) {
    Clock::time_point at[kPhases + 1];
    at[0] = Clock::now();
    {  // the whole step, freeing its tensors and graph included
      auto [xb, yb] = batch();
      at[1] = Clock::now();
      Tensor logits = model(xb);
      at[2] = Clock::now();
      Tensor loss = cross_entropy(logits.view({-1, V}), yb.view({-1}));
      at[3] = Clock::now();
      opt.zero_grad();
      at[4] = Clock::now();
      loss.backward();
      at[5] = Clock::now();
      opt.step();
      if (device.is_cuda()) (void)loss.item();  // waits for the queued kernels, Adam's included
      if (step == 0) first_loss = loss.item();
      if (step == last_step) last_loss = loss.item();
      at[6] = Clock::now();
    }
    at[7] = Clock::now();
    if (step < o.warmup) continue;
    ms.push_back(ms_between(at[0], at[7]));
    for (int p = 0; p < kPhases; ++p) phase_ms[p] += ms_between(at[p], at[p + 1]);
  }

  const bench::Times t = bench::summarize(ms);
  bench::print_losses_and_times(first_loss, last_step, last_loss, t, ms.size(), o.warmup);
  if (o.phases) {
    std::printf("mean ms per phase:");
    for (int p = 0; p < kPhases; ++p) std::printf(" %s %.4f", phase_names[p], phase_ms[p] / double(ms.size()));
    std::printf("\n");
  }
  bench::print_last_line(t, rss_base);
}
