// test_llama_cli.cpp — the command line on Llama-family models: `train --model llama` (a few steps, saved,
// resumed to the same bits), generate / eval / info on its checkpoint and on the PyTorch twin's tiny BF16
// folders (tests/reference/make_llama_fixture.py: greedy ids equal to the twin's, with and without the
// key/value cache, stopped at the folder's eos ids), a folder's tokenizer.json for --prompt text, a
// GPT2LMHeadModel folder whose heads are not 64 wide, and the refusals (one line, exit status 2).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "autograd/autograd.h"
#include "nn/gpt.h"
#include "nn/gpt2.h"
#include "nn/hf_folder.h"
#include "nn/llama.h"
#include "nn/tokenizer/hf_json.h"
#include "nn/tokenizer/tokenizer.h"
#include "nn/safetensors.h"
#include "test_helpers.h"
#include "test_process.h"

namespace {

namespace fs = std::filesystem;
using CliRun = testing_process::Shell;
using testing_process::ids_in;

const std::string kFixtures = std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/reference/fixtures/hf/";
const std::vector<std::string> kFamilies = {"llama32", "qwen2", "qwen3", "smollm2", "mistral"};

CliRun scratchgrad(const std::string& args) {
  return testing_process::shell(std::string(SCRATCHGRAD_BIN_DIR) + "/scratchgrad " + args);
}

void expect_refused(const CliRun& r, const std::string& needle) {
  EXPECT_EQ(r.status, 2) << r.command << "\n" << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("scratchgrad: error:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
  const size_t program = r.command.find("/bin/scratchgrad ");  // docs/reliability.md's catalog: the call
  const std::string call = program == std::string::npos ? r.command : r.command.substr(program + 5);
  testing_helpers::record_refusal(call, r.err.substr(0, r.err.find('\n')));
}

std::string joined(const std::vector<int64_t>& ids) { return fmt::format("{}", fmt::join(ids, " ")); }

// The twin's expectations for a folder: the ids it ran, and the greedy continuation of ids[0, :5].
struct TwinGreedy {
  std::vector<int64_t> prompt, greedy;
};

TwinGreedy twin_greedy(const std::string& family) {
  const nn::Checkpoint ck = nn::load_safetensors(kFixtures + family + "_expected.safetensors");
  TwinGreedy t;
  for (const auto& [name, tensor] : ck.tensors) {
    if (name == "ids") {
      const std::vector<int64_t> ids = tensor.to_vector<int64_t>();
      t.prompt.assign(ids.begin(), ids.begin() + 5);
    }
    if (name == "greedy") t.greedy = tensor.to_vector<int64_t>();
  }
  return t;
}

std::string greedy_command(const std::string& folder, const std::vector<int64_t>& prompt, size_t tokens,
                           const std::string& more = "") {
  return fmt::format("generate --checkpoint {} --prompt-ids '{}' --tokens {} --temperature 0 --ids {}", folder,
                     joined(prompt), tokens, more);
}

TEST(LlamaCli, FolderGreedyIdsAreTheTwinsWithAndWithoutTheCache) {
  for (const std::string& family : kFamilies) {
    SCOPED_TRACE(family);
    const TwinGreedy twin = twin_greedy(family);
    ASSERT_EQ(twin.prompt.size(), 5u);
    ASSERT_FALSE(twin.greedy.empty());
    const std::string folder = kFixtures + family;
    CliRun cached = scratchgrad(greedy_command(folder, twin.prompt, twin.greedy.size(), "--stop-id -1"));
    ASSERT_EQ(cached.status, 0) << cached.err;
    EXPECT_EQ(ids_in(cached.out), twin.greedy);
    CliRun uncached = scratchgrad(greedy_command(folder, twin.prompt, twin.greedy.size(), "--stop-id -1 --no-kv-cache"));
    ASSERT_EQ(uncached.status, 0) << uncached.err;
    EXPECT_EQ(ids_in(uncached.out), twin.greedy);
  }
}

TEST(LlamaCli, GenerationStopsAtTheFoldersEosIds) {
  // llama32's generation_config.json lists 60, 61 and 62: by default the greedy ids end at the first of
  // them (included); --stop-id -1 never stops. The check: the output is the twin's greedy ids cut there.
  for (const std::string& family : kFamilies) {
    SCOPED_TRACE(family);
    const TwinGreedy twin = twin_greedy(family);
    std::ifstream in(kFixtures + family + "/generation_config.json");
    const std::string config((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CliRun r = scratchgrad(greedy_command(kFixtures + family, twin.prompt, twin.greedy.size()));
    ASSERT_EQ(r.status, 0) << r.err;
    const std::vector<int64_t> got = ids_in(r.out);
    ASSERT_FALSE(got.empty());
    ASSERT_LE(got.size(), twin.greedy.size());
    EXPECT_TRUE(std::equal(got.begin(), got.end(), twin.greedy.begin()));
    if (got.size() < twin.greedy.size()) {  // it stopped early: at an eos id of the folder's
      EXPECT_NE(config.find(std::to_string(got.back())), std::string::npos) << joined(got);
    }
  }
}

TEST(LlamaCli, InfoAndEvalReadAFolder) {
  CliRun info = scratchgrad("info --checkpoint " + kFixtures + "qwen3");
  ASSERT_EQ(info.status, 0) << info.err;
  EXPECT_NE(info.out.find("Qwen3ForCausalLM"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("q/k norms"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("model.layers.0.self_attn.q_norm.weight"), std::string::npos) << info.out;
  CliRun smol = scratchgrad("info --checkpoint " + kFixtures + "smollm2");
  ASSERT_EQ(smol.status, 0) << smol.err;
  EXPECT_NE(smol.out.find("model-00002-of-00002.safetensors"), std::string::npos) << smol.out;

  const TwinGreedy twin = twin_greedy("llama32");
  const fs::path ids = testing_process::scratch("llama_eval_ids.txt");
  std::ofstream(ids) << joined(twin.prompt) << " " << joined(twin.greedy) << "\n";
  CliRun eval = scratchgrad("eval --checkpoint " + kFixtures + "llama32 --ids-file " + ids.string());
  ASSERT_EQ(eval.status, 0) << eval.err;
  EXPECT_NE(eval.out.find("eval: 13 tokens"), std::string::npos) << eval.out;
  EXPECT_NE(eval.out.find("mean loss"), std::string::npos) << eval.out;
}

// A copy of the llama32 folder with a tokenizer.json (the tiny Qwen3-layout one of the tokenizer's fixtures,
// whose digits are ids 15 .. 24: inside the model's 64).
fs::path folder_with_tokenizer() {
  const fs::path dir = testing_process::scratch("llama32_with_tokenizer");
  fs::create_directories(dir);
  for (const char* file : {"config.json", "generation_config.json", "model.safetensors"})
    fs::copy_file(kFixtures + "llama32/" + file, dir / file, fs::copy_options::overwrite_existing);
  fs::copy_file(std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/reference/fixtures/hf_tokenizer/tiny-qwen3.tokenizer.json",
                dir / "tokenizer.json", fs::copy_options::overwrite_existing);
  return dir;
}

TEST(LlamaCli, TheFoldersTokenizerReadsPromptText) {
  const fs::path dir = folder_with_tokenizer();
  CliRun text = scratchgrad("generate --checkpoint " + dir.string() + " --prompt 0123 --tokens 6 --temperature 0 --ids --stop-id -1");
  ASSERT_EQ(text.status, 0) << text.err;
  CliRun ids = scratchgrad(greedy_command(dir.string(), {15, 16, 17, 18}, 6, "--stop-id -1"));
  ASSERT_EQ(ids.status, 0) << ids.err;
  EXPECT_EQ(ids_in(text.out), ids_in(ids.out));
  EXPECT_EQ(ids_in(text.out).size(), 6u);
  CliRun as_text = scratchgrad("generate --checkpoint " + dir.string() + " --prompt 0123 --tokens 6 --temperature 0 --stop-id -1");
  ASSERT_EQ(as_text.status, 0) << as_text.err;
  EXPECT_EQ(as_text.out.rfind("0123", 0), 0u) << as_text.out;  // the prompt, then the new tokens as text
  CliRun info = scratchgrad("info --checkpoint " + dir.string());
  EXPECT_NE(info.out.find("tokenizer: tokenizer.json"), std::string::npos) << info.out;
}

// ---------------------------------------------------------------- train --model llama

const std::string& llama_text() {
  static const std::string path = [] {
    std::string text;
    for (int i = 0; i < 20; ++i) text += "the quick brown fox jumps over the lazy dog; ";
    const std::string p = testing_process::scratch("llama_corpus.txt").string();
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }();
  return path;
}

std::string tiny_run(const std::string& more) {
  return "train --model llama --preset tiny --text " + llama_text() + " --context 16 --batch 4 --warmup 2 --sample 8 " + more;
}

std::vector<double> losses(const std::string& out) {
  std::vector<double> values;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("step", 0) == 0 && line.find("| loss ") != std::string::npos)
      values.push_back(std::stod(line.substr(line.find("| loss ") + 7)));
  return values;
}

TEST(LlamaCli, TrainsAndItsCheckpointGeneratesEvaluatesAndDescribesItself) {
  const fs::path ck = testing_process::scratch("llama_tiny.safetensors");
  CliRun r = scratchgrad(tiny_run("--steps 30 --eval-every 10 --lr 1e-2 --save " + ck.string()));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("training a Llama"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 blocks D 48 T 16 B 4 heads 4 kv-heads 2 ffn 128"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("mfu "), std::string::npos) << r.out;
  const std::vector<double> l = losses(r.out);
  ASSERT_GE(l.size(), 3u);
  EXPECT_LT(l.back(), l.front());  // it learns

  // Hugging Face's names, the config in the metadata, the head tied
  const nn::Checkpoint saved = nn::load_safetensors(ck.string());
  EXPECT_EQ(saved.metadata.at("format"), "scratchgrad-llama");
  EXPECT_EQ(saved.metadata.at("num_key_value_heads"), "2");
  EXPECT_EQ(saved.metadata.at("intermediate_size"), "128");
  bool has_q = false, has_head = false;
  for (const auto& [name, t] : saved.tensors) {
    has_q |= name == "model.layers.1.self_attn.k_proj.weight" && t.shape() == autograd::Shape{24, 48};
    has_head |= name == "lm_head.weight";
  }
  EXPECT_TRUE(has_q);
  EXPECT_FALSE(has_head);

  CliRun cached = scratchgrad("generate --checkpoint " + ck.string() + " --prompt 'the quick' --tokens 20 --ids");
  CliRun uncached = scratchgrad("generate --checkpoint " + ck.string() + " --prompt 'the quick' --tokens 20 --ids --no-kv-cache");
  ASSERT_EQ(cached.status, 0) << cached.err;
  ASSERT_EQ(uncached.status, 0) << uncached.err;
  EXPECT_EQ(ids_in(cached.out).size(), 20u);
  EXPECT_EQ(ids_in(cached.out), ids_in(uncached.out));

  CliRun eval = scratchgrad("eval --checkpoint " + ck.string() + " --text " + llama_text());
  ASSERT_EQ(eval.status, 0) << eval.err;
  EXPECT_NE(eval.out.find("bits per byte"), std::string::npos) << eval.out;
  CliRun info = scratchgrad("info --checkpoint " + ck.string());
  ASSERT_EQ(info.status, 0) << info.err;
  EXPECT_NE(info.out.find("model: Llama, 2 blocks, vocab"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("kv-heads 2"), std::string::npos) << info.out;
}

TEST(LlamaCli, AResumedRunEndsOnTheUninterruptedRunsBits) {
  const fs::path whole = testing_process::scratch("llama_whole.safetensors"),
                 half = testing_process::scratch("llama_half.safetensors");
  ASSERT_EQ(scratchgrad(tiny_run("--steps 6 --save " + whole.string())).status, 0);
  CliRun first = scratchgrad(tiny_run("--steps 6 --save-every 3 --save " + half.string()));
  ASSERT_EQ(first.status, 0) << first.err;
  // the checkpoint of step 3 is overwritten by the end's: make the step-3 one again and resume it
  ASSERT_EQ(scratchgrad(tiny_run("--steps 3 --save " + half.string())).status, 0);
  CliRun resumed = scratchgrad("train --resume " + half.string() + " --steps 6 --save " + half.string());
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("resuming"), std::string::npos) << resumed.out;
  const nn::Checkpoint a = nn::load_safetensors(whole.string()), b = nn::load_safetensors(half.string());
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    if (a.tensors[i].first.starts_with("optimizer.")) continue;
    EXPECT_EQ(a.tensors[i].first, b.tensors[i].first);
    EXPECT_EQ(a.tensors[i].second.to_vector<float>(), b.tensors[i].second.to_vector<float>()) << a.tensors[i].first;
  }
}

TEST(LlamaCli, TrainsOnTheReferenceKernelsAndWithBpeTokens) {
  CliRun reference = scratchgrad(tiny_run("--steps 3 --kernels reference"));
  ASSERT_EQ(reference.status, 0) << reference.err;
  CliRun bpe = scratchgrad(tiny_run("--steps 3 --tokenizer bpe --vocab-size 280 --dim 32 --heads 4 --kv-heads 1 --ffn-dim 40"));
  ASSERT_EQ(bpe.status, 0) << bpe.err;
  EXPECT_NE(bpe.out.find("heads 4 kv-heads 1 ffn 40"), std::string::npos) << bpe.out;
  EXPECT_NE(bpe.out.find("bits/byte"), std::string::npos) << bpe.out;
}

// ---------------------------------------------------------------- GPT2LMHeadModel folder, heads 12 wide

fs::path gpt2_folder() {
  const fs::path dir = testing_process::scratch("gpt2_folder");
  fs::create_directories(dir);
  autograd::manual_seed(5);
  nn::GPTModel model(nn::GPTConfig{.vocab_size = 50257, .context_length = 32, .emb_dim = 24, .n_heads = 2,
                                   .n_layers = 2, .drop_rate = 0.0, .qkv_bias = true});
  model.tie_weights();
  nn::save_safetensors((dir / "model.safetensors").string(), nn::gpt2_state_dict(model), {{"format", "pt"}});
  std::ofstream(dir / "config.json") << R"({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
    "vocab_size": 50257, "n_positions": 32, "n_embd": 24, "n_head": 2, "n_layer": 2, "layer_norm_epsilon": 1e-5})";
  return dir;
}

TEST(LlamaCli, AGpt2FolderWithHeadsNot64WideGeneratesAsItsFile) {
  const fs::path dir = gpt2_folder();
  CliRun folder = scratchgrad(greedy_command(dir.string(), {464, 3290, 318}, 5));
  ASSERT_EQ(folder.status, 0) << folder.err;
  CliRun file = scratchgrad(greedy_command((dir / "model.safetensors").string(), {464, 3290, 318}, 5, "--heads 2"));
  ASSERT_EQ(file.status, 0) << file.err;
  EXPECT_EQ(ids_in(folder.out), ids_in(file.out));
  CliRun info = scratchgrad("info --checkpoint " + dir.string());
  EXPECT_NE(info.out.find("heads 2"), std::string::npos) << info.out;
}

TEST(LlamaCli, AGpt2FolderWithHeadsNot64WideIsFineTuned) {
  const fs::path dir = gpt2_folder();
  const std::string gpt2_tokenizer = std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/tokenizer/gpt2";
  const fs::path out = testing_process::scratch("gpt2_folder_finetuned.safetensors");
  CliRun r = scratchgrad("train --init " + dir.string() + " --tokenizer-file " + gpt2_tokenizer + " --text " + llama_text() +
                         " --steps 3 --context 16 --save " + out.string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("heads 2"), std::string::npos) << r.out;
  CliRun info = scratchgrad("info --checkpoint " + out.string());
  EXPECT_NE(info.out.find("heads 2, trained 3 steps"), std::string::npos) << info.out << info.err;
}

// ---------------------------------------------------------------- a Llama folder fine-tuned, LoRA, merge

// A Llama folder of our own (the twin's use a 64-id vocabulary no tokenizer fits): random weights with the
// vocabulary of the tiny SmolLM2-layout tokenizer.json, which it carries.
fs::path llama_folder_with_tokenizer() {
  const fs::path dir = testing_process::scratch("llama_folder_tok");
  fs::create_directories(dir);
  const std::string tok_file = std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/reference/fixtures/hf_tokenizer/tiny-smollm2.tokenizer.json";
  fs::copy_file(tok_file, dir / "tokenizer.json", fs::copy_options::overwrite_existing);
  const int64_t vocab = tokenizer::load_tokenizer_json(tok_file).vocab_size();
  nn::LlamaConfig c;
  c.vocab_size = vocab, c.hidden_size = 32, c.intermediate_size = 64, c.num_hidden_layers = 2;
  c.num_attention_heads = 4, c.num_key_value_heads = 2, c.max_position_embeddings = 64, c.tie_word_embeddings = true;
  autograd::manual_seed(3);
  nn::LlamaModel model(c);
  nn::save_safetensors((dir / "model.safetensors").string(), model.state_dict(), {{"format", "pt"}});
  std::ofstream(dir / "config.json") << fmt::format(R"({{"architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "vocab_size": {}, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
    "hidden_act": "silu", "tie_word_embeddings": true}})", vocab);
  return dir;
}

// A folder of `architecture` written from a tiny model of config `c` (its vocabulary that of the tiny
// SmolLM2-layout tokenizer.json, which it carries).
fs::path folder_of(const std::string& name, nn::LlamaConfig c, const std::string& architecture) {
  const fs::path dir = testing_process::scratch(name);
  const std::string tok_file = std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/reference/fixtures/hf_tokenizer/tiny-smollm2.tokenizer.json";
  c.vocab_size = tokenizer::load_tokenizer_json(tok_file).vocab_size();
  c.hidden_size = 32, c.intermediate_size = 64, c.num_hidden_layers = 2, c.num_attention_heads = 4;
  c.num_key_value_heads = 2, c.max_position_embeddings = 64, c.rope_theta = 10000.0;
  autograd::manual_seed(5);
  nn::save_llama_folder(nn::LlamaModel(c), dir.string(), architecture, {});
  fs::copy_file(tok_file, dir / "tokenizer.json", fs::copy_options::overwrite_existing);
  return dir;
}

// What Qwen2 (q/k/v biases), Qwen3 (q/k norms, its own head_dim) and Llama 3.2 (rope_scaling) add to a Llama
// is kept in our checkpoint of a fine-tuned folder: with a learning rate too small to move a float32 weight,
// the checkpoint scores a text to the same digits as the folder it came from.
TEST(LlamaCli, AFineTunedFolderIsSavedWithItsWholeConfig) {
  nn::LlamaConfig qwen2, qwen3, llama32;
  qwen2.attention_bias = true;
  qwen3.qk_norm = true, qwen3.head_dim = 16;  // not hidden_size / heads (8)
  llama32.rope_scaling = nn::RopeScaling{.factor = 8, .original_max_position_embeddings = 16};
  const std::vector<std::pair<fs::path, std::string>> folders = {
      {folder_of("qwen2_folder", qwen2, "Qwen2ForCausalLM"), "q/k/v biases"},
      {folder_of("qwen3_folder", qwen3, "Qwen3ForCausalLM"), "q/k norms"},
      {folder_of("llama32_scaled_folder", llama32, "LlamaForCausalLM"), "rope_scaling llama3 factor 8"}};
  for (const auto& [dir, feature] : folders) {
    SCOPED_TRACE(dir.string());
    const fs::path saved = testing_process::scratch(dir.filename().string() + ".safetensors");
    CliRun r = scratchgrad("train --init " + dir.string() + " --text " + llama_text() + " --steps 1 --context 16 --lr 1e-30 "
                           "--save " + saved.string());
    ASSERT_EQ(r.status, 0) << r.err;
    CliRun info = scratchgrad("info --checkpoint " + saved.string());
    ASSERT_EQ(info.status, 0) << info.err;
    EXPECT_NE(info.out.find(feature), std::string::npos) << info.out;
    CliRun from_folder = scratchgrad("eval --checkpoint " + dir.string() + " --text " + llama_text());
    CliRun from_checkpoint = scratchgrad("eval --checkpoint " + saved.string() + " --text " + llama_text());
    ASSERT_EQ(from_folder.status, 0) << from_folder.err;
    ASSERT_EQ(from_checkpoint.status, 0) << from_checkpoint.err;
    const auto loss_line = [](const std::string& out) { return out.substr(out.find("mean loss")); };
    EXPECT_EQ(loss_line(from_checkpoint.out), loss_line(from_folder.out));
  }
}

TEST(LlamaCli, AFolderIsFineTunedInFullAndWithLoraAndMerged) {
  const fs::path dir = llama_folder_with_tokenizer();
  const fs::path full = testing_process::scratch("llama_full_ft.safetensors");
  CliRun r = scratchgrad("train --init " + dir.string() + " --text " + llama_text() + " --steps 4 --context 16 --save " +
                         full.string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("training a Llama"), std::string::npos) << r.out;
  CliRun gen = scratchgrad("generate --checkpoint " + full.string() + " --prompt 'the quick' --tokens 5 --ids --temperature 0");
  ASSERT_EQ(gen.status, 0) << gen.err;
  EXPECT_EQ(ids_in(gen.out).size(), 5u);

  const fs::path lora = testing_process::scratch("llama_lora.safetensors");
  CliRun l = scratchgrad("train --init " + dir.string() + " --text " + llama_text() +
                         " --steps 4 --context 16 --lora-rank 2 --lora-targets attn,mlp --lr 1e-2 --save " + lora.string());
  ASSERT_EQ(l.status, 0) << l.err;
  EXPECT_NE(l.out.find("LoRA rank 2"), std::string::npos) << l.out;
  const nn::Checkpoint adapters = nn::load_safetensors(lora.string());
  int adapted = 0;
  for (const auto& [name, t] : adapters.tensors) {
    for (const char* layer : {"q_proj", "k_proj", "v_proj", "o_proj"})
      adapted += name == fmt::format("model.layers.1.self_attn.{}.lora.A", layer);
    for (const char* layer : {"gate_proj", "up_proj", "down_proj"})
      adapted += name == fmt::format("model.layers.1.mlp.{}.lora.A", layer);
  }
  EXPECT_EQ(adapted, 7);

  // the merged weights in the folder's layout: with the base's config.json and tokenizer.json, a folder that
  // generates what the adapters do
  const fs::path merged_dir = testing_process::scratch("llama_merged");
  fs::create_directories(merged_dir);
  CliRun m = scratchgrad("merge --lora " + lora.string() + " --out " + (merged_dir / "model.safetensors").string());
  ASSERT_EQ(m.status, 0) << m.err;
  for (const char* file : {"config.json", "tokenizer.json"})
    fs::copy_file(dir / file, merged_dir / file, fs::copy_options::overwrite_existing);
  const std::string args = " --prompt-ids '5 6 7' --tokens 6 --temperature 0 --ids --stop-id -1";
  CliRun with_adapters = scratchgrad("generate --checkpoint " + lora.string() + args);
  CliRun with_merged = scratchgrad("generate --checkpoint " + merged_dir.string() + args);
  ASSERT_EQ(with_adapters.status, 0) << with_adapters.err;
  ASSERT_EQ(with_merged.status, 0) << with_merged.err;
  EXPECT_EQ(ids_in(with_adapters.out), ids_in(with_merged.out));
  CliRun eval = scratchgrad("eval --checkpoint " + lora.string() + " --text " + llama_text());
  EXPECT_EQ(eval.status, 0) << eval.err;
  CliRun resumed = scratchgrad("train --resume " + lora.string() + " --steps 6");
  EXPECT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("resuming"), std::string::npos) << resumed.out;
}

