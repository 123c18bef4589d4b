// classify_files.cpp — texts, scores and checkpoints of a classifier (classify_files.h).
#include "classify_files.h"

#include <algorithm>

#include <fmt/format.h>

#include "autograd/autograd.h"
#include "command_line.h"
#include "guards.h"
#include "model_files.h"
#include "nn/finetune/error.h"
#include "nn/layers.h"
#include "nn/safetensors.h"

namespace cli {

using namespace autograd;
using finetune::ClassifyExample;
using finetune::Classifier;

std::vector<int64_t> TextTokenizer::encode(std::string_view text) const {
  if (tokenizer_.is_char()) return vocab_.encode(decode_utf8(std::string(text)));
  const std::vector<int32_t> ids = tokenizer_.bpe->encode_ordinary(text);
  return {ids.begin(), ids.end()};
}

std::optional<int64_t> TextTokenizer::special_id(std::string_view text) const {
  if (tokenizer_.is_char()) return std::nullopt;
  if (const std::optional<int32_t> id = tokenizer_.bpe->token_id(text)) return *id;
  return std::nullopt;
}

int64_t padding_id(const TextTokenizer& tokenizer) { return tokenizer.special_id("<|endoftext|>").value_or(0); }

finetune::ClassificationData read_data(const std::string& path) {
  try {
    return finetune::read_classification_data(path);
  } catch (const finetune::FinetuneError& e) {
    throw UsageError(e.what());
  }
}

std::vector<ClassifyExample> encode_examples(const finetune::ClassificationData& data, const std::vector<int64_t>& labels,
                                             const TextTokenizer& tokenizer, const std::string& path) {
  std::vector<ClassifyExample> out;
  out.reserve(data.examples.size());
  for (size_t i = 0; i < data.examples.size(); ++i) {
    const finetune::TextExample& example = data.examples[i];
    try {
      out.push_back({tokenizer.encode(example.text), labels[i]});
    } catch (const UsageError& e) {
      throw UsageError(fmt::format("{} {}: field \"text\": {}", path, example.place, e.what()));
    }
    if (out.back().ids.empty()) throw UsageError(fmt::format("{} {}: field \"text\" has no tokens", path, example.place));
  }
  return out;
}

Score score(const Classifier& model, const std::vector<ClassifyExample>& examples, std::span<const size_t> which,
            const Batching& b) {
  NoGradGuard no_grad;
  Score s;
  int64_t right = 0;
  for (size_t first = 0; first < which.size(); first += size_t(b.batch)) {
    const std::span<const size_t> part = which.subspan(first, std::min(size_t(b.batch), which.size() - first));
    const finetune::ClassifyBatch batch = finetune::collate_classify(examples, part, b.padding_id, b.cut);
    const Tensor logits = model(batch.input_tensor().to(b.device), batch.last_tensor().to(b.device));
    s.loss += cross_entropy(logits, batch.label_tensor().to(b.device)).item() * double(batch.rows);
    const std::vector<int64_t> predicted = argmax(logits, 1).cpu().to_vector<int64_t>();
    for (int64_t r = 0; r < batch.rows; ++r) right += predicted[size_t(r)] == batch.labels[size_t(r)];
    s.predicted.insert(s.predicted.end(), predicted.begin(), predicted.end());
  }
  s.count = int64_t(which.size());
  if (s.count > 0) s.loss /= double(s.count), s.accuracy = double(right) / double(s.count);
  return s;
}

LoadedClassifier load_classifier(const std::string& path, const std::string& tokenizer_file) {
  nn::Checkpoint ck = nn::load_safetensors(path);
  const auto format = ck.metadata.find("format");
  if (format == ck.metadata.end() || format->second != kClassifierFormat)
    throw UsageError(fmt::format("{}: not a classifier (train --task classify --save writes one)", path));
  LoadedClassifier c;
  const int64_t classes = metadata_int(ck, path, "classify.labels");
  if (classes < 2 || uint64_t(classes) > finetune::kMaxClasses)
    throw nn::CheckpointError(fmt::format("{}: metadata 'classify.labels' is {}, expected 2 to {} classes", path, classes,
                                          finetune::kMaxClasses));
  for (int64_t i = 0; i < classes; ++i) {
    const auto label = ck.metadata.find(fmt::format("classify.label.{}", i));
    if (label == ck.metadata.end() || label->second.empty())
      throw nn::CheckpointError(fmt::format("{}: metadata has no 'classify.label.{}'", path, i));
    if (std::find(c.labels.begin(), c.labels.end(), label->second) != c.labels.end())
      throw nn::CheckpointError(fmt::format("{}: metadata lists the label '{}' twice", path, one_line(label->second)));
    c.labels.push_back(label->second);
  }
  c.cut = metadata_int(ck, path, "classify.max_length");
  const std::string model_format = ck.metadata["classify.model_format"];
  if (model_format != "scratchgrad-gpt" && model_format != "scratchgrad-llama")
    throw nn::CheckpointError(fmt::format("{}: metadata 'classify.model_format' is '{}', expected scratchgrad-gpt or "
                                          "scratchgrad-llama",
                                          path, one_line(model_format.substr(0, 40))));
  nn::NamedTensors head;
  std::erase_if(ck.tensors, [&](const auto& entry) {
    if (!entry.first.starts_with("classify.head.")) return false;
    head.emplace_back(entry.first.substr(std::string("classify.head.").size()), entry.second);
    return true;
  });
  ck.metadata["format"] = model_format;
  LoadedModel m = load_model(path, std::move(ck), tokenizer_file);
  std::shared_ptr<nn::LanguageModel> backbone;
  if (m.gpt) backbone = std::move(m.gpt);
  else backbone = std::move(m.llama);
  check_finite_parameters(head, path);
  try {
    nn::SkipInitGuard from_the_file;
    c.model = std::make_shared<Classifier>(backbone, classes);
    c.model->head->load_state_dict(head);
  } catch (const std::invalid_argument& e) {
    throw nn::CheckpointError(fmt::format("{}: the classifier's head: {}", path, e.what()));
  }
  c.model->eval();
  c.cut = std::min(c.cut, backbone->context_length());  // (a crafted cut past the context reads no further)
  c.tokenizer = m.tokenizer;
  c.vocab = m.vocab;
  return c;
}

}  // namespace cli
