// test_classify.cpp — the classifier of chapter 6 (nn/finetune/classifier.h) and its command line
// (examples/cli/classify.h): the last real token's state is the one read, padding changes nothing, frozen
// parameters get no gradient, the loss, gradients and one AdamW step equal a PyTorch twin's
// (tests/reference/make_classify_fixture.py), and train --task classify / classify / eval --task classify
// end to end on a generated data set, with their refusals (one line, exit status 2).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "autograd/inspect/gradcheck.h"
#include "nn/finetune/classifier.h"
#include "nn/gpt.h"
#include "nn/llama.h"
#include "nn/safetensors.h"
#include "nn/tokenizer/tokenizer.h"
#include "optim/optim.h"
#include "test_helpers.h"
#include "test_process.h"

namespace {

using namespace autograd;
using finetune::Classifier;
using testing_helpers::Recorded;

std::shared_ptr<nn::GPTModel> tiny_gpt(uint64_t seed = 3) {
  manual_seed(seed);
  return std::make_shared<nn::GPTModel>(nn::GPTConfig{.vocab_size = 13, .context_length = 8, .emb_dim = 8,
                                                      .n_heads = 2, .n_layers = 3, .drop_rate = 0.0,
                                                      .qkv_bias = false});
}

std::shared_ptr<nn::LlamaModel> tiny_llama() {
  manual_seed(4);
  nn::LlamaConfig c;
  c.vocab_size = 13, c.hidden_size = 8, c.intermediate_size = 16, c.num_hidden_layers = 2;
  c.num_attention_heads = 2, c.num_key_value_heads = 1, c.max_position_embeddings = 8;
  return std::make_shared<nn::LlamaModel>(c);
}

Tensor ids_of(const std::vector<std::vector<int64_t>>& rows) {
  std::vector<int64_t> flat;
  for (const auto& row : rows) flat.insert(flat.end(), row.begin(), row.end());
  return from_vector(flat, {int64_t(rows.size()), int64_t(rows[0].size())});
}

// ------------------------------------------------------------------------------ the last token

TEST(Classifier, LastTokenStatesAreEachRowsOwnPosition) {
  const Tensor hidden = arange(0.0, 24.0, 1.0, DType::Float32).view({2, 4, 3}).requires_grad_();
  const Tensor states = finetune::last_token_states(hidden, from_vector(std::vector<int64_t>{1, 3}, {2}));
  EXPECT_EQ(states.shape(), (Shape{2, 3}));
  EXPECT_EQ(states.to_vector<float>(), (std::vector<float>{3, 4, 5, 21, 22, 23}));  // [0, 1, :] and [1, 3, :]
  // the gradient goes back to those two rows only
  (states * from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3})).sum().backward();
  std::vector<float> want(24, 0.0f);
  for (int k = 0; k < 3; ++k) want[size_t(3 + k)] = float(1 + k), want[size_t(21 + k)] = float(4 + k);
  EXPECT_EQ(hidden.grad().to_vector<float>(), want);
}

// A composition of reshape and the embedding gather, checked as an op would be: float64 against finite
// differences, on contiguous and non-contiguous states, a position picked twice in one batch included.
TEST(Classifier, LastTokenStatesPassAFloat64Gradcheck) {
  const Tensor last = from_vector(std::vector<int64_t>{2, 0, 2}, {3});
  const auto f = [&](const std::vector<Tensor>& in) { return finetune::last_token_states(in[0], last); };
  for (const Tensor& hidden : {testing_helpers::leaf({3, 4, 5}, 11), testing_helpers::transposed_leaf({3, 4, 5}, 12),
                               testing_helpers::sliced_leaf({3, 4, 5}, 13)}) {
    const auto result = inspect::gradcheck(f, {hidden});
    EXPECT_TRUE(result.ok) << result.message;
  }
}

TEST(Classifier, LastTokenStatesRefusePositionsOutsideTheRow) {
  const Tensor hidden = zeros({2, 4, 3});
  EXPECT_THROW(finetune::last_token_states(hidden, from_vector(std::vector<int64_t>{1, 4}, {2})), std::invalid_argument);
  EXPECT_THROW(finetune::last_token_states(hidden, from_vector(std::vector<int64_t>{-1, 0}, {2})), std::invalid_argument);
  EXPECT_THROW(finetune::last_token_states(hidden, from_vector(std::vector<int64_t>{0}, {1})), std::invalid_argument);
}