// ---------------------------------------------------------------- refusals

TEST(LlamaCli, RefusesWhatCannotApplyNamingTheFlagOrFile) {
  // run from the repository's root with the fixture's relative path, as docs/reliability.md's catalog shows it
  const auto scratchgrad = [](const std::string& args) {
    return testing_process::shell(std::string("cd ") + SCRATCHGRAD_SOURCE_DIR + " && " + SCRATCHGRAD_BIN_DIR +
                                  "/scratchgrad " + args);
  };
  const std::string folder = "tests/reference/fixtures/hf/llama32";
  expect_refused(scratchgrad("train --model gpt --kv-heads 2 --steps 2"), "--kv-heads is for --model llama");
  expect_refused(scratchgrad("train --model gpt --ffn-dim 64 --steps 2"), "--ffn-dim is for --model llama");
  expect_refused(scratchgrad(tiny_run("--steps 2 --kv-heads 3")), "--kv-heads must be at least 1 and divide --heads 4");
  expect_refused(scratchgrad(tiny_run("--steps 2 --ffn-dim 0")), "--ffn-dim must be at least 1");
  expect_refused(scratchgrad(tiny_run("--steps 2 --dim 36 --heads 4")), "must give an even head width");
  expect_refused(scratchgrad(tiny_run("--steps 2 --dropout 0.1")), "--dropout 0.1 is for --model gpt: a Llama has no dropout layers");
  expect_refused(scratchgrad("train --init " + llama_folder_with_tokenizer().string() + " --steps 2 --dropout 0.1 --text " + llama_text()),
                 "--dropout 0.1 is for GPT models: a Llama-family model has no dropout layers");
  expect_refused(scratchgrad(greedy_command(folder, {1, 2}, 3, "--heads 4")), "--heads is for GPT-2's");
  expect_refused(scratchgrad(greedy_command(folder, {1, 2}, 3, "--tokenizer-file x.json")), "--tokenizer-file is for");
  expect_refused(scratchgrad("generate --checkpoint " + folder + " --prompt hello --tokens 3"),
                 "has no tokenizer.json to read --prompt TEXT");
  expect_refused(scratchgrad(greedy_command(folder, {1, 64}, 3)), "outside the vocabulary of 64");
  expect_refused(scratchgrad(greedy_command(folder, {1, 2}, 300)), "more than the context of 256");
  expect_refused(scratchgrad("eval --checkpoint " + folder + " --text " + llama_text()),
                 "has no tokenizer.json to read --text");
  // a folder whose tokenizer.json is damaged: named
  const fs::path broken = testing_process::scratch("llama32_broken_tokenizer");
  fs::create_directories(broken);
  for (const char* file : {"config.json", "model.safetensors"})
    fs::copy_file(kFixtures + "llama32/" + file, broken / file, fs::copy_options::overwrite_existing);
  std::ofstream(broken / "tokenizer.json") << "{\"model\": 3}";
  expect_refused(scratchgrad(greedy_command(broken.string(), {1, 2}, 3)), "tokenizer.json");
}

}  // namespace
