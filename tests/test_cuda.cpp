// test_cuda.cpp — the CUDA device (gpu/) against the CPU path: every op's forward and backward, the fused
// Adam step, the caching allocator, device-mismatch and CUDA errors, and the seed char model trained on
// the GPU beside the same model on the CPU.
//
// Every test that needs a GPU starts with REQUIRE_GPU(): without a CUDA device (or driver) it is skipped
// with the reason, never failed. In a build without CUDA (SCRATCHGRAD_CUDA=OFF, or no nvcc) this file
// holds one test that skips with "built without CUDA".
//
// Tolerances (|gpu - cpu| <= atol + rtol·|cpu|, NaN matches NaN, infinities match exactly):
//   float64 ops                   rtol 1e-11, atol 1e-12  (CUDA's libdevice exp/log/tanh/pow are within
//                                                          2 ulp of glibc; sums add in another order)
//   float32 ops                   rtol 2e-5,  atol 1e-5   (values are O(1); sums add in another order)
//   float32 matmul, K up to 192   rtol 1e-4,  atol 1e-4   (cuBLAS blocks the K sum differently from BLIS)
//   Adam step, float32            rtol 1e-6,  atol 1e-7   (the kernel repeats the CPU's rounding step by step)
//   comparisons, indices, copies, integer ops, max values: exact
//   char model: step-0 loss within 1e-5; the mean of the last 20 losses within 0.1 of the CPU's, and
//   below 60% of the first loss on both devices; one step of the 4-head model: rtol 1e-3, atol 1e-5.
//
// SCRATCHGRAD_CUDA_TESTS_ON_CPU=1 runs the comparisons with the CPU standing in for the GPU: it checks the
// tests themselves (shapes, harness, tolerances) on a machine without a GPU; tests that are about the GPU
// runtime itself (allocator, errors) stay skipped.
#include <gtest/gtest.h>

#ifndef SCRATCHGRAD_HAS_CUDA

TEST(Cuda, BuiltWithoutCuda) {
  GTEST_SKIP() << "built without CUDA (configure with -DSCRATCHGRAD_CUDA=ON on a machine with nvcc to build gpu/)";
}

#else

#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/backend.h"
#include "gpu/gpu.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "tests/test_helpers.h"

namespace {

using namespace autograd;
using testing_helpers::randish;

bool cpu_stands_in() {
  const char* env = std::getenv("SCRATCHGRAD_CUDA_TESTS_ON_CPU");
  return env && *env && std::string(env) != "0";
}

// The device under test: cuda:0, or the CPU when it stands in (see the header).
Device dut() { return cpu_stands_in() ? Device::cpu() : Device::cuda(0); }

#define REQUIRE_GPU()                                                                                        \
  do {                                                                                                       \
    if (!cpu_stands_in() && !gpu::is_available()) GTEST_SKIP() << "no CUDA device: " << gpu::unavailable_reason(); \
  } while (0)

// For tests about the CUDA runtime itself, which the CPU cannot stand in for.
#define REQUIRE_REAL_GPU()                                                                                   \
  do {                                                                                                       \
    if (!gpu::is_available()) GTEST_SKIP() << "no CUDA device: " << gpu::unavailable_reason();              \
  } while (0)

struct Tol {
  double rtol, atol;
};
constexpr Tol kF64{1e-11, 1e-12};
constexpr Tol kF32{2e-5, 1e-5};
constexpr Tol kMatmulF32{1e-4, 1e-4};
constexpr Tol kExact{0, 0};

Tol tol_for(DType d) { return d == DType::Float32 ? kF32 : d == DType::Float64 ? kF64 : kExact; }

// Expects `got` (on the device under test) to match `want` (on the CPU).
void expect_close(const Tensor& got, const Tensor& want, Tol tol, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what << ": undefined on the device";
  ASSERT_TRUE(want.defined()) << what << ": undefined on the CPU";
  EXPECT_EQ(got.device(), dut()) << what;
  ASSERT_EQ(got.shape(), want.shape()) << what << ": shapes " << got.shape_str() << " vs " << want.shape_str();
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  int reported = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    bool ok;
    if (std::isnan(w[i])) ok = std::isnan(g[i]);
    else if (std::isinf(w[i])) ok = g[i] == w[i];
    else ok = std::abs(g[i] - w[i]) <= tol.atol + tol.rtol * std::abs(w[i]);
    if (!ok && reported++ < 5)
      ADD_FAILURE() << what << ": element " << i << " is " << g[i] << " on " << dut().str() << ", " << w[i]
                    << " on cpu (|diff| " << std::abs(g[i] - w[i]) << ", rtol " << tol.rtol << ", atol " << tol.atol
                    << ")";
  }
}

// CPU data (deterministic), moved to `device`.
Tensor data(const Shape& shape, uint32_t seed, Device device, double lo = -1.0, double hi = 1.0,
            DType dtype = DType::Float64) {
  return randish(shape, seed, lo, hi, dtype).to(device);
}

using V = std::vector<Tensor>;
using MakeInputs = std::function<V(Device)>;
using Op = std::function<Tensor(const V&)>;
using Op1 = std::function<Tensor(const Tensor&)>;

