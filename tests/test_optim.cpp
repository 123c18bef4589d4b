// test_optim.cpp — SGD, Adam and AdamW against PyTorch 1.13 (tests/reference/make_optim_fixtures.py),
// plus the Optimizer base: param groups, state_dict round trips, and the argument checks.
//
// Each fixture file is one optimizer configuration run for 20 steps on the same small model:
//   Sequential(Linear(4, 3), Tanh(), Linear(3, 2)),  loss = ((model(x) − target)²).mean()
// written twice, by torch's portable kernels (default/) and its AVX2 kernels (avx2/). Two checks per file:
//   * Training: start from the fixture's initial parameters and run the 20 steps here (forward,
//     backward, step). Loss and parameters must stay within 1e-6 relative of the default set at every step.
//   * One update: put the fixture's parameters, gradients and optimizer state of step k−1 in place and
//     take step k. This isolates the optimizer's arithmetic from the forward and backward kernels, and it
//     must give the default set's parameters and state bit for bit (the formulas of the fixtures' README,
//     rounded as torch's portable kernels round); the avx2 set, whose kernels fuse a + α·b, within 1e-6
//     of each tensor's largest value.
// Both print how many steps equal each set bit for bit.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "nn/nn.h"
#include "nn/safetensors.h"
#include "optim/optim.h"
#include "test_helpers.h"

using namespace autograd;

namespace {

const std::string kFixtures = std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/reference/fixtures/optim/";
const std::vector<std::string> kConfigurations = {
    "sgd",     "sgd_momentum", "sgd_nesterov_wd", "sgd_momentum_dampening", "adam",
    "adam_wd", "adam_amsgrad", "adamw",           "adam_betas_eps"};
const std::vector<std::string> kParams = {"0.weight", "0.bias", "2.weight", "2.bias"};

// ---------------------------------------------------------------- the fixture (format: fixtures/optim/README.md)

struct Recorded {
  Shape shape;
  std::vector<double> values;  // float32 values, exact in double
  Tensor tensor() const { return from_vector(values, shape, DType::Float32); }
};

struct Fixture {
  std::string optimizer;               // SGD | Adam | AdamW
  std::map<std::string, double> config;  // lr, momentum, ... as written
  Recorded x, target;
  std::map<std::string, Recorded> init;
  struct Step {
    double loss = 0;                           // from the parameters before the step
    std::map<std::string, Recorded> tensors;   // grad.<p>, <p> (after the step), state.<p>.<key>
  };
  std::vector<Step> steps;  // steps[k − 1] is step k
  double final_loss = 0;
};

Fixture read_fixture(const std::string& path) {
  std::ifstream file(path);
  if (!file) throw std::runtime_error("cannot open fixture " + path);
  Fixture f;
  std::map<std::string, Recorded>* into = nullptr;
  for (std::string line; std::getline(file, line);) {
    std::istringstream words(line);
    std::string kind;
    words >> kind;
    if (kind == "config") {
      words >> f.optimizer;
      for (std::string key, value; words >> key >> value;) f.config[key] = std::stod(value);
    } else if (kind == "init") {
      into = &f.init;
    } else if (kind == "step") {
      std::string k, word, loss;
      words >> k >> word >> loss;
      f.steps.emplace_back();
      f.steps.back().loss = std::strtod(loss.c_str(), nullptr);
      into = &f.steps.back().tensors;
    } else if (kind == "final") {
      std::string word, loss;
      words >> word >> loss;
      f.final_loss = std::strtod(loss.c_str(), nullptr);
    } else if (kind == "tensor") {
      std::string name;
      int64_t ndim = 0;
      words >> name >> ndim;
      Recorded r;
      r.shape.resize(size_t(ndim));
      for (int64_t& d : r.shape) words >> d;
      for (std::string v; words >> v;) r.values.push_back(std::strtod(v.c_str(), nullptr));  // hex floats
      if (name == "x") f.x = r;
      else if (name == "target") f.target = r;
      else into->emplace(name, r);
    }
  }
  if (f.steps.size() != 20) throw std::runtime_error(path + ": expected 20 steps");
  return f;
}

// ---------------------------------------------------------------- the model: torch's Sequential, same names

// Sequential(Linear(4, 3), Tanh(), Linear(3, 2)): the Tanh at index 1 has no parameters, so the names
// are 0.weight, 0.bias, 2.weight, 2.bias, as in torch.
struct TinyNet : nn::Module {
  std::shared_ptr<nn::Linear> first = register_module("0", std::make_shared<nn::Linear>(4, 3));
  std::shared_ptr<nn::Linear> second = register_module("2", std::make_shared<nn::Linear>(3, 2));
  Tensor operator()(const Tensor& x) const { return (*second)(tanh((*first)(x))); }
};

Tensor loss_of(const TinyNet& model, const Tensor& x, const Tensor& target) {
  return (model(x) - target).pow(2.0).mean();
}

void load_parameters(TinyNet& model, const std::map<std::string, Recorded>& values, const std::string& prefix = "") {
  nn::NamedTensors state;
  for (const std::string& p : kParams) state.emplace_back(p, values.at(prefix + p).tensor());
  model.load_state_dict(state);
}

std::unique_ptr<optim::Optimizer> make_optimizer(const Fixture& f, std::vector<Tensor> params) {
  auto c = [&](const char* key) { return f.config.at(key); };
  if (f.optimizer == "SGD")
    return std::make_unique<optim::SGD>(params, optim::SGD::Options{.lr = c("lr"),
                                                                    .momentum = c("momentum"),
                                                                    .dampening = c("dampening"),
                                                                    .weight_decay = c("weight_decay"),
                                                                    .nesterov = c("nesterov") != 0});
  if (f.optimizer == "Adam")
    return std::make_unique<optim::Adam>(params, optim::Adam::Options{.lr = c("lr"),
                                                                      .beta1 = c("beta1"),
                                                                      .beta2 = c("beta2"),
                                                                      .eps = c("eps"),
                                                                      .weight_decay = c("weight_decay"),
                                                                      .amsgrad = c("amsgrad") != 0});
  if (f.optimizer == "AdamW")
    return std::make_unique<optim::AdamW>(params, optim::AdamW::Options{.lr = c("lr"),
                                                                        .beta1 = c("beta1"),
                                                                        .beta2 = c("beta2"),
                                                                        .eps = c("eps"),
                                                                        .weight_decay = c("weight_decay"),
                                                                        .amsgrad = c("amsgrad") != 0});
  throw std::runtime_error("unknown optimizer " + f.optimizer);
}

// ---------------------------------------------------------------- comparing

// max over elements of |got − want| / |want| (an exact zero must stay zero)
double rel_error(const std::vector<double>& got, const std::vector<double>& want) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = std::abs(got[i] - want[i]);
    worst = std::max(worst, want[i] == 0 ? (d == 0 ? 0.0 : INFINITY) : d / std::abs(want[i]));
  }
  return worst;
}