// A padded batch gives each example the logits it has alone: the classifier reads its last real token, and
// in a causal model the padding after it never reaches that token. Reading the batch's last column instead
// (the padding) would give other logits.
void expect_padding_changes_nothing(std::shared_ptr<nn::LanguageModel> model) {
  manual_seed(5);
  Classifier classifier(model, 3);
  classifier.eval();
  const std::vector<std::vector<int64_t>> texts{{1, 2, 3, 4, 5}, {6, 7}, {8, 9, 10}};
  const Tensor batch = ids_of({{1, 2, 3, 4, 5}, {6, 7, 0, 0, 0}, {8, 9, 10, 0, 0}});
  const Tensor together = classifier(batch, from_vector(std::vector<int64_t>{4, 1, 2}, {3}));
  for (size_t i = 0; i < texts.size(); ++i) {
    const Tensor alone = classifier(ids_of({texts[i]}), from_vector(std::vector<int64_t>{int64_t(texts[i].size()) - 1}, {1}));
    const std::vector<float> a = alone.to_vector<float>(), b = together.narrow(0, int64_t(i), 1).to_vector<float>();
    for (size_t k = 0; k < a.size(); ++k) EXPECT_NEAR(a[k], b[k], 1e-5) << "example " << i << " class " << k;
  }
  const Tensor last_column = classifier(batch, from_vector(std::vector<int64_t>{4, 4, 4}, {3}));
  EXPECT_GT((last_column - together).abs().max().item(), 1e-3) << "padding read as the last token changes nothing?";
}

TEST(Classifier, APaddedBatchGivesEachTextItsOwnLogitsGpt) { expect_padding_changes_nothing(tiny_gpt()); }
TEST(Classifier, APaddedBatchGivesEachTextItsOwnLogitsLlama) { expect_padding_changes_nothing(tiny_llama()); }

// ------------------------------------------------------------------------------ what trains

void expect_only_the_last_blocks_train(std::shared_ptr<nn::LanguageModel> model, int64_t train_blocks,
                                       const std::vector<std::string>& trained_prefixes) {
  manual_seed(6);
  Classifier classifier(model, 2);
  finetune::freeze_for_classification(classifier, train_blocks);
  const Tensor logits = classifier(ids_of({{1, 2, 3}, {4, 5, 0}}), from_vector(std::vector<int64_t>{2, 1}, {2}));
  cross_entropy(logits, from_vector(std::vector<int64_t>{0, 1}, {2})).backward();
  int trained = 0, frozen = 0;
  for (const auto& [name, p] : classifier.named_parameters()) {
    const bool should_train =
        std::any_of(trained_prefixes.begin(), trained_prefixes.end(), [&](const std::string& s) { return name.starts_with(s); });
    EXPECT_EQ(p.requires_grad(), should_train) << name;
    if (should_train) {
      ++trained;
      ASSERT_TRUE(p.grad().defined()) << name << " trains but got no gradient";
      EXPECT_GT(p.grad().abs().sum().item(), 0.0) << name;
    } else {
      ++frozen;
      EXPECT_FALSE(p.grad().defined()) << name << " is frozen but got a gradient";
    }
  }
  EXPECT_GT(trained, 0);
  EXPECT_GT(frozen, 0);
}

TEST(Classifier, FrozenParametersReceiveNoGradientGpt) {
  expect_only_the_last_blocks_train(tiny_gpt(), 1, {"head.", "model.final_norm.", "model.trf_blocks.2."});
  expect_only_the_last_blocks_train(tiny_gpt(), 2,
                                    {"head.", "model.final_norm.", "model.trf_blocks.1.", "model.trf_blocks.2."});
  expect_only_the_last_blocks_train(tiny_gpt(), 0, {"head.", "model.final_norm."});
}

TEST(Classifier, FrozenParametersReceiveNoGradientLlama) {
  expect_only_the_last_blocks_train(tiny_llama(), 1, {"head.", "model.model.norm.", "model.model.layers.1."});
}

