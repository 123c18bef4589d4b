// bench_gpu — milliseconds per training step of the seed char model (nn::MiniSelfAttention + Adam) on the
// GPU, at the workshop's size (D 24, T 8, B 16) and at D 256, T 128, B 32. Built with the CUDA backend
// (cmake/CUDA.cmake); gpu/run-checks.sh runs it beside PyTorch's twin, bench/torch/char_model.py --device cuda.
//
//   build/bin/bench_gpu [--steps 100] [--warmup 10] [--heads 1] [--cpu]
//
// A timed step is what a training loop does: draw the batch (on the CPU, then copy it over), forward,
// cross_entropy, zero_grad, backward, Adam step, then wait for the GPU (loss.item()). Batches, text and
// seed are those of bench/char_model.cpp, so the numbers compare with `bench_char_model --device cuda`.
// --cpu also times the same steps on the CPU. One machine-readable line per run:
//   RESULT device=cuda D=256 T=128 B=32 heads=1 ms_per_step=<median> ms_mean=<mean> loss_first=... loss_last=...
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "gpu/gpu.h"
#include "nn/nn.h"
#include "optim/optim.h"

using namespace autograd;

namespace {

struct Config {
  int64_t dim, context, batch;
};

struct Result {
  double median_ms = 0, mean_ms = 0, first_loss = 0, last_loss = 0;
};

Result run(Device device, const Config& c, int64_t heads, int64_t warmup, int64_t steps) {
  // the workshop's text, repeated until it holds at least two training windows (as bench/char_model.cpp)
  const int64_t T = c.context, B = c.batch;
  const std::string phrase = "aditi likes warm dosa ";
  std::string text = phrase;
  while (int64_t(text.size()) < 2 * (T + 1)) text += phrase;
  std::set<char> charset(text.begin(), text.end());
  std::string chars(charset.begin(), charset.end());
  std::map<char, int64_t> stoi;
  for (size_t i = 0; i < chars.size(); ++i) stoi[chars[i]] = int64_t(i);
  std::vector<int64_t> ids;
  for (char ch : text) ids.push_back(stoi[ch]);
  Tensor data = from_vector(ids, {int64_t(ids.size())});
  const int64_t V = int64_t(chars.size());

  manual_seed(7);
  nn::MiniSelfAttention model({.vocab = V, .dim = c.dim, .context = T, .heads = heads});
  model.to(device);
  optim::Adam opt(model.parameters(), {.lr = 0.01});

  auto batch = [&] {  // the workshop's batch() (nn::random_windows), moved to the device
    auto [xb, yb] = nn::random_windows(data, B, T);
    return std::pair{xb.to(device), yb.to(device)};
  };

  Result r;
  std::vector<double> ms;
  for (int64_t step = 0; step < warmup + steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    auto [xb, yb] = batch();
    Tensor logits = model(xb);
    Tensor loss = cross_entropy(logits.view({-1, V}), yb.view({-1}));
    opt.zero_grad();
    loss.backward();
    opt.step();
    const double l = loss.item();  // waits for every queued kernel, Adam's included
    const auto stop = std::chrono::steady_clock::now();
    if (step >= warmup) ms.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
    if (step == 0) r.first_loss = l;
    r.last_loss = l;
  }
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  r.median_ms = n == 0 ? 0 : n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  r.mean_ms = n == 0 ? 0 : std::accumulate(ms.begin(), ms.end(), 0.0) / double(n);
  return r;
}

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr, "bench_gpu: %s\nusage: bench_gpu [--steps N] [--warmup N] [--heads H] [--cpu]\n",
               problem.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t steps = 100, warmup = 10, heads = 1;
  bool with_cpu = false;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> int64_t {
      if (i + 1 >= argc) usage(flag + " needs a value");
      char* end = nullptr;
      const long long v = std::strtoll(argv[++i], &end, 10);
      if (*end != '\0' || v < 0) usage(flag + " needs a non-negative integer");
      return v;
    };
    if (flag == "--steps") steps = std::max<int64_t>(1, value());
    else if (flag == "--warmup") warmup = value();
    else if (flag == "--heads") heads = std::max<int64_t>(1, value());
    else if (flag == "--cpu") with_cpu = true;
    else usage("unknown flag " + flag);
  }
  if (!gpu::is_available()) {
    std::printf("bench_gpu: no CUDA device (%s); nothing to time\n", gpu::unavailable_reason().c_str());
    return 0;
  }
  std::printf("bench_gpu: %s, %lld timed steps after %lld warm-up, heads %lld\n", gpu::device_description().c_str(),
              (long long)steps, (long long)warmup, (long long)heads);
  const std::vector<Config> configs = {{24, 8, 16}, {256, 128, 32}};
  std::vector<Device> devices = {Device::cuda(0)};
  if (with_cpu) devices.push_back(Device::cpu());
  for (const Config& c : configs)
    for (Device d : devices) {
      if (c.dim % heads != 0) continue;
      const Result r = run(d, c, heads, warmup, steps);
      std::printf("RESULT device=%s D=%lld T=%lld B=%lld heads=%lld ms_per_step=%.4f ms_mean=%.4f loss_first=%.4f "
                  "loss_last=%.4f\n",
                  d.str().c_str(), (long long)c.dim, (long long)c.context, (long long)c.batch, (long long)heads,
                  r.median_ms, r.mean_ms, r.first_loss, r.last_loss);
      std::fflush(stdout);
    }
  std::printf("gpu memory: %.1f MiB in live tensors, %.1f MiB cached\n", double(gpu::allocated_bytes()) / 1048576.0,
              double(gpu::cached_bytes()) / 1048576.0);
}
