// test_nn.cpp — nn::Module and the layers against PyTorch 1.13 (tests/reference/make_nn_fixtures.py).
//
//   * names: state_dict() / named_parameters() keys, order and shapes equal torch's for every model
//     of fixtures/nn/state_dict_keys.txt;
//   * the module tree: train()/eval() reach every submodule, zero_grad, load_state_dict's checks,
//     to(cpu) as a no-op, a shared submodule listed once by named_parameters;
//   * initial values: after manual_seed(s) each layer holds torch's numbers (fixtures/nn/*/init.txt).
//     Two kernel families wrote the fixtures and they differ in the last bits (fixtures/nn/README.md).
//     Our uniform_ rounds `x·(to − from)` and then `+ from` as torch's portable kernel does, so everything
//     drawn by uniform_ (Linear, xavier_uniform_) equals the default/ set bit for bit; our normal_ is torch's
//     portable block-of-16 Box–Muller, so Embedding's N(0, 1) weights equal the default/ set bit for bit too;
//   * nn::MultiheadAttention on multi_head.py's input (fixtures/nn/*/multihead_attention.txt), and the
//     workshop's copy-and-compare.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <tuple>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "nn/nn.h"
#include "test_helpers.h"

using namespace autograd;

namespace {

const std::string kFixtures = std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/reference/fixtures/nn/";
const std::vector<std::string> kKernelSets = {"default", "avx2"};

// ---------------------------------------------------------------- reading fixtures (format: fixtures/nn/README.md)

using testing_helpers::Recorded;

struct Case {
  std::string label;  // the words after `case`, e.g. "0 Linear(3,2)"
  std::vector<Recorded> tensors;

  const Recorded& get(const std::string& name) const {
    for (const Recorded& r : tensors)
      if (r.name == name) return r;
    throw std::runtime_error("fixture case '" + label + "' has no tensor '" + name + "'");
  }
};

std::vector<Case> read_cases(const std::string& path) {
  std::ifstream file(path);
  if (!file) throw std::runtime_error("cannot open fixture " + path);
  std::vector<Case> cases;
  for (std::string line; std::getline(file, line);) {
    std::istringstream words(line);
    std::string kind;
    words >> kind;
    if (kind == "case") {
      std::string rest;
      std::getline(words >> std::ws, rest);
      cases.push_back({rest, {}});
    } else if (kind == "tensor" || kind == "itensor") {
      cases.back().tensors.push_back(testing_helpers::read_recorded(words, kind, line));
    }
  }
  return cases;
}

Case find_case(const std::vector<Case>& cases, const std::string& label_prefix) {
  for (const Case& c : cases)
    if (c.label.rfind(label_prefix, 0) == 0) return c;
  throw std::runtime_error("no fixture case starting with '" + label_prefix + "'");
}

// ---------------------------------------------------------------- comparing

// Same shape and every element the same float32 value.
bool bit_equal(const Tensor& t, const Recorded& r) {
  if (t.shape() != r.shape) return false;
  std::vector<float> got = t.to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != float(r.values[i])) return false;
  return true;
}

double max_abs_diff(const Tensor& t, const Recorded& r) {
  std::vector<double> got = t.to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - r.values[i]));
  return worst;
}

std::vector<std::string> names_of(const nn::NamedTensors& entries) {
  std::vector<std::string> names;
  for (const auto& [name, t] : entries) names.push_back(name);
  return names;
}

// ---------------------------------------------------------------- the fixture's models, by their label

using Factory = std::function<std::shared_ptr<nn::Module>()>;

