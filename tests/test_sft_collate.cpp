// test_sft_collate.cpp — batches for fine-tuning (nn/finetune/collate.h): which targets are −100 for each
// template, with padding, truncation and train_on_prompt; the classifier's last real positions; the split;
// and cross_entropy over such targets against PyTorch (tests/reference/make_sft_fixtures.py) and gradcheck.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "autograd/autograd.h"
#include "nn/finetune/collate.h"
#include "nn/finetune/error.h"
#include "test_helpers.h"
#include "test_sft_helpers.h"

#ifndef SCRATCHGRAD_SOURCE_DIR
#define SCRATCHGRAD_SOURCE_DIR "."
#endif

namespace {

using namespace finetune;
using sft_testing::ByteTokenizer;
constexpr int64_t X = kIgnoreIndex;
using Inputs = std::vector<autograd::Tensor>;

// Two examples by hand, 9 the end-of-text: a prompt [1, 2] and reply [3, 4, 9]; a prompt [5] and reply [6, 9].
const std::vector<Rendered> kTwo{{{1, 2, 3, 4, 9}, {0, 0, 1, 1, 1}}, {{5, 6, 9}, {0, 1, 1}}};
const std::vector<size_t> kBoth{0, 1};

TEST(SftCollate, PaddingIsMaskedExceptTheFirstEndOfTextAndThePromptToo) {
  const InstructBatch b = collate_instruct(kTwo, kBoth, {.padding_id = 9});
  EXPECT_EQ(b.rows, 2);
  EXPECT_EQ(b.columns, 4);  // the longest example's 5 tokens give 4 inputs and 4 targets
  EXPECT_EQ(b.inputs, (std::vector<int64_t>{1, 2, 3, 4, /**/ 5, 6, 9, 9}));
  EXPECT_EQ(b.targets, (std::vector<int64_t>{X, 3, 4, 9, /**/ 6, 9, X, X}));
  EXPECT_EQ(b.counted_targets(), 5);
}

TEST(SftCollate, TrainOnPromptKeepsThePromptsTargets) {
  const InstructBatch b = collate_instruct(kTwo, kBoth, {.padding_id = 9, .train_on_prompt = true});
  EXPECT_EQ(b.targets, (std::vector<int64_t>{2, 3, 4, 9, /**/ 6, 9, X, X}));
}

TEST(SftCollate, MaxLengthCutsInputsAndTargetsAlike) {
  const InstructBatch b = collate_instruct(kTwo, kBoth, {.padding_id = 9, .max_length = 2});
  EXPECT_EQ(b.columns, 2);
  EXPECT_EQ(b.inputs, (std::vector<int64_t>{1, 2, /**/ 5, 6}));
  EXPECT_EQ(b.targets, (std::vector<int64_t>{X, 3, /**/ 6, 9}));
  // A batch of short examples is padded to its own longest, not to max_length.
  const std::vector<size_t> second{1};
  EXPECT_EQ(collate_instruct(kTwo, second, {.padding_id = 9, .max_length = 100}).columns, 2);
}

TEST(SftCollate, RefusesExamplesWithNothingToPredict) {
  const std::vector<Rendered> one_token{{{7}, {1}}};
  const std::vector<size_t> first{0};
  EXPECT_THROW_WITH(collate_instruct(one_token, first, {}), FinetuneError, "example 0", "fewer than two tokens");
  EXPECT_THROW_WITH(collate_instruct(kTwo, kBoth, {.max_length = -1}), FinetuneError, "negative");
}

// For each template, a short and a long conversation batched: the targets that count spell each reply and
// its end-of-turn token, and nothing else (no marker, no prompt, no second end-of-text).
TEST(SftCollate, EachTemplateCountsExactlyTheRepliesAndTheirEndOfTurn) {
  const std::map<std::string, ByteTokenizer> tokenizers{{"alpaca", sft_testing::gpt2_like()},
                                                        {"chatml", sft_testing::smollm2_like()},
                                                        {"llama3", sft_testing::llama3_like()}};
  const std::map<std::string, std::string> end{{"alpaca", "<|endoftext|>"}, {"chatml", "<|im_end|>"}, {"llama3", "<|eot_id|>"}};
  for (const auto& [name, tok] : tokenizers) {
    SCOPED_TRACE(name);
    const auto chat = make_template(name, tok);
    const std::vector<Rendered> examples{
        chat->render({{"user", "Hi"}, {"assistant", "Yo."}}),
        chat->render({{"system", "Be kind."}, {"user", "Colour of the sky?"}, {"assistant", "Blue."},
                      {"user", "And grass?"}, {"assistant", "Green."}})};
    const InstructBatch b = collate_instruct(examples, kBoth, {.padding_id = chat->padding_id()});
    const auto row = [&](int64_t r) {
      return std::vector<int64_t>(b.targets.begin() + r * b.columns, b.targets.begin() + (r + 1) * b.columns);
    };
    std::vector<int64_t> counted0, counted1;
    for (const int64_t t : row(0)) if (t != X) counted0.push_back(t);
    for (const int64_t t : row(1)) if (t != X) counted1.push_back(t);
    EXPECT_EQ(tok.spell(counted0), "Yo." + end.at(name));
    EXPECT_EQ(tok.spell(counted1), "Blue." + end.at(name) + "Green." + end.at(name));
    // The short row: its reply's targets come right before the padding, which is all −100.
    const std::string spelt = tok.spell(row(0));
    EXPECT_TRUE(spelt.find("Yo." + end.at(name)) != std::string::npos) << spelt;
    const size_t after = spelt.find("Yo." + end.at(name)) + 3 + end.at(name).size();
    const std::string rest = spelt.substr(after);
    EXPECT_EQ(rest.find_first_not_of('_'), std::string::npos) << rest;  // (chatml's "\n" after <|im_end|> too)
    // Padding inputs are the padding id (Alpaca's system prompt replaces its header: row 1 can be the shorter).
    const int64_t shorter = examples[0].ids.size() < examples[1].ids.size() ? 0 : 1;
    EXPECT_EQ(b.inputs[(shorter + 1) * b.columns - 1], chat->padding_id());
    // With train_on_prompt every real target counts: all but the short row's padding.
    const InstructBatch all = collate_instruct(examples, kBoth, {.padding_id = chat->padding_id(), .train_on_prompt = true});
    EXPECT_EQ(all.counted_targets(), int64_t(examples[0].ids.size() - 1 + examples[1].ids.size() - 1));
  }
}

TEST(SftCollate, TruncationCanCutTheReplyAndItsEnd) {
  const ByteTokenizer tok = sft_testing::gpt2_like();
  const auto alpaca = make_template("alpaca", tok);
  const std::vector<Rendered> one{alpaca->render({{"user", "Say a long word."}, {"assistant", "Supercalifragilistic"}})};
  const int64_t prompt = int64_t(sft_testing::ids_where(one[0], 0).size());
  const std::vector<size_t> first{0};
  // Cut 5 tokens into the reply: the targets count its first 5 characters and no end-of-text.
  const InstructBatch b = collate_instruct(one, first, {.padding_id = alpaca->padding_id(), .max_length = prompt + 4});
  std::vector<int64_t> counted;
  for (const int64_t t : b.targets) if (t != X) counted.push_back(t);
  EXPECT_EQ(tok.spell(counted), "Super");
}

TEST(SftCollate, ClassificationBatchesKeepEachExamplesLastRealPosition) {
  const std::vector<ClassifyExample> examples{{{4, 5, 6}, 1}, {{7}, 0}, {{1, 2, 3, 4, 5, 6}, 2}};
  const std::vector<size_t> picked{0, 1, 2};
  const ClassifyBatch b = collate_classify(examples, picked, /*padding_id=*/50256);
  EXPECT_EQ(b.columns, 6);
  EXPECT_EQ(b.last, (std::vector<int64_t>{2, 0, 5}));
  EXPECT_EQ(b.labels, (std::vector<int64_t>{1, 0, 2}));
  EXPECT_EQ(std::vector<int64_t>(b.inputs.begin() + 6, b.inputs.begin() + 12),
            (std::vector<int64_t>{7, 50256, 50256, 50256, 50256, 50256}));
  // Cut at 4: the long example's last real position is the last column.
  const ClassifyBatch cut = collate_classify(examples, picked, 50256, 4);
  EXPECT_EQ(cut.columns, 4);
  EXPECT_EQ(cut.last, (std::vector<int64_t>{2, 0, 3}));
  EXPECT_EQ(cut.last_tensor().shape(), (autograd::Shape{3}));
  EXPECT_EQ(cut.input_tensor().shape(), (autograd::Shape{3, 4}));
  const std::vector<ClassifyExample> empty{{{}, 0}};
  const std::vector<size_t> first{0};
  EXPECT_THROW_WITH(collate_classify(empty, first, 0), FinetuneError, "example 0", "no tokens");
}

TEST(SftCollate, DataSetsRenderAndTokenizeForTheirBatches) {
  const ByteTokenizer tok = sft_testing::gpt2_like();
  const auto alpaca = make_template("alpaca", tok);
  const std::vector<InstructionExample> records{AlpacaRecord{"Say hi.", "", "hi"},
                                                Conversation{{"user", "Say yo."}, {"assistant", "yo"}}};
  const std::vector<Rendered> rendered = render_examples(records, *alpaca);
  ASSERT_EQ(rendered.size(), 2u);
  EXPECT_EQ(tok.spell(sft_testing::ids_where(rendered[0], 1)), "hi<|endoftext|>");
  EXPECT_EQ(tok.spell(sft_testing::ids_where(rendered[1], 1)), "yo<|endoftext|>");
  const ClassificationData data{{{"ab", "spam", "line 2"}, {"c", "ham", "line 3"}}, {"spam", "ham"}};
  const std::vector<ClassifyExample> examples = tokenize_examples(data, {0, 1}, tok);
  EXPECT_EQ(examples[0].ids, (std::vector<int64_t>{'a', 'b'}));
  EXPECT_EQ(examples[1].label, 1);
  EXPECT_THROW(tokenize_examples(data, {0}, tok), std::invalid_argument);
}

TEST(SftSplit, FractionsCutASeededShuffle) {
  const Split s = split_examples(100, parse_split("0.7,0.1,0.2"), 123);
  EXPECT_EQ(s.train.size(), 70u);
  EXPECT_EQ(s.validation.size(), 10u);
  EXPECT_EQ(s.test.size(), 20u);
  std::set<size_t> all(s.train.begin(), s.train.end());
  all.insert(s.validation.begin(), s.validation.end());
  all.insert(s.test.begin(), s.test.end());
  EXPECT_EQ(all.size(), 100u);  // every example once
  EXPECT_EQ(*all.rbegin(), 99u);
  const Split again = split_examples(100, parse_split("0.7,0.1,0.2"), 123);
  EXPECT_EQ(again.train, s.train);
  EXPECT_EQ(again.test, s.test);
  EXPECT_NE(split_examples(100, parse_split("0.7,0.1,0.2"), 124).train, s.train);
  std::vector<size_t> sorted = s.train;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NE(sorted, s.train);  // shuffled
  // 0.29 × 100 is 28.999999999999996 in binary: still 29.
  EXPECT_EQ(split_examples(100, parse_split("0.29,0.71,0"), 1).train.size(), 29u);
  // The rest goes to test: 7 examples at 0.7, 0.1, 0.2 make 4, 0, 3.
  const Split small = split_examples(7, {}, 1);
  EXPECT_EQ(small.train.size() + small.validation.size() + small.test.size(), 7u);
  EXPECT_EQ(small.train.size(), 4u);
}

TEST(SftSplit, RefusesFractionsThatDoNotMakeASplit) {
  EXPECT_THROW_WITH(parse_split("0.7,0.3"), FinetuneError, "\"0.7,0.3\"", "three fractions");
  EXPECT_THROW_WITH(parse_split("0.7,0.2,0.2"), FinetuneError, "do not add up to 1");
  EXPECT_THROW_WITH(parse_split("0.7,x,0.3"), FinetuneError, "\"x\" is not a number");
  EXPECT_THROW_WITH(parse_split("1.5,-0.5,0"), FinetuneError, "1.5 is not a fraction");
  EXPECT_THROW_WITH(parse_split("0.7,0.1,0.2,"), FinetuneError, "three fractions");
  EXPECT_THROW_WITH(parse_split("nan,0,1"), FinetuneError, "not a number");
}

// ---- cross_entropy over collated targets ----

struct Recorded {
  autograd::Shape shape;
  std::vector<double> values;
  std::vector<int64_t> ints;
};

std::map<std::string, Recorded> load_sft_fixture() {
  const std::string path = std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/reference/fixtures/sft/masked_cross_entropy.txt";
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot open " << path << " (run tests/reference/make_sft_fixtures.py)";
  std::map<std::string, Recorded> out;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string kind, name, word;
    int64_t ndim = 0;
    words >> kind >> name >> ndim;
    Recorded r;
    for (int64_t d = 0, size = 0; d < ndim && words >> size; ++d) r.shape.push_back(size);
    while (words >> word)  // strtod reads C99 hex floats exactly
      kind == "tensor" ? r.values.push_back(std::strtod(word.c_str(), nullptr)) : r.ints.push_back(std::stoll(word));
    out[name] = std::move(r);
  }
  return out;
}

