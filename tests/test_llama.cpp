// test_llama.cpp — the Llama-family model (nn/llama.h) and the Hugging Face folder reader (nn/hf_folder.h).
//
// Against the PyTorch twin (tests/reference/make_llama_fixture.py, written from the blocks' description):
// five tiny BF16 folders (Llama 3.2-like with llama3 rope scaling and a tied head, Qwen2 with q/k/v biases,
// Qwen3 with per-head q/k norms and head_dim ≠ width/heads, a SmolLM2-shaped one in two shards, Mistral)
// and, for each, the logits of a fixed id sequence, one training step's loss and every gradient, and a
// greedy continuation. Then: the cache against the full forward, a float64 gradcheck of a block, every
// refusal of config.json by its field, the weights' checks, F16/BF16 widening, and GPT2LMHeadModel folders.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "autograd/inspect/gradcheck.h"
#include "nn/generation.h"
#include "nn/gpt2.h"
#include "nn/hf_folder.h"
#include "nn/llama.h"
#include "test_helpers.h"

namespace {

using namespace autograd;
namespace fs = std::filesystem;
using nlohmann::json;

const std::string kFixtures = std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/reference/fixtures/hf/";
const std::vector<std::string> kFamilies = {"llama32", "qwen2", "qwen3", "smollm2", "mistral"};

std::map<std::string, Tensor> expected_of(const std::string& family) {
  std::map<std::string, Tensor> out;
  for (auto& [name, t] : nn::load_safetensors(kFixtures + family + "_expected.safetensors").tensors) out[name] = t;
  return out;
}

std::unique_ptr<nn::LlamaModel> fixture_model(const std::string& family) {
  return nn::load_llama_folder(nn::read_hf_folder(kFixtures + family));
}

// The largest |a − b| / (1 + |b|) over all elements.
double worst_difference(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  const std::vector<double> x = a.to(DType::Float64).to_vector<double>(), y = b.to(DType::Float64).to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i)
    worst = std::max(worst, std::abs(x[i] - y[i]) / (1.0 + std::abs(y[i])));
  return worst;
}

// A copy of a fixture folder in a fresh temporary folder, for a test to edit.
fs::path copy_of(const std::string& family, const std::string& tag) {
  const fs::path to = fs::temp_directory_path() / ("scratchgrad_llama_" + std::to_string(::getpid()) + "_" + tag);
  fs::remove_all(to);
  fs::copy(kFixtures + family, to, fs::copy_options::recursive);
  return to;
}