// "all": every parameter on the classifier's path trains; the next-token head is not on it, and is frozen
// (a GPT whose head is its embedding, as GPT-2's is, trains that matrix as the embedding).
TEST(Classifier, AllTrainsEveryParameterButTheUnusedNextTokenHead) {
  for (const bool tied : {false, true}) {
    manual_seed(6);
    std::shared_ptr<nn::GPTModel> gpt = tiny_gpt();
    if (tied) gpt->tie_weights();
    Classifier classifier(gpt, 2);
    finetune::freeze_for_classification(classifier, -1);
    const Tensor logits = classifier(ids_of({{1, 2, 3}}), from_vector(std::vector<int64_t>{2}, {1}));
    cross_entropy(logits, from_vector(std::vector<int64_t>{1}, {1})).backward();
    for (const auto& [name, p] : classifier.named_parameters()) {
      const bool head = name == "model.out_head.weight";
      EXPECT_EQ(p.requires_grad(), !head) << name << (tied ? " (tied)" : "");
      EXPECT_EQ(p.grad().defined(), !head) << name << (tied ? " (tied)" : "");
    }
  }
  manual_seed(6);
  Classifier llama(tiny_llama(), 2);
  finetune::freeze_for_classification(llama, -1);
  for (const auto& [name, p] : llama.named_parameters()) EXPECT_TRUE(p.requires_grad()) << name;  // tied: no lm_head
}

TEST(Classifier, MoreBlocksThanTheModelHasAreRefused) {
  Classifier classifier(tiny_gpt(), 2);
  EXPECT_THROW(finetune::freeze_for_classification(classifier, 4), std::invalid_argument);
  EXPECT_THROW(Classifier(tiny_gpt(), 1), std::invalid_argument);
}

// ------------------------------------------------------------------------------ the PyTorch twin

std::map<std::string, Recorded> load_twin() {
  std::ifstream in(std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/reference/fixtures/classify/classifier.txt");
  EXPECT_TRUE(in.good()) << "fixture missing: run tests/reference/make_classify_fixture.py";
  std::map<std::string, Recorded> out;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string kind;
    words >> kind;
    if (kind != "tensor" && kind != "itensor") continue;
    Recorded r = testing_helpers::read_recorded(words, kind, line);
    out[r.name] = r;
  }
  return out;
}

void expect_close(const Tensor& got, const Recorded& want, double tolerance) {
  ASSERT_EQ(got.shape(), want.shape) << want.name;
  const std::vector<double> g = got.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_NEAR(g[i], want.values[i], tolerance * (1 + std::abs(want.values[i]))) << want.name << "[" << i << "]";
}

TEST(Classifier, LossGradientsAndOneStepEqualThePyTorchTwins) {
  const std::map<std::string, Recorded> twin = load_twin();
  ASSERT_FALSE(twin.empty());
  auto gpt = std::make_shared<nn::GPTModel>(nn::GPTConfig{.vocab_size = 11, .context_length = 8, .emb_dim = 8,
                                                          .n_heads = 2, .n_layers = 2, .drop_rate = 0.0,
                                                          .qkv_bias = false});
  Classifier classifier(gpt, 3);
  nn::NamedTensors state;
  for (const auto& [name, r] : twin)
    if (name.starts_with("model.") || name.starts_with("head.")) state.emplace_back(name, r.tensor());
  classifier.load_state_dict(state, /*strict=*/false);  // (the unused vocabulary head keeps its own values)
  finetune::freeze_for_classification(classifier, 1);
  classifier.eval();

  const Tensor logits = classifier(twin.at("ids").tensor(), twin.at("last").tensor());
  const Tensor loss = cross_entropy(logits, twin.at("labels").tensor());
  expect_close(logits, twin.at("logits"), 1e-5);
  expect_close(loss, twin.at("loss"), 1e-5);
  loss.backward();
  int compared = 0;
  for (const auto& [name, p] : classifier.named_parameters()) {
    const auto grad = twin.find("grad." + name);
    if (grad == twin.end()) {
      EXPECT_FALSE(p.grad().defined()) << name << ": frozen in the twin";
      continue;
    }
    ASSERT_TRUE(p.grad().defined()) << name;
    expect_close(p.grad(), grad->second, 1e-4);
    ++compared;
  }
  // the last block's 13 (attention 5, feed-forward 4, two norms 4), the final norm's 2, the head's 2
  EXPECT_EQ(compared, 13 + 2 + 2);

  // one AdamW step, with the twin's groups: the Linear weights decayed, the rest not
  auto [decay, no_decay] = nn::weight_decay_groups(classifier);
  std::vector<Tensor> decayed, plain;
  for (const auto& [name, p] : decay)
    if (p.requires_grad()) decayed.push_back(p);
  for (const auto& [name, p] : no_decay)
    if (p.requires_grad()) plain.push_back(p);
  optim::AdamW opt(decayed, {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1});
  opt.add_param_group(plain, {{"weight_decay", 0.0}});
  opt.step();
  for (const auto& [name, p] : classifier.named_parameters())
    if (const auto after = twin.find("after." + name); after != twin.end()) expect_close(p, after->second, 2e-5);
}