// Runs `op` on inputs made on the CPU and on the device under test; floating inputs become leaves that
// require grad (with their strides kept), a fixed gradient flows back from a floating output, and the
// output and every input gradient are compared.
void compare_op(const std::string& name, const MakeInputs& make, const Op& op, std::optional<Tol> tol = {},
                bool backward = true) {
  SCOPED_TRACE(name);
  struct Run {
    std::vector<Tensor> leaves;
    Tensor out;
  };
  auto run = [&](Device device) {
    Run r;
    for (const Tensor& t : make(device)) {
      if (t.device() != device) throw std::logic_error(name + ": an input was made on the wrong device");
      r.leaves.push_back(backward && is_floating(t.dtype()) ? t.detach().requires_grad_() : t);
    }
    r.out = op(r.leaves);
    if (backward && is_floating(r.out.dtype()) && r.out.requires_grad()) {
      Tensor g = randish(r.out.shape(), 4242, -1.0, 1.0, r.out.dtype()).to(device);
      r.out.backward(g);
    }
    return r;
  };
  Run cpu, dev;
  cpu = run(Device::cpu());
  dev = run(dut());
  const Tol t = tol.value_or(tol_for(cpu.out.dtype()));
  expect_close(dev.out, cpu.out, t, name + " forward");
  for (size_t i = 0; i < cpu.leaves.size(); ++i) {
    const Tensor gc = cpu.leaves[i].requires_grad() ? cpu.leaves[i].grad() : Tensor();
    const Tensor gd = dev.leaves[i].requires_grad() ? dev.leaves[i].grad() : Tensor();
    ASSERT_EQ(gc.defined(), gd.defined()) << name << ": gradient of input " << i << " defined on one device only";
    if (gc.defined()) expect_close(gd, gc, t, name + " grad of input " + std::to_string(i));
  }
}

// The same for an op of one input.
void compare_op(const std::string& name, const MakeInputs& make, const Op1& op, std::optional<Tol> tol = {},
                bool backward = true) {
  compare_op(name, make, Op([op](const V& x) { return op(x[0]); }), tol, backward);
}

// Input makers: each view is applied on the target device, so the kernels see the same strides there.
Tensor plain(const Shape& s, uint32_t seed, Device d, DType dt = DType::Float64) { return data(s, seed, d, -1, 1, dt); }
Tensor positive(const Shape& s, uint32_t seed, Device d, DType dt = DType::Float64) {
  return data(s, seed, d, 0.2, 2.0, dt);
}
Tensor transposed(const Shape& s, uint32_t seed, Device d, DType dt = DType::Float64) {  // last two dims swapped
  Shape sw = s;
  std::swap(sw[sw.size() - 1], sw[sw.size() - 2]);
  return data(sw, seed, d, -1, 1, dt).transpose(-1, -2);
}
Tensor every_other(const Shape& s, uint32_t seed, Device d, DType dt = DType::Float64) {  // last dim stride 2
  Shape wide = s;
  wide.back() *= 2;
  return data(wide, seed, d, -1, 1, dt).slice(-1, 0, std::nullopt, 2);
}
Tensor away_from_zero(const Shape& s, uint32_t seed, Device d, DType dt = DType::Float64) {
  return testing_helpers::away_from_zero(s, seed).to(dt).to(d);
}

const std::vector<DType> kFloatTypes = {DType::Float64, DType::Float32};

// ---------------------------------------------------------------- the build

// Runs without a GPU on purpose: it checks that the CUDA backend was linked into this program and
// registered itself (cmake/CUDA.cmake's static-registration link option), and that asking whether a GPU
// is there never throws.
TEST(CudaBuild, BackendIsRegistered) {
  EXPECT_TRUE(has_registered_backend(DeviceType::CUDA));
  const bool available = gpu::is_available();
  EXPECT_EQ(available, gpu::device_count() > 0);
  // Without a usable GPU the backend says so, naming the driver's reason, and has_backend is false.
  EXPECT_EQ(has_backend(Device::cuda(0)), available);
  if (available) {
    EXPECT_EQ(&backend(Device::cuda(0)), &gpu::backend());
  } else {
    EXPECT_FALSE(gpu::unavailable_reason().empty());
    try {
      (void)backend(Device::cuda(0));
      ADD_FAILURE() << "backend(cuda) did not throw without a usable GPU";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("no usable CUDA device: " + gpu::unavailable_reason()), std::string::npos)
          << e.what();
    }
  }
  std::printf("[ cuda     ] %s\n", gpu::device_description().c_str());
}

// ---------------------------------------------------------------- moving and converting

TEST(CudaOps, RoundTripEveryDtype) {
  REQUIRE_GPU();
  for (DType dt : {DType::Float32, DType::Float64, DType::Int64, DType::Bool}) {
    Tensor cpu = randish({3, 5}, 11, -3, 3).to(dt);
    Tensor dev = cpu.to(dut());
    EXPECT_EQ(dev.device(), dut());
    EXPECT_EQ(dev.dtype(), dt);
    EXPECT_TRUE(equal(dev.cpu(), cpu)) << dtype_name(dt);
    EXPECT_TRUE(equal(cpu.t().to(dut()).cpu(), cpu.t())) << "non-contiguous source, " << dtype_name(dt);
  }
  EXPECT_EQ(empty({0, 4}).to(dut()).cpu().shape(), (Shape{0, 4}));
  EXPECT_DOUBLE_EQ(scalar_tensor(2.5).to(dut()).item(), 2.5);
  // a gradient flows back across the device boundary
  Tensor x = randish({4}, 3).requires_grad_();
  (x.to(dut()) * 3.0).sum().backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().device(), Device::cpu());
  testing_helpers::expect_values(x.grad(), {4}, {3, 3, 3, 3});
}

TEST(CudaOps, DtypeConversions) {
  REQUIRE_GPU();
  std::vector<double> v = {-2.75, -1.0, -0.5, 0.0, 0.25, 1.0, 3.5, 100.0};
  for (DType from : {DType::Float32, DType::Float64, DType::Int64, DType::Bool})
    for (DType to : {DType::Float32, DType::Float64, DType::Int64, DType::Bool}) {
      Tensor src = from_vector(v, {2, 4}, from);
      Tensor want = src.to(to);
      Tensor got = src.to(dut()).t().to(to).t();  // a strided source and destination on the device
      expect_close(got, want, kExact, std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)));
    }
}

TEST(CudaOps, FillsAndFactories) {
  REQUIRE_GPU();
  for (DType dt : {DType::Float32, DType::Float64, DType::Int64, DType::Bool}) {
    expect_close(zeros({2, 3}, dt, dut()), zeros({2, 3}, dt), kExact, "zeros");
    expect_close(ones({4}, dt, dut()), ones({4}, dt), kExact, "ones");
    expect_close(full({2, 2}, 7.0, dt, dut()), full({2, 2}, 7.0, dt), kExact, "full");
  }
  Tensor cpu = zeros({3, 6});
  Tensor dev = zeros({3, 6}, DType::Float32, dut());
  Tensor cv = cpu.slice(1, 1, std::nullopt, 2), dv = dev.slice(1, 1, std::nullopt, 2);
  cv.fill_(-4.5);
  dv.fill_(-4.5);
  expect_close(dev, cpu, kExact, "fill_ of a strided view");
}

