// test_bfloat16.cpp — the bfloat16 dtype against PyTorch 1.13: conversion, ops computed in float32 and
// rounded once, printing, and safetensors' BF16. Fixtures: tests/reference/make_bf16_fixtures.py.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "autograd/numerics.h"
#include "autograd/precision/widening_backend.h"
#include "nn/safetensors.h"

#ifndef SCRATCHGRAD_SOURCE_DIR
#define SCRATCHGRAD_SOURCE_DIR "/work/main"
#endif

namespace {

using namespace autograd;

const std::string kFixtureDir = std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/reference/fixtures/bf16/";

std::ifstream open_fixture(const std::string& name) {
  std::ifstream in(kFixtureDir + name);
  if (!in) throw std::runtime_error("cannot open fixture " + kFixtureDir + name);
  return in;
}

// A bfloat16 tensor holding these bits.
Tensor from_bits(const Shape& shape, const std::vector<uint16_t>& bits) {
  Tensor t = empty(shape, DType::BFloat16);
  if (!bits.empty()) std::memcpy(t.raw_data(), bits.data(), bits.size() * 2);
  return t;
}

std::vector<uint16_t> bits_of(const Tensor& t) {
  Tensor c = t.contiguous();
  std::vector<uint16_t> bits(size_t(c.numel()));
  if (!bits.empty()) std::memcpy(bits.data(), c.raw_data(), bits.size() * 2);
  return bits;
}

// "in 4 37 ; c005 3feb ..." or "out bfloat16 4 ; ..." / "out bool 4 ; 0 1 ..."
struct FixtureTensor {
  std::string dtype = "bfloat16";
  Shape shape;
  std::vector<uint16_t> values;
};
FixtureTensor parse_tensor(const std::string& line) {
  std::istringstream in(line);
  FixtureTensor t;
  std::string word;
  in >> word;  // in / out
  if (word == "out") in >> t.dtype;
  while (in >> word && word != ";") t.shape.push_back(std::stoll(word));
  while (in >> word) t.values.push_back(uint16_t(std::stoul(word, nullptr, t.dtype == "bool" ? 10 : 16)));
  return t;
}

TEST(BFloat16, ConversionRoundsAsPyTorch) {
  std::ifstream in = open_fixture("convert.txt");
  std::vector<float> values;
  std::vector<uint16_t> expected;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string f32, bf16;
    fields >> f32 >> bf16;
    values.push_back(std::bit_cast<float>(uint32_t(std::stoul(f32, nullptr, 16))));
    expected.push_back(uint16_t(std::stoul(bf16, nullptr, 16)));
  }
  ASSERT_GT(values.size(), 250u);
  for (size_t i = 0; i < values.size(); ++i)
    EXPECT_EQ(round_to_bfloat16(values[i]).bits, expected[i]) << "float32 " << values[i];
  // The same through a tensor's .to(), and back to float32 exactly (every bfloat16 is a float32).
  const Tensor t = from_vector(values, {int64_t(values.size())}).to(DType::BFloat16);
  EXPECT_EQ(t.dtype(), DType::BFloat16);
  EXPECT_EQ(bits_of(t), expected);
  const std::vector<float> back = t.to(DType::Float32).to_vector<float>();
  for (size_t i = 0; i < back.size(); ++i) {
    if (std::isnan(values[i])) {
      EXPECT_TRUE(std::isnan(back[i]));  // a NaN stays a NaN
      continue;
    }
    EXPECT_EQ(std::bit_cast<uint32_t>(back[i]), uint32_t(expected[i]) << 16);
  }
}