// ------------------------------------------------------------------------------ the command line

namespace fs = std::filesystem;
using testing_process::scratch;
using testing_process::Shell;

Shell scratchgrad(const std::string& args) {
  return testing_process::shell(std::string(SCRATCHGRAD_BIN_DIR) + "/scratchgrad " + args);
}

void expect_refused(const Shell& r, const std::string& needle) {
  EXPECT_EQ(r.status, 2) << r.command << "\n" << r.out << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("scratchgrad: error:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
  const size_t program = r.command.find("/bin/scratchgrad ");
  const std::string call = program == std::string::npos ? r.command : r.command.substr(program + 5);
  testing_helpers::record_refusal(call, r.err.substr(0, r.err.find('\n')));
}

// An easy, separable task: "low" texts are made of the letters a–e, "high" ones of v–z (4 to 9 letters).
std::string write_letters_csv(const std::string& name, int rows, uint64_t seed) {
  const fs::path path = scratch(name);
  std::ofstream out(path);
  out << "label,text\n";
  uint64_t x = seed;
  auto next = [&](uint64_t n) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return (x >> 33) % n;
  };
  for (int i = 0; i < rows; ++i) {
    const bool high = i % 2 == 1;
    std::string text;
    for (uint64_t k = 0, n = 4 + next(6); k < n; ++k) text += char((high ? 'v' : 'a') + next(5));
    out << (high ? "high" : "low") << "," << text << "\n";
  }
  return path.string();
}

// The number after `key` on the line that starts with `line_start` (e.g. "test", "accuracy").
double number_after(const std::string& text, const std::string& line_start, const std::string& key) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.starts_with(line_start)) {
      const size_t at = line.find(key);
      if (at != std::string::npos) return std::stod(line.substr(at + key.size()));
    }
  ADD_FAILURE() << "no line '" << line_start << "' with '" << key << "' in:\n" << text;
  return std::nan("");
}

const std::string kTinyGpt = "--model gpt --preset tiny --dim 16 --heads 2 --layers 1 --context 16";

