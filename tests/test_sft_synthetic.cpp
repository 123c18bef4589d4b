// test_sft_synthetic.cpp — the tiny assistant's generated conversations (nn/finetune/synthetic.h): their
// form, their determinism, held-out questions that training never sees, and exact-answer scoring.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>

#include "nn/finetune/data.h"
#include "nn/finetune/error.h"
#include "nn/finetune/synthetic.h"
#include "test_helpers.h"
#include "test_process.h"

namespace {

using namespace finetune;

TEST(SftSynthetic, ExamplesHaveTheirTasksFormAndCorrectAnswers) {
  const SyntheticData data = make_synthetic_data({.train_per_task = 300, .held_out_per_task = 50, .seed = 7});
  ASSERT_EQ(data.train.size(), 900u);
  ASSERT_EQ(data.held_out.size(), 150u);
  const std::regex add(R"(What is (\d\d) \+ (\d\d)\?)"), count(R"(How many times does the letter ([a-z]) appear in ([a-z]+)\?)"),
      reverse(R"(Spell ([a-z]+) backwards\.)");
  for (const SyntheticExample& e : data.train) {
    std::smatch m;
    if (e.task == "add") {
      ASSERT_TRUE(std::regex_match(e.question, m, add)) << e.question;
      const int a = std::stoi(m[1]), b = std::stoi(m[2]);
      EXPECT_EQ(e.answer, m[1].str() + " + " + m[2].str() + " = " + std::to_string(a + b) + ".");
    } else if (e.task == "count") {
      ASSERT_TRUE(std::regex_match(e.question, m, count)) << e.question;
      const std::string word = m[2];
      const auto n = std::count(word.begin(), word.end(), m[1].str()[0]);
      EXPECT_EQ(e.answer, "The letter " + m[1].str() + " appears " + std::to_string(n) + (n == 1 ? " time" : " times") +
                              " in " + word + ".");
    } else {
      ASSERT_EQ(e.task, "reverse");
      ASSERT_TRUE(std::regex_match(e.question, m, reverse)) << e.question;
      const std::string word = m[1];
      EXPECT_EQ(e.answer, word + " backwards is " + std::string(word.rbegin(), word.rend()) + ".");
    }
  }
  // "0 times" is among the counting answers, so the model cannot answer from the word alone.
  EXPECT_TRUE(std::any_of(data.train.begin(), data.train.end(),
                          [](const SyntheticExample& e) { return e.answer.find(" 0 times") != std::string::npos; }));
}

TEST(SftSynthetic, TheSameSeedGivesTheSameDataAndHeldOutIsDisjoint) {
  const SyntheticOptions options{.train_per_task = 500, .held_out_per_task = 100, .seed = 3};
  const SyntheticData a = make_synthetic_data(options), b = make_synthetic_data(options);
  EXPECT_EQ(to_jsonl(a.train), to_jsonl(b.train));
  EXPECT_EQ(to_jsonl(a.held_out), to_jsonl(b.held_out));
  EXPECT_NE(to_jsonl(make_synthetic_data({.train_per_task = 500, .held_out_per_task = 100, .seed = 4}).train), to_jsonl(a.train));
  std::set<std::string> train_questions;
  for (const SyntheticExample& e : a.train) train_questions.insert(e.question);
  EXPECT_EQ(train_questions.size(), a.train.size());  // no question twice
  for (const SyntheticExample& e : a.held_out) EXPECT_EQ(train_questions.count(e.question), 0u) << e.question;
  // The tasks are mixed in training (not 500 additions first).
  EXPECT_NE(a.train[0].task + a.train[1].task + a.train[2].task + a.train[3].task, "addaddaddadd");
}

TEST(SftSynthetic, RefusesUnknownTasksAndMoreQuestionsThanATaskHas) {
  EXPECT_THROW_WITH(make_synthetic_data({.tasks = {"add", "multiply"}}), FinetuneError, "\"multiply\"", "add, count or reverse");
  // Two-digit addition has 8,100 questions.
  EXPECT_THROW_WITH(make_synthetic_data({.tasks = {"add"}, .train_per_task = 8100, .held_out_per_task = 1}), FinetuneError,
                    "add", "too few distinct questions");
  EXPECT_EQ(make_synthetic_data({.tasks = {"add"}, .train_per_task = 8000, .held_out_per_task = 100}).train.size(), 8000u);
}

TEST(SftSynthetic, JsonlRoundTripsThroughTheInstructionReader) {
  const SyntheticData data = make_synthetic_data({.train_per_task = 5, .held_out_per_task = 0, .seed = 1});
  const std::string path = testing_process::scratch("synthetic.jsonl").string();
  std::ofstream(path) << to_jsonl(data.train);
  const std::vector<InstructionExample> read = read_instruction_data(path);
  ASSERT_EQ(read.size(), data.train.size());
  for (size_t i = 0; i < read.size(); ++i) {
    const Conversation& c = std::get<Conversation>(read[i]);
    EXPECT_EQ(c[0].content, data.train[i].question);
    EXPECT_EQ(c[1].content, data.train[i].answer);
  }
}

TEST(SftSynthetic, ExactAnswerScoring) {
  const SyntheticExample e{"add", "What is 23 + 58?", "23 + 58 = 81."};
  EXPECT_TRUE(is_exact_answer(e, "23 + 58 = 81."));
  EXPECT_TRUE(is_exact_answer(e, "  23 + 58 = 81.\n"));
  EXPECT_FALSE(is_exact_answer(e, "23 + 58 = 82."));
  EXPECT_FALSE(is_exact_answer(e, "23 + 58 = 81. And more."));
  EXPECT_FALSE(is_exact_answer(e, ""));
  const std::vector<SyntheticExample> examples{e, {"reverse", "Spell abc backwards.", "abc backwards is cba."}, e};
  const auto scores = score_replies(examples, {"23 + 58 = 81.", "abc backwards is abc.", "81"});
  EXPECT_EQ(scores.at("add").correct, 1);
  EXPECT_EQ(scores.at("add").total, 2);
  EXPECT_DOUBLE_EQ(scores.at("add").accuracy(), 0.5);
  EXPECT_EQ(scores.at("reverse").correct, 0);
  EXPECT_THROW(score_replies(examples, {"x"}), std::invalid_argument);
}

}  // namespace