// The conversions take three paths (precision/widening_backend.cpp): one loop over contiguous tensors, 32 x 32
// tiles when a matrix meets its transpose (a weight's gradient), the index walk otherwise. Each must round every
// element as round_to_bfloat16 does and put it in its place: a 70 x 45 matrix (partial tiles on both edges),
// with ties, NaN and infinities among its values, rounded into a transposed view and from one, widened from a
// transposed bfloat16 matrix, and a 3-D permuted copy.
TEST(BFloat16, ConversionsInEveryLayout) {
  std::vector<float> values(70 * 45);
  for (size_t i = 0; i < values.size(); ++i) values[i] = std::ldexp(float(1 + (i * 7919) % 1000), int(i % 9) - 4) * (i % 2 ? -1 : 1);
  values[3] = std::bit_cast<float>(0x3F808000u);  // a tie: 1 + 2⁻⁸, rounded to even (1)
  values[100] = std::bit_cast<float>(0x3F818000u);  // a tie rounded up to even
  values[200] = std::numeric_limits<float>::quiet_NaN();
  values[300] = -std::numeric_limits<float>::infinity();
  const Tensor a = from_vector(values, {70, 45});
  auto expected_bits = [](const Tensor& t) {  // t's float32 values, rounded one by one, in t's logical order
    std::vector<uint16_t> bits;
    for (float v : t.contiguous().to_vector<float>()) bits.push_back(round_to_bfloat16(v).bits);
    return bits;
  };
  EXPECT_EQ(bits_of(a.to(DType::BFloat16)), expected_bits(a)) << "contiguous";
  Tensor into_transposed = zeros({45, 70}, DType::BFloat16).t();  // [70, 45] with strides (1, 70)
  {
    NoGradGuard no_grad;
    into_transposed.copy_(a);
  }
  EXPECT_EQ(bits_of(into_transposed.contiguous()), expected_bits(a)) << "into a transposed view";
  EXPECT_EQ(bits_of(a.t().to(DType::BFloat16).contiguous()), expected_bits(a.t())) << "from a transposed view";
  const Tensor widened = into_transposed.to(DType::Float32).contiguous();
  const std::vector<uint16_t> kept = expected_bits(a);
  const std::vector<float> back = widened.to_vector<float>();
  for (size_t i = 0; i < back.size(); ++i)
    EXPECT_EQ(std::bit_cast<uint32_t>(back[i]) >> 16, kept[i]) << "widened from a transposed view, element " << i;
  const Tensor cube = a.reshape({7, 10, 45}).permute({2, 0, 1});
  EXPECT_EQ(bits_of(cube.to(DType::BFloat16).contiguous()), expected_bits(cube)) << "3-D, permuted";
}

// A run long enough for the CPU's conversion loop to split over threads (bfloat16_runs.cpp), with a length
// that leaves a tail past the last 16 lanes: every element rounded as round_to_bfloat16 and widened back
// exactly, on one thread and on two.
TEST(BFloat16, LongRunsRoundAndWidenEveryElement) {
  const int64_t n = (int64_t(1) << 18) + 37;
  std::vector<float> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    values[size_t(i)] = std::bit_cast<float>(0x3F800000u + uint32_t(i) * 0x4000u);  // a tie every 4, odd and even
  values[5] = std::numeric_limits<float>::quiet_NaN();
  values[size_t(n - 1)] = -std::numeric_limits<float>::quiet_NaN();
  std::vector<uint16_t> expected;
  for (float v : values) expected.push_back(round_to_bfloat16(v).bits);
  const Tensor a = from_vector(values, {n});
  const int previous = get_num_threads();
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    const Tensor rounded = a.to(DType::BFloat16);
    EXPECT_EQ(bits_of(rounded), expected) << threads << " threads";
    const std::vector<float> back = rounded.to(DType::Float32).to_vector<float>();
    for (int64_t i = 0; i < n; ++i)
      if (std::bit_cast<uint32_t>(back[size_t(i)]) != uint32_t(expected[size_t(i)]) << 16) {
        ADD_FAILURE() << "element " << i << " widened to " << back[size_t(i)] << " on " << threads << " threads";
        break;
      }
  }
  set_num_threads(previous);
}