const std::map<std::string, Factory>& models() {
  static const std::map<std::string, Factory> m = {
      {"Linear(3,2)", [] { return std::make_shared<nn::Linear>(3, 2); }},
      {"Linear(3,2,bias=False)", [] { return std::make_shared<nn::Linear>(3, 2, false); }},
      {"Linear(24,24)", [] { return std::make_shared<nn::Linear>(24, 24); }},
      {"Linear(24,13)", [] { return std::make_shared<nn::Linear>(24, 13); }},
      {"Linear(24,13,bias=False)", [] { return std::make_shared<nn::Linear>(24, 13, false); }},
      {"Linear(8,8)", [] { return std::make_shared<nn::Linear>(8, 8); }},
      {"Embedding(13,24)", [] { return std::make_shared<nn::Embedding>(13, 24); }},
      {"Embedding(8,24)", [] { return std::make_shared<nn::Embedding>(8, 24); }},
      // the workshop's model: V = 13 characters, D = 24, T = 8
      {"MiniSelfAttention()",
       [] {
         return std::make_shared<nn::MiniSelfAttention>(nn::CharModelConfig{.vocab = 13, .dim = 24, .context = 8});
       }},
      {"MultiHeadAttentionWrapper(3,2,6,0.0,2)",
       [] { return std::make_shared<nn::MultiHeadAttentionWrapper>(3, 2, 6, 0.0, 2); }},
      {"MultiHeadAttention(3,2,6,0.0,2)", [] { return std::make_shared<nn::MultiHeadAttention>(3, 2, 6, 0.0, 2); }},
      {"WorkshopMultiHeadAttention(8,2)", [] { return std::make_shared<nn::WorkshopMultiHeadAttention>(8, 2); }},
      {"nn.MultiheadAttention(8,2,batch_first=True)", [] { return std::make_shared<nn::MultiheadAttention>(8, 2); }},
  };
  return m;
}

std::shared_ptr<nn::Module> build(const std::string& label) {
  auto it = models().find(label);
  if (it == models().end()) throw std::runtime_error("test has no factory for fixture model " + label);
  return it->second();
}

// ================================================================ names

struct ExpectedModel {
  std::string label;
  std::vector<std::string> keys, kinds;  // kinds: "param" | "buffer"
  std::vector<Shape> shapes;
  std::vector<std::string> named_parameters;
};

std::vector<ExpectedModel> read_state_dict_keys() {
  std::ifstream file(kFixtures + "state_dict_keys.txt");
  if (!file) throw std::runtime_error("cannot open state_dict_keys.txt");
  std::vector<ExpectedModel> out;
  for (std::string line; std::getline(file, line);) {
    std::istringstream words(line);
    std::string kind;
    words >> kind;
    if (kind == "model") {
      out.emplace_back();
      words >> out.back().label;
    } else if (kind == "key") {
      std::string name, what;
      int64_t ndim = 0;
      words >> name >> what >> ndim;
      Shape shape(size_t(ndim), 0);
      for (int64_t& d : shape) words >> d;
      out.back().keys.push_back(name);
      out.back().kinds.push_back(what);
      out.back().shapes.push_back(shape);
    } else if (kind == "named_parameters") {
      for (std::string name; words >> name;) out.back().named_parameters.push_back(name);
    }
  }
  return out;
}

TEST(ModuleNames, StateDictAndNamedParametersMatchPyTorch) {
  std::vector<ExpectedModel> expected = read_state_dict_keys();
  ASSERT_EQ(expected.size(), 7u);
  for (const ExpectedModel& want : expected) {
    SCOPED_TRACE(want.label);
    std::shared_ptr<nn::Module> m = build(want.label);
    nn::NamedTensors state = m->state_dict();
    EXPECT_EQ(names_of(state), want.keys);
    EXPECT_EQ(names_of(m->named_parameters()), want.named_parameters);
    ASSERT_EQ(state.size(), want.keys.size());

    nn::NamedTensors buffers = m->named_buffers();
    std::vector<std::string> buffer_names = names_of(buffers);
    for (size_t i = 0; i < state.size(); ++i) {
      EXPECT_EQ(state[i].second.shape(), want.shapes[i]) << state[i].first;
      const bool is_buffer = std::find(buffer_names.begin(), buffer_names.end(), state[i].first) != buffer_names.end();
      EXPECT_EQ(is_buffer ? "buffer" : "param", want.kinds[i]) << state[i].first;
      EXPECT_EQ(state[i].second.requires_grad(), !is_buffer) << state[i].first;
    }
    // parameters() is named_parameters() without the names: the very same tensors
    std::vector<Tensor> params = m->parameters();
    nn::NamedTensors named = m->named_parameters();
    ASSERT_EQ(params.size(), named.size());
    for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(params[i].same(named[i].second));
  }
}

