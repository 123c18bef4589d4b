// The project's own tanhf, expm1f and erff (autograd/cpu/libm/float_functions.h) give x86-64 glibc 2.36's
// bits on every CPU. Two ways to see it:
//   - on x86-64 with glibc 2.36 (Debian 12), against the library itself, over the sweeps below;
//   - anywhere (ARM under `make test-arm64` too), against fixtures the library wrote on x86-64
//     (tests/reference/fixtures/libm/float_functions.txt): a checksum of each sweep's results, and a few
//     hundred single values that say where a difference is.
// The fixtures are rewritten on such a machine with
//   SCRATCHGRAD_WRITE_FLOAT_FIXTURES=1 build/bin/scratchgrad_tests --gtest_filter='FloatFunctions.WriteFixtures'
#include <gnu/libc-version.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "autograd/cpu/libm/float_functions.h"
#include "tests/cpu_features.h"

namespace {

const std::string kFixtures = std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/reference/fixtures/libm/float_functions.txt";

struct Function {
  std::string name;
  float (*ours)(float);
  float (*library)(float);
};
const std::vector<Function>& functions() {
  static const std::vector<Function> all = {
      {"tanh", autograd::cpu::tanh_float, [](float x) { return std::tanh(x); }},
      {"expm1", autograd::cpu::expm1_float, [](float x) { return std::expm1(x); }},
      {"erf", autograd::cpu::erf_float, [](float x) { return std::erf(x); }},
  };
  return all;
}

// The inputs: "all" is every 4099th bit pattern (both signs, every exponent: every branch of each
// function); "near" every 509th float with |x| < 8, where the kernels' arguments live (GELU's, tanh's).
std::vector<float> sweep(const std::string& name) {
  std::vector<float> x;
  if (name == "all") {
    for (uint64_t bits = 0; bits < (uint64_t(1) << 32); bits += 4099) x.push_back(std::bit_cast<float>(uint32_t(bits)));
  } else {
    for (uint32_t bits = 0; bits < 0x41000000u; bits += 509) {
      x.push_back(std::bit_cast<float>(bits));
      x.push_back(std::bit_cast<float>(bits | 0x80000000u));
    }
  }
  return x;
}
const std::vector<std::string> kSweeps = {"all", "near"};

// A result's bits, with every NaN the same (only NaN-ness is compared)
uint32_t result_bits(float y) { return std::isnan(y) ? 0x7fc00000u : std::bit_cast<uint32_t>(y); }

// FNV-1a over the results' bits, in order
uint64_t checksum(const std::vector<float>& x, float (*f)(float)) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (float v : x) {
    const uint32_t bits = result_bits(f(v));
    for (int byte = 0; byte < 4; ++byte) h = (h ^ ((bits >> (8 * byte)) & 0xff)) * 0x100000001b3ull;
  }
  return h;
}

// The single values: every 16777259th bit pattern (256 spread over the whole range), and the edges of
// the functions' branches.
std::vector<float> single_inputs() {
  std::vector<float> x = {0.0f, -0.0f, 1.0f, -1.0f, 0.84375f, -0.84375f, 1.25f, -1.25f, 2.857142857f, 6.0f, -6.0f,
                          22.0f, 0.34657359f, 1.0397208f, 0x1p-28f, 0x1p-55f, 0x1p-120f, 88.72f, 88.8f, -30.0f};
  for (uint64_t bits = 0; bits < (uint64_t(1) << 32); bits += 16777259) x.push_back(std::bit_cast<float>(uint32_t(bits)));
  return x;
}

// What was recorded on x86-64: "sum <function> <sweep> <count> <checksum>" and "value <function> <x bits> <y bits>".
struct Recorded {
  std::map<std::string, std::pair<size_t, uint64_t>> sums;             // "erf all" → (count, checksum)
  std::vector<std::tuple<std::string, uint32_t, uint32_t>> values;     // (function, x bits, y bits)
};

