// test_random.cpp — autograd::Generator against numbers recorded from PyTorch 1.13
// (tests/reference/make_random_fixtures.py) plus self-contained checks of the engine and the API.
#include "autograd/random/generator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <limits>
#include <numbers>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/random/avx2_mathfun_emulation.h"
#include "autograd/random/float_sincos.h"

#ifndef SCRATCHGRAD_SOURCE_DIR
#define SCRATCHGRAD_SOURCE_DIR "/work/main"
#endif

using autograd::Generator;

namespace {

// ------------------------------------------------------------------------------------------------
// Fixture files: see the format description at the top of make_random_fixtures.py.
// ------------------------------------------------------------------------------------------------
struct Step {
  std::string op, dtype;
  int64_t n = 0;
  std::string arg1, arg2;
  std::vector<std::string> in, out;
};

struct Case {
  std::string name;
  uint64_t seed = 0;
  std::vector<Step> steps;
};

std::vector<std::string> split(const std::string& line) {
  std::istringstream is(line);
  std::vector<std::string> tokens;
  for (std::string t; is >> t;) tokens.push_back(t);
  return tokens;
}

std::vector<Case> load_cases(const std::string& path) {
  std::ifstream file(path);
  if (!file) throw std::runtime_error("cannot open fixture " + path);
  std::vector<Case> cases;
  for (std::string line; std::getline(file, line);) {
    auto tok = split(line);
    if (tok.empty() || tok[0][0] == '#' || tok[0] == "end") continue;
    const std::string kind = tok[0];
    tok.erase(tok.begin());
    if (kind == "case") {
      cases.push_back({tok.at(0), std::stoull(tok.at(1)), {}});
    } else if (kind == "step") {
      cases.back().steps.push_back({tok.at(0), tok.at(1), std::stoll(tok.at(2)), tok.at(3), tok.at(4), {}, {}});
    } else if (kind == "in") {
      cases.back().steps.back().in = tok;
    } else if (kind == "out") {
      cases.back().steps.back().out = tok;
    } else {
      throw std::runtime_error("bad fixture line: " + line);
    }
  }
  return cases;
}

double parse_double(const std::string& s) { return std::strtod(s.c_str(), nullptr); }  // handles hex floats

template <typename T>
std::vector<T> parse_values(const std::vector<std::string>& tokens) {
  std::vector<T> v;
  for (const auto& t : tokens) {
    if constexpr (std::is_same_v<T, int64_t>) {
      v.push_back(std::stoll(t));
    } else if constexpr (std::is_same_v<T, uint64_t>) {
      v.push_back(std::stoull(t));
    } else {
      v.push_back(static_cast<T>(parse_double(t)));  // float32 values are exact in the double text
    }
  }
  return v;
}

std::string hex_bytes(const std::vector<uint8_t>& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : bytes) {
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

std::vector<uint8_t> unhex(const std::string& s) {
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i + 1 < s.size(); i += 2) bytes.push_back(static_cast<uint8_t>(std::stoi(s.substr(i, 2), nullptr, 16)));
  return bytes;
}

// Bitwise equality: distinguishes -0 from +0, which a dropout of a negative input produces.
template <typename T>
bool same_bits(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::memcmp(&a, &b, sizeof a) == 0;
  } else {
    return a == b;
  }
}

template <typename T>
std::string show(T v) {
  std::ostringstream os;
  if constexpr (std::is_floating_point_v<T>) {
    os << std::hexfloat << v << " (" << std::defaultfloat << std::setprecision(9) << v << ")";
  } else {
    os << v;
  }
  return os.str();
}

// Selects a kernel set for the lifetime of the guard and restores the previous one afterwards.
class KernelsGuard {
 public:
  explicit KernelsGuard(autograd::random::CpuKernels k) : before_(autograd::random::cpu_kernels()) { autograd::random::set_cpu_kernels(k); }
  ~KernelsGuard() { autograd::random::set_cpu_kernels(before_); }
  KernelsGuard(const KernelsGuard&) = delete;
  KernelsGuard& operator=(const KernelsGuard&) = delete;

 private:
  autograd::random::CpuKernels before_;
};

// ------------------------------------------------------------------------------------------------
// Running a fixture case: with the matching kernel set selected, every value must match bit for bit.
// ------------------------------------------------------------------------------------------------
class CaseRunner {
 public:
  explicit CaseRunner(const Case& c) : case_(c), gen_(c.seed) {}