TEST(ClassifyCli, TrainsAnEasyTaskFromScratchThenClassifiesAndEvaluates) {
  const std::string data = write_letters_csv("letters.csv", 120, 1);
  const std::string held_out = write_letters_csv("letters_held_out.csv", 40, 2);
  const std::string ckpt = scratch("letters.safetensors").string();
  const Shell train = scratchgrad("train --task classify --data " + data + " " + kTinyGpt +
                                  " --batch 8 --train-blocks all --steps 60 --warmup 5 --eval-every 20 --lr 3e-3 --save " + ckpt);
  ASSERT_EQ(train.status, 0) << train.out << train.err;
  EXPECT_NE(train.out.find("into 2 classes (low, high): 84 to train, 12 to validate, 24 to test"), std::string::npos)
      << train.out;
  EXPECT_EQ(testing_process::count(train.out, "| val acc "), 4) << train.out;  // steps 0, 20, 40 and 59
  const double first = number_after(train.out, "step    0", "train acc ");
  const double test = number_after(train.out, "test", "accuracy ");
  EXPECT_GE(test, 0.9) << train.out;
  EXPECT_GT(number_after(train.out, "train ", "accuracy "), first) << "accuracy did not rise:\n" << train.out;

  const Shell one = scratchgrad("classify --checkpoint " + ckpt + " --prompt xyzzyvw");
  ASSERT_EQ(one.status, 0) << one.err;
  ASSERT_TRUE(one.out.starts_with("high ")) << one.out;  // the likelier label first
  const double p_high = number_after(one.out, "high", "high "), p_low = number_after(one.out, "high", "low ");
  EXPECT_NEAR(p_high + p_low, 1.0, 2e-4) << one.out;
  EXPECT_GT(p_high, 0.5);

  const fs::path lines = scratch("lines.txt");
  std::ofstream(lines) << "abcab\nzzyxw\r\ndeed\n";
  const Shell many = scratchgrad("classify --checkpoint " + ckpt + " --text " + lines.string());
  ASSERT_EQ(many.status, 0) << many.err;
  EXPECT_EQ(testing_process::count(many.out, "\n"), 3) << many.out;
  std::istringstream rows(many.out);
  std::vector<std::string> first_labels;
  for (std::string row; std::getline(rows, row);) first_labels.push_back(row.substr(0, row.find(' ')));
  EXPECT_EQ(first_labels, (std::vector<std::string>{"low", "high", "low"})) << many.out;

  const Shell info = scratchgrad("info --checkpoint " + ckpt);
  ASSERT_EQ(info.status, 0) << info.err;
  EXPECT_NE(info.out.find("classifier: 2 classes (low, high)"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("trained: from - on "), std::string::npos) << info.out;

  const Shell eval = scratchgrad("eval --task classify --checkpoint " + ckpt + " --data " + held_out);
  ASSERT_EQ(eval.status, 0) << eval.err;
  EXPECT_GE(number_after(eval.out, "accuracy", "accuracy "), 0.9) << eval.out;
  EXPECT_NE(eval.out.find("examples 40\n"), std::string::npos) << eval.out;
  EXPECT_NE(eval.out.find("label  precision  recall  examples\n"), std::string::npos) << eval.out;
  EXPECT_NE(eval.out.find("confusion matrix"), std::string::npos) << eval.out;
  // the matrix's rows add up to each label's examples: 20 and 20
  std::istringstream out_lines(eval.out);
  int rows_checked = 0;
  bool in_matrix = false;
  for (std::string line; std::getline(out_lines, line);) {
    if (line.starts_with("confusion matrix")) in_matrix = true;
    else if (in_matrix && (line.starts_with("low") || line.starts_with("high"))) {
      std::istringstream cells(line.substr(line.find(' ')));
      int a = 0, b = 0;
      cells >> a >> b;
      EXPECT_EQ(a + b, 20) << line;
      ++rows_checked;
    }
  }
  EXPECT_EQ(rows_checked, 2) << eval.out;
}

TEST(ClassifyCli, EpochsCountPassesOverTheTrainingPartAndJsonlReadsAsCsv) {
  const fs::path data = scratch("letters.jsonl");
  {
    std::ofstream out(data);
    for (int i = 0; i < 20; ++i) out << "{\"text\": \"" << (i % 2 ? "vwxyz" : "abcde") << "\", \"label\": " << i % 2 << "}\n";
  }
  // 20 × 0.5 = 10 training texts, 2 epochs of batch 4: ceil(20 / 4) = 5 steps
  const Shell r = scratchgrad("train --task classify --data " + data.string() + " " + kTinyGpt +
                              " --batch 4 --epochs 2 --split 0.5,0.25,0.25 --eval-every 1");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("5 steps of batch 4"), std::string::npos) << r.out;
  EXPECT_EQ(testing_process::count(r.out, "\nstep "), 5) << r.out;
  EXPECT_NE(r.out.find("into 2 classes (0, 1)"), std::string::npos) << r.out;
}

// A checkpoint of ours as --init: its tokenizer reads the texts; the default trains the last block.
TEST(ClassifyCli, FineTunesACheckpointOfOursInTheLastBlockOrWithLora) {
  const std::string data = write_letters_csv("letters_init.csv", 40, 4);
  std::string text;
  for (int i = 0; i < 40; ++i) text += "abcde vwxyz edcba zyxwv ";
  const fs::path text_file = scratch("base_text.txt");
  std::ofstream(text_file) << text;
  const std::string base = scratch("base.safetensors").string();
  ASSERT_EQ(scratchgrad("train --model gpt --preset tiny --dim 16 --heads 2 --layers 2 --context 16 --text " + text_file.string() + " --steps 3 --warmup 1 --save " +
                        base).status,
            0);
  const std::string ckpt = scratch("from_base.safetensors").string();
  const Shell r = scratchgrad("train --task classify --data " + data + " --init " + base + " --steps 4 --save " + ckpt);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("the last 1 blocks, the final norm and the head"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("4 steps of batch 8, lr 5e-05"), std::string::npos) << r.out;  // the book's recipe
  const Shell c = scratchgrad("classify --checkpoint " + ckpt + " --prompt abc");
  ASSERT_EQ(c.status, 0) << c.err;
  EXPECT_EQ(testing_process::count(c.out, "\n"), 1) << c.out;

  const std::string lora = scratch("from_base_lora.safetensors").string();
  const Shell l = scratchgrad("train --task classify --data " + data + " --init " + base + " --lora-rank 2 --steps 4 --save " +
                              lora);
  ASSERT_EQ(l.status, 0) << l.out << l.err;
  EXPECT_NE(l.out.find("LoRA rank 2 adapters and the head"), std::string::npos) << l.out;
  const Shell info = scratchgrad("info --checkpoint " + lora);
  ASSERT_EQ(info.status, 0) << info.err;
  EXPECT_NE(info.out.find("lora rank 2 adapters and the head"), std::string::npos) << info.out;
  EXPECT_EQ(scratchgrad("eval --task classify --checkpoint " + lora + " --data " + data).status, 0);
}