TEST(ModuleNames, ParametersAreTheMemberTensors) {
  // A state_dict entry is a handle to the layer's own tensor, not a copy: writing through one shows in the other.
  nn::MultiHeadAttentionWrapper wrapper(3, 2, 6, 0.0, 2);
  nn::NamedTensors state = wrapper.state_dict();
  EXPECT_TRUE(state[1].second.same(wrapper.heads->operator[](0).W_query->weight));  // heads.0.W_query.weight
  EXPECT_TRUE(state[0].second.same(wrapper.heads->operator[](0).mask));             // heads.0.mask
  EXPECT_EQ(wrapper.num_parameters(), 6 * 2 * 3);
}

// A module that holds one Linear under two names, as weight tying does.
struct Tied : nn::Module {
  std::shared_ptr<nn::Linear> shared = std::make_shared<nn::Linear>(2, 2);
  Tied() {
    register_module("encoder", shared);
    register_module("decoder", shared);
  }
};

TEST(ModuleNames, SharedSubmoduleIsOneSetOfParameters) {
  Tied tied;
  // named_parameters lists a tensor once, under its first name; state_dict lists every name (as torch does)
  EXPECT_EQ(names_of(tied.named_parameters()), (std::vector<std::string>{"encoder.weight", "encoder.bias"}));
  EXPECT_EQ(names_of(tied.state_dict()),
            (std::vector<std::string>{"encoder.weight", "encoder.bias", "decoder.weight", "decoder.bias"}));
  EXPECT_EQ(tied.num_parameters(), 6);
}

// ================================================================ the module tree

TEST(Module, TrainAndEvalReachEverySubmodule) {
  nn::MultiHeadAttentionWrapper wrapper(3, 2, 6, 0.5, 2);
  auto every_module_is = [&](bool training) {
    if (wrapper.is_training() != training || wrapper.heads->is_training() != training) return false;
    for (const auto& head : *wrapper.heads)
      if (head->is_training() != training || head->dropout->is_training() != training ||
          head->W_query->is_training() != training)
        return false;
    return true;
  };
  EXPECT_TRUE(every_module_is(true));  // modules start in training mode
  wrapper.eval();
  EXPECT_TRUE(every_module_is(false));
  wrapper.train();
  EXPECT_TRUE(every_module_is(true));
  wrapper.train(false);
  EXPECT_TRUE(every_module_is(false));
}

TEST(Module, DropoutIsTheIdentityInEval) {
  nn::Dropout dropout(0.5);
  Tensor x = testing_helpers::randish({4, 6}, 1, -1, 1, DType::Float32);
  manual_seed(0);
  Tensor trained = dropout(x);
  EXPECT_FALSE(equal(trained, x));  // some zeroed, the rest doubled
  std::vector<float> got = trained.to_vector<float>(), in = x.to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(got[i] == 0.0f || got[i] == 2.0f * in[i]) << got[i] << " from " << in[i];
  dropout.eval();
  EXPECT_TRUE(equal(dropout(x), x));
  EXPECT_THROW(nn::Dropout(1.5), std::invalid_argument);
  EXPECT_THROW(nn::Dropout(-0.1), std::invalid_argument);
}