Recorded read_fixtures() {
  std::ifstream in(kFixtures);
  if (!in) throw std::runtime_error("cannot read " + kFixtures);
  Recorded r;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string kind, function;
    words >> kind >> function;
    if (kind == "sum") {
      std::string name;
      size_t count = 0;
      uint64_t sum = 0;
      words >> name >> count >> std::hex >> sum;
      r.sums[function + " " + name] = {count, sum};
    } else if (kind == "value") {
      uint32_t x = 0, y = 0;
      words >> std::hex >> x >> y;
      r.values.emplace_back(function, x, y);
    }
  }
  return r;
}

// x86-64 with glibc 2.36 and FMA: the C library is the definition (erff's expf is its FMA build there).
bool library_is_the_reference() {
#if defined(__x86_64__)
  return std::strcmp(gnu_get_libc_version(), "2.36") == 0 && testing_helpers::cpu_has_fma();
#else
  return false;
#endif
}

const Function& function_named(const std::string& name) {
  for (const Function& f : functions())
    if (f.name == name) return f;
  throw std::runtime_error("no function " + name);
}

}  // namespace

TEST(FloatFunctions, MatchTheLibraryWhereItIsTheReference) {
  if (!library_is_the_reference()) GTEST_SKIP() << "not x86-64 glibc 2.36 with FMA: the fixtures test stands in";
  for (const Function& f : functions())
    for (const std::string& name : kSweeps) {
      int64_t differing = 0;
      std::string first;
      for (float x : sweep(name)) {
        const float ours = f.ours(x), library = f.library(x);
        if (result_bits(ours) == result_bits(library)) continue;
        if (differing++ == 0) first = fmt::format("{}({:a}) = {:a}, the library gives {:a}", f.name, x, ours, library);
      }
      EXPECT_EQ(differing, 0) << f.name << " over the sweep '" << name << "'; the first: " << first;
    }
}

TEST(FloatFunctions, MatchTheFixturesWrittenOnX86) {
  const Recorded recorded = read_fixtures();
  ASSERT_EQ(recorded.sums.size(), functions().size() * kSweeps.size()) << kFixtures;
  for (const auto& [function, x, y] : recorded.values) {
    const float got = function_named(function).ours(std::bit_cast<float>(x));
    EXPECT_EQ(result_bits(got), y) << fmt::format("{}({:a}) = {:a}, x86-64 glibc gives {:a}", function,
                                                  std::bit_cast<float>(x), got, std::bit_cast<float>(y));
  }
  for (const Function& f : functions())
    for (const std::string& name : kSweeps) {
      const std::vector<float> x = sweep(name);
      const auto& [count, sum] = recorded.sums.at(f.name + " " + name);
      ASSERT_EQ(x.size(), count) << "the sweep '" << name << "' changed: rewrite the fixtures";
      EXPECT_EQ(checksum(x, f.ours), sum) << f.name << " over the sweep '" << name << "' differs from x86-64 glibc's";
    }
}

// The fixtures' writer: run on x86-64 with glibc 2.36 (the library's own values are recorded).
TEST(FloatFunctions, WriteFixtures) {
  if (!std::getenv("SCRATCHGRAD_WRITE_FLOAT_FIXTURES")) GTEST_SKIP() << "writes the fixtures when asked";
  ASSERT_TRUE(library_is_the_reference()) << "the fixtures are x86-64 glibc 2.36's values: write them there";
  std::ofstream out(kFixtures);
  out << "# x86-64 glibc 2.36's tanhf, expm1f and erff (tests/test_float_functions.cpp; flush-to-zero on, as in\n"
         "# the engine). sum <function> <sweep> <inputs> <FNV-1a of the results' bits>; value <function> <x> <y>\n";
  for (const Function& f : functions())
    for (const std::string& name : kSweeps) {
      const std::vector<float> x = sweep(name);
      out << fmt::format("sum {} {} {} {:016x}\n", f.name, name, x.size(), checksum(x, f.library));
    }
  for (const Function& f : functions())
    for (float x : single_inputs())
      out << fmt::format("value {} {:08x} {:08x}\n", f.name, std::bit_cast<uint32_t>(x), result_bits(f.library(x)));
  ASSERT_TRUE(out.good()) << kFixtures;
}
