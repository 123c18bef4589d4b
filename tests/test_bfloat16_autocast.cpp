// test_bfloat16_autocast.cpp — AutocastGuard(DType::BFloat16) against PyTorch 1.13's
// torch.autocast("cpu", dtype=torch.bfloat16) (fixtures/bf16/autocast.txt, make_bf16_fixtures.py).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/autograd.h"
#include "nn/gpt.h"

#ifndef SCRATCHGRAD_SOURCE_DIR
#define SCRATCHGRAD_SOURCE_DIR "/work/main"
#endif

namespace {

using namespace autograd;

// The fixture's tensors by name ("tensor"/"itensor" lines), its losses and its config line.
struct Fixture {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, double> numbers;
  std::map<std::string, std::string> config;
};

const Fixture& fixture() {
  static const Fixture f = [] {
    Fixture out;
    std::ifstream in(std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/reference/fixtures/bf16/autocast.txt");
    if (!in) throw std::runtime_error("cannot open fixtures/bf16/autocast.txt");
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream words(line);
      std::string kind, name;
      words >> kind;
      if (kind == "tensor" || kind == "itensor") {
        int64_t dims = 0;
        words >> name >> dims;
        Shape shape(static_cast<size_t>(dims));
        for (int64_t& d : shape) words >> d;
        std::vector<double> values;
        std::string v;
        while (words >> v) values.push_back(std::strtod(v.c_str(), nullptr));
        out.tensors[name] = from_vector(values, shape, kind == "tensor" ? DType::Float32 : DType::Int64);
      } else if (kind.rfind("loss.", 0) == 0) {
        std::string v;
        words >> v;
        out.numbers[kind] = std::strtod(v.c_str(), nullptr);
      } else if (kind == "config") {
        std::string key, value;
        while (words >> key >> value) out.config[key] = value;
      }
    }
    return out;
  }();
  return f;
}

const Tensor& get(const std::string& name) {
  auto it = fixture().tensors.find(name);
  if (it == fixture().tensors.end()) throw std::runtime_error("autocast.txt has no tensor " + name);
  return it->second;
}

// How many entries differ, and whether each is within one bfloat16 step (2⁻⁷ of its magnitude) of PyTorch's.
void expect_within_one_bf16_step(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const std::vector<float> g = got.to_vector<float>(), w = want.to_vector<float>();
  int differ = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    differ += g[i] != w[i];
    EXPECT_LE(std::fabs(g[i] - w[i]), std::ldexp(std::fabs(w[i]), -7)) << what << " entry " << i;
  }
  // the sums are added in another order than PyTorch's, which moves a rounding now and then, rarely
  EXPECT_LE(differ, int(g.size()) / 10 + 1) << what << ": entries not bit-equal to PyTorch's";
}

// A Linear under autocast: bfloat16 operands and bias, float32 sums, the output rounded to bfloat16 (PyTorch's
// autocast output, bit for bit here); its gradients' products the same, against the fixture's float32-sum
// gradients (Debian's PyTorch adds some bfloat16 products into bfloat16 sums: make_bf16_fixtures.py).
TEST(Autocast, LinearMatchesPyTorch) {
  Tensor x = get("x").clone().requires_grad_(), weight = get("weight").clone().requires_grad_();
  Tensor bias = get("bias").clone().requires_grad_();
  Tensor y;
  {
    AutocastGuard bf16(DType::BFloat16);
    y = linear(x, weight, bias);
  }
  EXPECT_EQ(y.dtype(), DType::Float32);  // handed on widened; its values are bfloat16 numbers
  EXPECT_TRUE(equal(y, y.to(DType::BFloat16).to(DType::Float32)));
  expect_within_one_bf16_step(y, get("y"), "y");
  (y * get("c")).sum().backward();
  expect_within_one_bf16_step(weight.grad(), get("grad.weight"), "grad.weight");
  expect_within_one_bf16_step(bias.grad(), get("grad.bias"), "grad.bias");
  expect_within_one_bf16_step(x.grad(), get("grad.x"), "grad.x");
  EXPECT_EQ(weight.grad().dtype(), DType::Float32);  // master weights keep float32 gradients
}

