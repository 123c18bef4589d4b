// synthetic.cpp — see synthetic.h.
#include "nn/finetune/synthetic.h"

#include <algorithm>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "nn/finetune/error.h"
#include "nn/finetune/seeded.h"

namespace finetune {
namespace {

// Two to four consonant-vowel syllables: "tamana", "kemoru".
std::string pseudo_word(SeededRandom& random) {
  static const std::string kConsonants = "bdfgklmnprstvz", kVowels = "aeiou";
  std::string word;
  for (int64_t n = random.between(2, 4); n > 0; --n) {
    word += kConsonants[random.below(kConsonants.size())];
    word += kVowels[random.below(kVowels.size())];
  }
  return word;
}

SyntheticExample addition(SeededRandom& random) {
  const int64_t a = random.between(10, 99), b = random.between(10, 99);
  const std::string sum = std::to_string(a) + " + " + std::to_string(b);
  return {"add", "What is " + sum + "?", sum + " = " + std::to_string(a + b) + "."};
}

SyntheticExample letter_count(SeededRandom& random) {
  const std::string word = pseudo_word(random);
  // Mostly a letter of the word; one time in four any letter, so that "0 times" is an answer too.
  const char letter = random.below(4) == 0 ? char('a' + random.below(26)) : word[random.below(word.size())];
  const auto n = std::count(word.begin(), word.end(), letter);
  return {"count", "How many times does the letter " + std::string(1, letter) + " appear in " + word + "?",
          "The letter " + std::string(1, letter) + " appears " + std::to_string(n) + (n == 1 ? " time" : " times") +
              " in " + word + "."};
}

SyntheticExample backwards(SeededRandom& random) {
  const std::string word = pseudo_word(random);
  return {"reverse", "Spell " + word + " backwards.", word + " backwards is " + std::string(word.rbegin(), word.rend()) + "."};
}

SyntheticExample make_example(const std::string& task, SeededRandom& random) {
  if (task == "add") return addition(random);
  if (task == "count") return letter_count(random);
  if (task == "reverse") return backwards(random);
  throw FinetuneError("unknown synthetic task \"" + task + "\": expected add, count or reverse");
}

// `count` examples of `task` whose questions are not in `seen` (which gains them).
std::vector<SyntheticExample> distinct_examples(const std::string& task, int64_t count, std::set<std::string>& seen,
                                                SeededRandom& random) {
  std::vector<SyntheticExample> out;
  // Enough draws to fill a large part of a task's space; past that, the space is too small for the request.
  for (int64_t draws = 0; int64_t(out.size()) < count; ++draws) {
    if (draws > 50 * count + 10000)
      throw FinetuneError("the synthetic task " + task + " has too few distinct questions for " +
                          std::to_string(count) + " more (found " + std::to_string(out.size()) + ")");
    SyntheticExample example = make_example(task, random);
    if (seen.insert(example.question).second) out.push_back(std::move(example));
  }
  return out;
}

}  // namespace

SyntheticData make_synthetic_data(const SyntheticOptions& options) {
  if (options.train_per_task < 0 || options.held_out_per_task < 0)
    throw FinetuneError("synthetic data: a negative number of examples");
  SeededRandom random(options.seed);
  SyntheticData data;
  for (const std::string& task : options.tasks) {
    make_example(task, random);  // refuses an unknown task before any work
    // Held-out questions first, then training questions that are none of them.
    std::set<std::string> seen;
    const std::vector<SyntheticExample> held_out = distinct_examples(task, options.held_out_per_task, seen, random);
    const std::vector<SyntheticExample> train = distinct_examples(task, options.train_per_task, seen, random);
    data.held_out.insert(data.held_out.end(), held_out.begin(), held_out.end());
    data.train.insert(data.train.end(), train.begin(), train.end());
  }
  random.shuffle(data.train);
  return data;
}

Conversation as_conversation(const SyntheticExample& example) {
  return {{"user", example.question}, {"assistant", example.answer}};
}

std::string to_jsonl(const std::vector<SyntheticExample>& examples) {
  std::string out;
  for (const SyntheticExample& example : examples) {
    nlohmann::json messages = nlohmann::json::array();
    for (const Message& m : as_conversation(example)) messages.push_back({{"role", m.role}, {"content", m.content}});
    out += nlohmann::json{{"messages", messages}}.dump() + "\n";
  }
  return out;
}

bool is_exact_answer(const SyntheticExample& example, std::string_view reply) {
  const size_t first = reply.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return example.answer.empty();
  const size_t last = reply.find_last_not_of(" \t\r\n");
  return reply.substr(first, last - first + 1) == example.answer;
}

std::map<std::string, TaskScore> score_replies(const std::vector<SyntheticExample>& examples,
                                               const std::vector<std::string>& replies) {
  if (examples.size() != replies.size())
    throw std::invalid_argument("score_replies: " + std::to_string(replies.size()) + " replies for " +
                                std::to_string(examples.size()) + " examples");
  std::map<std::string, TaskScore> scores;
  for (size_t i = 0; i < examples.size(); ++i) {
    TaskScore& score = scores[examples[i].task];
    score.correct += is_exact_answer(examples[i], replies[i]) ? 1 : 0;
    ++score.total;
  }
  return scores;
}

}  // namespace finetune