json read_json(const fs::path& path) {
  std::ifstream in(path);
  return json::parse(in);
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// A fixture folder whose config.json `edit` changed.
fs::path with_config(const std::string& family, const std::string& tag, const std::function<void(json&)>& edit) {
  const fs::path folder = copy_of(family, tag);
  json config = read_json(folder / "config.json");
  edit(config);
  write_text(folder / "config.json", config.dump(2));
  return folder;
}

// The CheckpointError's message of reading and loading `folder` (empty when it loads).
std::string refusal_of(const fs::path& folder) {
  try {
    nn::load_hf_folder(folder.string());
  } catch (const nn::CheckpointError& e) {
    return e.what();
  }
  return "";
}

void expect_refused(const fs::path& folder, const std::vector<std::string>& parts) {
  const std::string message = refusal_of(folder);
  ASSERT_FALSE(message.empty()) << folder << " loaded";
  for (const std::string& part : parts) EXPECT_NE(message.find(part), std::string::npos) << message << "\n  lacks: " << part;
  EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;
  EXPECT_EQ(message.find("json.exception"), std::string::npos) << message;
  fs::remove_all(folder);
}

// ---- against the twin

TEST(LlamaTwin, LogitsMatchPyTorchForEachFamily) {
  for (const std::string& family : kFamilies) {
    SCOPED_TRACE(family);
    auto model = fixture_model(family);
    auto expected = expected_of(family);
    NoGradGuard no_grad;
    const Tensor logits = model->forward(expected["ids"]);
    EXPECT_LT(worst_difference(logits, expected["logits"]), 2e-5);
  }
}

TEST(LlamaTwin, OneTrainingStepsLossAndGradientsMatchPyTorch) {
  for (const std::string& family : kFamilies) {
    SCOPED_TRACE(family);
    auto model = fixture_model(family);
    model->train();
    auto expected = expected_of(family);
    const Tensor ids = expected["ids"];
    const int64_t t = ids.size(1), vocab = model->cfg.vocab_size;
    const Tensor logits = model->forward(ids);
    Tensor loss = cross_entropy(logits.narrow(1, 0, t - 1).reshape({-1, vocab}), ids.narrow(1, 1, t - 1).reshape({-1}));
    loss.backward();
    EXPECT_LT(worst_difference(loss, expected["loss"]), 1e-6);
    size_t compared = 0;
    for (const auto& [name, parameter] : model->named_parameters()) {
      ASSERT_TRUE(expected.count("grad." + name)) << name;
      ASSERT_TRUE(parameter.grad().defined()) << name;
      EXPECT_LT(worst_difference(parameter.grad(), expected["grad." + name]), 2e-5) << name;
      ++compared;
    }
    size_t in_fixture = 0;
    for (const auto& [name, t] : expected) in_fixture += name.starts_with("grad.");
    EXPECT_EQ(compared, in_fixture) << "every parameter of the folder, and no other";
  }
}

TEST(LlamaTwin, GreedyIdsMatchPyTorchWithAndWithoutTheCache) {
  for (const std::string& family : kFamilies) {
    SCOPED_TRACE(family);
    auto model = fixture_model(family);
    auto expected = expected_of(family);
    const std::vector<int64_t> ids = expected["ids"][0].to_vector<int64_t>();
    const std::vector<int64_t> prompt(ids.begin(), ids.begin() + 5);
    nn::GenerationOptions options;
    options.sampling.temperature = 0;
    options.max_new_tokens = 8;
    Generator a(0), b(0);
    const std::vector<int64_t> cached = nn::generate(*model, prompt, options, a);
    EXPECT_EQ(cached, expected["greedy"].to_vector<int64_t>());
    EXPECT_EQ(nn::generate_uncached(*model, prompt, options, b), cached);
  }
}

// ---- the cache

TEST(LlamaCache, HoldsOnlyTheKeyValueHeadsAndMatchesTheFullForward) {
  for (const std::string& family : {std::string("qwen3"), std::string("smollm2")}) {
    SCOPED_TRACE(family);
    auto model = fixture_model(family);
    const Tensor ids = expected_of(family)["ids"];  // [2, 12]
    nn::KVCache cache = model->make_kv_cache(2, 12);
    ASSERT_EQ(cache.keys.size(), size_t(model->cfg.num_hidden_layers));
    EXPECT_EQ(cache.keys[0].shape(), (Shape{2, model->cfg.num_key_value_heads, 12, model->cfg.head_size()}));
    NoGradGuard no_grad;
    const Tensor full = model->forward(ids);
    int64_t done = 0;
    for (int64_t piece : {5, 1, 3, 1, 2}) {  // a prefill, then steps of one and of several positions
      const Tensor last = model->forward_cached(ids.narrow(1, done, piece), cache);
      done += piece;
      EXPECT_EQ(cache.length, done);
      EXPECT_LT(worst_difference(last, full.select(1, done - 1)), 1e-5) << "after " << done << " positions";
    }
    EXPECT_THROW(model->forward_cached(ids.narrow(1, 0, 1), cache), std::invalid_argument);  // full
  }
}

TEST(LlamaCache, GreedyGenerationToTheEndOfTheContextMatchesRecomputingTheWindow) {
  for (const std::string& family : {std::string("smollm2"), std::string("mistral")}) {  // contexts of 64
    SCOPED_TRACE(family);
    auto model = fixture_model(family);
    nn::GenerationOptions options;
    options.sampling.temperature = 0;
    options.max_new_tokens = model->context_length() - 3 + 1;  // the last step fills the context
    Generator a(0), b(0);
    const std::vector<int64_t> cached = nn::generate(*model, {3, 14, 15}, options, a);
    EXPECT_EQ(cached.size(), size_t(options.max_new_tokens));
    EXPECT_EQ(nn::generate_uncached(*model, {3, 14, 15}, options, b), cached);
    options.stop_tokens = {cached[4]};  // and the first of several stop tokens ends it
    options.stop_tokens.push_back(63);
    Generator c(0);
    const std::vector<int64_t> stopped = nn::generate(*model, {3, 14, 15}, options, c);
    EXPECT_EQ(stopped.back(), std::find_first_of(cached.begin(), cached.end(), options.stop_tokens.begin(),
                                                 options.stop_tokens.end())[0]);
    EXPECT_LE(stopped.size(), 5u);
  }
}

// ---- the block's gradient in float64

// Makes every parameter of `m` a float64 leaf (the member fields and the registered entries alike).
void to_float64(nn::Module& m) {
  if (auto* linear = dynamic_cast<nn::Linear*>(&m)) {
    linear->weight = linear->weight.detach().to(DType::Float64).requires_grad_();
    linear->set_parameter("weight", linear->weight);
    if (linear->bias.defined()) {
      linear->bias = linear->bias.detach().to(DType::Float64).requires_grad_();
      linear->set_parameter("bias", linear->bias);
    }
  } else if (auto* norm = dynamic_cast<nn::RMSNorm*>(&m)) {
    norm->weight = norm->weight.detach().to(DType::Float64).requires_grad_();
    norm->set_parameter("weight", norm->weight);
  }
  for (auto& [name, child] : m.named_children()) to_float64(*child);
}

// (Named Gradcheck* so that ctest reruns it with fast numerics and on the reference kernels.)
TEST(GradcheckLlama, ABlockWithGroupedQueriesBiasesAndQkNormInFloat64) {
  nn::LlamaConfig cfg{.vocab_size = 7, .hidden_size = 8, .intermediate_size = 6, .num_hidden_layers = 1,
                      .num_attention_heads = 4, .num_key_value_heads = 2, .head_dim = 4, .max_position_embeddings = 8,
                      .rms_norm_eps = 1e-6, .rope_theta = 10000.0, .attention_bias = true, .qk_norm = true,
                      .initializer_range = 0.5};
  manual_seed(48);
  nn::LlamaModel model(cfg);
  nn::LlamaDecoderLayer& block = (*model.model->layers)[0];
  to_float64(block);
  {  // norm weights away from 1, so their gradients are tested at a general point
    NoGradGuard no_grad;
    for (auto& [name, p] : block.named_parameters())
      if (name.ends_with("norm.weight")) Tensor(p).add_(randn(p.shape(), DType::Float64), 0.3);
  }
  const auto [cos, sin] = model.rope(0, 3, zeros({1}, DType::Float64));
  std::vector<Tensor> inputs{randn({2, 3, 8}, DType::Float64).requires_grad_()};
  for (const auto& [name, p] : block.named_parameters()) inputs.push_back(p);
  EXPECT_GRADCHECK([&](const std::vector<Tensor>& in) { return block.forward(in[0], cos, sin); }, inputs);
}

// ---- initial values

TEST(LlamaInit, DrawsHuggingFacesInitialValuesFromTheSeed) {
  nn::LlamaConfig cfg{.vocab_size = 50, .hidden_size = 64, .intermediate_size = 96, .num_hidden_layers = 2,
                      .num_attention_heads = 4, .num_key_value_heads = 2, .max_position_embeddings = 32,
                      .tie_word_embeddings = false, .attention_bias = true, .qk_norm = true};
  manual_seed(7);
  nn::LlamaModel a(cfg);
  manual_seed(7);
  nn::LlamaModel b(cfg);
  const nn::NamedTensors pa = a.named_parameters(), pb = b.named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    SCOPED_TRACE(pa[i].first);
    EXPECT_TRUE(equal(pa[i].second, pb[i].second)) << "the same seed, the same values";
    const std::vector<float> v = pa[i].second.to_vector<float>();
    if (pa[i].first.ends_with("norm.weight")) {
      EXPECT_EQ(v, std::vector<float>(v.size(), 1.0f));
    } else if (pa[i].first.ends_with(".bias")) {
      EXPECT_EQ(v, std::vector<float>(v.size(), 0.0f));
    } else {
      double sum = 0, squares = 0;
      for (float x : v) sum += x, squares += double(x) * x;
      const double mean = sum / double(v.size()), spread = std::sqrt(squares / double(v.size()) - mean * mean);
      EXPECT_NEAR(spread, 0.02, 0.004) << "N(0, initializer_range)";
      EXPECT_NEAR(mean, 0.0, 0.004);
    }
  }
  EXPECT_EQ(pa.back().first, "lm_head.weight");
  EXPECT_EQ(pa.front().first, "model.embed_tokens.weight");
}

