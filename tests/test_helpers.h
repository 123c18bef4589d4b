// test_helpers.h — small tools shared by the engine's tests: deterministic "randomish" tensors, a
// gradcheck expectation that prints the mismatch, and exception-message checks.
//
// The values come from std::mt19937 with a fixed seed (not autograd's own generator, which is tested on
// its own): every run sees the same numbers, so a failure always reproduces.
#pragma once
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <initializer_list>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "autograd/cpu/runtime/buffer_cache.h"

#ifndef SCRATCHGRAD_SOURCE_DIR
#define SCRATCHGRAD_SOURCE_DIR "/work/main"
#endif

namespace testing_helpers {

// One recorded tensor of a fixture file: a `tensor NAME NDIM D0 .. V0 ..` line (float32 values as hex
// floats) or an `itensor` line (integers) — the format of fixtures/nn/README.md, also used by the GPT's.
struct Recorded {
  std::string name;
  autograd::Shape shape;
  std::vector<double> values;  // float32 values (exact in double), or the ints of an `itensor`
  bool is_int = false;

  autograd::Tensor tensor(autograd::DType dtype = autograd::DType::Float32) const {
    if (is_int) return autograd::from_vector(std::vector<int64_t>(values.begin(), values.end()), shape);
    return autograd::from_vector(values, shape, dtype);
  }
};

// The rest of such a line, after its first word (`kind`, "tensor" or "itensor"); `line` is for the error.
inline Recorded read_recorded(std::istringstream& words, const std::string& kind, const std::string& line) {
  Recorded r;
  r.is_int = kind == "itensor";
  int64_t ndim = 0;
  words >> r.name >> ndim;
  r.shape.resize(size_t(ndim));
  for (int64_t& d : r.shape) words >> d;
  for (std::string v; words >> v;) r.values.push_back(std::strtod(v.c_str(), nullptr));  // hex floats, inf, nan
  if (int64_t(r.values.size()) != autograd::shape_numel(r.shape))
    throw std::runtime_error("bad fixture line: " + line.substr(0, 80));
  return r;
}

using autograd::DType;
using autograd::Shape;
using autograd::Tensor;

// Uniform values in [lo, hi), the same on every platform (std::uniform_real_distribution is not).
inline std::vector<double> uniform_values(int64_t n, uint32_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937 gen(seed);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = lo + (hi - lo) * (double(gen() >> 8) / double(1u << 24));
  return v;
}

// A tensor of values in [lo, hi) (float64 unless asked otherwise), not requiring grad.
inline Tensor randish(const Shape& shape, uint32_t seed, double lo = -1.0, double hi = 1.0,
                      DType dtype = DType::Float64) {
  return autograd::from_vector(uniform_values(autograd::shape_numel(shape), seed, lo, hi), shape, dtype);
}

// Values with |v| in [0.2, 1.0) and a random sign: safe for relu/abs, whose derivative jumps at 0.
inline Tensor away_from_zero(const Shape& shape, uint32_t seed) {
  std::vector<double> mag = uniform_values(autograd::shape_numel(shape), seed, 0.2, 1.0);
  std::vector<double> sign = uniform_values(autograd::shape_numel(shape), seed + 1000);
  for (size_t i = 0; i < mag.size(); ++i) mag[i] = sign[i] < 0 ? -mag[i] : mag[i];
  return autograd::from_vector(mag, shape, DType::Float64);
}

// A float64 leaf that requires grad.
inline Tensor leaf(const Shape& shape, uint32_t seed, double lo = -1.0, double hi = 1.0) {
  return randish(shape, seed, lo, hi).requires_grad_();
}

// Turns a tensor into a leaf that requires grad without changing its strides (detach keeps them).
inline Tensor as_leaf(const Tensor& t) { return t.detach().requires_grad_(); }

// A float64 leaf of `shape` whose last two dims are transposed in memory (not contiguous).
inline Tensor transposed_leaf(const Shape& shape, uint32_t seed, double lo = -1.0, double hi = 1.0) {
  Shape swapped = shape;
  std::swap(swapped[swapped.size() - 1], swapped[swapped.size() - 2]);
  Tensor t = as_leaf(randish(swapped, seed, lo, hi).transpose(-1, -2));
  EXPECT_FALSE(t.is_contiguous());
  return t;
}

// A float64 leaf of `shape` that is every other column of a wider tensor (a strided slice).
inline Tensor sliced_leaf(const Shape& shape, uint32_t seed, double lo = -1.0, double hi = 1.0) {
  Shape wide = shape;
  wide.back() = 2 * wide.back();
  Tensor t = as_leaf(randish(wide, seed, lo, hi).slice(-1, 0, std::nullopt, 2));
  EXPECT_FALSE(t.is_contiguous());
  return t;
}

inline std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

// The same values in a layout fast paths do not take: each last-dim row followed by as many unused
// values (not contiguous), so an op on it runs its general path.
inline Tensor spaced_copy(const Tensor& x) {
  const int64_t n = x.size(-1);
  Shape wide = x.shape();
  wide.back() = 2 * n;
  Tensor out = autograd::zeros(wide, x.dtype());
  out.slice(-1, 0, n).copy_(x);
  return out.slice(-1, 0, n);
}

// Expects two float32 tensors to hold the same bits (a fast path against the general one).
inline void expect_same_float_bits(const Tensor& got, const Tensor& want, const std::string& what) {
  std::vector<float> g = got.contiguous().to_vector<float>(), w = want.contiguous().to_vector<float>();
  ASSERT_EQ(g.size(), w.size()) << what;
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(g[i]), std::bit_cast<uint32_t>(w[i]))
        << what << ": element " << i << " is " << g[i] << ", the general path gives " << w[i];
}