  // Returns a description of every mismatch (empty when the case matches).
  std::vector<std::string> run() {
    for (size_t i = 0; i < case_.steps.size(); ++i) {
      step_index_ = i;
      run_step(case_.steps[i]);
    }
    return failures_;
  }

 private:
  void fail(const std::string& what) {
    failures_.push_back(case_.name + " step " + std::to_string(step_index_) + " (" +
                        case_.steps[step_index_].op + " " + case_.steps[step_index_].dtype + "): " + what);
  }

  void run_step(const Step& s) {
    if (s.op == "uniform") return dispatch_float(s, [&](auto* out) { uniform(s, out); });
    if (s.op == "normal") return dispatch_float(s, [&](auto* out) { normal(s, out); });
    if (s.op == "bernoulli") {
      return dispatch_float(s, [&](auto* out) { autograd::random::bernoulli(gen_, out, s.n, parse_double(s.arg1)); check_exact(s, out); });
    }
    if (s.op == "randint") return randint(s);
    if (s.op == "randperm") return randperm(s);
    if (s.op == "dropout") return dispatch_float(s, [&](auto* out) { dropout(s, out); });
    if (s.op == "linear_weight" || s.op == "linear_bias") return linear(s);
    if (s.op == "random64") return random64(s);
    if (s.op == "reseed") return gen_.manual_seed(std::stoull(s.arg1));
    if (s.op == "state") return state(s);
    fail("unknown op");
  }

  template <typename F>
  void dispatch_float(const Step& s, F&& fill) {
    if (s.dtype == "float32") {
      std::vector<float> out(static_cast<size_t>(s.n));
      fill(out.data());
    } else if (s.dtype == "float64") {
      std::vector<double> out(static_cast<size_t>(s.n));
      fill(out.data());
    } else {
      fail("unexpected dtype");
    }
  }

  template <typename T>
  void check_exact(const Step& s, const T* got) {
    const auto want = parse_values<T>(s.out);
    if (want.size() != static_cast<size_t>(s.n)) return fail("fixture has the wrong number of values");
    for (size_t i = 0; i < want.size(); ++i) {
      if (!same_bits(got[i], want[i])) {
        return fail("element " + std::to_string(i) + ": got " + show(got[i]) + ", PyTorch " + show(want[i]));
      }
    }
  }

  // uniform rounds x·(to − from) + from twice with the portable kernels and once (fused) with the
  // AVX2 ones, exactly as the two PyTorch builds do.
  template <typename T>
  void uniform(const Step& s, T* out) {
    autograd::random::uniform(gen_, out, s.n, parse_double(s.arg1), parse_double(s.arg2));
    check_exact(s, out);
  }

  // Bit for bit in both sets, including the AVX2 build's vectorised log/sin/cos for float blocks.
  template <typename T>
  void normal(const Step& s, T* out) {
    autograd::random::normal(gen_, out, s.n, parse_double(s.arg1), parse_double(s.arg2));
    check_exact(s, out);
  }

  void randint(const Step& s) {
    const int64_t low = std::stoll(s.arg1), high = std::stoll(s.arg2);
    if (s.dtype == "int64") {
      std::vector<int64_t> out(static_cast<size_t>(s.n));
      autograd::random::random_from_to(gen_, out.data(), s.n, low, high);
      check_exact(s, out.data());
    } else {
      std::vector<float> out(static_cast<size_t>(s.n));
      autograd::random::random_from_to(gen_, out.data(), s.n, low, high);
      check_exact(s, out.data());
    }
  }

  void randperm(const Step& s) {
    std::vector<int64_t> out(static_cast<size_t>(s.n));
    autograd::random::randperm(gen_, out.data(), s.n);
    check_exact(s, out.data());
  }

  // F.dropout(x, p, training=True) on CPU: p == 0 returns x and p == 1 returns x * 0, both without
  // drawing; otherwise mask = bernoulli(1 - p), noise = mask / T(1 - p), output = x * noise.
  template <typename T>
  void dropout(const Step& s, T* out) {
    const double p = parse_double(s.arg1);
    const auto x = parse_values<T>(s.in);
    std::vector<T> mask(x.size(), T(1));
    if (p == 1.0) std::fill(mask.begin(), mask.end(), T(0));
    const T keep = static_cast<T>(1.0 - p);
    if (p > 0.0 && p < 1.0) autograd::random::bernoulli(gen_, mask.data(), s.n, 1.0 - p);
    for (size_t i = 0; i < x.size(); ++i) {
      const T noise = (p > 0.0 && p < 1.0) ? mask[i] / keep : mask[i];
      out[i] = x[i] * noise;
    }
    check_exact(s, out);
  }

