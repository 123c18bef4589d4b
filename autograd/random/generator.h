// random.h — a CPU random number generator that reproduces PyTorch 1.13's numbers.
//
// Seed a Generator with the same seed as torch.manual_seed(s) and the fills in `random::` below give
// the same values that PyTorch's CPU kernels write into a contiguous tensor with the same number of
// elements. docs/random.md explains how each number is produced. Everything here was re-implemented
// from a description of PyTorch's algorithms; no PyTorch code is used.
//
// A Generator is not thread-safe (PyTorch guards its generator with a mutex); share one across
// threads only behind your own lock, or give each thread its own (ThreadDefaultGenerator below).
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <vector>

namespace autograd {

class Generator {
 public:
  // The seed PyTorch's default CPU generator starts with before any torch.manual_seed call.
  static constexpr uint64_t kDefaultSeed = 67280421310721ULL;
  // Size in bytes of the blob returned by get_state(); it has torch.get_rng_state()'s layout.
  static constexpr size_t kStateBytes = 5056;

  explicit Generator(uint64_t seed = kDefaultSeed);

  // Restarts the Mersenne Twister from `seed` and forgets cached normal samples
  // (what torch.manual_seed does). Only the low 32 bits drive the stream; all 64 are remembered.
  void manual_seed(uint64_t seed);
  uint64_t initial_seed() const { return seed_; }

  uint32_t random();    // one 32-bit Mersenne Twister output
  uint64_t random64();  // two outputs: the first becomes the high 32 bits, the second the low ones

  // Box-Muller makes normal samples in pairs; the second of a pair waits here for the next
  // small-tensor normal draw. Only the double slot is used by PyTorch's CPU kernels.
  std::optional<double> next_double_normal_sample() const { return next_double_normal_; }
  void set_next_double_normal_sample(std::optional<double> v) { next_double_normal_ = v; }
  std::optional<float> next_float_normal_sample() const { return next_float_normal_; }
  void set_next_float_normal_sample(std::optional<float> v) { next_float_normal_ = v; }

  // A byte blob laid out exactly like torch.get_rng_state() (little-endian): seed, MT position,
  // the 624 state words, the cached normal samples. set_state accepts such a blob (also one
  // produced by PyTorch) and throws std::invalid_argument when it is malformed.
  std::vector<uint8_t> get_state() const;
  void set_state(const std::vector<uint8_t>& state);

 private:
  static constexpr int kStateWords = 624;

  void twist();  // regenerates all 624 state words at once

  uint64_t seed_ = 0;
  std::array<uint32_t, kStateWords> state_{};
  // PyTorch's engine counts down `left_` and reads state_[next_]; `left_ == 1` right after
  // seeding means "twist before the first output".
  int left_ = 1;
  uint32_t next_ = 0;
  std::optional<float> next_float_normal_;
  std::optional<double> next_double_normal_;
};

// The generator used when no generator is passed: the process-wide one (torch's default CPU generator),
// unless this thread has chosen its own with ThreadDefaultGenerator.
Generator& default_generator();
void manual_seed(uint64_t seed);  // seeds default_generator()

// While alive, default_generator() on this thread is `g`: model initialisation, dropout and batch
// sampling on this thread then draw from `g`. Threads that each train their own model get the same
// numbers as if each ran alone, instead of racing on one stream. Scopes nest; other threads see nothing.
class ThreadDefaultGenerator {
 public:
  explicit ThreadDefaultGenerator(Generator& g);
  ~ThreadDefaultGenerator();
  ThreadDefaultGenerator(const ThreadDefaultGenerator&) = delete;
  ThreadDefaultGenerator& operator=(const ThreadDefaultGenerator&) = delete;