// A view whose rows are contiguous but not the whole (attention's heads: [B, H, T, d] of [B, T, H·d]): each
// row converted through the backend's loop, the rows split over the threads; the same bits as element by
// element, on the fast kernels and the reference loops, both ways.
TEST(BFloat16, RowsOfAViewRoundAndWidenEveryElement) {
  manual_seed(12);
  const Tensor base = randn({4, 64, 3 * 8 * 64});  // 196,608 values: the threaded path
  const Tensor heads = base.slice(2, 8 * 64, 2 * 8 * 64).reshape({4, 64, 8, 64}).transpose(1, 2);  // k's view
  ASSERT_FALSE(heads.is_contiguous());
  const std::vector<float> values = heads.contiguous().to_vector<float>();
  std::vector<uint16_t> expected;
  for (float v : values) expected.push_back(round_to_bfloat16(v).bits);
  const int previous = get_num_threads();
  for (Kernels kernels : {Kernels::cpu, Kernels::reference})
    for (int threads : {1, 2}) {
      KernelsGuard guard(kernels);
      set_num_threads(threads);
      const Tensor rounded = heads.to(DType::BFloat16);
      EXPECT_EQ(bits_of(rounded), expected) << threads << " threads";
      // and back, from a view of a bfloat16 tensor laid out alike
      const Tensor sixteen_heads =
          base.to(DType::BFloat16).slice(2, 8 * 64, 2 * 8 * 64).reshape({4, 64, 8, 64}).transpose(1, 2);
      const std::vector<float> back = sixteen_heads.to(DType::Float32).to_vector<float>();
      for (size_t i = 0; i < back.size(); ++i)
        if (std::bit_cast<uint32_t>(back[i]) != uint32_t(expected[i]) << 16) {
          ADD_FAILURE() << "element " << i << " widened to " << back[i] << " on " << threads << " threads";
          break;
        }
    }
  set_num_threads(previous);
}

TEST(BFloat16, ConversionFromFloat64AndIntegers) {
  // float64 → bfloat16 goes through float32, as PyTorch converts: 1 + 2⁻⁸ + 2⁻³⁰ rounds to 1 + 2⁻⁸ in
  // float32 first, a tie that goes to even (1), where a direct rounding would go up.
  const double x = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);
  EXPECT_EQ(scalar_tensor(x, DType::Float64).to(DType::BFloat16).item(), 1.0);
  EXPECT_EQ(tensor({1, 300, -7}).to(DType::BFloat16).to_vector<int64_t>(), (std::vector<int64_t>{1, 300, -7}));
  EXPECT_EQ(tensor({257}).to(DType::BFloat16).item(), 256.0);  // 9 significant bits: rounded to even
  EXPECT_EQ(full({}, 0.1, DType::BFloat16).item(), 0.10009765625);
  EXPECT_EQ(dtype_size(DType::BFloat16), 2u);
  EXPECT_TRUE(is_floating(DType::BFloat16));
}