// max |got − want| over the elements, relative to the largest |want| (for values that cancel to near 0)
double scaled_error(const Tensor& got, const Tensor& want) {
  std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  double worst = 0, scale = 0;
  for (size_t i = 0; i < g.size(); ++i)
    worst = std::max(worst, std::abs(g[i] - w[i])), scale = std::max(scale, std::abs(w[i]));
  return scale == 0 ? worst : worst / scale;
}

bool bit_equal(const Tensor& t, const Recorded& r) {
  std::vector<float> got = t.to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != float(r.values[i])) return false;
  return true;
}

// The optimizer's own state of step k, as state_dict keys: the fixture's "state.0.weight.exp_avg" is
// "state.<index of 0.weight>.exp_avg" here. Adam's `step` is not recorded by the fixture: it is k.
nn::NamedTensors optimizer_state(const Fixture& f, size_t k) {
  nn::NamedTensors state;
  for (size_t i = 0; i < kParams.size(); ++i) {
    for (const auto& [name, r] : f.steps[k - 1].tensors) {
      const std::string prefix = "state." + kParams[i] + ".";
      if (name.rfind(prefix, 0) == 0)
        state.emplace_back("state." + std::to_string(i) + "." + name.substr(prefix.size()), r.tensor());
    }
    if (f.optimizer != "SGD")
      state.emplace_back("state." + std::to_string(i) + ".step", scalar_tensor(double(k), DType::Float64));
  }
  return state;
}