// Expects `t` to hold exactly the given values (row-major) with the given shape, to a tolerance.
inline void expect_values(const Tensor& t, const Shape& shape, const std::vector<double>& expected,
                          double tol = 1e-12) {
  ASSERT_EQ(autograd::shape_to_string(t.shape()), autograd::shape_to_string(shape));
  std::vector<double> got = values(t);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(expected[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i << ": expected nan, got " << got[i];
    } else {
      EXPECT_NEAR(got[i], expected[i], tol) << "element " << i;
    }
  }
}

// Checks that an exception message names everything in `parts` (the op, the shapes, the values).
inline void expect_message_contains(const std::string& message, std::initializer_list<std::string> parts,
                                    const char* statement) {
  for (const std::string& p : parts)
    EXPECT_NE(message.find(p), std::string::npos)
        << "the error from `" << statement << "` should mention \"" << p << "\"; it says: " << message;
}

// The catalog of refused inputs in docs/reliability.md is made from the error tests themselves: when
// SCRATCHGRAD_CATALOG names a file, every EXPECT_THROW_WITH (and every refused command line in
// test_cli.cpp) appends a line "<test>\t<call>\t<message>" to it. Docs.TheCatalogOfRefusedInputsIsCurrent
// (test_house.cpp) runs the error tests that way and compares.
inline void record_refusal(const std::string& call, const std::string& message) {
  const char* file = std::getenv("SCRATCHGRAD_CATALOG");
  if (!file) return;
  auto one_line = [](std::string s) {
    for (char& c : s) c = (c == '\n' || c == '\t') ? ' ' : c;
    return s;
  };
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::ofstream(file, std::ios::app) << test->test_suite_name() << '.' << test->name() << '\t' << one_line(call) << '\t'
                                     << one_line(message) << '\n';
}

// While one lives, new CPU buffers start as NaN bytes: an output entry a kernel should have written but
// did not, or a value it read from C instead of its real source, shows in the result.
struct PoisonedBuffers {
  PoisonedBuffers() { autograd::cpu::set_poison_allocations(true); }
  ~PoisonedBuffers() { autograd::cpu::set_poison_allocations(false); }
  PoisonedBuffers(const PoisonedBuffers&) = delete;
  PoisonedBuffers& operator=(const PoisonedBuffers&) = delete;
};

}  // namespace testing_helpers

// EXPECTs gradcheck to pass and shows its message (which input, which element, both numbers) if not.
#define EXPECT_GRADCHECK(f, ...)                                                \
  do {                                                                          \
    autograd::GradcheckResult gradcheck_result_ = autograd::gradcheck(f, __VA_ARGS__); \
    EXPECT_TRUE(gradcheck_result_.ok) << gradcheck_result_.message;             \
  } while (0)

// EXPECT_THROW for a given exception type, plus: its message contains every listed string.
#define EXPECT_THROW_WITH(statement, exception_type, ...)                                              \
  do {                                                                                                 \
    bool threw_ = false;                                                                               \
    try {                                                                                              \
      statement;                                                                                       \
    } catch (const exception_type& e) {                                                                \
      threw_ = true;                                                                                   \
      testing_helpers::expect_message_contains(e.what(), {__VA_ARGS__}, #statement);                   \
      testing_helpers::record_refusal(#statement, e.what());                                           \
    } catch (const std::exception& e) {                                                                \
      threw_ = true;                                                                                   \
      ADD_FAILURE() << "`" #statement "` threw the wrong exception type (expected " #exception_type "): " \
                    << e.what();                                                                       \
    }                                                                                                  \
    if (!threw_) ADD_FAILURE() << "`" #statement "` did not throw (expected " #exception_type ")";      \
  } while (0)