  void linear(const Step& s) {
    const int64_t fan_in = std::stoll(s.arg1);
    const double torch_bound = parse_double(s.arg2);
    const double bound = s.op == "linear_weight" ? autograd::kaiming_uniform_bound(fan_in, std::sqrt(5.0))
                                                 : autograd::linear_bias_bound(fan_in);
    if (!same_bits(bound, torch_bound)) fail("bound " + show(bound) + " differs from PyTorch's " + show(torch_bound));
    std::vector<float> out(static_cast<size_t>(s.n));
    autograd::random::uniform(gen_, out.data(), s.n, -bound, bound);
    check_exact(s, out.data());
  }

  void random64(const Step& s) {
    std::vector<uint64_t> out(static_cast<size_t>(s.n));
    for (auto& v : out) v = gen_.random64();
    check_exact(s, out.data());
  }

  // Compare the blob with torch.get_rng_state(), then continue the case from a generator rebuilt
  // with set_state from PyTorch's blob: later steps only pass if the restore was complete.
  void state(const Step& s) {
    if (hex_bytes(gen_.get_state()) != s.out.at(0)) fail("get_state() differs from torch.get_rng_state()");
    Generator restored(424242);
    restored.set_state(unhex(s.out.at(0)));
    gen_ = restored;
  }

  const Case& case_;
  Generator gen_;
  size_t step_index_ = 0;
  std::vector<std::string> failures_;
};

void check_fixture_file(const std::string& set_dir, const std::string& name) {
  const std::string path = std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/reference/fixtures/random/" + set_dir + "/" + name + ".txt";
  const auto cases = load_cases(path);
  ASSERT_FALSE(cases.empty()) << path;
  const KernelsGuard kernels(set_dir == "avx2" ? autograd::random::CpuKernels::avx2 : autograd::random::CpuKernels::portable);
  size_t failed = 0, steps = 0;
  for (const auto& c : cases) {
    steps += c.steps.size();
    const auto failures = CaseRunner(c).run();
    if (!failures.empty() && ++failed <= 10) ADD_FAILURE() << failures.front();
  }
  EXPECT_EQ(failed, 0u) << "of " << cases.size() << " cases in " << path;
  EXPECT_GT(steps, 0u);
}

}  // namespace

// ---- PyTorch fixtures, portable kernels (ATEN_CPU_CAPABILITY=default): bit for bit -------------
TEST(Random, UniformMatchesPortableKernels) { check_fixture_file("default", "uniform"); }
TEST(Random, NormalMatchesPortableKernels) { check_fixture_file("default", "normal"); }
TEST(Random, RandintMatchesPortableKernels) { check_fixture_file("default", "randint"); }
TEST(Random, BernoulliMatchesPortableKernels) { check_fixture_file("default", "bernoulli"); }
TEST(Random, RandpermMatchesPortableKernels) { check_fixture_file("default", "randperm"); }
TEST(Random, DropoutMatchesPortableKernels) { check_fixture_file("default", "dropout"); }
TEST(Random, NnInitMatchesPortableKernels) { check_fixture_file("default", "init"); }
TEST(Random, SequencesMatchPortableKernels) { check_fixture_file("default", "sequence"); }
TEST(Random, StateMatchesPortableKernels) { check_fixture_file("default", "state"); }

// ---- PyTorch fixtures, AVX2 kernels (a plain run), with autograd::random::CpuKernels::avx2: bit for bit -------
TEST(Random, UniformMatchesAvx2Kernels) { check_fixture_file("avx2", "uniform"); }
TEST(Random, NormalMatchesAvx2Kernels) { check_fixture_file("avx2", "normal"); }
TEST(Random, RandintMatchesAvx2Kernels) { check_fixture_file("avx2", "randint"); }
TEST(Random, BernoulliMatchesAvx2Kernels) { check_fixture_file("avx2", "bernoulli"); }
TEST(Random, RandpermMatchesAvx2Kernels) { check_fixture_file("avx2", "randperm"); }
TEST(Random, DropoutMatchesAvx2Kernels) { check_fixture_file("avx2", "dropout"); }
TEST(Random, NnInitMatchesAvx2Kernels) { check_fixture_file("avx2", "init"); }
TEST(Random, SequencesMatchAvx2Kernels) { check_fixture_file("avx2", "sequence"); }
TEST(Random, StateMatchesAvx2Kernels) { check_fixture_file("avx2", "state"); }