// ================================================================ the nine configurations

class OptimizerFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(OptimizerFixture, TwentyTrainingStepsMatchPyTorch) {
  const Fixture portable = read_fixture(kFixtures + "default/" + GetParam() + ".txt");
  const Fixture avx2 = read_fixture(kFixtures + "avx2/" + GetParam() + ".txt");
  ASSERT_EQ(portable.config, avx2.config);

  TinyNet model;
  load_parameters(model, portable.init);
  std::unique_ptr<optim::Optimizer> opt = make_optimizer(portable, model.parameters());
  const Tensor x = portable.x.tensor(), target = portable.target.tensor();

  int same_as_default = 0, same_as_avx2 = 0;
  double worst_vs_default = 0;
  for (size_t k = 1; k <= 20; ++k) {
    SCOPED_TRACE("step " + std::to_string(k));
    const Fixture::Step& want = portable.steps[k - 1];
    Tensor loss = loss_of(model, x, target);
    EXPECT_LE(rel_error({loss.item()}, {want.loss}), 1e-6) << loss.item() << " vs " << want.loss;
    opt->zero_grad();
    loss.backward();
    opt->step();

    bool bits_default = true, bits_avx2 = true;
    for (const auto& [name, value] : model.named_parameters()) {
      const double error = rel_error(value.to_vector<double>(), want.tensors.at(name).values);
      EXPECT_LE(error, 1e-6) << name;
      worst_vs_default = std::max(worst_vs_default, error);
      bits_default = bits_default && bit_equal(value, want.tensors.at(name));
      bits_avx2 = bits_avx2 && bit_equal(value, avx2.steps[k - 1].tensors.at(name));
    }
    same_as_default += bits_default;
    same_as_avx2 += bits_avx2;
  }
  EXPECT_LE(rel_error({loss_of(model, x, target).item()}, {portable.final_loss}), 1e-6);
  std::printf("[ info     ] %s: 20 training steps, largest relative error %.2g; parameters bit for bit equal to "
              "default/ after %d steps, to avx2/ after %d\n",
              GetParam().c_str(), worst_vs_default, same_as_default, same_as_avx2);
}

// Step k alone: the parameters, gradients and optimizer state PyTorch recorded before it are put in
// place, then our optimizer takes the step. With the forward and backward out of the way, this is the
// update's arithmetic only: the default set's formulas (fixtures/optim/README.md) are reproduced bit for
// bit; the avx2 set fuses a + alpha·b and so lands an ulp or so away in most steps.
TEST_P(OptimizerFixture, OneUpdateFromTheRecordedStateIsBitExact) {
  for (const std::string set : {"default", "avx2"}) {
    SCOPED_TRACE(set);
    const Fixture f = read_fixture(kFixtures + set + "/" + GetParam() + ".txt");
    int exact = 0;
    for (size_t k = 1; k <= 20; ++k) {
      SCOPED_TRACE("step " + std::to_string(k));
      TinyNet model;
      load_parameters(model, k == 1 ? f.init : f.steps[k - 2].tensors);
      std::unique_ptr<optim::Optimizer> opt = make_optimizer(f, model.parameters());
      if (k > 1) opt->load_state_dict(optimizer_state(f, k - 1));
      for (const auto& [name, p] : model.named_parameters())
        p.set_grad(f.steps[k - 1].tensors.at("grad." + name).tensor());
      opt->step();

      // the parameters after the step, then the optimizer's state (momentum buffer, moments, running max)
      nn::NamedTensors got = model.named_parameters(), want;
      for (const auto& [name, p] : got) want.emplace_back(name, f.steps[k - 1].tensors.at(name).tensor());
      const nn::NamedTensors state = opt->state_dict();
      for (const auto& [key, t] : optimizer_state(f, k)) {
        if (key.ends_with(".step")) continue;
        auto it = std::find_if(state.begin(), state.end(), [&](const auto& e) { return e.first == key; });
        ASSERT_NE(it, state.end()) << "optimizer has no state " << key;
        got.push_back(*it);
        want.emplace_back(key, t);
      }
      bool all_bits = true;
      for (size_t i = 0; i < got.size(); ++i) {
        const bool bits = equal(got[i].second, want[i].second);
        if (set == "default")
          EXPECT_TRUE(bits) << got[i].first << " is " << got[i].second << ", PyTorch has " << want[i].second;
        else EXPECT_LE(scaled_error(got[i].second, want[i].second), 1e-6) << got[i].first;
        all_bits = all_bits && bits;
      }
      exact += all_bits;
    }
    std::printf("[ info     ] %s: one update from the recorded state, bit for bit equal to %s/ at %d of 20 steps\n",
                GetParam().c_str(), set.c_str(), exact);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, OptimizerFixture, ::testing::ValuesIn(kConfigurations),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// ================================================================ the Optimizer base

std::vector<Tensor> snapshot(const nn::Module& m) {
  std::vector<Tensor> out;
  for (const Tensor& p : m.parameters()) out.push_back(p.detach().clone());
  return out;
}

void train(TinyNet& model, optim::Optimizer& opt, int steps) {
  const Tensor x = testing_helpers::randish({5, 4}, 11, -1, 1, DType::Float32);
  const Tensor target = testing_helpers::randish({5, 2}, 12, -1, 1, DType::Float32);
  for (int i = 0; i < steps; ++i) {
    Tensor loss = loss_of(model, x, target);
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
}

// A checkpoint as a file holds it: the model's and the optimizer's state_dict written with
// nn::save_safetensors and read back (state_dict() hands out the live tensors; the file has copies).
nn::NamedTensors through_file(const nn::NamedTensors& state, const std::string& name) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()) + ".safetensors");
  nn::save_safetensors(path.string(), state);
  nn::NamedTensors loaded = nn::load_safetensors(path.string()).tensors;
  std::filesystem::remove(path);
  return loaded;
}

