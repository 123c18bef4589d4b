// collate.cpp — see collate.h.
#include "nn/finetune/collate.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "nn/finetune/error.h"
#include "nn/finetune/seeded.h"

namespace finetune {
namespace {

void check_max_length(int64_t max_length) {
  if (max_length < 0) throw FinetuneError("max length " + std::to_string(max_length) + " is negative");
}

// The longest of the picked lengths, cut at max_length (when given).
template <typename Length>
int64_t batch_columns(std::span<const size_t> batch, int64_t max_length, Length&& length) {
  int64_t longest = 0;
  for (const size_t i : batch) longest = std::max(longest, length(i));
  return max_length > 0 ? std::min(longest, max_length) : longest;
}

autograd::Tensor as_tensor(const std::vector<int64_t>& values, autograd::Shape shape) {
  return autograd::from_vector(values, shape);
}

}  // namespace

int64_t InstructBatch::counted_targets() const {
  return std::count_if(targets.begin(), targets.end(), [](int64_t t) { return t != kIgnoreIndex; });
}
autograd::Tensor InstructBatch::input_tensor() const { return as_tensor(inputs, {rows, columns}); }
autograd::Tensor InstructBatch::target_tensor() const { return as_tensor(targets, {rows, columns}); }

std::vector<Rendered> render_examples(const std::vector<InstructionExample>& examples, const ChatTemplate& chat) {
  std::vector<Rendered> out;
  for (const InstructionExample& example : examples) out.push_back(chat.render(to_conversation(example, chat)));
  return out;
}

InstructBatch collate_instruct(const std::vector<Rendered>& examples, std::span<const size_t> batch,
                               const CollateOptions& options) {
  check_max_length(options.max_length);
  for (const size_t i : batch)
    if (examples.at(i).ids.size() < 2)
      throw FinetuneError("example " + std::to_string(i) + " has fewer than two tokens: nothing to predict");
  InstructBatch out;
  out.rows = int64_t(batch.size());
  // Position t predicts token t + 1, so an example of n tokens gives n − 1 inputs and targets.
  out.columns = batch_columns(batch, options.max_length, [&](size_t i) { return int64_t(examples[i].ids.size()) - 1; });
  for (const size_t i : batch) {
    const Rendered& example = examples[i];
    const int64_t length = int64_t(example.ids.size());
    for (int64_t t = 0; t < out.columns; ++t) {
      out.inputs.push_back(t < length ? example.ids[t] : options.padding_id);
      const int64_t next = t + 1;
      const bool counts = next < length && (options.train_on_prompt || example.counted[next]);
      out.targets.push_back(counts ? example.ids[next] : kIgnoreIndex);
    }
  }
  return out;
}

autograd::Tensor ClassifyBatch::input_tensor() const { return as_tensor(inputs, {rows, columns}); }
autograd::Tensor ClassifyBatch::last_tensor() const { return as_tensor(last, {rows}); }
autograd::Tensor ClassifyBatch::label_tensor() const { return as_tensor(labels, {rows}); }

std::vector<ClassifyExample> tokenize_examples(const ClassificationData& data, const std::vector<int64_t>& labels,
                                               const TemplateTokenizer& tokenizer) {
  if (labels.size() != data.examples.size())
    throw std::invalid_argument("tokenize_examples: " + std::to_string(labels.size()) + " labels for " +
                                std::to_string(data.examples.size()) + " examples");
  std::vector<ClassifyExample> out;
  for (size_t i = 0; i < labels.size(); ++i) out.push_back({tokenizer.encode(data.examples[i].text), labels[i]});
  return out;
}

ClassifyBatch collate_classify(const std::vector<ClassifyExample>& examples, std::span<const size_t> batch,
                               int64_t padding_id, int64_t max_length) {
  check_max_length(max_length);
  for (const size_t i : batch)
    if (examples.at(i).ids.empty()) throw FinetuneError("example " + std::to_string(i) + " has no tokens");
  ClassifyBatch out;
  out.rows = int64_t(batch.size());
  out.columns = batch_columns(batch, max_length, [&](size_t i) { return int64_t(examples[i].ids.size()); });
  for (const size_t i : batch) {
    const std::vector<int64_t>& ids = examples[i].ids;
    for (int64_t t = 0; t < out.columns; ++t) out.inputs.push_back(t < int64_t(ids.size()) ? ids[t] : padding_id);
    out.last.push_back(std::min(int64_t(ids.size()), out.columns) - 1);
    out.labels.push_back(examples[i].label);
  }
  return out;
}

SplitFractions parse_split(const std::string& text) {
  const auto refuse = [&](const std::string& why) {
    return FinetuneError("split \"" + text + "\": " + why + " (three fractions for training, validation and "
                         "test that add up to 1, such as 0.7,0.1,0.2)");
  };
  std::vector<double> parts;
  std::istringstream in(text);
  for (std::string part; std::getline(in, part, ',');) {
    char* end = nullptr;
    const double value = std::strtod(part.c_str(), &end);
    if (part.empty() || *end != '\0' || !std::isfinite(value)) throw refuse("\"" + part + "\" is not a number");
    if (value < 0 || value > 1) throw refuse(part + " is not a fraction from 0 to 1");
    parts.push_back(value);
  }
  if (parts.size() != 3 || text.ends_with(',')) throw refuse("expected three fractions");
  if (std::abs(parts[0] + parts[1] + parts[2] - 1.0) > 1e-6) throw refuse("the fractions do not add up to 1");
  return SplitFractions{parts[0], parts[1], parts[2]};
}

Split split_examples(size_t count, const SplitFractions& fractions, uint64_t seed) {
  std::vector<size_t> order(count);
  std::iota(order.begin(), order.end(), size_t(0));
  SeededRandom random(seed);
  random.shuffle(order);
  // floor(), nudged: 0.7 × 100 is 70.00000000000001 in binary, and 0.29 × 100 is 28.999999999999996.
  const auto part = [&](double fraction) { return size_t(std::floor(double(count) * fraction + 1e-9)); };
  const size_t train = std::min(part(fractions.train), count);
  const size_t validation = std::min(part(fractions.validation), count - train);
  Split out;
  out.train.assign(order.begin(), order.begin() + train);
  out.validation.assign(order.begin() + train, order.begin() + train + validation);
  out.test.assign(order.begin() + train + validation, order.end());
  return out;
}

}  // namespace finetune