// ---- The engine itself ------------------------------------------------------------------------

TEST(Random, EngineIsStandardMt19937OnLow32BitsOfSeed) {
  for (uint64_t seed : {0ull, 1ull, 5489ull, 67280421310721ull, (1ull << 40) + 5}) {
    Generator gen(seed);
    std::mt19937 reference(static_cast<uint32_t>(seed & 0xffffffffu));
    for (int i = 0; i < 2000; ++i) ASSERT_EQ(gen.random(), reference()) << "seed " << seed << " draw " << i;
  }
  // The C++ standard fixes the 10000th output of mt19937 with the default seed 5489.
  Generator gen(5489);
  uint32_t last = 0;
  for (int i = 0; i < 10000; ++i) last = gen.random();
  EXPECT_EQ(last, 4123659995u);
}

TEST(Random, Random64IsFirstDrawHighSecondDrawLow) {
  Generator a(99), b(99);
  for (int i = 0; i < 100; ++i) {
    const uint64_t hi = a.random(), lo = a.random();
    EXPECT_EQ(b.random64(), (hi << 32) | lo);
  }
}

TEST(Random, SeedKeepsAll64BitsButOnlyLow32DriveTheStream) {
  Generator a(5), b((1ull << 40) + 5);
  EXPECT_EQ(a.initial_seed(), 5u);
  EXPECT_EQ(b.initial_seed(), (1ull << 40) + 5);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(a.random(), b.random());
}