// The ops of ops.txt by name, as make_bf16_fixtures.py applies them.
const std::map<std::string, std::function<Tensor(const std::vector<Tensor>&)>>& fixture_ops() {
  using In = const std::vector<Tensor>&;
  static const std::map<std::string, std::function<Tensor(In)>> ops = {
      {"neg", [](In x) { return neg(x[0]); }},
      {"exp", [](In x) { return exp(x[0]); }},
      {"log", [](In x) { return log(x[0]); }},
      {"sqrt", [](In x) { return sqrt(x[0]); }},
      {"tanh", [](In x) { return tanh(x[0]); }},
      {"relu", [](In x) { return relu(x[0]); }},
      {"abs", [](In x) { return abs(x[0]); }},
      {"add_0.1", [](In x) { return x[0] + 0.1; }},
      {"sub_0.3", [](In x) { return x[0] - 0.3; }},
      {"mul_0.1", [](In x) { return x[0] * 0.1; }},
      {"div_0.3", [](In x) { return x[0] / 0.3; }},
      {"rsub_0.7", [](In x) { return 0.7 - x[0]; }},
      {"rdiv_1.7", [](In x) { return 1.7 / x[0]; }},
      {"pow_2", [](In x) { return pow(x[0], 2.0); }},
      {"pow_1.3", [](In x) { return pow(x[0], 1.3); }},
      {"gelu", [](In x) { return gelu(x[0]); }},
      {"gelu_tanh", [](In x) { return gelu(x[0], "tanh"); }},
      {"softmax", [](In x) { return softmax(x[0], -1); }},
      {"log_softmax", [](In x) { return log_softmax(x[0], -1); }},
      {"layer_norm", [](In x) { return layer_norm(x[0], {x[0].size(-1)}); }},
      {"sum", [](In x) { return sum(x[0]); }},
      {"sum_0", [](In x) { return sum(x[0], 0); }},
      {"sum_1", [](In x) { return sum(x[0], 1); }},
      {"mean", [](In x) { return mean(x[0]); }},
      {"mean_1", [](In x) { return mean(x[0], 1); }},
      {"max_1", [](In x) { return max(x[0], 1).first; }},
      {"lt_0.1", [](In x) { return lt(x[0], 0.1); }},
      {"to_float32_exp", [](In x) { return exp(x[0].to(DType::Float32)).to(DType::BFloat16); }},
      {"add", [](In x) { return x[0] + x[1]; }},
      {"sub", [](In x) { return x[0] - x[1]; }},
      {"mul", [](In x) { return x[0] * x[1]; }},
      {"div", [](In x) { return x[0] / x[1]; }},
  };
  return ops;
}

struct OpCase {
  std::string op;
  std::vector<FixtureTensor> inputs;
  FixtureTensor output;
};

std::vector<OpCase> op_cases() {
  std::ifstream in = open_fixture("ops.txt");
  std::vector<OpCase> cases;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("case ", 0) == 0) cases.push_back({line.substr(5), {}, {}});
    else if (line.rfind("in ", 0) == 0) cases.back().inputs.push_back(parse_tensor(line));
    else if (line.rfind("out ", 0) == 0) cases.back().output = parse_tensor(line);
  }
  return cases;
}

// Every op of the fixture file: on the CPU kernels (whose float32 results are PyTorch's bits) the same
// bits as PyTorch's bfloat16 kernels, which compute in float32 and round once; on the reference kernels
// (textbook loops, whose float32 sums take another order) each value within one bfloat16 step.
void check_ops_against_pytorch(Kernels kernels) {
  KernelsGuard guard(kernels);
  const std::vector<OpCase> cases = op_cases();
  ASSERT_GT(cases.size(), 40u);
  for (const OpCase& c : cases) {
    SCOPED_TRACE(c.op + " on " + shape_to_string(c.inputs[0].shape));
    std::vector<Tensor> inputs;
    for (const FixtureTensor& t : c.inputs) inputs.push_back(from_bits(t.shape, t.values));
    ASSERT_TRUE(fixture_ops().count(c.op)) << "no op named " << c.op;
    const Tensor out = fixture_ops().at(c.op)(inputs);
    EXPECT_EQ(out.shape(), c.output.shape);
    if (c.output.dtype == "bool") {
      EXPECT_EQ(out.dtype(), DType::Bool);
      std::vector<uint16_t> got;
      for (int64_t v : out.to_vector<int64_t>()) got.push_back(uint16_t(v));
      EXPECT_EQ(got, c.output.values);
      continue;
    }
    EXPECT_EQ(out.dtype(), DType::BFloat16);
    const std::vector<uint16_t> got = bits_of(out);
    ASSERT_EQ(got.size(), c.output.values.size());
    int differ = 0, further = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      differ += got[i] != c.output.values[i];
      further += std::abs(int(got[i]) - int(c.output.values[i])) > 1;  // more than one step (same sign)
    }
    if (kernels == Kernels::cpu) {
      EXPECT_EQ(differ, 0) << "of " << got.size() << " values";
    }
    EXPECT_EQ(further, 0) << "of " << got.size() << " values";
  }
}

