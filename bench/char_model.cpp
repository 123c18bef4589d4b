// bench_char_model — milliseconds per training step of the workshop's character model (nn::MiniSelfAttention)
// trained with Adam, the C++ side of bench/compare.sh. Its twin is bench/torch/char_model.py: same model,
// same seed, same batches, same optimizer, same output format.
//
//   build/bin/bench_char_model [--dim 24] [--context 8] [--batch 16] [--heads 1] [--threads 1]
//                              [--steps 300] [--warmup 20] [--device cpu|cuda]
//                              [--attention auto|blocked|dense|flash] [--phases]
//
// One timed step is everything a training loop does: draw the batch, forward, cross_entropy, zero_grad,
// backward, Adam step. The last line is machine-readable:
//   ms_per_step=<median> ms_mean=<mean> rss_mb=<peak RSS of the process> rss_base_mb=<RSS before the model>
//
// --attention: auto, the model's default (the composed ops, the masked half skipped past 32 positions, the
// flash op past 64 under fast numerics); blocked, the composed ops with the masked half skipped past 32;
// dense, the workshop's ops at every length; flash, scaled_dot_product_attention at every length.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "nn/nn.h"
#include "optim/optim.h"

using namespace autograd;

namespace {

struct Options {
  int64_t dim = 24, context = 8, batch = 16, heads = 1, threads = 1, steps = 300, warmup = 20;
  std::string device = "cpu";
  std::string attention = "auto";  // blocked, dense, flash: one kind of attention at every length (before/after figures)
  bool phases = false;                // print the mean time of each phase of a step
};

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr,
               "bench_char_model: %s\n"
               "usage: bench_char_model [--dim D] [--context T] [--batch B] [--heads H] [--threads N]\n"
               "                        [--steps N] [--warmup N] [--device cpu|cuda] [--attention auto|blocked|dense|flash]\n"
               "                        [--phases]\n",
               problem.c_str());
  std::exit(2);
}

int64_t parse_int(const std::string& flag, const std::string& text, int64_t min) {
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < min) usage(flag + " needs an integer >= " + std::to_string(min) + ", got '" + text + "'");
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  std::map<std::string, int64_t*> ints = {{"--dim", &o.dim},         {"--context", &o.context}, {"--batch", &o.batch},
                                          {"--heads", &o.heads},     {"--threads", &o.threads}, {"--steps", &o.steps},
                                          {"--warmup", &o.warmup}};
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i], value;
    if (flag == "-h" || flag == "--help") usage("help");
    if (flag == "--phases") {
      o.phases = true;
      continue;
    }
    if (auto eq = flag.find('='); eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else {
      if (i + 1 >= argc) usage(flag + " needs a value");
      value = argv[++i];
    }
    if (flag == "--device") o.device = value;
    else if (flag == "--attention") o.attention = value;
    else if (auto it = ints.find(flag); it != ints.end()) *it->second = parse_int(flag, value, flag == "--warmup" ? 0 : 1);
    else usage("unknown flag " + flag);
  }
  if (o.dim % o.heads != 0) usage("--heads must divide --dim");
  if (o.attention != "auto" && o.attention != "blocked" && o.attention != "dense" && o.attention != "flash")
    usage("--attention must be auto, blocked, dense or flash");
  return o;
}

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_maxrss) / 1024.0;  // Linux reports kilobytes
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
  set_num_threads(int(o.threads));
  const double rss_base = peak_rss_mb();

  // The workshop's text, repeated until it holds at least two training windows (the seed size keeps it as is).
  const int64_t T = o.context, B = o.batch;
  const std::string phrase = "aditi likes warm dosa ";
  std::string text = phrase;
  while (int64_t(text.size()) < 2 * (T + 1)) text += phrase;
  std::set<char> charset(text.begin(), text.end());
  std::string chars(charset.begin(), charset.end());  // sorted(set(text))
  std::map<char, int64_t> stoi;
  for (size_t i = 0; i < chars.size(); ++i) stoi[chars[i]] = int64_t(i);
  std::vector<int64_t> ids;
  for (char c : text) ids.push_back(stoi[c]);
  Tensor data = from_vector(ids, {int64_t(ids.size())});
  const int64_t V = int64_t(chars.size());

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
              "device %s, BLIS kernels %s, SCRATCHGRAD_MATMUL=%s\n",
              (long long)V, (long long)o.dim, (long long)T, (long long)B, (long long)o.heads,
              (long long)model.num_parameters(), (long long)o.threads, device.str().c_str(), blis_kernel_name(),
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

  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  const double median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  const double mean = std::accumulate(ms.begin(), ms.end(), 0.0) / double(n);
  std::printf("loss: step 0 %.4f, step %lld %.4f\n", first_loss, (long long)(o.warmup + o.steps - 1), last_loss);
  std::printf("%lld timed steps after %lld warm-up: median %.4f ms, mean %.4f ms, min %.4f ms, max %.4f ms\n",
              (long long)n, (long long)o.warmup, median, mean, sorted.front(), sorted.back());
  if (o.phases) {
    std::printf("mean ms per phase:");
    for (int p = 0; p < kPhases; ++p) std::printf(" %s %.4f", phase_names[p], phase_ms[p] / double(n));
    std::printf("\n");
  }
  std::printf("ms_per_step=%.4f ms_mean=%.4f rss_mb=%.1f rss_base_mb=%.1f\n", median, mean, peak_rss_mb(), rss_base);
}