// A Hugging Face Llama folder with its tokenizer.json as --init.
TEST(ClassifyCli, FineTunesALlamaFolder) {
  const fs::path dir = scratch("classify_llama_folder");
  fs::create_directories(dir);
  const std::string tok_file =
      std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/reference/fixtures/hf_tokenizer/tiny-smollm2.tokenizer.json";
  fs::copy_file(tok_file, dir / "tokenizer.json", fs::copy_options::overwrite_existing);
  const int64_t vocab = tokenizer::load_hugging_face_tokenizer(tok_file).vocab_size();
  nn::LlamaConfig c;
  c.vocab_size = vocab, c.hidden_size = 32, c.intermediate_size = 64, c.num_hidden_layers = 2;
  c.num_attention_heads = 4, c.num_key_value_heads = 2, c.max_position_embeddings = 64, c.tie_word_embeddings = true;
  manual_seed(3);
  nn::LlamaModel model(c);
  nn::save_safetensors((dir / "model.safetensors").string(), model.state_dict(), {{"format", "pt"}});
  std::ofstream(dir / "config.json") << fmt::format(R"({{"architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "vocab_size": {}, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
    "hidden_act": "silu", "tie_word_embeddings": true}})", vocab);
  const std::string data = write_letters_csv("letters_llama.csv", 30, 5);
  const std::string ckpt = scratch("llama_classifier.safetensors").string();
  const Shell r = scratchgrad("train --task classify --data " + data + " --init " + dir.string() +
                              " --train-blocks 2 --steps 3 --max-length 6 --save " + ckpt);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("2 blocks, width 32"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("texts cut at 6 tokens"), std::string::npos) << r.out;
  const Shell k = scratchgrad("classify --checkpoint " + ckpt + " --prompt zzzz");
  ASSERT_EQ(k.status, 0) << k.err;
  EXPECT_NE(k.out.find("high "), std::string::npos) << k.out;
  EXPECT_NE(k.out.find("low "), std::string::npos) << k.out;
}