TEST(BFloat16, OpsMatchPyTorch) { check_ops_against_pytorch(Kernels::cpu); }
TEST(BFloat16, OpsMatchPyTorchOnReferenceKernels) { check_ops_against_pytorch(Kernels::reference); }

// The Llama family's ops on bfloat16 tensors compute in float32 and round once, forward and backward: the
// same bits as the float32 op on the widened values, rounded (on both kernel sets; the float32 ops' own
// bits are held to PyTorch's in test_llama_ops.cpp).
void check_llama_ops_round_once(Kernels kernels) {
  KernelsGuard guard(kernels);
  manual_seed(7);
  const Tensor x32 = randn({2, 3, 8}).to(DType::BFloat16).to(DType::Float32);  // values a bfloat16 holds
  const Tensor w32 = randn({8}).to(DType::BFloat16).to(DType::Float32);
  // (any two tables do: the kernel does not assume cos² + sin² = 1)
  const Tensor cos32 = randn({3, 4}).to(DType::BFloat16).to(DType::Float32);
  const Tensor sin32 = randn({3, 4}).to(DType::BFloat16).to(DType::Float32);
  const auto bf = [](const Tensor& t) { return t.to(DType::BFloat16); };
  const auto rounded = [](const Tensor& t) { return bits_of(t.to(DType::BFloat16)); };
  EXPECT_EQ(bits_of(silu(bf(x32))), rounded(silu(x32)));
  EXPECT_EQ(bits_of(rms_norm(bf(x32), bf(w32), 1e-6)), rounded(rms_norm(x32, w32, 1e-6)));
  EXPECT_EQ(bits_of(rotary_embedding(bf(x32), bf(cos32), bf(sin32))), rounded(rotary_embedding(x32, cos32, sin32)));
  // backward: a bfloat16 leaf's gradient through each op, against the float32 op's gradient rounded
  int which = 0;
  for (const auto& op : std::vector<std::function<Tensor(const Tensor&)>>{
           [](const Tensor& x) { return silu(x); },
           [&](const Tensor& x) { return rms_norm(x, x.dtype() == DType::BFloat16 ? bf(w32) : w32, 1e-6); },
           [&](const Tensor& x) {
             return x.dtype() == DType::BFloat16 ? rotary_embedding(x, bf(cos32), bf(sin32)) : rotary_embedding(x, cos32, sin32);
           }}) {
    SCOPED_TRACE(which++ == 0 ? "silu" : which == 2 ? "rms_norm" : "rotary_embedding");
    Tensor low = bf(x32).detach().requires_grad_(true), wide = x32.detach().requires_grad_(true);
    op(low).sum().backward();
    op(wide).sum().backward();
    EXPECT_EQ(low.grad().dtype(), DType::BFloat16);
    const std::vector<uint16_t> got = bits_of(low.grad()), want = rounded(wide.grad());
    ASSERT_EQ(got.size(), want.size());
    // rms_norm saves its rstd in the input's dtype, as PyTorch's layer_norm saves mean and rstd for a
    // bfloat16 input: the backward reads the rounded rstd, a step or two from the float32 gradient
    const int allowed_steps = which == 2 ? 2 : 0;
    for (size_t i = 0; i < got.size(); ++i) EXPECT_LE(std::abs(int(got[i]) - int(want[i])), allowed_steps) << i;
  }
}

TEST(BFloat16, LlamaOpsComputeInFloat32AndRoundOnce) { check_llama_ops_round_once(Kernels::cpu); }
TEST(BFloat16, LlamaOpsComputeInFloat32AndRoundOnceOnReferenceKernels) { check_llama_ops_round_once(Kernels::reference); }

