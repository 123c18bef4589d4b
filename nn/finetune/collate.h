// collate.h — examples in token form made into batches, as chapters 6 and 7 of the book explain them.
//
// Instruction batches (chapter 7): each example is padded with the padding id (the end-of-text token) to the
// longest of its batch, or cut at max_length; the targets are the inputs shifted by one. A target is the
// ignore index −100, which cross_entropy skips and leaves out of its mean, when it is
//   - padding: past the example's end. The example's own end-of-turn token (the first end-of-text after an
//     Alpaca response) is not padding and stays, so that the model learns to stop;
//   - the prompt: a template marker, the system prompt or the user's text (rendered.counted == 0), unless
//     train_on_prompt (the book's main text trains on the whole text; masking the prompt is its exercise
//     7.2 and the default here, so that the loss measures the replies alone).
//
//   ids      Below … ### Response:\n  Blue  <EOT>            (and a longer example beside it)
//   inputs   Below … ### Response:\n  Blue  <EOT> <EOT> <EOT>
//   targets  −100  …  −100           Blue <EOT>  −100  −100
//
// Classification batches (chapter 6): padded likewise, with each example's last real position: the
// classifier reads the hidden state there (the last position of a padded row would be padding).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "nn/finetune/data.h"
#include "nn/finetune/template.h"

namespace finetune {

inline constexpr int64_t kIgnoreIndex = -100;  // cross_entropy's default ignore_index (PyTorch's)

struct CollateOptions {
  int64_t padding_id = 0;
  int64_t max_length = 0;  // the most positions a row keeps (0: no cut); the model's context at most
  bool train_on_prompt = false;
};

struct InstructBatch {
  int64_t rows = 0, columns = 0;
  std::vector<int64_t> inputs, targets;  // rows × columns, row by row
  int64_t counted_targets() const;       // the targets that are not kIgnoreIndex (what the mean divides by)
  autograd::Tensor input_tensor() const;   // int64 [rows, columns]
  autograd::Tensor target_tensor() const;  // int64 [rows, columns]
};

// Each example rendered in `chat`'s template (an Alpaca record as its user and assistant messages).
std::vector<Rendered> render_examples(const std::vector<InstructionExample>& examples, const ChatTemplate& chat);

// The examples `batch` picks from `examples`. FinetuneError for an example of fewer than two tokens (it has
// no target) and for a negative max_length.
InstructBatch collate_instruct(const std::vector<Rendered>& examples, std::span<const size_t> batch,
                               const CollateOptions& options);

struct ClassifyExample {
  std::vector<int64_t> ids;
  int64_t label = 0;
};

struct ClassifyBatch {
  int64_t rows = 0, columns = 0;
  std::vector<int64_t> inputs;  // rows × columns, padded with padding_id
  std::vector<int64_t> last;    // each row's last real position (max_length − 1 for a row that was cut)
  std::vector<int64_t> labels;
  autograd::Tensor input_tensor() const;  // int64 [rows, columns]
  autograd::Tensor last_tensor() const;   // int64 [rows]
  autograd::Tensor label_tensor() const;  // int64 [rows]
};

// Each text as ids, with its class: labels[i] is example i's (label_indices() in data.h).
std::vector<ClassifyExample> tokenize_examples(const ClassificationData& data, const std::vector<int64_t>& labels,
                                               const TemplateTokenizer& tokenizer);

// FinetuneError for an example without tokens and for a negative max_length.
ClassifyBatch collate_classify(const std::vector<ClassifyExample>& examples, std::span<const size_t> batch,
                               int64_t padding_id, int64_t max_length = 0);

// ---- train / validation / test ----

struct SplitFractions {
  double train = 0.7, validation = 0.1, test = 0.2;
};
// "0.7,0.1,0.2": three fractions from 0 to 1 that add up to 1. FinetuneError naming the text otherwise.
SplitFractions parse_split(const std::string& text);

struct Split {
  std::vector<size_t> train, validation, test;  // indices into the data set
};
// The indices 0..count−1 shuffled with `seed` (the same parts on every platform, seeded.h), then cut:
// floor(count × train) for training, floor(count × validation) for validation, the rest for testing (the
// book's random_split does the same).
Split split_examples(size_t count, const SplitFractions& fractions, uint64_t seed);

}  // namespace finetune