 private:
  Generator* previous_;
};

// nn.init helpers, computed in double exactly as torch.nn.init does:
// kaiming_uniform_(w, a): gain = sqrt(2 / (1 + a^2)), std = gain / sqrt(fan_in), bound = sqrt(3) * std.
// nn.Linear uses a = sqrt(5) for its weight and 1 / sqrt(fan_in) for its bias
// (fan_in == 0 gives a bias bound of 0, as in PyTorch).
double kaiming_uniform_bound(int64_t fan_in, double a);
double linear_bias_bound(int64_t fan_in);

// Fills of a contiguous buffer of n elements, in the order PyTorch's CPU kernels fill a contiguous
// tensor with numel() == n. They throw std::invalid_argument on bad arguments (n < 0, from > to,
// std < 0, low >= high, p outside [0, 1]), mirroring PyTorch's checks.
namespace random {

// Which of PyTorch's CPU kernel builds the fills reproduce (PyTorch picks one at startup; its
// ATEN_CPU_CAPABILITY environment variable overrides the choice).
//   portable  ATEN_CPU_CAPABILITY=default: the default here, and what the whole project's parity
//             fixtures are made with.
//   avx2      ATEN_CPU_CAPABILITY=avx2, what a plain `python3` picks on an AVX2 x86 CPU: uniform
//             computes x * (to - from) + from with one fused rounding; normal fuses `* std + mean`
//             and, for float32 with n >= 16, uses re-creations of PyTorch's vectorised log and
//             sin/cos (autograd/random/avx2_mathfun_emulation.h). Both are bit for bit.
// The draws are the same in both sets, so generators stay in step; randint, bernoulli and randperm
// do not change. The choice is process-wide. It starts from the environment variable
// SCRATCHGRAD_CPU_KERNELS (unset, "default" or "portable" -> portable; "avx2" -> avx2), read once at
// the first fill or cpu_kernels() call; any other value makes that call throw std::invalid_argument.
// set_cpu_kernels() overrides it at any time (not while another thread is filling).
enum class CpuKernels { portable, avx2 };
void set_cpu_kernels(CpuKernels kernels);  // throws std::invalid_argument for a value not listed above
CpuKernels cpu_kernels();
// Parses a SCRATCHGRAD_CPU_KERNELS value as described above; the message of the invalid_argument it
// throws names the variable and the value.
CpuKernels parse_cpu_kernels(const char* value);
// Reads and parses SCRATCHGRAD_CPU_KERNELS now (what cpu_kernels() does once); does not change the choice.
CpuKernels cpu_kernels_from_environment();

// uniform_(from, to) / torch.rand. One 32-bit draw per float (24 bits used), one random64 per
// double (53 bits used); then x * (to - from) + from. The portable kernels round twice (the product,
// then the sum); the avx2 set rounds once (a fused multiply-add). Both match PyTorch bit for bit.
void uniform(Generator& gen, float* out, int64_t n, double from, double to);
void uniform(Generator& gen, double* out, int64_t n, double from, double to);

// normal_(mean, std) / torch.randn: n < 16 uses cached double Box-Muller pairs; n >= 16 uses
// PyTorch's block-of-16 fill (portable or AVX2, see CpuKernels).
void normal(Generator& gen, float* out, int64_t n, double mean, double std);
void normal(Generator& gen, double* out, int64_t n, double mean, double std);

// random_(low, high) / torch.randint(low, high): (draw % (high - low)) + low, with a 32-bit draw
// when high - low < 2^32 and a random64 otherwise.
void random_from_to(Generator& gen, int64_t* out, int64_t n, int64_t low, int64_t high);
void random_from_to(Generator& gen, float* out, int64_t n, int64_t low, int64_t high);

// bernoulli_(p): writes 1 where a 53-bit uniform double is < p, else 0 (one random64 each).
// F.dropout(x, p) on CPU is x * (mask / float(1 - p)) with mask drawn by bernoulli(gen, mask, n, 1 - p).
void bernoulli(Generator& gen, float* out, int64_t n, double p);
void bernoulli(Generator& gen, double* out, int64_t n, double p);

// torch.randperm(n): swap-based Fisher-Yates from the front, one 32-bit draw per position.
void randperm(Generator& gen, int64_t* out, int64_t n);

}  // namespace random
}  // namespace autograd
