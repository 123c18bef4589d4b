// classify_files.h — what train --task classify, classify and eval --task classify share (classify.h): texts
// read and tokenized, batches scored, and a classifier's checkpoint read back.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "autograd/device.h"
#include "nn/finetune/classifier.h"
#include "nn/finetune/collate.h"
#include "nn/finetune/data.h"
#include "nn/finetune/template.h"
#include "text.h"
#include "train_tokenizer.h"

namespace cli {

// What a classifier reads a text with: its characters (a char run) or a byte-level BPE (special-token
// spellings in a text read as ordinary text).
class TextTokenizer : public finetune::TemplateTokenizer {
 public:
  TextTokenizer(const RunTokenizer& tokenizer, const Vocabulary& vocab) : tokenizer_(tokenizer), vocab_(vocab) {}
  // UsageError for a character a char run's vocabulary lacks.
  std::vector<int64_t> encode(std::string_view text) const override;
  std::optional<int64_t> special_id(std::string_view text) const override;

 private:
  const RunTokenizer& tokenizer_;  // not owned: both must outlive the adapter
  const Vocabulary& vocab_;
};

// The padding id: GPT-2's <|endoftext|> (50256, as the book pads), else 0. In a causal model the padding
// after a text never reaches the last real token's state, so the choice changes no result.
int64_t padding_id(const TextTokenizer& tokenizer);

// read_classification_data with its FinetuneError as a UsageError (exit status 2).
finetune::ClassificationData read_data(const std::string& path);

// Each text as ids, with its class (labels[i] is example i's): a character the model lacks, or a text
// without tokens, is refused with the text's place in `path`.
std::vector<finetune::ClassifyExample> encode_examples(const finetune::ClassificationData& data,
                                                       const std::vector<int64_t>& labels, const TextTokenizer& tokenizer,
                                                       const std::string& path);

// How texts become batches: padded with `padding_id` to the longest of the batch, cut at `cut` tokens.
struct Batching {
  int64_t padding_id = 0, cut = 0, batch = 8;
  autograd::Device device;
};

struct Score {
  double loss = 0, accuracy = 0;
  int64_t count = 0;
  std::vector<int64_t> predicted;  // each example's class, in the order given
};

// Mean loss and accuracy over `which`, in batches, with no graph recorded (the caller sets eval mode).
Score score(const finetune::Classifier& model, const std::vector<finetune::ClassifyExample>& examples,
            std::span<const size_t> which, const Batching& batching);

// A checkpoint's "format".
inline constexpr const char* kClassifierFormat = "scratchgrad-classifier";

struct LoadedClassifier {
  std::shared_ptr<finetune::Classifier> model;  // in eval mode
  RunTokenizer tokenizer;
  Vocabulary vocab{std::u32string()};
  std::vector<std::string> labels;
  int64_t cut = 0;  // the most tokens of a text it reads
};

// A checkpoint of train --task classify --save: the model through load_model, then the head and the labels
// (UsageError for another file, nn::CheckpointError naming the damaged field).
LoadedClassifier load_classifier(const std::string& path, const std::string& tokenizer_file);

}  // namespace cli