TEST(Module, DropoutDrawsPyTorchsMask) {
  // fixtures/nn/*/random.txt: torch.manual_seed(s); nn.Dropout(0.5)(torch.ones(6, 6)) — the same in both sets
  std::vector<Case> cases = read_cases(kFixtures + "default/random.txt");
  int checked = 0;
  for (const Case& c : cases) {
    if (c.label.find("dropout(0.5,ones(6,6))") == std::string::npos) continue;
    SCOPED_TRACE(c.label);
    manual_seed(std::stoull(c.label));
    nn::Dropout dropout(0.5);
    EXPECT_TRUE(bit_equal(dropout(ones({6, 6})), c.get("out")));
    ++checked;
  }
  EXPECT_EQ(checked, 5);
}

TEST(Module, ZeroGradClearsEveryGradient) {
  nn::MultiHeadAttention mha(3, 4, 6, 0.0, 2);
  Tensor x = testing_helpers::randish({2, 5, 3}, 2, -1, 1, DType::Float32);
  mha(x).sum().backward();
  for (auto& [name, p] : mha.named_parameters()) EXPECT_TRUE(p.grad().defined()) << name;
  mha.zero_grad();
  for (auto& [name, p] : mha.named_parameters()) EXPECT_FALSE(p.grad().defined()) << name;
  EXPECT_FALSE(mha.mask.requires_grad());  // a buffer is not a parameter
}

TEST(Module, LoadStateDictCopiesValuesIntoTheSameTensors) {
  manual_seed(0);
  nn::MultiHeadAttention source(3, 2, 6, 0.0, 2);
  manual_seed(1);
  nn::MultiHeadAttention target(3, 2, 6, 0.0, 2);
  Tensor w = target.W_query->weight;  // a handle held elsewhere (e.g. by an optimizer)
  ASSERT_FALSE(equal(w, source.W_query->weight));

  target.load_state_dict(source.state_dict());
  EXPECT_TRUE(equal(w, source.W_query->weight)) << "the old handle sees the loaded values";
  nn::NamedTensors mine = target.state_dict(), theirs = source.state_dict();
  for (size_t i = 0; i < mine.size(); ++i) {
    EXPECT_EQ(mine[i].first, theirs[i].first);
    EXPECT_TRUE(equal(mine[i].second, theirs[i].second)) << mine[i].first;
    EXPECT_FALSE(mine[i].second.same(theirs[i].second)) << mine[i].first << " was copied, not shared";
  }
  EXPECT_TRUE(target.W_query->weight.requires_grad());
  EXPECT_TRUE(target.W_query->weight.is_leaf());

  // float64 values are rounded into the float32 parameters
  nn::NamedTensors doubled;
  for (auto& [name, t] : source.state_dict()) doubled.emplace_back(name, (t * 2.0).to(DType::Float64));
  target.load_state_dict(doubled);
  EXPECT_EQ(target.W_key->weight.dtype(), DType::Float32);
  EXPECT_TRUE(equal(target.W_key->weight, source.W_key->weight * 2.0));
}

TEST(Module, LoadStateDictNamesTheBadKey) {
  nn::MultiHeadAttention mha(3, 2, 6, 0.0, 2);
  const nn::NamedTensors good = mha.state_dict();

  nn::NamedTensors missing(good.begin(), good.end());
  missing.erase(missing.begin() + 2);  // W_key.weight
  EXPECT_THROW_WITH(mha.load_state_dict(missing), std::invalid_argument, "missing", "\"W_key.weight\"");

  nn::NamedTensors unexpected = good;
  unexpected.emplace_back("W_key.bias", zeros({2}));
  EXPECT_THROW_WITH(mha.load_state_dict(unexpected), std::invalid_argument, "unexpected", "\"W_key.bias\"");

  nn::NamedTensors misshapen = good;
  misshapen[4].second = zeros({3, 2});  // out_proj.weight is [2, 2]
  EXPECT_THROW_WITH(mha.load_state_dict(misshapen), std::invalid_argument, "size mismatch", "out_proj.weight",
                    "[3, 2]", "[2, 2]");

  // strict = false: missing and unexpected keys are ignored, the rest is loaded; a bad shape is still an error
  nn::NamedTensors partial = {{"out_proj.bias", full({2}, 0.5)}, {"not.a.key", zeros({1})}};
  mha.load_state_dict(partial, /*strict=*/false);
  EXPECT_TRUE(equal(mha.out_proj->bias, full({2}, 0.5)));
  EXPECT_THROW_WITH(mha.load_state_dict(misshapen, false), std::invalid_argument, "out_proj.weight");
}