TEST(SftCollate, MaskedCrossEntropyAndItsGradientMatchPyTorch) {
  using namespace autograd;
  const auto fixture = load_sft_fixture();
  ASSERT_TRUE(fixture.count("logits"));
  const Recorded& logits = fixture.at("logits");
  const int64_t vocab = logits.shape.back();
  for (const bool train_on_prompt : {false, true}) {
    const std::string name = train_on_prompt ? "train_on_prompt" : "prompt_masked";
    SCOPED_TRACE(name);
    const InstructBatch b = collate_instruct(kTwo, kBoth, {.padding_id = 9, .train_on_prompt = train_on_prompt});
    EXPECT_EQ(b.targets, fixture.at(name + ".targets").ints);  // the script's targets are collate's
    Tensor x = from_vector(logits.values, logits.shape, DType::Float64).requires_grad_();
    Tensor loss = cross_entropy(x.view({-1, vocab}), b.target_tensor().view({-1}));
    loss.backward();
    EXPECT_NEAR(loss.item<double>(), fixture.at(name + ".loss").values[0], 1e-14);
    const std::vector<double> grad = x.grad().to_vector<double>();
    const std::vector<double>& expected = fixture.at(name + ".grad").values;
    ASSERT_EQ(grad.size(), expected.size());
    for (size_t i = 0; i < grad.size(); ++i) EXPECT_NEAR(grad[i], expected[i], 1e-15) << "element " << i;
  }
}

TEST(SftCollate, MaskedCrossEntropyGradchecksInFloat64) {
  using namespace autograd;
  for (const bool train_on_prompt : {false, true}) {
    const Tensor targets = collate_instruct(kTwo, kBoth, {.padding_id = 9, .train_on_prompt = train_on_prompt})
                               .target_tensor()
                               .view({-1});
    EXPECT_GRADCHECK([targets](const Inputs& x) { return cross_entropy(x[0].view({-1, 10}), targets); },
                     Inputs{testing_helpers::leaf({2, 4, 10}, 4900 + train_on_prompt, -3, 3)});
  }
  // non-contiguous logits: the rows of a transposed [10, 8] leaf
  const Tensor targets = collate_instruct(kTwo, kBoth, {.padding_id = 9}).target_tensor().view({-1});
  EXPECT_GRADCHECK([targets](const Inputs& x) { return cross_entropy(x[0].t(), targets); },
                   Inputs{testing_helpers::leaf({10, 8}, 4910, -3, 3)});
}

}  // namespace
