// classifier.h — a decoder turned into a text classifier, as chapter 6 of "Build a Large Language Model
// (From Scratch)" does it:
//
//   ids [B, T] ─ blocks ─ final norm ─▶ hidden [B, T, width] ─ row `last[b]` of each ─▶ [B, width]
//                                                               ─ head: Linear(width, classes) ─▶ logits [B, classes]
//
// The next-token head (width → vocabulary) is not used: a Linear(width, classes) reads the hidden state
// instead. It reads the state of each example's last real token, not the batch's last column: in a causal
// model the last token is the only one that has attended to the whole text, and in a padded row the last
// column is padding (collate_classify gives each row's last real position).
//
// What trains (freeze_for_classification): the head always, and the final norm with the last N blocks
// (the book trains the last block and the final norm), or everything; every other parameter is frozen and
// receives no gradient.
#pragma once
#include <cstdint>
#include <memory>

#include "nn/language_model.h"
#include "nn/layers.h"

namespace finetune {

using autograd::Tensor;

// The hidden states a decoder's output head would read: the final norm's output, [B, T, width]. For a GPT
// (nn/gpt.h) or a Llama (nn/llama.h); std::invalid_argument for another model.
Tensor final_hidden_states(const nn::LanguageModel& model, const Tensor& ids);
// The width of those states, and the number of transformer blocks.
int64_t hidden_width(const nn::LanguageModel& model);
int64_t block_count(const nn::LanguageModel& model);

// hidden [B, T, width], last int64 [B] (0 ≤ last[b] < T) → [B, width]: row last[b] of example b. A gather
// (the rows b·T + last[b] of hidden seen as [B·T, width]); its backward puts each row's gradient back in
// its place and zeros everywhere else.
Tensor last_token_states(const Tensor& hidden, const Tensor& last);

class Classifier : public nn::Module {
 public:
  // The head Linear(width, classes) is drawn as a new Linear is (seed the generator first).
  Classifier(std::shared_ptr<nn::LanguageModel> backbone, int64_t classes);
  // ids int64 [B, T], last int64 [B] → logits [B, classes]
  Tensor forward(const Tensor& ids, const Tensor& last) const;
  Tensor operator()(const Tensor& ids, const Tensor& last) const { return forward(ids, last); }
  int64_t classes() const { return head->out_features; }

  std::shared_ptr<nn::LanguageModel> backbone;  // registered as "model"
  std::shared_ptr<nn::Linear> head;             // registered as "head"
};

// Freezes every parameter of the backbone except those of its last `train_blocks` blocks and its final
// norm; the head trains. train_blocks < 0: everything on the classifier's path trains (all but an untied
// next-token head). std::invalid_argument when train_blocks is more than the model has.
void freeze_for_classification(Classifier& classifier, int64_t train_blocks);

// The parameters that train (requires_grad), in named_parameters() order.
nn::NamedTensors trainable_parameters(const nn::Module& module);

}  // namespace finetune