TEST(BFloat16, PrintsAsPyTorch) {
  std::ifstream in = open_fixture("print.txt");
  std::string line;
  int cases = 0;
  while (std::getline(in, line)) {
    if (line.rfind("case ", 0) != 0) continue;
    const std::string name = line.substr(5);
    std::getline(in, line);
    const FixtureTensor t = parse_tensor(line);
    std::getline(in, line);
    const bool grad = line == "grad 1";
    std::getline(in, line);
    const int n = std::stoi(line.substr(9));
    std::string expected;
    for (int i = 0; i < n; ++i) {
      std::getline(in, line);
      expected += (i ? "\n" : "") + line;
    }
    Tensor x = from_bits(t.shape, t.values);
    if (grad) x.requires_grad_();
    std::ostringstream got;
    got << x;
    EXPECT_EQ(got.str(), expected) << name;
    ++cases;
  }
  EXPECT_EQ(cases, 9);
}

// The widening reads views (strides, offsets, broadcasts) and writes into them, in place too.
TEST(BFloat16, ViewsAndInPlaceWrites) {
  const Tensor a = arange(0.0, 12.0, 1.0, DType::Float32).reshape({3, 4});
  const Tensor b = a.to(DType::BFloat16);
  EXPECT_TRUE(equal(b.t().contiguous().to(DType::Float32), a.t().contiguous()));
  EXPECT_TRUE(equal((b.t() * 2.0).to(DType::Float32), a.t() * 2.0));
  Tensor c = zeros({3, 4}, DType::BFloat16);
  {
    NoGradGuard no_grad;
    c.narrow(1, 1, 2).copy_(b.narrow(1, 0, 2));
    c.add_(ones({4}, DType::BFloat16));
  }
  EXPECT_EQ(c.to(DType::Float32).to_vector<float>(),
            (std::vector<float>{1, 1, 2, 1, 1, 5, 6, 1, 1, 9, 10, 1}));
}

// Gradients flow through bfloat16 tensors (each gradient bfloat16 too) and through the conversions.
TEST(BFloat16, GradientsThroughConversion) {
  Tensor x = tensor({1.5, -2.0, 0.25}).requires_grad_();
  Tensor y = (x.to(DType::BFloat16) * 3.0).sum();
  EXPECT_EQ(y.dtype(), DType::BFloat16);
  y.backward();
  EXPECT_EQ(x.grad().dtype(), DType::Float32);
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{3, 3, 3}));
}

TEST(BFloat16, KernelsNeverSeeItUnwidened) {
  EXPECT_THROW(dispatch(DType::BFloat16, [](auto) { return 0; }), std::logic_error);
}

TEST(BFloat16, SafetensorsKeepsTheBits) {
  const std::string path = (std::filesystem::temp_directory_path() / "scratchgrad_bf16_test.safetensors").string();
  const Tensor w = from_bits({2, 3}, {0x3f80, 0xc000, 0x7f80, 0xffff, 0x0001, 0x4049});
  nn::save_safetensors(path, {{"w", w}});
  // The header says BF16, and the 12 data bytes are the tensor's own.
  std::ifstream in(path, std::ios::binary);
  uint64_t header_length = 0;
  in.read(reinterpret_cast<char*>(&header_length), 8);
  std::string header(header_length, ' ');
  in.read(header.data(), std::streamsize(header_length));
  EXPECT_NE(header.find("\"dtype\":\"BF16\""), std::string::npos) << header;
  const nn::Checkpoint loaded = nn::load_safetensors(path);
  ASSERT_EQ(loaded.tensors.size(), 1u);
  EXPECT_EQ(loaded.tensors[0].second.dtype(), DType::BFloat16);
  EXPECT_EQ(bits_of(loaded.tensors[0].second), bits_of(w));
  std::filesystem::remove(path);
}

}  // namespace
