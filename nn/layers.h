// layers.h — the building blocks: Linear, Embedding, RMSNorm, Dropout, ModuleList, and functional forms.
// Each layer draws its initial values exactly as torch.nn does, so after manual_seed(s) a layer built
// here holds the same numbers as the same layer built in Python.
#pragma once
#include <memory>
#include <vector>

#include "nn/module.h"

namespace nn {

// LoRA's low-rank update (Hu et al., 2021): (α/r)·(x Aᵀ) Bᵀ, with A [r, in] drawn as a Linear's weight
// (kaiming_uniform, a = √5) and B [out, r] zero, so a fresh adapter changes nothing and training moves B
// first. Two products through r, never the [out, in] matrix B·A (docs/gpt2.md).
class LoRA : public Module {
 public:
  LoRA(int64_t in_features, int64_t out_features, int64_t rank, double alpha);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  Tensor delta_weight() const;  // (α/r)·B·A, [out, in]: what merging adds to the base weight
  Tensor A, B;
  int64_t rank;
  double alpha, scale;  // scale = α / r
};

class Embedding;

// y = x Wᵀ + b. Weight [out, in] ~ kaiming_uniform(a = √5) = U(−1/√in, 1/√in); then bias ~ U(−1/√in, 1/√in).
// With an adapter (add_lora), y = x Wᵀ + b + lora(x).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  // Freezes weight and bias (no gradient) and adds a trainable LoRA adapter, registered as "lora"
  // ("lora.A", "lora.B"). Throws std::invalid_argument if one is there already or rank < 1.
  void add_lora(int64_t rank, double alpha);
  // weight += (α/r)·B·A, then the adapter is removed (the weight stays frozen).
  void merge_lora();
  // For a model that will only generate (nn::pack_weights_for_generation): the weight's values move into
  // `panels` (autograd::pack_panels, the layout one row times W reads fastest), which then stands as the
  // parameter "weight"; `weight` itself is undefined from then on, and forward runs panel_linear, with the bits
  // of linear and no gradient. Refused with an adapter (merge it first).
  void pack_for_generation();
  // The same with a weight shared with an Embedding that is packed already (a head tied to the table).
  void pack_for_generation(const Embedding& tied_table);
  bool packed() const { return panels.defined(); }
  Tensor weight, bias;
  Tensor panels;  // undefined unless packed
  int64_t in_features, out_features;
  std::shared_ptr<LoRA> lora;  // null: no adapter

 private:
  void take_panels(const Tensor& packed_weight);
};

// A lookup table: row i of `weight` [num, dim] is the vector for token i. Weight ~ N(0, 1).
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim);
  Tensor forward(const Tensor& indices) const;
  Tensor operator()(const Tensor& indices) const { return forward(indices); }
  // For a table that is also a model's output head, in a model that will only generate
  // (nn::pack_weights_for_generation): as Linear::pack_for_generation, the values move into `panels`, which
  // the head multiplies by (panel_linear) and the lookups read rows from (panel_rows).
  void pack_for_generation();
  bool packed() const { return panels.defined(); }
  const Tensor& table() const { return packed() ? panels : weight; }  // whichever holds the values
  Tensor weight;
  Tensor panels;  // undefined unless packed
  int64_t num_embeddings;
};

// y = x · rsqrt(mean(x²) + eps) · weight over the last dim (autograd::rms_norm), as Hugging Face's
// LlamaRMSNorm: weight [dim], registered as "weight", ones at first.
class RMSNorm : public Module {
 public:
  RMSNorm(int64_t dim, double eps = 1e-6);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  Tensor weight;
  double eps;
};

// Zeroes elements with probability p while training (scaling the rest by 1/(1−p)); identity in eval().
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  double p;
};

// Holds submodules under the names "0", "1", ... (as torch.nn.ModuleList).
template <typename M = Module> class ModuleList : public Module {
 public:
  void push_back(std::shared_ptr<M> module) {
    items_.push_back(register_module(std::to_string(items_.size()), std::move(module)));
  }
  M& operator[](size_t i) const { return *items_.at(i); }
  size_t size() const { return items_.size(); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  std::vector<std::shared_ptr<M>> items_;
};

// While alive, Linear and Embedding on this thread leave their weights as allocated instead of drawing
// them (torch.nn.utils.skip_init's idea): for a model whose every value is about to be overwritten, such
// as one loaded from a checkpoint, where drawing 124M random numbers would take longer than the load.
class SkipInitGuard {
 public:
  SkipInitGuard();
  ~SkipInitGuard();
  SkipInitGuard(const SkipInitGuard&) = delete;
  SkipInitGuard& operator=(const SkipInitGuard&) = delete;
  static bool active();

 private:
  bool previous_;
};

// nn.init equivalents (in place, no graph).
void kaiming_uniform_(Tensor& w, double a);
void xavier_uniform_(Tensor& w, double gain = 1.0);

namespace functional {
using autograd::cross_entropy;
using autograd::linear;
using autograd::log_softmax;
using autograd::softmax;
inline Tensor dropout(const Tensor& x, double p = 0.5, bool training = true) { return autograd::dropout(x, p, training); }
}  // namespace functional

}  // namespace nn
