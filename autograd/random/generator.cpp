// random.cpp — PyTorch-1.13-compatible Mersenne Twister and distribution fills.
// The algorithms follow the description of PyTorch's CPU generator and kernels (see docs/random.md);
// the code is our own.
#include "autograd/random/generator.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <numbers>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "autograd/compat.h"
#include "autograd/random/avx2_mathfun_emulation.h"
#include "autograd/random/float_sincos.h"

// The uniform and normal fills must round after every multiply and add, like PyTorch's portable
// kernels. Compilers may otherwise fuse `a * b + c` into one FMA instruction when the target has one
// (-march=native, aarch64), which changes the last bit. CMakeLists.txt passes -ffp-contract=off to
// the whole build; the pragma keeps this file correct when it is compiled on its own. Where the AVX2
// kernel set needs one rounding, the code says so with an explicit std::fma.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace autograd {

// ------------------------------------------------------------------------------------------------
// Mersenne Twister (MT19937)
// ------------------------------------------------------------------------------------------------
namespace {

constexpr int kN = 624;  // state words
constexpr int kM = 397;  // the "middle" word each twist mixes in
constexpr uint32_t kMatrixA = 0x9908b0dfu;
constexpr uint32_t kUpperBit = 0x80000000u;
constexpr uint32_t kLowerBits = 0x7fffffffu;

// Tempering spreads the state word's bits so that consecutive outputs look independent.
uint32_t temper(uint32_t y) {
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

}  // namespace

Generator::Generator(uint64_t seed) { manual_seed(seed); }

void Generator::manual_seed(uint64_t seed) {
  seed_ = seed;
  // Knuth's linear recurrence (the reference MT "init_genrand"), on the low 32 bits of the seed.
  // Unsigned arithmetic wraps modulo 2^32, which is exactly what the recurrence wants.
  state_[0] = static_cast<uint32_t>(seed & 0xffffffffu);
  for (int i = 1; i < kN; ++i) {
    const uint32_t prev = state_[i - 1];
    state_[i] = 1812433253u * (prev ^ (prev >> 30)) + static_cast<uint32_t>(i);
  }
  left_ = 1;  // the first random() call twists before reading
  next_ = 0;
  next_float_normal_.reset();
  next_double_normal_.reset();
}

void Generator::twist() {
  for (int i = 0; i < kN; ++i) {
    const uint32_t y = (state_[i] & kUpperBit) | (state_[(i + 1) % kN] & kLowerBits);
    state_[i] = state_[(i + kM) % kN] ^ (y >> 1) ^ ((y & 1u) ? kMatrixA : 0u);
  }
  left_ = kN;
  next_ = 0;
}

uint32_t Generator::random() {
  if (--left_ == 0) twist();
  return temper(state_[next_++]);
}

uint64_t Generator::random64() {
  // Two separate statements: the first draw must become the high half.
  const uint64_t hi = random();
  const uint64_t lo = random();
  return (hi << 32) | lo;
}

// ------------------------------------------------------------------------------------------------
// State blob, byte-compatible with torch.get_rng_state(): PyTorch's C struct with its natural
// padding, written field by field in little-endian order so the host's layout does not matter.
//   0     uint64 initial seed            5016  double unused (0)
//   8     int32  left                    5024  double cached double normal sample
//   12    int32  seeded (1)              5032  double unused (0)
//   16    uint64 next                    5040  int32  cached double sample valid (+4 padding)
//   24    uint64 state[624]              5048  float  cached float sample
//                                        5052  uint8  cached float sample valid (+3 padding)
// ------------------------------------------------------------------------------------------------
namespace {

constexpr size_t kSeedAt = 0, kLeftAt = 8, kSeededAt = 12, kNextAt = 16, kWordsAt = 24;
constexpr size_t kNormalYAt = 5024, kNormalValidAt = 5040;
constexpr size_t kFloatSampleAt = 5048, kFloatValidAt = 5052;

template <typename U>
void put_le(std::vector<uint8_t>& out, size_t at, U value) {
  for (size_t b = 0; b < sizeof(U); ++b) out[at + b] = static_cast<uint8_t>(value >> (8 * b));
}

template <typename U>
U get_le(const std::vector<uint8_t>& in, size_t at) {
  U value = 0;
  for (size_t b = 0; b < sizeof(U); ++b) value |= static_cast<U>(static_cast<U>(in[at + b]) << (8 * b));
  return value;
}

[[noreturn]] void bad_state(const std::string& why) {
  throw std::invalid_argument("Generator::set_state: " + why);
}

}  // namespace

std::vector<uint8_t> Generator::get_state() const {
  std::vector<uint8_t> out(kStateBytes, 0);
  put_le<uint64_t>(out, kSeedAt, seed_);
  put_le<uint32_t>(out, kLeftAt, static_cast<uint32_t>(left_));
  put_le<uint32_t>(out, kSeededAt, 1u);
  put_le<uint64_t>(out, kNextAt, next_);
  for (int i = 0; i < kN; ++i) put_le<uint64_t>(out, kWordsAt + 8 * static_cast<size_t>(i), state_[i]);
  if (next_double_normal_) {
    put_le<uint64_t>(out, kNormalYAt, compat::bit_cast<uint64_t>(*next_double_normal_));
    put_le<uint32_t>(out, kNormalValidAt, 1u);
  }
  if (next_float_normal_) {
    put_le<uint32_t>(out, kFloatSampleAt, compat::bit_cast<uint32_t>(*next_float_normal_));
    out[kFloatValidAt] = 1;
  }
  return out;
}

void Generator::set_state(const std::vector<uint8_t>& state) {
  if (state.size() != kStateBytes) {
    bad_state("expected " + std::to_string(kStateBytes) + " bytes, got " + std::to_string(state.size()));
  }
  const auto left = static_cast<int32_t>(get_le<uint32_t>(state, kLeftAt));
  const uint64_t next = get_le<uint64_t>(state, kNextAt);
  if (get_le<uint32_t>(state, kSeededAt) != 1u) bad_state("generator is not marked as seeded");
  // random() reads state_[next] until `left` runs down, so these bounds keep every read in range.
  if (left < 1 || left > kN) bad_state("position 'left' out of range");
  if (next > static_cast<uint64_t>(kN) || next + static_cast<uint64_t>(left) > kN + 1u) {
    bad_state("position 'next' out of range");
  }
  const uint32_t double_valid = get_le<uint32_t>(state, kNormalValidAt);
  const uint8_t float_valid = state[kFloatValidAt];
  if (double_valid > 1u || float_valid > 1u) bad_state("cached-sample flag is neither 0 nor 1");

  std::array<uint32_t, kN> words{};
  for (int i = 0; i < kN; ++i) {
    const uint64_t w = get_le<uint64_t>(state, kWordsAt + 8 * static_cast<size_t>(i));
    if (w > 0xffffffffu) bad_state("state word does not fit in 32 bits");
    words[static_cast<size_t>(i)] = static_cast<uint32_t>(w);
  }

  // Everything validated: commit (a throwing call above leaves the generator untouched).
  seed_ = get_le<uint64_t>(state, kSeedAt);
  state_ = words;
  left_ = left;
  next_ = static_cast<uint32_t>(next);
  next_double_normal_.reset();
  next_float_normal_.reset();
  if (double_valid) next_double_normal_ = compat::bit_cast<double>(get_le<uint64_t>(state, kNormalYAt));
  if (float_valid) next_float_normal_ = compat::bit_cast<float>(get_le<uint32_t>(state, kFloatSampleAt));
}

namespace {
thread_local Generator* this_threads_generator = nullptr;  // set by ThreadDefaultGenerator
}

Generator& default_generator() {
  static Generator gen;
  return this_threads_generator ? *this_threads_generator : gen;
}

ThreadDefaultGenerator::ThreadDefaultGenerator(Generator& g) : previous_(this_threads_generator) {
  this_threads_generator = &g;
}
ThreadDefaultGenerator::~ThreadDefaultGenerator() { this_threads_generator = previous_; }

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

// ------------------------------------------------------------------------------------------------
// nn.init bounds
// ------------------------------------------------------------------------------------------------
double kaiming_uniform_bound(int64_t fan_in, double a) {
  if (fan_in <= 0) throw std::invalid_argument("kaiming_uniform_bound: fan_in must be positive");
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  const double stddev = gain / std::sqrt(static_cast<double>(fan_in));
  return std::sqrt(3.0) * stddev;
}

double linear_bias_bound(int64_t fan_in) {
  return fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
}

// ------------------------------------------------------------------------------------------------
// Distributions
// ------------------------------------------------------------------------------------------------
namespace random {

// ------------------------------------------------------------------------------------------------
// Kernel set (CpuKernels): decided once from SCRATCHGRAD_CPU_KERNELS, or by set_cpu_kernels.
// ------------------------------------------------------------------------------------------------
namespace {

constexpr const char* kKernelsVariable = "SCRATCHGRAD_CPU_KERNELS";
constexpr int kUndecided = -1;
std::atomic<int> g_cpu_kernels{kUndecided};

bool is_kernel_set(CpuKernels k) { return k == CpuKernels::portable || k == CpuKernels::avx2; }

}  // namespace

CpuKernels parse_cpu_kernels(const char* value) {
  if (value == nullptr || *value == '\0') return CpuKernels::portable;
  const std::string_view v(value);
  if (v == "default" || v == "portable") return CpuKernels::portable;  // "default" as in ATEN_CPU_CAPABILITY
  if (v == "avx2") return CpuKernels::avx2;
  throw std::invalid_argument(std::string(kKernelsVariable) + "=\"" + value +
                              "\" is not a kernel set; use \"default\" (or \"portable\") or \"avx2\"");
}

CpuKernels cpu_kernels_from_environment() { return parse_cpu_kernels(std::getenv(kKernelsVariable)); }

void set_cpu_kernels(CpuKernels kernels) {
  if (!is_kernel_set(kernels)) {
    throw std::invalid_argument("random::set_cpu_kernels: unknown kernel set " +
                                std::to_string(static_cast<int>(kernels)));
  }
  g_cpu_kernels.store(static_cast<int>(kernels));
}

CpuKernels cpu_kernels() {
  int k = g_cpu_kernels.load();
  if (k == kUndecided) {
    // First use: read the environment (throws on a bad value and stays undecided, so every later
    // call throws too). A concurrent set_cpu_kernels wins over the environment.
    int from_env = static_cast<int>(cpu_kernels_from_environment());
    g_cpu_kernels.compare_exchange_strong(k, from_env);
    k = g_cpu_kernels.load();
  }
  return static_cast<CpuKernels>(k);
}

// ------------------------------------------------------------------------------------------------
// Fills
// ------------------------------------------------------------------------------------------------
namespace {

void check_count(int64_t n, const char* who) {
  if (n < 0) throw std::invalid_argument(std::string(who) + ": negative element count");
}

// A uniform number in [0, 1) with as many random bits as the type's mantissa holds:
// 24 bits of one 32-bit draw for float, 53 bits of one random64 for double.
// Both the integer and the power-of-two scale are exact, so no rounding happens here.
template <typename T> T uniform01(Generator& gen);

template <> float uniform01<float>(Generator& gen) {
  constexpr uint32_t kMask = (1u << 24) - 1;
  return static_cast<float>(gen.random() & kMask) * (1.0f / 16777216.0f);
}

template <> double uniform01<double>(Generator& gen) {
  constexpr uint64_t kMask = (uint64_t{1} << 53) - 1;
  return static_cast<double>(gen.random64() & kMask) * (1.0 / 9007199254740992.0);
}

template <typename T>
void uniform_fill(Generator& gen, T* out, int64_t n, double from_d, double to_d, CpuKernels kernels) {
  check_count(n, "uniform");
  if (!(from_d <= to_d)) throw std::invalid_argument("uniform: expected from <= to");
  const T from = static_cast<T>(from_d);
  const T to = static_cast<T>(to_d);
  const T range = to - from;  // in T, as PyTorch does
  if (!std::isfinite(range)) throw std::invalid_argument("uniform: to - from overflows the dtype");
  // Two roundings, as PyTorch's portable kernel: the product x * range is rounded to T on its own,
  // then `from` is added and the sum rounded. The order matters: a fused multiply-add (one rounding,
  // what PyTorch's AVX2 kernel computes) differs in the last bit for about half of the values, and
  // nn.Linear's initial weights come from here. The build compiles with -ffp-contract=off (and the
  // pragma above) so the compiler cannot fuse the two statements back into one FMA.
  if (kernels == CpuKernels::avx2) {
    // PyTorch's AVX2 build: the compiler fused the same expression into one FMA (one rounding).
    for (int64_t i = 0; i < n; ++i) out[i] = std::fma(uniform01<T>(gen), range, from);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const T product = uniform01<T>(gen) * range;
    out[i] = product + from;
  }
}

// `z * std + mean` as the chosen kernel set rounds it: twice (portable) or once (AVX2, where the
// compiler fused PyTorch's expression into an FMA).
template <typename T>
T scale_shift(T z, T stddev, T mean, CpuKernels kernels) {
  if (kernels == CpuKernels::avx2) return std::fma(z, stddev, mean);
  const T scaled = z * stddev;
  return scaled + mean;
}

// One standard normal from a Box-Muller pair (PyTorch's normal_distribution<double>): the first
// uniform gives the angle, the second the radius; the sine half is cached in the generator and
// returned by the next call instead of drawing.
double cached_standard_normal(Generator& gen) {
  if (const auto cached = gen.next_double_normal_sample()) {
    gen.set_next_double_normal_sample(std::nullopt);
    return *cached;
  }
  const double u_angle = uniform01<double>(gen);
  const double u_radius = uniform01<double>(gen);
  const double radius = std::sqrt(-2.0 * std::log(1.0 - u_radius));  // 1 - u is in (0, 1]
  const double theta = 2.0 * std::numbers::pi * u_angle;
  gen.set_next_double_normal_sample(radius * std::sin(theta));
  return radius * std::cos(theta);
}

// Small (n < 16) tensors: each element is a double sample, scaled in double, then rounded to T.
template <typename T>
void normal_small(Generator& gen, T* out, int64_t n, double mean, double stddev, CpuKernels kernels) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = static_cast<T>(scale_shift(cached_standard_normal(gen), stddev, mean, kernels));
  }
}

// sin θ and cos θ for the block path. PyTorch calls the C library's sinf/cosf, and the fixtures come from
// glibc's; float_sincos returns glibc's bits on every platform (Emscripten's musl, for one, rounds 1.3% of
// the angles the other way). Double angles use the C library's sin and cos, as PyTorch does.
SinCos sin_cos(float theta) { return float_sincos(theta); }
std::pair<double, double> sin_cos(double theta) { return {std::sin(theta), std::cos(theta)}; }

// Box-Muller over one block of 16 uniforms: element j (j < 8) pairs with element j + 8.
// data[j] supplies the radius, data[j + 8] the angle; cosine lands in j, sine in j + 8.
template <typename T>
void box_muller_16(T* data, T mean, T stddev, CpuKernels kernels) {
  for (int j = 0; j < 8; ++j) {
    const T u_radius = T(1) - data[j];  // [0, 1) -> (0, 1] so the log is finite
    const T u_angle = data[j + 8];
    // std::log of a float is logf: glibc's and musl's (the same algorithm, by Arm) agree on all 2^24
    // arguments this can be (tests/lab/core.test.mjs checks the WebAssembly build against the native).
    const T radius = std::sqrt(T(-2) * std::log(u_radius));
    // PyTorch forms the angle in double and then rounds it to T.
    const T theta = static_cast<T>(2.0 * std::numbers::pi * static_cast<double>(u_angle));
    const auto [sin_theta, cos_theta] = sin_cos(theta);
    data[j] = scale_shift(radius * cos_theta, stddev, mean, kernels);
    data[j + 8] = scale_shift(radius * sin_theta, stddev, mean, kernels);
  }
}

// PyTorch's AVX2 block of 16 (float only): the same Box-Muller, eight lanes at a time, with the
// vectorised Cephes log and sin/cos instead of the C library's. Differences from the portable block,
// all in float: the angle is 2π rounded to float times u (one float multiply, not a double one), and
// the final `* std + mean` is an explicit fused multiply-add.
void box_muller_16_avx2(float* data, float mean, float stddev) {
  const float two_pi = static_cast<float>(2.0 * std::numbers::pi);
  for (int j = 0; j < 8; ++j) {
    const float u_radius = 1.0f - data[j];
    const float u_angle = data[j + 8];
    const float radius = std::sqrt(-2.0f * random::avx2_emulation::log(u_radius));
    const float theta = two_pi * u_angle;
    float sin_theta, cos_theta;
    random::avx2_emulation::sincos(theta, sin_theta, cos_theta);
    const float n1 = radius * cos_theta;
    const float n2 = radius * sin_theta;
    data[j] = std::fma(n1, stddev, mean);
    data[j + 8] = std::fma(n2, stddev, mean);
  }
}

template <typename T>
void transform_block(T* data, T mean, T stddev, CpuKernels kernels) {
  if constexpr (std::is_same_v<T, float>) {
    if (kernels == CpuKernels::avx2) return box_muller_16_avx2(data, mean, stddev);
  }
  box_muller_16(data, mean, stddev, kernels);
}

// Large (n >= 16) contiguous tensors: draw n uniforms, transform whole blocks of 16, and if n is not
// a multiple of 16 draw 16 fresh uniforms for the last 16 slots (overlapping the previous block) and
// transform those. The overlap overwrites already-finished values, exactly as PyTorch does.
template <typename T>
void normal_fill(Generator& gen, T* out, int64_t n, T mean, T stddev, CpuKernels kernels) {
  for (int64_t i = 0; i < n; ++i) out[i] = uniform01<T>(gen);
  for (int64_t i = 0; i + 16 <= n; i += 16) transform_block(out + i, mean, stddev, kernels);
  if (n % 16 != 0) {
    T* tail = out + (n - 16);
    for (int i = 0; i < 16; ++i) tail[i] = uniform01<T>(gen);
    transform_block(tail, mean, stddev, kernels);
  }
}

template <typename T>
void normal_any(Generator& gen, T* out, int64_t n, double mean, double stddev) {
  check_count(n, "normal");
  if (!(stddev >= 0.0)) throw std::invalid_argument("normal: expected std >= 0");
  const CpuKernels kernels = cpu_kernels();
  if (n >= 16) {
    normal_fill<T>(gen, out, n, static_cast<T>(mean), static_cast<T>(stddev), kernels);
  } else {
    normal_small<T>(gen, out, n, mean, stddev, kernels);
  }
}

template <typename T>
void random_from_to_any(Generator& gen, T* out, int64_t n, int64_t low, int64_t high) {
  check_count(n, "random_from_to");
  if (low >= high) throw std::invalid_argument("random_from_to: expected low < high");
  // Unsigned arithmetic: high - low can exceed INT64_MAX, and the wrap-around is intended.
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  const bool wide = range >= (uint64_t{1} << 32);  // a 32-bit draw cannot cover the range
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t draw = wide ? gen.random64() : gen.random();
    const uint64_t value = draw % range + static_cast<uint64_t>(low);
    out[i] = static_cast<T>(static_cast<int64_t>(value));
  }
}