TEST(Optimizer, ResumingFromACheckpointContinuesTrainingIdentically) {
  using Make = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>, double lr)>;
  const std::vector<std::pair<std::string, Make>> optimizers = {
      {"SGD",
       [](auto p, double lr) {
         return std::make_unique<optim::SGD>(p, optim::SGD::Options{.lr = lr, .momentum = 0.9, .nesterov = true});
       }},
      {"Adam",
       [](auto p, double lr) {
         return std::make_unique<optim::Adam>(p, optim::Adam::Options{.lr = lr, .weight_decay = 0.01});
       }},
      {"AMSGrad",
       [](auto p, double lr) {
         return std::make_unique<optim::Adam>(p, optim::Adam::Options{.lr = lr, .amsgrad = true});
       }},
      {"AdamW", [](auto p, double lr) { return std::make_unique<optim::AdamW>(p, optim::AdamW::Options{.lr = lr}); }},
  };
  for (const auto& [label, make] : optimizers) {
    SCOPED_TRACE(label);
    manual_seed(0);
    TinyNet model;
    std::unique_ptr<optim::Optimizer> opt = make(model.parameters(), 0.01);
    train(model, *opt, 5);
    const nn::NamedTensors model_state = through_file(model.state_dict(), "model");
    const nn::NamedTensors opt_state = through_file(opt->state_dict(), "optimizer");
    train(model, *opt, 5);  // the original run goes on

    manual_seed(1);  // other initial weights: the checkpoint overwrites them
    TinyNet resumed;
    std::unique_ptr<optim::Optimizer> resumed_opt =
        make(resumed.parameters(), 0.5);  // lr too comes from the checkpoint
    resumed.load_state_dict(model_state);
    resumed_opt->load_state_dict(opt_state);
    EXPECT_EQ(resumed_opt->param_groups()[0].get("lr"), 0.01);
    train(resumed, *resumed_opt, 5);

    std::vector<Tensor> a = snapshot(model), b = snapshot(resumed);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(equal(a[i], b[i])) << kParams[i];
  }
}