// ---------------------------------------------------------------- elementwise

TEST(CudaOps, BinaryOpsBroadcastForwardBackward) {
  REQUIRE_GPU();
  const std::vector<std::pair<std::string, Op>> ops = {
      {"add", [](const V& x) { return x[0] + x[1]; }},
      {"sub", [](const V& x) { return x[0] - x[1]; }},
      {"mul", [](const V& x) { return x[0] * x[1]; }},
      {"div", [](const V& x) { return x[0] / x[1]; }},
  };
  for (DType dt : kFloatTypes)
    for (const auto& [name, op] : ops) {
      const std::string tag = name + " " + std::string(dtype_name(dt));
      compare_op(tag + " same shape", [&](Device d) { return std::vector{plain({3, 4}, 1, d, dt), positive({3, 4}, 2, d, dt)}; }, op);
      compare_op(tag + " broadcast [3,1,4] by [2,4]",
                 [&](Device d) { return std::vector{plain({3, 1, 4}, 3, d, dt), positive({2, 4}, 4, d, dt)}; }, op);
      compare_op(tag + " by a 0-d tensor", [&](Device d) { return std::vector{plain({5}, 5, d, dt), positive({}, 6, d, dt)}; }, op);
      compare_op(tag + " transposed and strided inputs",
                 [&](Device d) { return std::vector{transposed({4, 3}, 7, d, dt), every_other({4, 3}, 8, d, dt).abs() + 0.5}; },
                 op);
      compare_op(tag + " column by row", [&](Device d) { return std::vector{plain({6, 1}, 9, d, dt), positive({1, 5}, 10, d, dt)}; },
                 op);
    }
}

TEST(CudaOps, UnaryOpsForwardBackward) {
  REQUIRE_GPU();
  const std::vector<std::pair<std::string, Op>> ops = {
      {"neg", [](const V& x) { return -x[0]; }},
      {"exp", [](const V& x) { return x[0].exp(); }},
      {"log", [](const V& x) { return (x[0].abs() + 0.1).log(); }},
      {"sqrt", [](const V& x) { return (x[0].abs() + 0.1).sqrt(); }},
      {"tanh", [](const V& x) { return x[0].tanh(); }},
      {"relu", [](const V& x) { return x[0].relu(); }},
      {"abs", [](const V& x) { return x[0].abs(); }},
      {"pow 2", [](const V& x) { return x[0].pow(2.0); }},
      {"pow 0.5", [](const V& x) { return (x[0].abs() + 0.1).pow(0.5); }},
      {"pow 3", [](const V& x) { return x[0].pow(3.0); }},
      {"pow -1.5", [](const V& x) { return (x[0].abs() + 0.1).pow(-1.5); }},
      {"add scalar", [](const V& x) { return x[0] + 1.25; }},
      {"sub scalar", [](const V& x) { return x[0] - 0.75; }},
      {"rsub scalar", [](const V& x) { return 2.0 - x[0]; }},
      {"mul scalar", [](const V& x) { return x[0] * -3.0; }},
      {"div scalar", [](const V& x) { return x[0] / 7.0; }},
      {"rdiv scalar", [](const V& x) { return 2.0 / (x[0].abs() + 0.1); }},
  };
  for (DType dt : kFloatTypes)
    for (const auto& [name, op] : ops) {
      const std::string tag = name + " " + std::string(dtype_name(dt));
      compare_op(tag, [&](Device d) { return std::vector{away_from_zero({4, 5}, 21, d, dt)}; }, op);
      compare_op(tag + " (transposed)", [&](Device d) { return std::vector{away_from_zero({5, 4}, 22, d, dt).t()}; }, op);
    }
  // special values pass through like on the CPU
  Tensor special = from_vector(std::vector<double>{0.0, -0.0, 1e-30, -1.0, std::numeric_limits<double>::infinity(),
                                                   -std::numeric_limits<double>::infinity(),
                                                   std::numeric_limits<double>::quiet_NaN()},
                               {7});
  for (DType dt : kFloatTypes)
    for (const auto& [name, op] : ops)
      compare_op(name + " special values " + std::string(dtype_name(dt)),
                 [&](Device d) { return std::vector{special.to(dt).to(d)}; }, op, {}, /*backward=*/false);
}

TEST(CudaOps, ComparisonsWhereAndMaskedFill) {
  REQUIRE_GPU();
  const std::vector<std::pair<std::string, Op>> cmp = {
      {"eq", [](const V& x) { return x[0] == x[1]; }}, {"ne", [](const V& x) { return x[0] != x[1]; }},
      {"lt", [](const V& x) { return x[0] < x[1]; }},  {"le", [](const V& x) { return x[0] <= x[1]; }},
      {"gt", [](const V& x) { return x[0] > x[1]; }},  {"ge", [](const V& x) { return x[0] >= x[1]; }},
      {"eq s", [](const V& x) { return x[0] == 0.0; }}, {"ne s", [](const V& x) { return x[0] != 1.0; }},
      {"lt s", [](const V& x) { return x[0] < 1.0; }},  {"le s", [](const V& x) { return x[0] <= 1.0; }},
      {"gt s", [](const V& x) { return x[0] > -1.0; }}, {"ge s", [](const V& x) { return x[0] >= 2.0; }},
  };
  // small integers so that ties happen
  for (DType dt : {DType::Float32, DType::Float64, DType::Int64})
    for (const auto& [name, op] : cmp)
      compare_op(name + " " + std::string(dtype_name(dt)),
                 [&](Device d) {
                   return std::vector{randish({3, 4}, 31, -2, 3).to(DType::Int64).to(dt).to(d),
                                      randish({4}, 32, -2, 3).to(DType::Int64).to(dt).to(d)};
                 },
                 op, kExact, false);
  for (DType dt : kFloatTypes) {
    compare_op("where with a broadcast condition " + std::string(dtype_name(dt)),
               [&](Device d) {
                 return std::vector{plain({3, 1}, 33, d, dt) > 0.0, plain({3, 4}, 34, d, dt), plain({4}, 35, d, dt)};
               },
               [](const V& x) { return where(x[0], x[1], x[2]); });
    compare_op("masked_fill -inf then softmax " + std::string(dtype_name(dt)),
               [&](Device d) { return std::vector{plain({2, 4, 4}, 36, d, dt), tril(ones({4, 4}, dt, d)) == 0.0}; },
               [](const V& x) { return softmax(x[0].masked_fill(x[1], -std::numeric_limits<double>::infinity()), -1); });
    compare_op("tril / triu " + std::string(dtype_name(dt)), [&](Device d) { return std::vector{plain({2, 3, 5}, 37, d, dt)}; },
               [](const V& x) { return x[0].tril(1) * 2.0 + x[0].triu(-1); });
  }
}