template <typename T>
void bernoulli_any(Generator& gen, T* out, int64_t n, double p) {
  check_count(n, "bernoulli");
  if (!(p >= 0.0 && p <= 1.0)) throw std::invalid_argument("bernoulli: expected 0 <= p <= 1");
  for (int64_t i = 0; i < n; ++i) out[i] = uniform01<double>(gen) < p ? T(1) : T(0);
}

}  // namespace

void uniform(Generator& gen, float* out, int64_t n, double from, double to) {
  uniform_fill(gen, out, n, from, to, cpu_kernels());
}
void uniform(Generator& gen, double* out, int64_t n, double from, double to) {
  uniform_fill(gen, out, n, from, to, cpu_kernels());
}

void normal(Generator& gen, float* out, int64_t n, double mean, double stddev) { normal_any(gen, out, n, mean, stddev); }
void normal(Generator& gen, double* out, int64_t n, double mean, double stddev) { normal_any(gen, out, n, mean, stddev); }

void random_from_to(Generator& gen, int64_t* out, int64_t n, int64_t low, int64_t high) {
  random_from_to_any(gen, out, n, low, high);
}
void random_from_to(Generator& gen, float* out, int64_t n, int64_t low, int64_t high) {
  random_from_to_any(gen, out, n, low, high);
}

void bernoulli(Generator& gen, float* out, int64_t n, double p) { bernoulli_any(gen, out, n, p); }
void bernoulli(Generator& gen, double* out, int64_t n, double p) { bernoulli_any(gen, out, n, p); }

void randperm(Generator& gen, int64_t* out, int64_t n) {
  check_count(n, "randperm");
  for (int64_t i = 0; i < n; ++i) out[i] = i;
  // Position i swaps with a uniformly chosen position in [i, n); the last one has nothing to swap.
  for (int64_t i = 0; i + 1 < n; ++i) {
    const auto remaining = static_cast<uint64_t>(n - i);
    const auto z = static_cast<int64_t>(gen.random() % remaining);
    std::swap(out[i], out[i + z]);
  }
}

}  // namespace random
}  // namespace autograd