TEST(Random, DefaultSeedAndDefaultGenerator) {
  EXPECT_EQ(Generator().initial_seed(), 67280421310721ull);
  autograd::manual_seed(7);
  Generator fresh(7);
  EXPECT_EQ(autograd::default_generator().initial_seed(), 7u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(autograd::default_generator().random(), fresh.random());
}

TEST(Random, ManualSeedClearsCachedNormalSample) {
  Generator gen(3);
  double one;
  autograd::random::normal(gen, &one, 1, 0.0, 1.0);
  ASSERT_TRUE(gen.next_double_normal_sample().has_value());
  gen.manual_seed(3);
  EXPECT_FALSE(gen.next_double_normal_sample().has_value());
  double again;
  autograd::random::normal(gen, &again, 1, 0.0, 1.0);
  EXPECT_EQ(one, again);
}

TEST(Random, SmallNormalUsesTheCachedSampleFirst) {
  Generator gen(11);
  double a[3];
  autograd::random::normal(gen, a, 3, 0.0, 1.0);  // pair, cached half, new pair (its sine half stays cached)
  const double cached = *gen.next_double_normal_sample();
  float b;
  autograd::random::normal(gen, &b, 1, 2.0, 0.5);
  EXPECT_EQ(b, static_cast<float>(cached * 0.5 + 2.0));
  EXPECT_FALSE(gen.next_double_normal_sample().has_value());
}

TEST(Random, NormalTailRedrawsTheLast16) {
  // n = 17: the first block covers 0..15, then 16 fresh uniforms are transformed into 1..16,
  // so only element 0 survives from the first block and equals element 0 of a 16-element fill.
  Generator a(21), b(21);
  std::vector<float> seventeen(17), sixteen(16);
  autograd::random::normal(a, seventeen.data(), 17, 0.0, 1.0);
  autograd::random::normal(b, sixteen.data(), 16, 0.0, 1.0);
  EXPECT_EQ(seventeen[0], sixteen[0]);
  EXPECT_NE(seventeen[1], sixteen[1]);
  // 17 + 16 float draws were consumed.
  Generator c(21);
  for (int i = 0; i < 33; ++i) c.random();
  EXPECT_EQ(a.random(), c.random());
}

TEST(Random, EmptyFillsDrawNothing) {
  Generator gen(8);
  const auto before = gen.get_state();
  autograd::random::uniform(gen, static_cast<float*>(nullptr), 0, 0.0, 1.0);
  autograd::random::normal(gen, static_cast<double*>(nullptr), 0, 0.0, 1.0);
  autograd::random::random_from_to(gen, static_cast<int64_t*>(nullptr), 0, 0, 5);
  autograd::random::bernoulli(gen, static_cast<float*>(nullptr), 0, 0.5);
  autograd::random::randperm(gen, nullptr, 0);
  EXPECT_EQ(gen.get_state(), before);
}

TEST(Random, RandpermIsAPermutation) {
  Generator gen(1);
  std::vector<int64_t> perm(257);
  autograd::random::randperm(gen, perm.data(), 257);
  std::vector<bool> seen(257, false);
  for (int64_t v : perm) {
    ASSERT_GE(v, 0);
    ASSERT_LT(v, 257);
    EXPECT_FALSE(seen[static_cast<size_t>(v)]);
    seen[static_cast<size_t>(v)] = true;
  }
}

TEST(Random, RandintCoversFullInt64Range) {
  Generator gen(4);
  std::vector<int64_t> v(64);
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  autograd::random::random_from_to(gen, v.data(), 64, lo, hi);
  bool negative = false, positive = false;
  for (int64_t x : v) {
    negative |= x < 0;
    positive |= x > 0;
    EXPECT_LT(x, hi);
  }
  EXPECT_TRUE(negative && positive);
}

TEST(Random, KaimingBoundForLinearIsOneOverSqrtFanIn) {
  for (int64_t fan_in : {1, 3, 24, 784}) {
    const double b = autograd::kaiming_uniform_bound(fan_in, std::sqrt(5.0));
    EXPECT_NEAR(b, 1.0 / std::sqrt(static_cast<double>(fan_in)), 1e-15);
    EXPECT_EQ(autograd::linear_bias_bound(fan_in), 1.0 / std::sqrt(static_cast<double>(fan_in)));
  }
  EXPECT_EQ(autograd::linear_bias_bound(0), 0.0);
  EXPECT_THROW(autograd::kaiming_uniform_bound(0, 1.0), std::invalid_argument);
}

TEST(Random, BadArgumentsThrow) {
  Generator gen;
  float f[4];
  double d[4];
  int64_t i[4];
  EXPECT_THROW(autograd::random::uniform(gen, f, -1, 0.0, 1.0), std::invalid_argument);
  EXPECT_THROW(autograd::random::uniform(gen, f, 4, 1.0, 0.0), std::invalid_argument);
  EXPECT_THROW(autograd::random::uniform(gen, f, 4, -3e38, 3e38), std::invalid_argument);
  EXPECT_THROW(autograd::random::uniform(gen, d, 4, 0.0, std::nan("")), std::invalid_argument);
  EXPECT_THROW(autograd::random::normal(gen, f, 4, 0.0, -1.0), std::invalid_argument);
  EXPECT_THROW(autograd::random::normal(gen, d, -2, 0.0, 1.0), std::invalid_argument);
  EXPECT_THROW(autograd::random::random_from_to(gen, i, 4, 5, 5), std::invalid_argument);
  EXPECT_THROW(autograd::random::random_from_to(gen, f, 4, 6, 5), std::invalid_argument);
  EXPECT_THROW(autograd::random::bernoulli(gen, f, 4, 1.5), std::invalid_argument);
  EXPECT_THROW(autograd::random::bernoulli(gen, d, 4, -0.1), std::invalid_argument);
  EXPECT_THROW(autograd::random::bernoulli(gen, d, 4, std::nan("")), std::invalid_argument);
  EXPECT_THROW(autograd::random::randperm(gen, i, -1), std::invalid_argument);
}

// ---- get_state / set_state --------------------------------------------------------------------

TEST(Random, StateRoundTripRestoresStreamAndCachedSample) {
  Generator gen(2024);
  std::vector<float> warmup(5);
  autograd::random::normal(gen, warmup.data(), 5, 0.0, 1.0);  // leaves a cached double sample
  for (int k = 0; k < 1000; ++k) gen.random();  // cross a twist
  const auto blob = gen.get_state();
  ASSERT_EQ(blob.size(), Generator::kStateBytes);

  std::vector<float> first(40), second(40);
  autograd::random::normal(gen, first.data(), 3, 0.0, 1.0);
  autograd::random::uniform(gen, first.data() + 3, 37, -2.0, 5.0);

  Generator other(1);
  other.set_state(blob);
  EXPECT_EQ(other.initial_seed(), 2024u);
  EXPECT_EQ(other.get_state(), blob);
  autograd::random::normal(other, second.data(), 3, 0.0, 1.0);
  autograd::random::uniform(other, second.data() + 3, 37, -2.0, 5.0);
  EXPECT_EQ(first, second);
}

TEST(Random, SetStateRejectsMalformedBlobs) {
  Generator gen(31);
  const auto good = gen.get_state();
  auto with = [&](size_t at, uint8_t byte) {
    auto blob = good;
    blob[at] = byte;
    return blob;
  };
  Generator target(77);
  const auto target_before = target.get_state();
  EXPECT_THROW(target.set_state({}), std::invalid_argument);
  EXPECT_THROW(target.set_state(std::vector<uint8_t>(good.begin(), good.end() - 1)), std::invalid_argument);
  EXPECT_THROW(target.set_state(with(12, 0)), std::invalid_argument);     // not seeded
  EXPECT_THROW(target.set_state(with(8, 0)), std::invalid_argument);      // left == 0
  auto left_too_big = with(8, 0x71);                                       // left == 625
  left_too_big[9] = 0x02;
  EXPECT_THROW(target.set_state(left_too_big), std::invalid_argument);
  Generator scratch;
  EXPECT_NO_THROW(scratch.set_state(with(16, 200)));                       // left 1 + next 200 is fine...
  auto next_past_end = with(8, 0x70);                                      // ...but left 624 + next 200 is not
  next_past_end[9] = 0x02;
  next_past_end[16] = 200;
  EXPECT_THROW(target.set_state(next_past_end), std::invalid_argument);
  EXPECT_THROW(target.set_state(with(24 + 4, 1)), std::invalid_argument);  // state word above 32 bits
  EXPECT_THROW(target.set_state(with(5040, 2)), std::invalid_argument);    // cached flag must be 0 or 1
  EXPECT_THROW(target.set_state(with(5052, 7)), std::invalid_argument);
  EXPECT_EQ(target.get_state(), target_before);  // failed calls change nothing
}

// ---- Kernel sets (autograd::random::CpuKernels) --------------------------------------------------------------

namespace {

// Sets (or, with nullptr, unsets) an environment variable and puts the old value back afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value ? setenv(name, value, 1) : unsetenv(name);
  }
  ~ScopedEnv() { old_ ? setenv(name_, old_->c_str(), 1) : unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

TEST(Random, KernelSetDefaultsToPortable) {
  {
    ScopedEnv unset("SCRATCHGRAD_CPU_KERNELS", nullptr);
    EXPECT_EQ(autograd::random::cpu_kernels_from_environment(), autograd::random::CpuKernels::portable);
  }
  if (std::getenv("SCRATCHGRAD_CPU_KERNELS") == nullptr) {
    EXPECT_EQ(autograd::random::cpu_kernels(), autograd::random::CpuKernels::portable);
  }
  EXPECT_EQ(autograd::random::parse_cpu_kernels(nullptr), autograd::random::CpuKernels::portable);
  EXPECT_EQ(autograd::random::parse_cpu_kernels(""), autograd::random::CpuKernels::portable);
  EXPECT_EQ(autograd::random::parse_cpu_kernels("default"), autograd::random::CpuKernels::portable);
  EXPECT_EQ(autograd::random::parse_cpu_kernels("portable"), autograd::random::CpuKernels::portable);
  EXPECT_EQ(autograd::random::parse_cpu_kernels("avx2"), autograd::random::CpuKernels::avx2);
}

TEST(Random, KernelSetRejectsUnknownValues) {
  for (const char* bad : {"avx512", "AVX2", "avx2 ", "1"}) {
    try {
      autograd::random::parse_cpu_kernels(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("SCRATCHGRAD_CPU_KERNELS"), std::string::npos) << what;
      EXPECT_NE(what.find(std::string("\"") + bad + "\""), std::string::npos) << what;
    }
  }
  {
    ScopedEnv bad("SCRATCHGRAD_CPU_KERNELS", "sse9");
    EXPECT_THROW(autograd::random::cpu_kernels_from_environment(), std::invalid_argument);
  }
  const KernelsGuard guard(autograd::random::CpuKernels::avx2);
  EXPECT_THROW(autograd::random::set_cpu_kernels(static_cast<autograd::random::CpuKernels>(7)), std::invalid_argument);
  EXPECT_EQ(autograd::random::cpu_kernels(), autograd::random::CpuKernels::avx2);  // a rejected value changes nothing
}

// The environment variable is read at the first use in a process, so check it in fresh processes
// (the "threadsafe" death-test style re-executes this test binary for each EXPECT_EXIT).
TEST(RandomDeathTest, EnvironmentChoosesTheKernelSetAtFirstUse) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  {
    ScopedEnv avx2("SCRATCHGRAD_CPU_KERNELS", "avx2");
    EXPECT_EXIT(std::exit(autograd::random::cpu_kernels() == autograd::random::CpuKernels::avx2 ? 0 : 1), ::testing::ExitedWithCode(0), "");
  }
  {
    ScopedEnv bad("SCRATCHGRAD_CPU_KERNELS", "sse9");
    auto first_fill = [] {
      Generator gen(1);
      float x[4];
      try {
        autograd::random::uniform(gen, x, 4, 0.0, 1.0);
      } catch (const std::invalid_argument& e) {
        std::fprintf(stderr, "%s\n", e.what());
        std::exit(3);
      }
      std::exit(0);
    };
    EXPECT_EXIT(first_fill(), ::testing::ExitedWithCode(3), "SCRATCHGRAD_CPU_KERNELS=\"sse9\"");
  }
}

TEST(Random, KernelSetsDrawTheSameWordsAndDifferOnlySlightly) {
  // The two sets consume the generator identically, so a program stays in step whichever it uses.
  // Their float normals differ by the vectorised log/sin/cos (at most about 2.5e-6 * max(|x|, std):
  // near zero the sin/cos error is absolute); double normals and the small path only by the fused
  // `* std + mean`.
  for (int64_t n : {5, 16, 17, 37, 1000}) {
    const auto count = static_cast<size_t>(n);
    auto run = [&](autograd::random::CpuKernels kernels, Generator& gen, std::vector<float>& f, std::vector<double>& d) {
      const KernelsGuard guard(kernels);
      f.resize(count);
      d.resize(count);
      autograd::random::normal(gen, f.data(), n, 0.5, 2.0);
      autograd::random::normal(gen, d.data(), n, 0.5, 2.0);
      float u[3];
      autograd::random::uniform(gen, u, 3, -1.0, 1.0);
    };
    Generator a(99), b(99);
    std::vector<float> fa, fb;
    std::vector<double> da, db;
    run(autograd::random::CpuKernels::portable, a, fa, da);
    run(autograd::random::CpuKernels::avx2, b, fb, db);
    EXPECT_EQ(a.get_state(), b.get_state()) << "n " << n;
    for (size_t i = 0; i < count; ++i) {
      EXPECT_NEAR(fb[i], fa[i], 4e-6 * std::max(std::abs(static_cast<double>(fa[i])), 2.0)) << "n " << n << " element " << i;
      EXPECT_NEAR(db[i], da[i], 1e-15 * std::max(std::abs(da[i]), 2.0)) << "n " << n << " element " << i;
    }
  }
}

TEST(Random, Avx2MathfunEmulationIsAccurate) {
  // Not a parity check (the fixtures do that) but a guard against a broken polynomial or reduction:
  // the Cephes approximations are within a few float ulps of the true values on the kernel's inputs.
  double worst_log = 0, worst_trig = 0;
  for (uint32_t u = 0; u < (1u << 24); u += 37) {
    const float x = 1.0f - static_cast<float>(u) * (1.0f / 16777216.0f);  // (0, 1], as Box-Muller uses it
    const double want = std::log(static_cast<double>(x));
    worst_log = std::max(worst_log, std::abs(autograd::random::avx2_emulation::log(x) - want) / std::max(std::abs(want), 1e-30));
    const float theta = static_cast<float>(2.0 * std::numbers::pi) * (static_cast<float>(u) * (1.0f / 16777216.0f));
    float s, c;
    autograd::random::avx2_emulation::sincos(theta, s, c);
    worst_trig = std::max({worst_trig, std::abs(s - std::sin(static_cast<double>(theta))),
                           std::abs(c - std::cos(static_cast<double>(theta)))});
  }
  EXPECT_LT(worst_log, 4e-7);
  EXPECT_LT(worst_trig, 2e-7);
  EXPECT_TRUE(std::isnan(autograd::random::avx2_emulation::log(0.0f)));
  float s, c;
  autograd::random::avx2_emulation::sincos(-1.0f, s, c);
  EXPECT_NEAR(s, std::sin(-1.0), 1e-7);
  EXPECT_NEAR(c, std::cos(-1.0), 1e-7);
}

// ------------------------------------------------------------------------------------------------
// float_sincos: glibc's sinf/cosf on every angle of the float Box-Muller block, on every platform
// ------------------------------------------------------------------------------------------------
namespace {

// The k-th of the 2^24 angles the block path can form: a float uniform is k · 2^-24 for a 24-bit k, and
// θ = float(2π · double(u)), as random::normal computes it.
float box_muller_angle(uint32_t k) {
  const float u = static_cast<float>(k) * (1.0f / 16777216.0f);
  return static_cast<float>(2.0 * std::numbers::pi * static_cast<double>(u));
}

uint32_t float_bits(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

}  // namespace

TEST(Random, FloatSincosIsGlibcsSinfCosfOnEveryBoxMullerAngle) {
#if defined(__GLIBC__) && defined(__x86_64__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 28))
  // The fixtures' normals were drawn with glibc's sinf/cosf (since 2.28 the algorithm float_sincos
  // re-implements): compare all 2^24 angles, bit for bit.
  int64_t sin_differ = 0, cos_differ = 0;
  for (uint32_t k = 0; k < (1u << 24); ++k) {
    const float theta = box_muller_angle(k);
    const autograd::random::SinCos sc = autograd::random::float_sincos(theta);
    const float want_sin = std::sin(theta), want_cos = std::cos(theta);  // the float overloads: sinf, cosf
    if (float_bits(sc.sin) != float_bits(want_sin) && ++sin_differ <= 5) {
      ADD_FAILURE() << std::hexfloat << "sin(" << theta << "): " << sc.sin << ", glibc " << want_sin;
    }
    if (float_bits(sc.cos) != float_bits(want_cos) && ++cos_differ <= 5) {
      ADD_FAILURE() << std::hexfloat << "cos(" << theta << "): " << sc.cos << ", glibc " << want_cos;
    }
  }
  EXPECT_EQ(sin_differ, 0);
  EXPECT_EQ(cos_differ, 0);
#else
  GTEST_SKIP() << "compares with glibc's (2.28 or later, x86-64) sinf and cosf, which made the fixtures";
#endif
}

TEST(Random, FloatSincosGivesTheSameBitsEverywhere) {
  // On any platform: a fingerprint of all 2^24 (sin, cos) pairs (FNV-1a over the 32-bit patterns), the one
  // glibc's sinf/cosf give (the test above ties them together where glibc is at hand). The lab computes
  // the same fingerprint in WebAssembly (box_muller_fingerprint, tests/lab/core.test.mjs).
  uint64_t hash = 0xcbf29ce484222325u;
  for (uint32_t k = 0; k < (1u << 24); ++k) {
    const autograd::random::SinCos sc = autograd::random::float_sincos(box_muller_angle(k));
    hash = (hash ^ float_bits(sc.sin)) * 0x100000001b3u;
    hash = (hash ^ float_bits(sc.cos)) * 0x100000001b3u;
  }
  EXPECT_EQ(hash, 0x9e827f2e9c0a657cu);
  // One angle where glibc's sinf is not the correctly rounded sine: sin θ = 0x1.4e92e4fffeaf...p-7 lies
  // just below the midpoint of two floats, and glibc (so float_sincos) rounds up.
  const float theta = box_muller_angle(27264);
  EXPECT_EQ(theta, 0x1.4e9462p-7f);
  EXPECT_EQ(float_bits(autograd::random::float_sincos(theta).sin), float_bits(0x1.4e92e6p-7f));
  EXPECT_EQ(float_bits(static_cast<float>(std::sin(static_cast<double>(theta)))), float_bits(0x1.4e92e4p-7f));
  // Outside the one-step range reduction: refused.
  EXPECT_THROW(autograd::random::float_sincos(120.0f), std::domain_error);
  EXPECT_THROW(autograd::random::float_sincos(std::numeric_limits<float>::quiet_NaN()), std::domain_error);
  EXPECT_NO_THROW(autograd::random::float_sincos(-119.99f));
}