TEST(CudaOps, IntegerArithmetic) {
  REQUIRE_GPU();
  auto ints = [](uint32_t seed, Device d) { return randish({3, 4}, seed, -50, 50).to(DType::Int64).to(d); };
  compare_op("int64 add", [&](Device d) { return std::vector{ints(41, d), ints(42, d)}; },
             [](const V& x) { return x[0] + x[1]; }, kExact, false);
  compare_op("int64 sub, mul", [&](Device d) { return std::vector{ints(43, d), ints(44, d)}; },
             [](const V& x) { return (x[0] - x[1]) * x[0]; }, kExact, false);
  compare_op("int64 true division gives float", [&](Device d) { return std::vector{ints(45, d), ints(46, d).abs() + 1.0}; },
             [](const V& x) { return x[0] / x[1]; }, kF32, false);
  compare_op("int64 sums", [&](Device d) { return std::vector{ints(47, d)}; },
             [](const V& x) { return x[0].sum(0); }, kExact, false);
  compare_op("bool sums", [&](Device d) { return std::vector{ints(48, d) > 0.0}; },
             [](const V& x) { return x[0].sum(); }, kExact, false);
}

TEST(CudaOps, ManyDimensions) {
  REQUIRE_GPU();
  // 8 dims that cannot be merged (a permuted view): the deepest layout one launch takes
  compare_op("8-d permuted", [](Device d) { return std::vector{plain({2, 3, 2, 3, 2, 3, 2, 2}, 51, d).permute({7, 5, 3, 1, 0, 2, 4, 6})}; },
             [](const Tensor& x) { return x.exp() * 2.0; }, kF64);
  compare_op("8-d permuted, broadcast", [](Device d) {
               return std::vector{plain({2, 3, 2, 3, 2, 3, 2, 2}, 52, d).permute({7, 5, 3, 1, 0, 2, 4, 6}), plain({3, 1, 1, 2, 1, 2}, 53, d)};
             },
             [](const V& x) { return x[0] * x[1]; });
  // deeper layouts: elementwise kernels split them into several launches
  compare_op("9-d reversed", [](Device d) { return std::vector{plain({2, 2, 3, 2, 2, 3, 2, 2, 2}, 54, d).permute({8, 7, 6, 5, 4, 3, 2, 1, 0})}; },
             [](const Tensor& x) { return x.contiguous().exp() + x * x; });
  compare_op("10-d reversed, broadcast", [](Device d) {
               return std::vector{plain({2, 2, 2, 2, 2, 2, 2, 2, 2, 3}, 55, d).permute({9, 8, 7, 6, 5, 4, 3, 2, 1, 0}),
                                  plain({2, 1, 2}, 56, d)};
             },
             [](const V& x) { return x[0] * x[1]; });
}

// ---------------------------------------------------------------- reductions

TEST(CudaOps, Reductions) {
  REQUIRE_GPU();
  for (DType dt : kFloatTypes) {
    const std::string tag = " " + std::string(dtype_name(dt));
    auto in = [&](Device d) { return std::vector{transposed({4, 5, 6}, 61, d, dt)}; };
    compare_op("sum all" + tag, in, [](const Tensor& x) { return x.sum(); });
    compare_op("sum dim 0" + tag, in, [](const Tensor& x) { return x.sum(0); });
    compare_op("sum dim 1 keepdim" + tag, in, [](const Tensor& x) { return x.sum(1, true); });
    compare_op("sum dim -1" + tag, in, [](const Tensor& x) { return x.sum(-1); });
    compare_op("sum dims {0, 2}" + tag, in, [](const Tensor& x) { return sum(x, {0, 2}, false); });
    compare_op("mean" + tag, in, [](const Tensor& x) { return x.mean() + x.mean(1).sum(); });
    compare_op("sum_to (undoing a broadcast)" + tag, in, [](const Tensor& x) { return x.sum_to({1, 5, 1}); });
    // a long reduction (one block per output) and a wide one (one thread per output)
    compare_op("sum of 300000" + tag, [&](Device d) { return std::vector{plain({300000}, 62, d, dt)}; },
               [](const Tensor& x) { return x.sum(); }, Tol{dt == DType::Float32 ? 1e-4 : 1e-10, 1e-4});
    compare_op("column sums of [4096, 96]" + tag, [&](Device d) { return std::vector{plain({4096, 96}, 63, d, dt)}; },
               [](const Tensor& x) { return x.sum(0); }, Tol{dt == DType::Float32 ? 1e-4 : 1e-10, 1e-4});
    compare_op("row sums of [3000, 7]" + tag, [&](Device d) { return std::vector{plain({3000, 7}, 64, d, dt)}; },
               [](const Tensor& x) { return x.sum(1); });
  }
}