TEST(LlamaInit, TiedModelsHaveNoHeadOfTheirOwn) {
  nn::LlamaConfig cfg{.vocab_size = 20, .hidden_size = 8, .intermediate_size = 12, .num_hidden_layers = 1,
                      .num_attention_heads = 2, .num_key_value_heads = 1, .max_position_embeddings = 8};
  nn::LlamaModel model(cfg);
  for (const auto& [name, p] : model.named_parameters()) EXPECT_NE(name, "lm_head.weight");
  EXPECT_TRUE(model.head_weight().same(model.model->embed_tokens->weight));
  EXPECT_EQ(model.forward(zeros({1, 3}, DType::Int64)).shape(), (Shape{1, 3, 20}));
}

TEST(LlamaInit, ParameterCountsFromTheShapesAreTheModels) {
  for (const std::string& family : kFamilies) {
    const nn::LlamaConfig cfg = nn::read_hf_folder(kFixtures + family).llama;
    EXPECT_EQ(cfg.parameter_count(), fixture_model(family)->num_parameters()) << family;
  }
  // docs/llama.md's table: SmolLM2-135M, Qwen3-0.6B, Llama 3.2 1B (their config.json's shapes)
  const nn::LlamaConfig smollm2{.vocab_size = 49152, .hidden_size = 576, .intermediate_size = 1536, .num_hidden_layers = 30,
                                .num_attention_heads = 9, .num_key_value_heads = 3, .max_position_embeddings = 8192};
  EXPECT_EQ(smollm2.parameter_count(), 134'515'008);
  EXPECT_EQ(smollm2.cache_numbers_per_position() * 4, 46'080);
  const nn::LlamaConfig qwen3{.vocab_size = 151936, .hidden_size = 1024, .intermediate_size = 3072, .num_hidden_layers = 28,
                              .num_attention_heads = 16, .num_key_value_heads = 8, .head_dim = 128,
                              .max_position_embeddings = 40960, .qk_norm = true};
  EXPECT_EQ(qwen3.parameter_count(), 596'049'920);
  EXPECT_EQ(qwen3.cache_numbers_per_position() * 4, 229'376);
  const nn::LlamaConfig llama{.vocab_size = 128256, .hidden_size = 2048, .intermediate_size = 8192, .num_hidden_layers = 16,
                              .num_attention_heads = 32, .num_key_value_heads = 8, .head_dim = 64,
                              .max_position_embeddings = 131072};
  EXPECT_EQ(llama.parameter_count(), 1'235'814'400);
  EXPECT_EQ(llama.cache_numbers_per_position() * 4, 65'536);
}

TEST(LlamaInit, RefusesConfigsThatMakeNoModelNamingTheField) {
  auto refused = [](nn::LlamaConfig cfg, const std::string& field) {
    EXPECT_THROW_WITH(nn::LlamaModel model(cfg), std::invalid_argument, field);
  };
  nn::LlamaConfig ok{.vocab_size = 20, .hidden_size = 8, .intermediate_size = 12, .num_hidden_layers = 1,
                     .num_attention_heads = 2, .num_key_value_heads = 1, .max_position_embeddings = 8};
  refused([&] { auto c = ok; c.num_key_value_heads = 3; c.num_attention_heads = 4; return c; }(), "num_key_value_heads");
  refused([&] { auto c = ok; c.hidden_size = 9; return c; }(), "hidden_size 9");
  refused([&] { auto c = ok; c.head_dim = 5; return c; }(), "head_dim 5 is odd");
  refused([&] { auto c = ok; c.vocab_size = 0; return c; }(), "vocab_size");
  refused([&] { auto c = ok; c.rms_norm_eps = 0; return c; }(), "rms_norm_eps");
}

// ---- the folder: config.json

TEST(HfFolder, ReadsTheConfigAndTheEndOfSequenceIds) {
  const nn::HfFolder llama = nn::read_hf_folder(kFixtures + "llama32");
  EXPECT_EQ(llama.architecture, "LlamaForCausalLM");
  EXPECT_EQ(llama.eos_token_ids, (std::vector<int64_t>{60, 61, 62}));  // generation_config.json's list
  ASSERT_TRUE(llama.llama.rope_scaling.has_value());
  EXPECT_EQ(llama.llama.rope_scaling->original_max_position_embeddings, 512);
  EXPECT_TRUE(llama.llama.tie_word_embeddings);
  const nn::HfFolder qwen3 = nn::read_hf_folder(kFixtures + "qwen3");
  EXPECT_TRUE(qwen3.llama.qk_norm);
  EXPECT_EQ(qwen3.llama.head_size(), 16);
  // Without head_dim, Qwen3Config's default of 128 (not 32 / 4): a model of 64·32·2 + 2·(32·128·12 + 3·32·48)
  // = 111616 numbers, more than the fixture's files hold.
  expect_refused(with_config("qwen3", "head_dim_default", [](json& c) { c.erase("head_dim"); }),
                 {"describes a model of 111616 numbers"});
  EXPECT_FALSE(qwen3.llama.tie_word_embeddings);
  EXPECT_EQ(nn::read_hf_folder(kFixtures + "qwen2").eos_token_ids, (std::vector<int64_t>{63}));
  EXPECT_TRUE(nn::read_hf_folder(kFixtures + "qwen2").llama.attention_bias);
  EXPECT_EQ(nn::read_hf_folder(kFixtures + "smollm2").weight_files.size(), 2u);
  EXPECT_TRUE(nn::is_hf_folder(kFixtures + "mistral"));
  EXPECT_FALSE(nn::is_hf_folder(kFixtures + "mistral/config.json"));
  EXPECT_FALSE(nn::is_hf_folder(kFixtures));

  // without generation_config.json: config.json's eos_token_id
  const fs::path folder = copy_of("llama32", "eos");
  fs::remove(folder / "generation_config.json");
  EXPECT_EQ(nn::read_hf_folder(folder.string()).eos_token_ids, (std::vector<int64_t>{60}));
  fs::remove_all(folder);
}

TEST(HfFolder, RefusesWhatTheModelDoesNotComputeNamingTheField) {
  expect_refused(with_config("llama32", "arch", [](json& c) { c["architectures"] = {"GemmaForCausalLM"}; }),
                 {"config.json", "'architectures'", "GemmaForCausalLM"});
  expect_refused(with_config("mistral", "moe", [](json& c) { c["num_local_experts"] = 8; }),
                 {"config.json", "'num_local_experts'", "mixture of experts"});
  expect_refused(with_config("qwen3", "moe2", [](json& c) { c["num_experts"] = 4; }), {"'num_experts'"});
  expect_refused(with_config("llama32", "act", [](json& c) { c["hidden_act"] = "gelu"; }), {"'hidden_act'", "gelu"});
  expect_refused(with_config("llama32", "norm", [](json& c) { c["layer_norm_eps"] = 1e-5; }),
                 {"'layer_norm_eps'", "normalisation"});
  expect_refused(with_config("qwen2", "window", [](json& c) { c["use_sliding_window"] = true; }),
                 {"'use_sliding_window'", "sliding window"});
  expect_refused(with_config("mistral", "mistral_window", [](json& c) { c["sliding_window"] = 32; }),
                 {"'sliding_window'", "32", "max_position_embeddings 64"});
  expect_refused(with_config("mistral", "mistral_default_window", [](json& c) {
                   c.erase("sliding_window");  // Hugging Face's default, 4096
                   c["max_position_embeddings"] = 8192;
                 }),
                 {"'sliding_window'", "4096", "max_position_embeddings 8192"});
  expect_refused(with_config("llama32", "yarn", [](json& c) { c["rope_scaling"]["rope_type"] = "yarn"; }),
                 {"'rope_scaling.rope_type'", "yarn"});
  expect_refused(with_config("llama32", "scaling_factor", [](json& c) { c["rope_scaling"].erase("factor"); }),
                 {"'rope_scaling.factor'", "missing"});
  expect_refused(with_config("llama32", "bias", [](json& c) { c["attention_bias"] = true; }), {"'attention_bias'"});
  expect_refused(with_config("llama32", "mlp_bias", [](json& c) { c["mlp_bias"] = true; }), {"'mlp_bias'"});
  expect_refused(with_config("llama32", "no_width", [](json& c) { c.erase("hidden_size"); }), {"'hidden_size'", "missing"});
  expect_refused(with_config("llama32", "width_text", [](json& c) { c["hidden_size"] = "32"; }),
                 {"'hidden_size'", "\"32\"", "whole number"});
  expect_refused(with_config("llama32", "kv", [](json& c) { c["num_key_value_heads"] = 3; }),
                 {"config.json", "num_key_value_heads 3"});
  expect_refused(with_config("qwen2", "eos", [](json& c) { c["eos_token_id"] = 64; }), {"'eos_token_id'", "64"});
  // a model larger than its files is refused before anything of its size is allocated
  expect_refused(with_config("llama32", "huge", [](json& c) { c["vocab_size"] = int64_t(1) << 40; }),
                 {"config.json", "describes a model of", "more than its weights (37344 bytes) hold"});
  const fs::path bad_json = copy_of("llama32", "json");
  write_text(bad_json / "config.json", "{\"architectures\": [");
  expect_refused(bad_json, {"config.json", "not valid JSON"});
  const fs::path bad_eos = copy_of("llama32", "generation_eos");
  write_text(bad_eos / "generation_config.json", R"({"eos_token_id": [60, "x"]})");
  expect_refused(bad_eos, {"generation_config.json", "'eos_token_id[1]'"});
}

TEST(HfFolder, QwenSlidingWindowFieldsNotInUseAndAMistralWindowAsLongAsTheContextAreRead) {
  const fs::path qwen = with_config("qwen2", "window_off", [](json& c) { c["sliding_window"] = 4; });
  EXPECT_EQ(refusal_of(qwen), "");  // use_sliding_window is false
  fs::remove_all(qwen);
  const fs::path mistral = with_config("mistral", "window_all", [](json& c) { c["sliding_window"] = 64; });
  EXPECT_EQ(refusal_of(mistral), "");
  fs::remove_all(mistral);
}

// ---- the folder: weights

// A safetensors file of `tensors`, each given as (name, dtype code, shape, raw bytes), written by hand.
struct RawTensor {
  std::string name, dtype;
  Shape shape;
  std::string bytes;
};
void write_raw_safetensors(const fs::path& path, const std::vector<RawTensor>& tensors) {
  json header = json::object();
  size_t offset = 0;
  std::string data;
  for (const RawTensor& t : tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
    data += t.bytes;
  }
  const std::string text = header.dump();
  std::string length(8, '\0');
  for (int i = 0; i < 8; ++i) length[size_t(i)] = char((uint64_t(text.size()) >> (8 * i)) & 0xff);
  write_text(path, length + text + data);
}

std::string halves(const std::vector<uint16_t>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * 2);
}

TEST(HfWeights, WidensBf16AndF16ExactlyAndRefusesThemWhereNotAsked) {
  const fs::path file = fs::temp_directory_path() / ("scratchgrad_llama_halves_" + std::to_string(::getpid()));
  // BF16: 1, −2.5, the largest finite, the smallest subnormal; F16: 1, −0.5, 65504, 2^-24 (subnormal), −0, 1/3's half
  write_raw_safetensors(file, {{"b", "BF16", {4}, halves({0x3f80, 0xc020, 0x7f7f, 0x0001})},
                               {"h", "F16", {6}, halves({0x3c00, 0xb800, 0x7bff, 0x0001, 0x8000, 0x3555})}});
  std::map<std::string, std::vector<float>> read;
  nn::read_safetensors(file.string(), {.on_header = {}, .destination = {},
                                       .on_tensor = [&](const nn::TensorHeader& h, const Tensor& t) {
                                         EXPECT_EQ(t.dtype(), DType::Float32);
                                         EXPECT_EQ(h.file_dtype, h.name == "b" ? "BF16" : "F16");
                                         read[h.name] = t.to_vector<float>();
                                       },
                                       .widen_half_floats = true});
  EXPECT_EQ(read["b"], (std::vector<float>{1.0f, -2.5f, 3.3895313892515355e38f, 9.183549615799121e-41f}));
  const std::vector<float> h = read["h"];
  ASSERT_EQ(h.size(), 6u);
  EXPECT_EQ(h[0], 1.0f);
  EXPECT_EQ(h[1], -0.5f);
  EXPECT_EQ(h[2], 65504.0f);
  EXPECT_EQ(h[3], std::ldexp(1.0f, -24));
  EXPECT_TRUE(h[4] == 0.0f && std::signbit(h[4]));
  EXPECT_EQ(h[5], 0.333251953125f);
  // A reader that did not ask (GPT-2's files, our checkpoints) reads BF16 as bfloat16, and refuses F16.
  EXPECT_THROW_WITH(nn::load_safetensors(file.string()), nn::CheckpointError, "tensor 'h' has unsupported dtype \"F16\"",
                    "(the dtypes read are F32, F64, I64, BOOL and BF16)");
  fs::remove(file);
}

// float32 → F16 bits, for a value F16 holds exactly (a normal F16 number with at most 11 significant bits, or 0).
uint16_t f16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const uint32_t sign = (u >> 16) & 0x8000;
  if (x == 0) return uint16_t(sign);
  const int exponent = int((u >> 23) & 0xff) - 127;
  EXPECT_TRUE(exponent >= -14 && exponent <= 15 && (u & 0x1fff) == 0) << x << " is not an F16 number";
  return uint16_t(sign | (uint32_t(exponent + 15) << 10) | ((u >> 13) & 0x3ff));
}

TEST(HfWeights, TheSameValuesInF16AndF32LoadTheSameModel) {
  // The fixture's BF16 values (8 significant bits: F16 holds each one that is at least 2^-14 in size),
  // the smaller ones made 0, written once as F16 by hand and once as F32 by save_safetensors.
  nn::NamedTensors values = fixture_model("mistral")->named_parameters();
  const fs::path f32 = copy_of("mistral", "f32"), f16 = copy_of("mistral", "f16");
  std::vector<RawTensor> halves_file;
  for (auto& [name, p] : values) {
    std::vector<float> v = p.to_vector<float>();
    std::vector<uint16_t> bits;
    for (float& x : v) {
      if (std::abs(x) < std::ldexp(1.0f, -14)) x = 0;
      bits.push_back(f16_bits(x));
    }
    p = from_vector(v, p.shape());
    halves_file.push_back({name, "F16", p.shape(), halves(bits)});
  }
  write_raw_safetensors(f16 / "model.safetensors", halves_file);
  nn::save_safetensors((f32 / "model.safetensors").string(), values);  // (with a checksum, which is read and checked)
  auto from_f16 = nn::load_llama_folder(nn::read_hf_folder(f16.string()));
  auto from_f32 = nn::load_llama_folder(nn::read_hf_folder(f32.string()));
  for (const auto& [name, p] : from_f16->named_parameters()) {
    const auto same_name = [&](const auto& entry) { return entry.first == name; };
    const auto it = std::find_if(values.begin(), values.end(), same_name);
    ASSERT_NE(it, values.end()) << name;
    EXPECT_TRUE(equal(p, it->second)) << name << " read from F16";
  }
  const Tensor ids = expected_of("mistral")["ids"];
  NoGradGuard no_grad;
  EXPECT_TRUE(equal(from_f16->forward(ids), from_f32->forward(ids)));
  fs::remove_all(f32);
  fs::remove_all(f16);
}

// The fixture's model.safetensors with one tensor replaced (or removed: nullopt) or one added.
fs::path with_tensor(const std::string& tag, const std::string& name, std::optional<Tensor> value) {
  const fs::path folder = copy_of("mistral", tag);
  nn::Checkpoint ck = nn::load_safetensors((folder / "model.safetensors").string(), true);
  bool found = false;
  for (auto it = ck.tensors.begin(); it != ck.tensors.end(); ++it)
    if (it->first == name) {
      found = true;
      if (value) it->second = *value;
      else ck.tensors.erase(it);
      break;
    }
  if (!found && value) ck.tensors.emplace_back(name, *value);
  nn::save_safetensors((folder / "model.safetensors").string(), ck.tensors);
  return folder;
}

TEST(HfWeights, RefusesTensorsMissingMisshapenUnexpectedOrNotFiniteByName) {
  expect_refused(with_tensor("missing", "model.layers.1.mlp.up_proj.weight", std::nullopt),
                 {"tensor 'model.layers.1.mlp.up_proj.weight' [48, 32] is missing"});
  expect_refused(with_tensor("shape", "model.norm.weight", ones({31})),
                 {"model.safetensors", "tensor 'model.norm.weight' has shape [31], expected [32]"});
  expect_refused(with_tensor("extra", "model.layers.2.mlp.up_proj.weight", ones({48, 32})),
                 {"unexpected tensor 'model.layers.2.mlp.up_proj.weight' [48, 32]"});
  Tensor nan_norm = ones({32});
  nan_norm.fill_(std::nan(""));
  expect_refused(with_tensor("nan", "model.norm.weight", nan_norm), {"tensor 'model.norm.weight' holds 32 NaN"});
  expect_refused(with_tensor("int", "model.norm.weight", zeros({32}, DType::Int64)),
                 {"tensor 'model.norm.weight' has dtype I64, expected floating point"});
  // a NaN stored as BF16 (0x7fc0) is refused as well, once widened
  const fs::path bf16_nan = copy_of("mistral", "bf16_nan");
  std::vector<RawTensor> raw;
  for (const auto& [name, t] : nn::load_safetensors((bf16_nan / "model.safetensors").string(), true).tensors) {
    if (name == "model.norm.weight") {
      std::vector<uint16_t> bits(32, 0x3f80);
      bits[5] = 0x7fc0;
      raw.push_back({name, "BF16", t.shape(), halves(bits)});
    } else {
      const std::vector<float> v = t.to_vector<float>();
      raw.push_back({name, "F32", t.shape(), std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4)});
    }
  }
  write_raw_safetensors(bf16_nan / "model.safetensors", raw);
  expect_refused(bf16_nan, {"tensor 'model.norm.weight' holds 1 NaN or infinite values of 32"});
  // a tied model's file may carry the head's copy, and older files RoPE's inv_freq: both are read past
  const fs::path extras = copy_of("llama32", "tolerated");
  {
    nn::Checkpoint ck = nn::load_safetensors((extras / "model.safetensors").string(), true);
    ck.tensors.emplace_back("lm_head.weight", ones({64, 32}));
    ck.tensors.emplace_back("model.layers.0.self_attn.rotary_emb.inv_freq", ones({4}));
    nn::save_safetensors((extras / "model.safetensors").string(), ck.tensors);
  }
  EXPECT_EQ(refusal_of(extras), "");
  fs::remove_all(extras);
}

TEST(HfWeights, ReadsShardsAsTheIndexListsThemAndRefusesAnIndexThatDisagrees) {
  const nn::HfFolder folder = nn::read_hf_folder(kFixtures + "smollm2");
  EXPECT_EQ(folder.shard_of.at("model.embed_tokens.weight"), kFixtures + "smollm2/model-00001-of-00002.safetensors");
  EXPECT_EQ(folder.shard_of.at("model.norm.weight"), kFixtures + "smollm2/model-00002-of-00002.safetensors");

  auto with_index = [](const std::string& tag, const std::function<void(json&)>& edit) {
    const fs::path f = copy_of("smollm2", tag);
    json index = read_json(f / "model.safetensors.index.json");
    edit(index);
    write_text(f / "model.safetensors.index.json", index.dump());
    return f;
  };
  expect_refused(with_index("outside", [](json& i) { i["weight_map"]["model.norm.weight"] = "../model.safetensors"; }),
                 {"model.safetensors.index.json", "'weight_map'", "not a file of the folder"});
  expect_refused(with_index("unlisted", [](json& i) { i["weight_map"].erase("model.norm.weight"); }),
                 {"model.safetensors.index.json", "does not list tensor 'model.norm.weight'"});
  expect_refused(with_index("other_shard",
                            [](json& i) { i["weight_map"]["model.norm.weight"] = "model-00001-of-00002.safetensors"; }),
                 {"model-00002-of-00002.safetensors", "holds tensor 'model.norm.weight', which the index puts in"});
  expect_refused(with_index("gone", [](json& i) { i["weight_map"]["model.norm.weight"] = "model-00003.safetensors"; }),
                 {"model-00003.safetensors"});
  const fs::path none = copy_of("smollm2", "no_weights");
  fs::remove(none / "model.safetensors.index.json");
  expect_refused(none, {"neither model.safetensors nor model.safetensors.index.json"});
}

TEST(HfWeights, ASavedFolderReadsBackAsTheSameModel) {
  for (const auto& [family, architecture] : std::vector<std::pair<std::string, std::string>>{
           {"llama32", "LlamaForCausalLM"}, {"qwen2", "Qwen2ForCausalLM"}, {"qwen3", "Qwen3ForCausalLM"}}) {
    SCOPED_TRACE(family);
    auto model = fixture_model(family);
    const nn::HfFolder original = nn::read_hf_folder(kFixtures + family);
    const fs::path saved = fs::temp_directory_path() / ("scratchgrad_llama_saved_" + std::to_string(::getpid()) + family);
    fs::remove_all(saved);
    nn::save_llama_folder(*model, saved.string(), architecture, original.eos_token_ids);
    const nn::HfFolder again = nn::read_hf_folder(saved.string());
    EXPECT_EQ(again.architecture, architecture);
    EXPECT_EQ(again.eos_token_ids, original.eos_token_ids);
    EXPECT_EQ(again.llama.rope_scaling.has_value(), original.llama.rope_scaling.has_value());
    auto reread = nn::load_llama_folder(again);
    const Tensor ids = expected_of(family)["ids"];
    NoGradGuard no_grad;
    EXPECT_TRUE(equal(reread->forward(ids), model->forward(ids)));
    fs::remove_all(saved);
  }
  auto qwen3 = fixture_model("qwen3");
  EXPECT_THROW_WITH(nn::save_llama_folder(*qwen3, "/nonexistent", "LlamaForCausalLM"), std::invalid_argument,
                    "q/k norms is not a LlamaForCausalLM");
  (*qwen3->model->layers)[0].self_attn->q_proj->add_lora(2, 4.0);
  EXPECT_THROW_WITH(nn::save_llama_folder(*qwen3, "/nonexistent", "Qwen3ForCausalLM"), std::invalid_argument,
                    "model.layers.0.self_attn.q_proj.lora.A", "merge them first");
}

// ---- GPT2LMHeadModel folders

TEST(HfGpt2, ReadsAGpt2WhoseHeadsAreNot64WideWithTheConfigsHeadCount) {
  manual_seed(12);
  nn::GPTModel original(nn::GPTConfig{.vocab_size = 40, .context_length = 16, .emb_dim = 32, .n_heads = 8,
                                      .n_layers = 2, .drop_rate = 0.0, .qkv_bias = true});
  original.tie_weights();
  original.eval();
  const fs::path folder = fs::temp_directory_path() / ("scratchgrad_llama_gpt2_" + std::to_string(::getpid()));
  fs::remove_all(folder);
  fs::create_directories(folder);
  nn::save_safetensors((folder / "model.safetensors").string(), nn::gpt2_state_dict(original));  // no n_head in it
  const json config = {{"architectures", {"GPT2LMHeadModel"}}, {"model_type", "gpt2"}, {"vocab_size", 40},
                       {"n_positions", 16}, {"n_ctx", 16}, {"n_embd", 32}, {"n_head", 8}, {"n_layer", 2},
                       {"layer_norm_epsilon", 1e-5}, {"activation_function", "gelu_new"}, {"n_inner", nullptr},
                       {"eos_token_id", 39}};
  write_text(folder / "config.json", config.dump(2));
  // The file alone cannot say its heads (32 does not split into heads of 64):
  EXPECT_THROW_WITH(nn::load_gpt2((folder / "model.safetensors").string()), nn::CheckpointError, "cannot split emb_dim 32");
  const nn::HfFolder hf = nn::read_hf_folder(folder.string());
  EXPECT_TRUE(hf.is_gpt2());
  EXPECT_EQ(hf.eos_token_ids, (std::vector<int64_t>{39}));
  auto model = nn::load_gpt2_folder(hf);
  EXPECT_EQ(model->cfg.n_heads, 8);
  const Tensor ids = from_vector(std::vector<int64_t>{1, 5, 9, 33, 2, 0, 17}, {1, 7});
  NoGradGuard no_grad;
  EXPECT_TRUE(equal(model->forward(ids), original.forward(ids)));
  std::unique_ptr<nn::LanguageModel> through_dispatch = nn::load_hf_folder(folder.string());
  EXPECT_NE(dynamic_cast<nn::GPTModel*>(through_dispatch.get()), nullptr);

  json wrong = config;
  wrong["n_layer"] = 3;
  write_text(folder / "config.json", wrong.dump());
  expect_refused(folder, {"config.json", "'n_layer' is 3", "holds 2"});
}

TEST(HfGpt2, RefusesAnotherActivationNamingTheField) {
  const fs::path folder = fs::temp_directory_path() / ("scratchgrad_llama_gpt2_act_" + std::to_string(::getpid()));
  fs::create_directories(folder);
  write_text(folder / "config.json", R"({"architectures": ["GPT2LMHeadModel"], "vocab_size": 40, "n_positions": 16,
    "n_embd": 32, "n_head": 8, "n_layer": 2, "activation_function": "relu"})");
  expect_refused(folder, {"config.json", "'activation_function'", "relu"});
}

}  // namespace