TEST(Autocast, GuardNestsAndRefusesOtherDtypes) {
  EXPECT_EQ(autocast_dtype(), DType::Float32);
  {
    AutocastGuard on(DType::BFloat16);
    EXPECT_EQ(autocast_dtype(), DType::BFloat16);
    {
      AutocastGuard off(DType::Float32);
      EXPECT_EQ(autocast_dtype(), DType::Float32);
      const Tensor a = tensor({{1.0, 1.0 / 512}});
      EXPECT_EQ(matmul(a, tensor({{1.0}, {1.0}})).item(), 1.0 + 1.0 / 512);  // float32: nothing rounded
    }
    const Tensor a = tensor({{1.0, 1.0 / 512}});
    EXPECT_EQ(matmul(a, tensor({{1.0}, {1.0}})).item(), 1.0);  // 1 + 2⁻⁹ is no bfloat16 number: rounded
    // float64 operands are left alone, as PyTorch's autocast leaves them
    EXPECT_EQ(matmul(a.to(DType::Float64), tensor({{1.0}, {1.0}}, DType::Float64)).item(), 1.0 + 1.0 / 512);
  }
  EXPECT_EQ(autocast_dtype(), DType::Float32);
  EXPECT_THROW(AutocastGuard(DType::Float64), std::invalid_argument);
}

nn::GPTConfig fixture_config() {
  auto value = [](const std::string& key) { return fixture().config.at(key); };
  return nn::GPTConfig{std::stoll(value("vocab_size")), std::stoll(value("context_length")),
                       std::stoll(value("emb_dim")),    std::stoll(value("n_heads")),
                       std::stoll(value("n_layers")),   std::stod(value("drop_rate")),
                       value("qkv_bias") == "1"};
}

double norm(const Tensor& t) { return std::sqrt((t.to(DType::Float64) * t.to(DType::Float64)).sum().item()); }
double distance(const Tensor& a, const Tensor& b) { return norm(a.to(DType::Float64) - b.to(DType::Float64)); }

// The loss and every gradient of one step of the fixture's GPT on its batch, under autocast or not.
std::pair<double, std::map<std::string, Tensor>> gpt_step(bool autocast) {
  manual_seed(123);
  nn::GPTModel model(fixture_config());
  Tensor loss;
  {
    AutocastGuard guard(autocast ? DType::BFloat16 : DType::Float32);
    const Tensor logits = model.forward(get("xb"));
    EXPECT_EQ(logits.dtype(), DType::Float32);  // the head's product, widened: the loss runs in float32
    loss = cross_entropy(logits.reshape({-1, logits.size(-1)}), get("yb").reshape({-1}));
  }
  loss.backward();  // outside the guard, as PyTorch's recipe has it: the graph carries the rule
  std::map<std::string, Tensor> grads;
  for (const auto& [name, p] : model.named_parameters()) grads[name] = p.grad();
  return {loss.item(), grads};
}

// A GPT step under autocast against PyTorch's. Where a step rounds differs a little from PyTorch 1.13's
// (its LayerNorm, softmax and GELU outputs are bfloat16 under autocast, ours float32: autocast.h), so the
// bits cannot agree; the tolerance is PyTorch's own: each gradient is as close to PyTorch's bfloat16
// gradient as that is to PyTorch's float32 one (times 2: two independent sets of bfloat16 roundings),
// while our float32 step matches PyTorch's float32 step to float32 precision, and our bfloat16 step is
// measurably away from our float32 one (the rounding did happen).
TEST(Autocast, GptStepWithinPyTorchsOwnBf16Distance) {
  const auto [loss_bf16, grads_bf16] = gpt_step(true);
  const auto [loss_f32, grads_f32] = gpt_step(false);
  const double torch_bf16 = fixture().numbers.at("loss.bf16"), torch_f32 = fixture().numbers.at("loss.f32");
  EXPECT_NEAR(loss_f32, torch_f32, 1e-5 * torch_f32);
  // one number, not a norm over many: two independent sets of roundings can both land on the same side
  EXPECT_NEAR(loss_bf16, torch_bf16, 4 * std::fabs(torch_bf16 - torch_f32) + 1e-6);
  for (const auto& [name, g] : grads_bf16) {
    SCOPED_TRACE(name);
    const Tensor& want_bf16 = get("bf16." + name);
    const Tensor& want_f32 = get("f32." + name);
    const double pytorch_spread = distance(want_bf16, want_f32);
    EXPECT_LE(distance(grads_f32.at(name), want_f32), 1e-4 * norm(want_f32));
    EXPECT_LE(distance(g, want_bf16), 2 * pytorch_spread + 1e-6 * norm(want_f32));
    EXPECT_GT(distance(g, grads_f32.at(name)), 0.1 * pytorch_spread);
  }
}

}  // namespace