TEST(Module, ToCpuIsANoOp) {
  manual_seed(5);
  nn::CausalAttention attn(3, 2, 6, 0.0);
  Tensor w = attn.W_value->weight;
  const void* data = w.raw_data();
  std::vector<float> before = w.to_vector<float>();
  attn.W_value->weight.sum().backward();
  attn.to(Device::cpu());
  EXPECT_EQ(w.raw_data(), data);  // same storage, nothing copied
  EXPECT_EQ(w.to_vector<float>(), before);
  EXPECT_TRUE(w.grad().defined());  // and the gradient is kept
  EXPECT_EQ(attn.mask.device(), Device::cpu());
}

// ================================================================ initial values

// Which fixture set a draw reproduces bit for bit, and how far the other set is:
//   * uniform_ (Linear, xavier_uniform_, rand) rounds the product x·(to − from) and then the sum with from,
//     as torch's portable kernel does (autograd/random/generator.h). The AVX2 kernel fuses them into one rounding:
//     at most half an ulp of that product away, and x·(to − from) ≤ 1.2 here, so 2^-24.
//   * normal_ of ≥ 16 elements (Embedding, randn) is torch's portable block-of-16 Box–Muller. AVX2's
//     vectorised one uses the same draws but its own log/sin/cos: up to 1.6e-6 away on these N(0, 1)
//     values (relative to a value near 0 that is large: 5e-4 for one element of pos.weight at seed 0).
const std::string kUniformSet = "default";
const double kProductRounding = std::ldexp(1.0, -24);

void expect_drawn_by_uniform(const Tensor& value, const Recorded& recorded, const std::string& set) {
  if (set == kUniformSet) EXPECT_TRUE(bit_equal(value, recorded)) << recorded.name << " vs " << set << "/";
  else EXPECT_LE(max_abs_diff(value, recorded), kProductRounding) << recorded.name << " vs " << set << "/";
}

void expect_drawn_by_normal(const Tensor& value, const Recorded& recorded, const std::string& set) {
  if (set == "default") EXPECT_TRUE(bit_equal(value, recorded)) << recorded.name << " vs " << set << "/";
  else EXPECT_LE(max_abs_diff(value, recorded), 2e-6) << recorded.name << " vs " << set << "/";
}

TEST(Initialisation, EveryLayerHoldsPyTorchsInitialValues) {
  for (const std::string& set : kKernelSets) {
    int uniform_tensors = 0, normal_tensors = 0;
    for (const Case& c : read_cases(kFixtures + set + "/init.txt")) {
      const std::string seed = c.label.substr(0, c.label.find(' '));  // "0 Linear(3,2)"
      const std::string model = c.label.substr(seed.size() + 1);
      SCOPED_TRACE(set + "/: manual_seed(" + seed + "); " + model);

      manual_seed(std::stoull(seed));
      nn::NamedTensors params = build(model)->named_parameters();
      ASSERT_EQ(params.size(), c.tensors.size());
      for (size_t i = 0; i < params.size(); ++i) {
        const auto& [name, value] = params[i];
        ASSERT_EQ(name, c.tensors[i].name);
        const bool embedding = model.starts_with("Embedding") || name == "tok.weight" || name == "pos.weight";
        if (embedding) {
          expect_drawn_by_normal(value, c.tensors[i], set);
          ++normal_tensors;
        } else {
          expect_drawn_by_uniform(value, c.tensors[i], set);  // (and MultiheadAttention's zero biases)
          ++uniform_tensors;
        }
      }
    }
    EXPECT_EQ(normal_tensors, 14);                    // 2 Embeddings and 1 MiniSelfAttention per seed 0, 7, 123; seed 1
    EXPECT_EQ(uniform_tensors + normal_tensors, 168);  // every tensor of the 44 cases
  }
}