TEST(CudaOps, MaxAndArgmax) {
  REQUIRE_GPU();
  for (DType dt : {DType::Float64, DType::Float32, DType::Int64}) {
    const std::string tag = " " + std::string(dtype_name(dt));
    // small integers: ties, where the first index must win
    auto in = [&](Device d) { return std::vector{randish({4, 6, 5}, 71, -3, 3).to(DType::Int64).to(dt).to(d).transpose(0, 2)}; };
    for (int64_t dim : {0, 1, 2, -1}) {
      compare_op("max values, dim " + std::to_string(dim) + tag, in,
                 [dim](const Tensor& x) { return x.max(dim).first; }, kExact, is_floating(dt));
      compare_op("max indices, dim " + std::to_string(dim) + tag, in,
                 [dim](const Tensor& x) { return x.max(dim, true).second; }, kExact, false);
      compare_op("argmax, dim " + std::to_string(dim) + tag, in, [dim](const Tensor& x) { return x.argmax(dim); }, kExact,
                 false);
    }
    compare_op("max of all" + tag, in, [](const Tensor& x) { return x.max(); }, kExact, false);
    compare_op("argmax of all" + tag, in, [](const Tensor& x) { return x.argmax(); }, kExact, false);
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  compare_op("max with NaN", [&](Device d) { return std::vector{from_vector(std::vector<double>{1, nan, 3, 5, 2, 4}, {2, 3}).to(d)}; },
             [](const Tensor& x) { return x.max(1).first + x.argmax(1).to(DType::Float64); }, kExact, false);
}

// ---------------------------------------------------------------- matmul

TEST(CudaOps, MatmulLayoutsAndBatches) {
  REQUIRE_GPU();
  auto mm = [](const V& x) { return matmul(x[0], x[1]); };
  for (DType dt : kFloatTypes) {
    const std::string tag = " " + std::string(dtype_name(dt));
    const Tol tol = dt == DType::Float32 ? kMatmulF32 : kF64;
    auto cmp = [&](const std::string& name, MakeInputs make) { compare_op(name + tag, make, mm, tol); };
    cmp("[3,4]@[4,5]", [&](Device d) { return std::vector{plain({3, 4}, 81, d, dt), plain({4, 5}, 82, d, dt)}; });
    cmp("transposed A", [&](Device d) { return std::vector{transposed({3, 4}, 83, d, dt), plain({4, 5}, 84, d, dt)}; });
    cmp("transposed B", [&](Device d) { return std::vector{plain({3, 4}, 85, d, dt), transposed({4, 5}, 86, d, dt)}; });
    cmp("both transposed", [&](Device d) { return std::vector{transposed({3, 4}, 87, d, dt), transposed({4, 5}, 88, d, dt)}; });
    cmp("strided A (copied)", [&](Device d) { return std::vector{every_other({3, 4}, 89, d, dt), plain({4, 5}, 90, d, dt)}; });
    cmp("row-sliced B", [&](Device d) { return std::vector{plain({3, 4}, 91, d, dt), plain({8, 5}, 92, d, dt).slice(0, 0, std::nullopt, 2)}; });
    cmp("vector @ vector", [&](Device d) { return std::vector{plain({7}, 93, d, dt), plain({7}, 94, d, dt)}; });
    cmp("matrix @ vector", [&](Device d) { return std::vector{plain({3, 7}, 95, d, dt), plain({7}, 96, d, dt)}; });
    cmp("vector @ batched", [&](Device d) { return std::vector{plain({7}, 97, d, dt), plain({2, 7, 3}, 98, d, dt)}; });
    cmp("[1,1]@[1,1]", [&](Device d) { return std::vector{plain({1, 1}, 99, d, dt), plain({1, 1}, 100, d, dt)}; });
    cmp("[1,4]@[4,1]", [&](Device d) { return std::vector{plain({1, 4}, 101, d, dt), plain({4, 1}, 102, d, dt)}; });
    cmp("batched [2,3,4]@[2,4,5]", [&](Device d) { return std::vector{plain({2, 3, 4}, 103, d, dt), plain({2, 4, 5}, 104, d, dt)}; });
    cmp("batched @ shared matrix", [&](Device d) { return std::vector{plain({6, 3, 4}, 105, d, dt), plain({4, 5}, 106, d, dt)}; });
    cmp("broadcast batch [2,1,3,4]@[5,4,2]",
        [&](Device d) { return std::vector{plain({2, 1, 3, 4}, 107, d, dt), plain({5, 4, 2}, 108, d, dt)}; });
    cmp("attention scores q @ k^T", [&](Device d) {
      return std::vector{plain({4, 8, 6}, 109, d, dt), plain({4, 8, 6}, 110, d, dt).transpose(-2, -1)};
    });
    // the multi-head layout: [B, t, H, hd] viewed as [B, H, t, hd] — batch dims that do not merge
    cmp("heads split by a transpose", [&](Device d) {
      return std::vector{plain({3, 5, 4, 2}, 111, d, dt).transpose(1, 2), plain({3, 5, 4, 2}, 112, d, dt).transpose(1, 2).transpose(-2, -1)};
    });
    cmp("many unmerged batches", [&](Device d) {
      return std::vector{plain({12, 5, 3, 2}, 113, d, dt).transpose(1, 2), plain({12, 3, 2, 4}, 114, d, dt)};
    });
    cmp("expanded batch", [&](Device d) {
      return std::vector{plain({1, 3, 4}, 115, d, dt).expand({5, 3, 4}), plain({5, 4, 2}, 116, d, dt)};
    });
    cmp("K = 0", [&](Device d) { return std::vector{plain({3, 0}, 117, d, dt), plain({0, 4}, 118, d, dt)}; });
    cmp("M = 0", [&](Device d) { return std::vector{plain({0, 3}, 119, d, dt), plain({3, 4}, 120, d, dt)}; });
  }
  compare_op("float32 [3,64,96] @ [96,80]", [](Device d) {
               return std::vector{plain({3, 64, 96}, 121, d, DType::Float32), plain({96, 80}, 122, d, DType::Float32)};
             },
             mm, kMatmulF32);
}

// ---------------------------------------------------------------- softmax, embedding, losses

TEST(CudaOps, SoftmaxAndLogSoftmax) {
  REQUIRE_GPU();
  for (DType dt : kFloatTypes) {
    const std::string tag = " " + std::string(dtype_name(dt));
    for (int64_t dim : {0, 1, -1}) {
      auto in = [&](Device d) { return std::vector{transposed({4, 6, 5}, 131, d, dt) * 3.0}; };
      compare_op("softmax dim " + std::to_string(dim) + tag, in, [dim](const Tensor& x) { return softmax(x, dim); });
      compare_op("log_softmax dim " + std::to_string(dim) + tag, in, [dim](const Tensor& x) { return log_softmax(x, dim); });
    }
    compare_op("softmax of a long row" + tag, [&](Device d) { return std::vector{plain({3, 1000}, 132, d, dt) * 10.0}; },
               [](const Tensor& x) { return softmax(x, -1); });
    compare_op("log_softmax, large logits" + tag, [&](Device d) { return std::vector{plain({5, 40}, 133, d, dt) * 80.0}; },
               [](const Tensor& x) { return log_softmax(x, 1); });
  }
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  compare_op("softmax of -inf and NaN rows", [&](Device d) {
               return std::vector{from_vector(std::vector<double>{-inf, -inf, -inf, 1, nan, 2, 0, -inf, 1}, {3, 3}).to(d)};
             },
             [](const Tensor& x) { return softmax(x, 1) + log_softmax(x, 1); }, kF64, false);
}

// The CUDA backend has no flash kernel (has_flash_attention() is false): the op runs the composition there
// (matmul, masked_fill, softmax, matmul), which must agree with the CPU's FlashAttention to rounding.
TEST(CudaOps, ScaledDotProductAttentionFallsBackToTheComposition) {
  REQUIRE_GPU();
  for (DType dt : kFloatTypes) {
    const std::string tag = " " + std::string(dtype_name(dt));
    const std::optional<Tol> tol = dt == DType::Float32 ? std::optional<Tol>(kMatmulF32) : std::nullopt;
    for (bool causal : {true, false}) {
      auto in = [&](Device d) {
        return std::vector{plain({2, 3, 70, 8}, 141, d, dt), transposed({2, 3, 70, 8}, 142, d, dt),
                           plain({3, 70, 5}, 143, d, dt)};
      };
      compare_op(std::string(causal ? "causal" : "full") + " attention" + tag, in,
                 Op([causal](const V& x) { return scaled_dot_product_attention(x[0], x[1], x[2], causal); }), tol);
    }
  }
}

TEST(CudaOps, EmbeddingCrossEntropyNllLoss) {
  REQUIRE_GPU();
  for (DType dt : kFloatTypes) {
    const std::string tag = " " + std::string(dtype_name(dt));
    // repeated indices: their gradients must add up (atomicAdd on the GPU)
    auto idx = [](Device d) { return from_vector(std::vector<int64_t>{3, 1, 3, 0, 6, 3, 1, 2, 5, 3}, {2, 5}).to(d); };
    compare_op("embedding" + tag, [&](Device d) { return std::vector{plain({7, 4}, 141, d, dt), idx(d)}; },
               [](const V& x) { return embedding(x[0], x[1]) * 2.0; });
    compare_op("embedding of a transposed table" + tag, [&](Device d) { return std::vector{transposed({7, 4}, 142, d, dt), idx(d)}; },
               [](const V& x) { return embedding(x[0], x[1]).exp(); });
    auto targets = [](Device d) { return from_vector(std::vector<int64_t>{2, 0, 4, 4, 1, 3}, {6}).to(d); };
    compare_op("cross_entropy" + tag, [&](Device d) { return std::vector{plain({6, 5}, 143, d, dt) * 2.0, targets(d)}; },
               [](const V& x) { return cross_entropy(x[0], x[1]); });
    compare_op("cross_entropy with ignore_index" + tag,
               [&](Device d) {
                 return std::vector{plain({6, 5}, 144, d, dt), from_vector(std::vector<int64_t>{2, -100, 4, 4, -100, 3}, {6}).to(d)};
               },
               [](const V& x) { return cross_entropy(x[0], x[1]); });
    compare_op("nll_loss on transposed log-probs" + tag,
               [&](Device d) { return std::vector{transposed({6, 5}, 145, d, dt), targets(d)}; },
               [](const V& x) { return nll_loss(log_softmax(x[0], 1), x[1]); });
  }
}

// ---------------------------------------------------------------- shapes and in-place updates

TEST(CudaOps, ShapeOps) {
  REQUIRE_GPU();
  for (DType dt : kFloatTypes) {
    const std::string tag = " " + std::string(dtype_name(dt));
    auto two = [&](Device d) { return std::vector{plain({3, 4}, 151, d, dt), transposed({2, 4}, 152, d, dt)}; };
    compare_op("cat" + tag, two, [](const V& x) { return cat({x[0], x[1]}, 0) * 3.0; });
    compare_op("stack" + tag, [&](Device d) { return std::vector{plain({3, 4}, 153, d, dt), transposed({3, 4}, 154, d, dt)}; },
               [](const V& x) { return stack({x[0], x[1]}, 1).exp(); });
    auto one = [&](Device d) { return std::vector{plain({4, 6, 5}, 155, d, dt)}; };
    compare_op("slice with a step" + tag, one, [](const Tensor& x) { return x.slice(1, 1, 6, 2).tanh(); });
    compare_op("select" + tag, one, [](const Tensor& x) { return x.select(2, 3) * x.select(2, 1); });
    compare_op("permute + contiguous" + tag, one, [](const Tensor& x) { return x.permute({2, 0, 1}).contiguous().view({5, -1}); });
    compare_op("expand + contiguous" + tag, [&](Device d) { return std::vector{plain({4, 1, 5}, 156, d, dt)}; },
               [](const Tensor& x) { return x.expand({4, 3, 5}).contiguous().pow(2.0); });
    compare_op("narrow + reshape" + tag, one, [](const Tensor& x) { return x.narrow(0, 1, 2).reshape({-1}).relu(); });
    compare_op("chunk" + tag, one, [](const Tensor& x) {
      auto parts = chunk(x, 3, 1);
      return parts[0] * parts[2];
    });
  }
}

TEST(CudaOps, InPlaceUpdates) {
  REQUIRE_GPU();
  NoGradGuard no_grad;
  auto both = [](auto&& f) {
    Tensor c = randish({4, 6}, 161), d = randish({4, 6}, 161).to(dut());
    f(c, Device::cpu());
    f(d, dut());
    expect_close(d, c, kF64, "in place");
  };
  both([](Tensor& t, Device dev) { t.add_(randish({6}, 162).to(dev), 0.5); });
  both([](Tensor& t, Device) { t.mul_(-2.5); });
  both([](Tensor& t, Device dev) { t.slice(1, 0, std::nullopt, 2).copy_(randish({3, 4}, 163).to(dev).t()); });
  both([](Tensor& t, Device dev) { t.masked_fill_(randish({4, 1}, 164).to(dev) > 0.0, 9.0); });
  both([](Tensor& t, Device) { t.select(0, 2).zero_(); });
}

TEST(CudaOps, DropoutMatchesCpuForTheSameSeed) {
  REQUIRE_GPU();
  // The mask is drawn on the CPU by the PyTorch-compatible generator and copied over (see docs/cuda.md),
  // so the same seed gives the same mask on both devices.
  compare_op("dropout p=0.3", [](Device d) { return std::vector{plain({8, 16}, 171, d)}; }, [](const Tensor& x) {
    manual_seed(5);
    return dropout(x, 0.3, true);
  });
  compare_op("nn::Dropout in eval is the identity", [](Device d) { return std::vector{plain({3, 3}, 172, d)}; },
             [](const Tensor& x) { return dropout(x, 0.5, false); });
}

// ---------------------------------------------------------------- the device itself

TEST(CudaDevice, OpsOnTwoDevicesNameBoth) {
  REQUIRE_REAL_GPU();
  Tensor c = ones({2, 2}), g = ones({2, 2}, DType::Float32, Device::cuda(0));
  EXPECT_THROW_WITH((void)(c + g), std::invalid_argument, "cpu", "cuda:0");
  EXPECT_THROW_WITH((void)matmul(g, c), std::invalid_argument, "cuda:0", "cpu");
  EXPECT_THROW_WITH((void)embedding(g, from_vector(std::vector<int64_t>{0, 1}, {2})), std::invalid_argument, "cpu",
                    "cuda:0");
  EXPECT_THROW_WITH((void)c.copy_(g), std::invalid_argument, "cpu", "cuda:0");
  EXPECT_THROW_WITH((void)cat({c, g}), std::invalid_argument, "cpu", "cuda:0");
  EXPECT_THROW_WITH((void)scaled_dot_product_attention(c, g, c), std::invalid_argument,
                    "scaled_dot_product_attention", "cpu", "cuda:0");
}

TEST(CudaDevice, CachingAllocatorKeepsAndReleasesBlocks) {
  REQUIRE_REAL_GPU();
  gpu::synchronize();
  gpu::empty_cache();
  EXPECT_EQ(gpu::cached_bytes(), 0u);
  const size_t live_before = gpu::allocated_bytes();
  {
    Tensor t = empty({1 << 20}, DType::Float32, Device::cuda(0));  // 4 MiB
    EXPECT_GE(gpu::allocated_bytes(), live_before + (4u << 20));
  }
  EXPECT_GE(gpu::cached_bytes(), 4u << 20);  // kept for reuse, not freed
  EXPECT_EQ(gpu::allocated_bytes(), live_before);
  {
    Tensor again = empty({1 << 20}, DType::Float32, Device::cuda(0));  // same size: served from the cache
    EXPECT_EQ(gpu::cached_bytes(), 0u);
  }
  gpu::empty_cache();
  EXPECT_EQ(gpu::cached_bytes(), 0u);
}

TEST(CudaDevice, CudaErrorsBecomeExceptionsNamingTheOp) {
  REQUIRE_REAL_GPU();
  try {
    Tensor huge = empty({int64_t(1) << 48}, DType::Float32, Device::cuda(0));  // 1 PiB of floats
    ADD_FAILURE() << "a 1 PiB allocation should fail";
  } catch (const std::runtime_error& e) {
    testing_helpers::expect_message_contains(e.what(), {"gpu allocate", "cudaMalloc", "out of memory"}, "empty(2^48 floats)");
  }
  // the device still works afterwards
  EXPECT_DOUBLE_EQ((ones({3}, DType::Float32, Device::cuda(0)) * 2.0).sum().item(), 6.0);
  EXPECT_THROW_WITH((void)ones({2}, DType::Float32, Device::cuda(1)), std::invalid_argument, "cuda:1");
}

// ---------------------------------------------------------------- optimizers

TEST(CudaOptim, FusedAdamMatchesCpu) {
  REQUIRE_GPU();
  struct Case {
    std::string name;
    std::function<std::unique_ptr<optim::Adam>(std::vector<Tensor>)> make;
  };
  const std::vector<Case> cases = {
      {"Adam", [](auto p) { return std::make_unique<optim::Adam>(p, optim::Adam::Options{.lr = 0.01}); }},
      {"Adam wd amsgrad", [](auto p) {
         return std::make_unique<optim::Adam>(p, optim::Adam::Options{.lr = 0.02, .weight_decay = 0.1, .amsgrad = true});
       }},
      {"AdamW", [](auto p) { return std::make_unique<optim::AdamW>(p, optim::AdamW::Options{.lr = 0.01, .weight_decay = 0.05}); }},
  };
  for (const Case& c : cases)
    for (DType dt : kFloatTypes) {
      SCOPED_TRACE(c.name + " " + std::string(dtype_name(dt)));
      std::vector<Tensor> pc, pd;
      for (const Shape& s : {Shape{5, 7}, Shape{3}}) {
        pc.push_back(randish(s, 181 + uint32_t(s.size()), -1, 1, dt).requires_grad_());
        pd.push_back(pc.back().detach().to(dut()).requires_grad_());
      }
      auto oc = c.make(pc), od = c.make(pd);
      for (int step = 0; step < 4; ++step) {
        for (size_t i = 0; i < pc.size(); ++i) {
          Tensor g = randish(pc[i].shape(), 190 + uint32_t(step * 10 + i), -1, 1, dt);
          pc[i].set_grad(g);
          pd[i].set_grad(g.to(dut()));
        }
        const double clip = step == 2 ? 0.37 : 1.0;  // a step with the clipping's coefficient fused in
        oc->step(clip);
        od->step(clip);
      }
      // every operation IEEE-rounded, in the same order on both devices: the same bits
      for (size_t i = 0; i < pc.size(); ++i)
        expect_close(pd[i].detach(), pc[i].detach(), kExact, "parameter " + std::to_string(i));
    }
}

// ---------------------------------------------------------------- the seed char model

struct CharData {
  std::string chars;
  Tensor data;
  int64_t V = 0;
};

CharData char_data() {
  const std::string text = "aditi likes warm dosa ";
  std::set<char> charset(text.begin(), text.end());
  CharData d;
  d.chars.assign(charset.begin(), charset.end());
  std::map<char, int64_t> stoi;
  for (size_t i = 0; i < d.chars.size(); ++i) stoi[d.chars[i]] = int64_t(i);
  std::vector<int64_t> ids;
  for (char c : text) ids.push_back(stoi[c]);
  d.data = from_vector(ids, {int64_t(ids.size())});
  d.V = int64_t(d.chars.size());
  return d;
}

// Trains the workshop's model (manual_seed(7), Adam lr 0.01, B 16, T 8) on `device`; the batches are drawn
// on the CPU by the same generator, so both devices see the same data. Returns the loss of every step.
std::vector<double> train_char_model(Device device, int steps, int64_t heads = 1, int64_t dim = 24) {
  const CharData cd = char_data();
  const int64_t T = 8, B = 16;
  manual_seed(7);
  nn::MiniSelfAttention model({.vocab = cd.V, .dim = dim, .context = T, .heads = heads});
  model.to(device);
  optim::Adam opt(model.parameters(), {.lr = 0.01});
  std::vector<double> losses;
  for (int step = 0; step < steps; ++step) {
    Tensor i = randint(0, cd.data.size(0) - T - 1, {B});
    std::vector<Tensor> xs, ys;
    for (int64_t j : i.to_vector<int64_t>()) {
      xs.push_back(cd.data.slice(0, j, j + T));
      ys.push_back(cd.data.slice(0, j + 1, j + T + 1));
    }
    Tensor xb = stack(xs).to(device), yb = stack(ys).to(device);
    Tensor logits = model(xb);
    EXPECT_EQ(logits.device(), device);
    Tensor loss = cross_entropy(logits.view({-1, cd.V}), yb.view({-1}));
    opt.zero_grad();
    loss.backward();
    opt.step();
    losses.push_back(loss.item());
  }
  for (const Tensor& p : model.parameters()) EXPECT_EQ(p.device(), device);
  return losses;
}

double mean_of_last(const std::vector<double>& v, size_t n) {
  double s = 0;
  for (size_t i = v.size() - n; i < v.size(); ++i) s += v[i];
  return s / double(n);
}

TEST(CudaTraining, SeedCharModelLossFallsAsOnCpu) {
  REQUIRE_GPU();
  const int steps = 120;
  const std::vector<double> cpu = train_char_model(Device::cpu(), steps);
  const std::vector<double> dev = train_char_model(dut(), steps);
  ASSERT_EQ(dev.size(), cpu.size());
  EXPECT_NEAR(dev[0], cpu[0], 1e-5) << "step 0: same weights, same batch";
  const double cpu_end = mean_of_last(cpu, 20), dev_end = mean_of_last(dev, 20);
  std::printf("[ cuda     ] char model: loss %.4f -> %.4f on cpu, %.4f -> %.4f on %s (mean of the last 20 steps)\n",
              cpu[0], cpu_end, dev[0], dev_end, dut().str().c_str());
  EXPECT_LT(cpu_end, 0.6 * cpu[0]);
  EXPECT_LT(dev_end, 0.6 * dev[0]) << "the loss should fall on the GPU as it does on the CPU";
  EXPECT_NEAR(dev_end, cpu_end, 0.1);
}

TEST(CudaTraining, MultiHeadCharModelStepMatchesCpu) {
  REQUIRE_GPU();
  // One forward/backward of the 4-head model (the batched-head matmuls) against the CPU, then a few steps.
  const CharData cd = char_data();
  auto grads_after_one_step = [&](Device device) {
    manual_seed(7);
    nn::MiniSelfAttention model({.vocab = cd.V, .dim = 32, .context = 8, .heads = 4});
    model.to(device);
    Tensor xb = cd.data.slice(0, 0, 16).view({2, 8}).to(device), yb = cd.data.slice(0, 1, 17).view({2, 8}).to(device);
    Tensor loss = cross_entropy(model(xb).view({-1, cd.V}), yb.view({-1}));
    loss.backward();
    std::vector<Tensor> out = {loss.detach()};
    for (const Tensor& p : model.parameters()) out.push_back(p.grad());
    return out;
  };
  const std::vector<Tensor> c = grads_after_one_step(Device::cpu()), d = grads_after_one_step(dut());
  ASSERT_EQ(c.size(), d.size());
  for (size_t i = 0; i < c.size(); ++i) expect_close(d[i], c[i], Tol{1e-3, 1e-5}, i == 0 ? "loss" : "grad " + std::to_string(i));
  const std::vector<double> dev = train_char_model(dut(), 60, /*heads=*/4, /*dim=*/32);
  EXPECT_LT(mean_of_last(dev, 10), 0.6 * dev[0]);
}

}  // namespace

#endif  // SCRATCHGRAD_HAS_CUDA
