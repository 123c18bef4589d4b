// classifier.cpp — the classifier of chapter 6 (classifier.h): a decoder's hidden states, the last real
// token's row, a Linear head; and which parameters train.
#include "nn/finetune/classifier.h"

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "nn/gpt.h"
#include "nn/llama.h"

namespace finetune {

using namespace autograd;

Tensor final_hidden_states(const nn::LanguageModel& model, const Tensor& ids) {
  if (const auto* gpt = dynamic_cast<const nn::GPTModel*>(&model)) {
    // GPTModel::forward without its last line (out_head)
    CallSite line("x = drop_emb(tok_emb(in_idx) + pos_emb(arange(T)))");
    Tensor x = gpt->embed(ids);
    for (const auto& block : *gpt->trf_blocks) x = (*block)(x);
    line.set("hidden = final_norm(x)");
    return (*gpt->final_norm)(x);
  }
  if (const auto* llama = dynamic_cast<const nn::LlamaModel*>(&model)) {
    // LlamaModel::forward without lm_head
    if (ids.dim() != 2 || ids.size(1) < 1 || ids.size(1) > llama->cfg.max_position_embeddings)
      throw std::invalid_argument("final_hidden_states: expected token ids [batch, tokens] with 1 to " +
                                  std::to_string(llama->cfg.max_position_embeddings) + " tokens, got " + ids.shape_str());
    CallSite line("x = model.embed_tokens(ids)");
    Tensor x = (*llama->model->embed_tokens)(ids);
    const auto [cos, sin] = llama->rope(0, ids.size(1), x);
    for (const auto& layer : *llama->model->layers) x = layer->forward(x, cos, sin);
    line.set("hidden = model.norm(x)");
    return llama->model->norm->forward(x);
  }
  throw std::invalid_argument("final_hidden_states: a GPT or a Llama model is needed");
}

int64_t hidden_width(const nn::LanguageModel& model) {
  if (const auto* gpt = dynamic_cast<const nn::GPTModel*>(&model)) return gpt->cfg.emb_dim;
  return dynamic_cast<const nn::LlamaModel&>(model).cfg.hidden_size;
}

int64_t block_count(const nn::LanguageModel& model) {
  if (const auto* gpt = dynamic_cast<const nn::GPTModel*>(&model)) return int64_t(gpt->trf_blocks->size());
  return int64_t(dynamic_cast<const nn::LlamaModel&>(model).model->layers->size());
}

Tensor last_token_states(const Tensor& hidden, const Tensor& last) {
  if (hidden.dim() != 3 || last.dim() != 1 || last.size(0) != hidden.size(0))
    throw std::invalid_argument("last_token_states: expected hidden [B, T, width] and last [B], got " +
                                hidden.shape_str() + " and " + last.shape_str());
  const int64_t B = hidden.size(0), T = hidden.size(1), width = hidden.size(2);
  std::vector<int64_t> rows = last.cpu().to_vector<int64_t>();
  for (int64_t b = 0; b < B; ++b) {
    if (rows[b] < 0 || rows[b] >= T)
      throw std::invalid_argument("last_token_states: last[" + std::to_string(b) + "] = " + std::to_string(rows[b]) +
                                  " is not a position of " + std::to_string(T));
    rows[b] += b * T;  // example b's rows start at b·T
  }
  CallSite line("states = hidden.flatten(0, 1)[b * T + last[b]]");
  // embedding() is the row gather with a scatter-add backward: exactly what picking rows needs
  return embedding(hidden.reshape({B * T, width}), from_vector(rows, {B}).to(hidden.device()));
}

Classifier::Classifier(std::shared_ptr<nn::LanguageModel> model, int64_t classes) : backbone(std::move(model)) {
  if (classes < 2) throw std::invalid_argument("Classifier: at least 2 classes are needed, got " + std::to_string(classes));
  register_module("model", backbone);
  head = register_module("head", std::make_shared<nn::Linear>(hidden_width(*backbone), classes));
}

Tensor Classifier::forward(const Tensor& ids, const Tensor& last) const {
  const Tensor states = last_token_states(final_hidden_states(*backbone, ids), last);
  CallSite line("logits = head(states)");
  return (*head)(states);
}

void freeze_for_classification(Classifier& classifier, int64_t train_blocks) {
  const nn::LanguageModel& model = *classifier.backbone;
  const int64_t blocks = block_count(model);
  if (train_blocks > blocks)
    throw std::invalid_argument("freeze_for_classification: " + std::to_string(train_blocks) + " blocks to train, the "
                                "model has " + std::to_string(blocks));
  for (Tensor& p : classifier.parameters()) p.requires_grad_(train_blocks < 0);
  if (train_blocks < 0) {
    // everything on the classifier's path: the next-token head is not on it (unless it is the embedding)
    if (const auto* gpt = dynamic_cast<const nn::GPTModel*>(&model)) {
      if (&gpt->out_head->weight.impl() != &gpt->tok_emb->weight.impl())
        for (Tensor p : gpt->out_head->parameters()) p.requires_grad_(false);
    } else if (const auto& llama = dynamic_cast<const nn::LlamaModel&>(model); llama.lm_head) {
      for (Tensor p : llama.lm_head->parameters()) p.requires_grad_(false);
    }
    return;
  }
  std::vector<const nn::Module*> trained{classifier.head.get()};
  if (const auto* gpt = dynamic_cast<const nn::GPTModel*>(&model)) {
    trained.push_back(gpt->final_norm.get());
    for (int64_t i = blocks - train_blocks; i < blocks; ++i) trained.push_back(&(*gpt->trf_blocks)[size_t(i)]);
  } else {
    const auto& llama = dynamic_cast<const nn::LlamaModel&>(model);
    trained.push_back(llama.model->norm.get());
    for (int64_t i = blocks - train_blocks; i < blocks; ++i) trained.push_back(&(*llama.model->layers)[size_t(i)]);
  }
  for (const nn::Module* module : trained)
    for (Tensor p : module->parameters()) p.requires_grad_(true);
}

nn::NamedTensors trainable_parameters(const nn::Module& module) {
  nn::NamedTensors out;
  for (const auto& [name, p] : module.named_parameters())
    if (p.requires_grad()) out.emplace_back(name, p);
  return out;
}

}  // namespace finetune