TEST(Initialisation, LinearBoundsAndTheOrderOfDraws) {
  // torch: weight ~ U(−1/√in, 1/√in) first, then bias with the same bound; a model draws layer by layer
  manual_seed(0);
  nn::Linear layer(24, 13);
  const double bound = 1.0 / std::sqrt(24.0);
  for (float w : layer.weight.to_vector<float>()) EXPECT_LE(std::abs(w), bound);
  for (float b : layer.bias.to_vector<float>()) EXPECT_LE(std::abs(b), bound);
  manual_seed(0);
  nn::Linear no_bias(24, 13, false);
  EXPECT_TRUE(equal(no_bias.weight, layer.weight));
  EXPECT_FALSE(no_bias.bias.defined());
  EXPECT_EQ(names_of(no_bias.named_parameters()), std::vector<std::string>{"weight"});
  EXPECT_THROW(nn::Linear(-1, 2), std::invalid_argument);
}

// ================================================================ nn::MultiheadAttention

// multi_head.py: after manual_seed(1) the workshop's module is built first, then nn.MultiheadAttention,
// then x = randn(1, 5, 8). The fixture's weights are loaded here, so each set's own forward is compared.
void load(nn::MultiheadAttention& ref, const Case& c) {
  ref.load_state_dict({{"in_proj_weight", c.get("ref.in_proj_weight").tensor()},
                       {"in_proj_bias", c.get("ref.in_proj_bias").tensor()},
                       {"out_proj.weight", c.get("ref.out_proj.weight").tensor()},
                       {"out_proj.bias", c.get("ref.out_proj.bias").tensor()}});
}

TEST(MultiheadAttention, FreshModuleHoldsPyTorchsWeights) {
  // in_proj_weight by xavier_uniform_ (bound √(6 / (8 + 24))), out_proj.weight by Linear(8, 8), both biases 0
  for (const std::string& set : kKernelSets) {
    SCOPED_TRACE(set);
    const Case fresh = find_case(read_cases(kFixtures + set + "/multihead_attention.txt"), "fresh");
    manual_seed(1);
    nn::MultiheadAttention ref(8, 2);
    for (auto& [name, value] : ref.named_parameters()) expect_drawn_by_uniform(value, fresh.get(name), set);
    EXPECT_EQ(max_abs_diff(ref.in_proj_bias, fresh.get("in_proj_bias")), 0.0);
  }
}

TEST(MultiheadAttention, MultiHeadProgramDrawsPyTorchsNumbers) {
  // the draws of multi_head.py in its order: the workshop's module, nn.MultiheadAttention, then x
  manual_seed(1);
  nn::WorkshopMultiHeadAttention mine(8, 2);
  nn::MultiheadAttention ref(8, 2);
  Tensor x = randn({1, 5, 8});
  for (const std::string& set : kKernelSets) {
    SCOPED_TRACE(set);
    const Case c = find_case(read_cases(kFixtures + set + "/multihead_attention.txt"), "multi_head.py");
    for (auto& [name, value] : mine.named_parameters()) expect_drawn_by_uniform(value, c.get("mine_init." + name), set);
    for (auto& [name, value] : ref.named_parameters()) expect_drawn_by_uniform(value, c.get("ref." + name), set);
    expect_drawn_by_normal(x, c.get("x"), set);
  }
}