TEST(ClassifyCli, RefusesBadDataAndFlagsThatDoNotApply) {
  const std::string data = write_letters_csv("refusals.csv", 20, 3);
  const std::string gpt = " " + kTinyGpt + " --batch 8 --steps 2 --warmup 0";
  const fs::path no_text = scratch("no_text.csv");
  std::ofstream(no_text) << "label,words\nspam,hello\n";
  const fs::path empty_label = scratch("empty_label.csv");
  std::ofstream(empty_label) << "label,text\nspam,hello\n,there\n";
  expect_refused(scratchgrad("train --task classify --data " + no_text.string() + gpt), "text");
  expect_refused(scratchgrad("train --task classify --data " + empty_label.string() + gpt), "line 3");
  expect_refused(scratchgrad("train --task classify --data " + scratch("missing.csv").string() + gpt), "missing.csv");
  expect_refused(scratchgrad("train --task sort --data " + data + gpt), "--task must be text");
  expect_refused(scratchgrad("train --task classify" + gpt), "--task classify needs --data FILE");
  expect_refused(scratchgrad("train --task classify --data " + data + " --steps 2"), "trains a GPT or a Llama");
  expect_refused(scratchgrad("train --task classify --data " + data + gpt + " --text " + data), "--text is for --task text");
  expect_refused(scratchgrad("train --data " + data + gpt), "--data is for");
  expect_refused(scratchgrad("train --train-blocks 2" + gpt), "--train-blocks is for --task classify");
  expect_refused(scratchgrad("train --task classify --data " + data + gpt + " --train-blocks 5"), "--train-blocks must be");
  expect_refused(scratchgrad("train --task classify --data " + data + gpt + " --split 0.5,0.5"), "three fractions");
  expect_refused(scratchgrad("train --task classify --data " + data + gpt + " --epochs 2"), "--steps or --epochs");
  expect_refused(scratchgrad("train --task classify --data " + data + gpt + " --split 0,0.5,0.5"), "no training examples");
  const fs::path one_label = scratch("one_label.csv");
  std::ofstream(one_label) << "text,label\nabc,low\ncba,low\n";
  expect_refused(scratchgrad("train --task classify --data " + one_label.string() + gpt), "at least two labels");
  expect_refused(scratchgrad("train --task classify --data " + data + gpt + " --sample 5"), "--sample is for --task text");

  // a classifier's checkpoint: the labels it knows, the commands that read it
  const std::string ckpt = scratch("refusals.safetensors").string();
  ASSERT_EQ(scratchgrad("train --task classify --data " + data + gpt + " --save " + ckpt).status, 0);
  const fs::path other_label = scratch("other_label.csv");
  std::ofstream(other_label) << "label,text\nlow,abc\nmedium,mmm\n";
  expect_refused(scratchgrad("eval --task classify --checkpoint " + ckpt + " --data " + other_label.string()), "medium");
  expect_refused(scratchgrad("eval --task classify --checkpoint " + ckpt + " --text " + data), "--text is for eval --task text");
  expect_refused(scratchgrad("eval --task classify --checkpoint " + ckpt), "needs --data FILE");
  expect_refused(scratchgrad("eval --checkpoint " + ckpt + " --data " + data), "--data is for eval --task classify");
  expect_refused(scratchgrad("generate --checkpoint " + ckpt), "a classifier (train --task classify)");
  expect_refused(scratchgrad("classify --checkpoint " + ckpt), "give the text");
  expect_refused(scratchgrad("classify --checkpoint " + ckpt + " --prompt abc --text " + data), "give the text");
  expect_refused(scratchgrad("classify --checkpoint " + ckpt + " --prompt ABC"), "not in the model's vocabulary");
  const fs::path blank_line = scratch("blank_line.txt");
  std::ofstream(blank_line) << "abc\n\nxyz\n";
  expect_refused(scratchgrad("classify --checkpoint " + ckpt + " --text " + blank_line.string()), "line 2: empty");
  expect_refused(scratchgrad("classify --checkpoint " + data + " --prompt abc"), "");
  // (run in the source folder, with the fixtures' paths from there: the catalog shows no machine's folders)
  const auto scratchgrad = [](const std::string& args) {
    return testing_process::shell("cd " + std::string(SCRATCHGRAD_SOURCE_DIR) + " && " + SCRATCHGRAD_BIN_DIR +
                                  "/scratchgrad " + args);
  };
  const std::string tiny_gpt2 = "tests/reference/fixtures/gpt2/tiny_gpt2.safetensors";
  const std::string gpt2_tokenizer = "tests/tokenizer/gpt2";
  expect_refused(scratchgrad("train --task classify --data " + data + " --init " + tiny_gpt2 + " --steps 2"),
                 "give --tokenizer-file");
  expect_refused(scratchgrad("train --task classify --data " + data + " --init " + tiny_gpt2 + " --tokenizer-file " +
                             gpt2_tokenizer + " --steps 2"),
                 "has a vocabulary of 50 tokens");
  const std::string qwen3 = "tests/reference/fixtures/hf/qwen3";
  expect_refused(scratchgrad("train --task classify --data " + data + " --init " + qwen3 + " --save " +
                             scratch("qwen3_classifier.safetensors").string()),
                 "cannot be saved yet: our checkpoints do not record its q/k norms");
  expect_refused(scratchgrad("train --task classify --data " + data + " --init " + tiny_gpt2 + " --context 8"),
                 "--context cannot be given with --init");
  expect_refused(scratchgrad("train --task classify --data " + data + " --init " + tiny_gpt2 +
                             " --lora-rank 2 --train-blocks 1"),
                 "choose one");
}

}  // namespace