TEST(Optimizer, StateDictKeys) {
  TinyNet model;
  optim::Adam opt(model.parameters(), {.lr = 0.01, .amsgrad = true});
  std::vector<std::string> keys;
  for (auto& [key, t] : opt.state_dict()) keys.push_back(key);
  EXPECT_EQ(keys.size(), 6u);  // no state before the first step, only the group's options
  EXPECT_NE(std::find(keys.begin(), keys.end(), "param_groups.0.lr"), keys.end());
  train(model, opt, 3);
  nn::NamedTensors state = opt.state_dict();
  auto find = [&](const std::string& key) {
    auto it = std::find_if(state.begin(), state.end(), [&](const auto& e) { return e.first == key; });
    return it == state.end() ? Tensor() : it->second;
  };
  for (int i = 0; i < 4; ++i) {
    const std::string p = "state." + std::to_string(i) + ".";
    ASSERT_TRUE(find(p + "step").defined()) << p;
    EXPECT_EQ(find(p + "step").item(), 3.0);
    for (const char* key : {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"})
      EXPECT_EQ(find(p + key).shape(), model.parameters()[size_t(i)].shape()) << p << key;
  }
  EXPECT_EQ(find("param_groups.0.beta2").item(), 0.999);
  EXPECT_EQ(find("param_groups.0.amsgrad").item(), 1.0);

  EXPECT_THROW_WITH(opt.load_state_dict({{"state.4.exp_avg", zeros({2})}}), std::invalid_argument, "state.4.exp_avg",
                    "parameter 4");
  EXPECT_THROW_WITH(opt.load_state_dict({{"param_groups.1.lr", scalar_tensor(0.1)}}), std::invalid_argument,
                    "param_groups.1.lr");
  EXPECT_THROW_WITH(opt.load_state_dict({{"momentum", scalar_tensor(0.1)}}), std::invalid_argument, "momentum");
  // per-element state must fit its parameter (0.weight is [3, 4]); the update loop would run off its end
  EXPECT_THROW_WITH(opt.load_state_dict({{"state.0.exp_avg", zeros({4, 3})}}), std::invalid_argument,
                    "'state.0.exp_avg'", "[4, 3]", "parameter 0", "[3, 4]");

  // state saved in another dtype is stored in the parameter's dtype, as torch's load_state_dict casts it
  opt.load_state_dict({{"state.0.step", scalar_tensor(1, DType::Float64)},
                       {"state.0.exp_avg", ones({3, 4}, DType::Float64)},
                       {"state.0.exp_avg_sq", ones({3, 4}, DType::Float64)},
                       {"state.0.max_exp_avg_sq", ones({3, 4}, DType::Float64)}});
  state = opt.state_dict();
  EXPECT_EQ(find("state.0.exp_avg").dtype(), DType::Float32);
  EXPECT_FALSE(find("state.1.exp_avg").defined());  // loading replaces the whole state
  train(model, opt, 1);
  state = opt.state_dict();
  EXPECT_EQ(find("state.0.step").item(), 2.0);
  EXPECT_EQ(find("state.1.step").item(), 1.0);
}

TEST(Optimizer, ParamGroupsOverrideTheDefaults) {
  manual_seed(0);
  TinyNet model;
  optim::SGD opt(model.first->parameters(), {.lr = 0.1, .momentum = 0.9});
  opt.add_param_group(model.second->parameters(), {{"lr", 0.5}});
  ASSERT_EQ(opt.param_groups().size(), 2u);
  EXPECT_EQ(opt.param_groups()[0].get("lr"), 0.1);
  EXPECT_EQ(opt.param_groups()[1].get("lr"), 0.5);
  EXPECT_EQ(opt.param_groups()[1].get("momentum"), 0.9);  // not overridden: the default

  // first step with momentum: buffer = gradient, p ← p − lr·g, each group with its own lr
  std::vector<Tensor> before = snapshot(model);
  Tensor x = testing_helpers::randish({5, 4}, 1, -1, 1, DType::Float32);
  Tensor loss = loss_of(model, x, zeros({5, 2}));
  loss.backward();
  std::vector<Tensor> grads;
  for (const Tensor& p : model.parameters()) grads.push_back(p.grad().clone());
  opt.step();
  const std::vector<double> lr = {0.1, 0.1, 0.5, 0.5};
  std::vector<Tensor> params = model.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    std::vector<double> got = params[i].to_vector<double>(), p0 = before[i].to_vector<double>(),
                        g = grads[i].to_vector<double>();
    for (size_t e = 0; e < got.size(); ++e) EXPECT_NEAR(got[e], p0[e] - lr[i] * g[e], 1e-7) << kParams[i];
  }
  // state indices count across groups, as in torch
  std::vector<std::string> keys;
  for (auto& [key, t] : opt.state_dict()) keys.push_back(key);
  EXPECT_NE(std::find(keys.begin(), keys.end(), "state.3.momentum_buffer"), keys.end());
  EXPECT_NE(std::find(keys.begin(), keys.end(), "param_groups.1.lr"), keys.end());

  // changing a group's lr between steps takes effect at the next step
  opt.param_groups()[1].options["lr"] = 0.0;
  opt.param_groups()[1].options["momentum"] = 0.0;
  std::vector<Tensor> frozen = snapshot(*model.second);
  opt.zero_grad();
  loss_of(model, x, zeros({5, 2})).backward();
  opt.step();
  EXPECT_TRUE(equal(model.second->weight, frozen[0]));
  EXPECT_FALSE(equal(model.first->weight, before[0]));

  EXPECT_THROW_WITH(opt.add_param_group(model.first->parameters(), {{"betas", 0.5}}), std::invalid_argument, "betas");
}

TEST(Optimizer, ZeroGradSetsGradientsToNone) {
  TinyNet model;
  optim::SGD opt(model.parameters(), {.lr = 0.1});
  loss_of(model, ones({1, 4}), zeros({1, 2})).backward();
  for (const Tensor& p : model.parameters()) ASSERT_TRUE(p.grad().defined());
  opt.zero_grad();
  for (const Tensor& p : model.parameters()) EXPECT_FALSE(p.grad().defined());
  std::vector<Tensor> before = snapshot(model);
  opt.step();  // parameters without a gradient are skipped
  std::vector<Tensor> after = snapshot(model);
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(equal(before[i], after[i]));
}

// The trainer clips inside the update: clip_coefficient, then step(coefficient). That must be
// clip_grad_norm_ then step(), bit for bit, in the parameters and in both moments, over several steps, for
// Adam with L2 decay and amsgrad and for AdamW, in float and double; the gradients keep their values, and a
// coefficient of 1 (the norm within max_norm) is a plain step.
TEST(Optimizer, StepWithTheClipCoefficientIsClipThenStep) {
  for (DType dtype : {DType::Float32, DType::Float64})
    for (bool decoupled : {false, true})
      for (double max_norm : {0.05, 1e6}) {
        const std::string label = fmt::format("{} {} max_norm {}", dtype_name(dtype), decoupled ? "AdamW" : "Adam",
                                              max_norm);
        auto make = [&] {
          manual_seed(7);
          return std::vector<Tensor>{randn({6, 5}).to(dtype).requires_grad_(), randn({5}).to(dtype).requires_grad_()};
        };
        std::vector<Tensor> clipped = make(), fused = make();
        std::unique_ptr<optim::Adam> a, b;
        if (decoupled) {
          a = std::make_unique<optim::AdamW>(clipped, optim::AdamW::Options{.lr = 0.01, .weight_decay = 0.1});
          b = std::make_unique<optim::AdamW>(fused, optim::AdamW::Options{.lr = 0.01, .weight_decay = 0.1});
        } else {
          a = std::make_unique<optim::Adam>(clipped, optim::Adam::Options{.lr = 0.01, .weight_decay = 0.1, .amsgrad = true});
          b = std::make_unique<optim::Adam>(fused, optim::Adam::Options{.lr = 0.01, .weight_decay = 0.1, .amsgrad = true});
        }
        for (int step = 0; step < 3; ++step) {
          manual_seed(100 + uint64_t(step));
          for (size_t i = 0; i < clipped.size(); ++i) {
            const Tensor g = randn(clipped[i].shape()).to(dtype);
            clipped[i].set_grad(g.clone());
            fused[i].set_grad(g.clone());
          }
          const Tensor norm = optim::clip_grad_norm_(clipped, max_norm);
          a->step();
          const std::vector<Tensor> grads_before = {fused[0].grad().clone(), fused[1].grad().clone()};
          const optim::ClipCoefficient clip = optim::clip_coefficient(fused, max_norm);
          EXPECT_EQ(clip.coefficient == 1.0, max_norm > 1) << label;
          testing_helpers::expect_same_float_bits(clip.total_norm, norm, label + " the norm");
          b->step(clip.coefficient);
          for (size_t i = 0; i < clipped.size(); ++i) {
            const std::string at = fmt::format("{}, step {}, parameter {}", label, step, i);
            testing_helpers::expect_same_float_bits(fused[i].detach(), clipped[i].detach(), at);
            testing_helpers::expect_same_float_bits(fused[i].grad(), grads_before[i], at + ": the gradient is left as it was");
          }
        }
        const auto state_a = a->state_dict(), state_b = b->state_dict();
        ASSERT_EQ(state_a.size(), state_b.size()) << label;
        for (size_t i = 0; i < state_a.size(); ++i) {
          EXPECT_EQ(state_b[i].first, state_a[i].first) << label;
          testing_helpers::expect_same_float_bits(state_b[i].second, state_a[i].second, label + " " + state_a[i].first);
        }
      }
}

TEST(Optimizer, ClipCoefficientRefusesGradientsOfTwoTypes) {
  Tensor a = zeros({2}).requires_grad_(), b = zeros({2}, DType::Float64).requires_grad_();
  a.set_grad(ones({2}));
  b.set_grad(ones({2}, DType::Float64));
  EXPECT_THROW_WITH(optim::clip_coefficient({a, b}, 1.0), std::invalid_argument, "clip_coefficient", "float32",
                    "float64");
  const optim::ClipCoefficient none = optim::clip_coefficient({zeros({2}).requires_grad_()}, 1.0);
  EXPECT_EQ(none.coefficient, 1.0);
  EXPECT_EQ(none.total_norm.item(), 0.0);
}

TEST(Optimizer, RefusesBadArguments) {
  TinyNet model;
  std::vector<Tensor> params = model.parameters();
  EXPECT_THROW_WITH(optim::SGD(params, {.lr = -0.1}), std::invalid_argument, "learning rate", "-0.1");
  EXPECT_THROW_WITH(optim::Adam(params, {.lr = -1}), std::invalid_argument, "learning rate", "-1");
  EXPECT_THROW_WITH(optim::AdamW(params, {.lr = -1}), std::invalid_argument, "learning rate");
  EXPECT_THROW_WITH(optim::SGD(params, {.lr = 0.1, .momentum = -0.5}), std::invalid_argument, "momentum", "-0.5");
  EXPECT_THROW_WITH(optim::SGD(params, {.lr = 0.1, .weight_decay = -1}), std::invalid_argument, "weight_decay");
  EXPECT_THROW_WITH(optim::SGD(params, {.lr = 0.1, .nesterov = true}), std::invalid_argument, "Nesterov");
  EXPECT_THROW_WITH(optim::SGD(params, {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .nesterov = true}),
                    std::invalid_argument, "Nesterov", "zero dampening");
  EXPECT_THROW_WITH(optim::Adam(params, {.beta1 = 1.0}), std::invalid_argument, "betas (1, 0.999)");
  EXPECT_THROW_WITH(optim::Adam(params, {.beta2 = -0.1}), std::invalid_argument, "betas (0.9, -0.1)");
  EXPECT_THROW_WITH(optim::AdamW(params, {.beta1 = 1.5}), std::invalid_argument, "betas");
  EXPECT_THROW_WITH(optim::Adam(params, {.eps = -1e-8}), std::invalid_argument, "epsilon");
  EXPECT_THROW_WITH(optim::Adam(params, {.weight_decay = -0.1}), std::invalid_argument, "weight_decay");
  EXPECT_THROW_WITH(optim::SGD({}, {.lr = 0.1}), std::invalid_argument, "empty parameter list");

  // only leaves that require grad can be optimized
  Tensor non_leaf = model.first->weight * 2.0;
  EXPECT_THROW_WITH(optim::SGD({non_leaf}, {.lr = 0.1}), std::invalid_argument, "leaf", "non-leaf", "[3, 4]");
  EXPECT_THROW_WITH(optim::Adam({ones({2})}, {}), std::invalid_argument, "requires_grad=false", "[2]");
}

}  // namespace