TEST(MultiheadAttention, ForwardMatchesPyTorch) {
  for (const std::string& set : kKernelSets) {
    SCOPED_TRACE(set);
    const Case c = find_case(read_cases(kFixtures + set + "/multihead_attention.txt"), "multi_head.py");
    nn::MultiheadAttention ref(8, 2);
    load(ref, c);
    Tensor x = c.get("x").tensor();

    auto [out, weights] = ref(x, x, x);
    EXPECT_LE(max_abs_diff(out, c.get("out_ref")), 1e-6);
    EXPECT_LE(max_abs_diff(weights, c.get("attn_weights_avg")), 1e-6);
    EXPECT_EQ(weights.shape(), (Shape{1, 5, 5}));
    for (float row_sum : weights.sum(-1).to_vector<float>()) EXPECT_NEAR(row_sum, 1.0, 1e-6);

    // attn_mask: bool, true = may not attend (torch's convention; the opposite of the workshop's mask)
    Tensor causal = c.get("causal_attn_mask").tensor().to_bool();
    auto [out_causal, weights_causal] = ref(x, x, x, causal);
    EXPECT_LE(max_abs_diff(out_causal, c.get("out_ref_causal")), 1e-6);
    EXPECT_LE(max_abs_diff(weights_causal, c.get("attn_weights_avg_causal")), 1e-6);
    EXPECT_EQ(weights_causal[0][0][1].item(), 0.0);  // the first token sees only itself
    auto how = [](bool bits) { return bits ? "bit for bit" : "within 1e-6"; };
    std::printf("[ info     ] nn::MultiheadAttention vs %s/: outputs %s, attention weights %s\n", set.c_str(),
                how(bit_equal(out, c.get("out_ref")) && bit_equal(out_causal, c.get("out_ref_causal"))),
                how(bit_equal(weights, c.get("attn_weights_avg")) &&
                    bit_equal(weights_causal, c.get("attn_weights_avg_causal"))));
  }
}

TEST(MultiheadAttention, WorkshopCopyAndCompareAgrees) {
  // multi_head.py as written: copy the packed weights into the hand-written module, compare outputs
  for (const std::string& set : kKernelSets) {
    SCOPED_TRACE(set);
    const Case c = find_case(read_cases(kFixtures + set + "/multihead_attention.txt"), "multi_head.py");
    nn::MultiheadAttention ref(8, 2);
    load(ref, c);
    nn::WorkshopMultiHeadAttention mine(8, 2);
    std::vector<Tensor> w = chunk(ref.in_proj_weight, 3, 0), b = chunk(ref.in_proj_bias, 3, 0);
    {
      NoGradGuard no_grad;
      mine.W_q->weight.copy_(w[0]); mine.W_q->bias.copy_(b[0]);
      mine.W_k->weight.copy_(w[1]); mine.W_k->bias.copy_(b[1]);
      mine.W_v->weight.copy_(w[2]); mine.W_v->bias.copy_(b[2]);
      mine.W_o->weight.copy_(ref.out_proj->weight); mine.W_o->bias.copy_(ref.out_proj->bias);
    }
    Tensor x = c.get("x").tensor();
    Tensor out_mine = mine(x);
    Tensor out_ref = ref(x, x, x).first;
    EXPECT_LE((out_mine - out_ref).abs().max().item(), 1e-6);
    EXPECT_LE(max_abs_diff(out_mine, c.get("out_mine")), 1e-6);

    // the same with a causal mask: 1 = may attend for the workshop, true = blocked for torch
    Tensor allowed = tril(ones({5, 5}));
    Tensor masked_mine = mine(x, allowed);
    Tensor masked_ref = ref(x, x, x, allowed == 0.0).first;
    EXPECT_LE((masked_mine - masked_ref).abs().max().item(), 1e-6);
    EXPECT_LE(max_abs_diff(masked_mine, c.get("out_ref_causal")), 1e-6);
  }
}

TEST(MultiheadAttention, RefusesBadShapes) {
  EXPECT_THROW_WITH(nn::MultiheadAttention(8, 3), std::invalid_argument, "embed_dim (8)", "num_heads (3)");
  nn::MultiheadAttention ref(8, 2);
  Tensor x = zeros({1, 5, 6});
  EXPECT_THROW_WITH(ref(x, x, x), std::invalid_argument, "[1, 5, 6]");
}

}  // namespace

// random_windows gathers rows in one copy; it must give exactly the workshop's stack of slices, from the
// same draw of the generator, and leave the generator where the workshop's batch() leaves it.
TEST(RandomWindows, SameBatchesAsTheWorkshopsStackOfSlices) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 40; ++i) ids.push_back((i * 7) % 13);
  Tensor data = from_vector(ids, {40});
  for (uint64_t seed : {0, 1, 7, 1234}) {
    manual_seed(seed);
    auto [x, y] = nn::random_windows(data, 16, 8);
    const double next = rand({1}).item();
    manual_seed(seed);
    std::vector<Tensor> xs, ys;
    for (int64_t j : randint(0, 40 - 8 - 1, {16}).to_vector<int64_t>()) {
      xs.push_back(data.slice(0, j, j + 8));
      ys.push_back(data.slice(0, j + 1, j + 9));
    }
    EXPECT_EQ(x.to_vector<int64_t>(), stack(xs).to_vector<int64_t>()) << "seed " << seed;
    EXPECT_EQ(y.to_vector<int64_t>(), stack(ys).to_vector<int64_t>()) << "seed " << seed;
    EXPECT_EQ(x.shape(), (Shape{16, 8}));
    EXPECT_TRUE(x.is_contiguous() && y.is_contiguous());
    EXPECT_EQ(rand({1}).item(), next) << "the generator moved on differently, seed " << seed;
  }
  // a slice of a longer tensor (offset, stride) gives the same windows as its contiguous copy
  Tensor strided = stack({data, data}, 1).select(1, 0);
  manual_seed(5);
  auto [a, b] = nn::random_windows(strided, 4, 5);
  manual_seed(5);
  auto [c, d] = nn::random_windows(data, 4, 5);
  EXPECT_EQ(a.to_vector<int64_t>(), c.to_vector<int64_t>());
  EXPECT_EQ(b.to_vector<int64_t>(), d.to_vector<int64_t>());
  EXPECT_THROW_WITH(nn::random_windows(data.view({4, 10}), 2, 3), std::invalid_argument, "random_windows", "[4, 10]");
  EXPECT_THROW_WITH(nn::random_windows(data.slice(0, 0, 9), 2, 8), std::invalid_argument, "random_windows", "10", "[9]");
}

// linear's weight gradient is computed as (gᵀ·x)ᵀ so that it arrives in the weight's layout; it must be
// the same bits as the textbook xᵀ·g, transposed (and land in .grad without a copy: contiguous).
TEST(LinearWeightGradient, SameBitsAsTheTextbookProduct) {
  for (auto [rows, in, out] : {std::tuple<int64_t, int64_t, int64_t>{128, 24, 13}, {300, 7, 5}, {9, 1, 4}, {9, 4, 1}, {1, 3, 2}}) {
    Tensor x = testing_helpers::randish({rows, in}, uint32_t(rows + in), -1, 1, DType::Float32);
    Tensor w = testing_helpers::randish({out, in}, uint32_t(out), -1, 1, DType::Float32).requires_grad_();
    Tensor b = testing_helpers::randish({out}, 3, -1, 1, DType::Float32).requires_grad_();
    Tensor g = testing_helpers::randish({rows, out}, uint32_t(rows * 3 + out), -1, 1, DType::Float32);
    linear(x, w, b).backward(g);
    Tensor want = matmul(x.mT(), g).t().contiguous();
    std::vector<float> got_v = w.grad().to_vector<float>(), want_v = want.to_vector<float>();
    ASSERT_EQ(got_v.size(), want_v.size());
    for (size_t i = 0; i < got_v.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(got_v[i]), std::bit_cast<uint32_t>(want_v[i]))
          << "rows " << rows << " in " << in << " out " << out << " element " << i;
    EXPECT_TRUE(w.grad().is_contiguous());
  }
}
