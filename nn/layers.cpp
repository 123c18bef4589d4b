// layers.cpp — Linear, Embedding, RMSNorm, Dropout, and the initialisers they use.
#include "nn/layers.h"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace nn {

using namespace autograd;

namespace {
thread_local bool skip_init = false;
}

SkipInitGuard::SkipInitGuard() : previous_(skip_init) { skip_init = true; }
SkipInitGuard::~SkipInitGuard() { skip_init = previous_; }
bool SkipInitGuard::active() { return skip_init; }

void kaiming_uniform_(Tensor& w, double a) {
  const int64_t fan_in = w.dim() > 1 ? w.numel() / w.size(0) : w.numel();
  const double bound = kaiming_uniform_bound(fan_in, a);
  NoGradGuard no_grad;
  uniform_(w, -bound, bound);
}

void xavier_uniform_(Tensor& w, double gain) {
  if (w.dim() < 2)
    throw std::invalid_argument(fmt::format("xavier_uniform_: needs at least 2 dims, got {}", w.shape_str()));
  const int64_t receptive = w.numel() / (w.size(0) * w.size(1));
  const int64_t fan_in = w.size(1) * receptive, fan_out = w.size(0) * receptive;
  // computed in double in this order, as torch.nn.init does: a = √3 · gain · √(2 / (fan_in + fan_out))
  const double std = gain * std::sqrt(2.0 / double(fan_in + fan_out));
  const double bound = std::sqrt(3.0) * std;
  NoGradGuard no_grad;
  uniform_(w, -bound, bound);
}

Linear::Linear(int64_t in, int64_t out, bool has_bias) : in_features(in), out_features(out) {
  if (in < 0 || out < 0) throw std::invalid_argument(fmt::format("Linear: negative size ({}, {})", in, out));
  weight = empty({out, in});
  const bool draw = !SkipInitGuard::active();
  if (draw) kaiming_uniform_(weight, std::sqrt(5.0));  // weight first, then bias: the order of torch's draws
  register_parameter("weight", weight);
  if (has_bias) {
    bias = empty({out});
    const double bound = linear_bias_bound(in);
    if (draw) uniform_(bias, -bound, bound);
    register_parameter("bias", bias);
  }
}

Tensor Linear::forward(const Tensor& x) const {
  if (packed()) return panel_linear(x, panels, out_features, bias);
  Tensor y = linear(x, weight, bias);
  return lora ? y + (*lora)(x) : y;
}

void Linear::pack_for_generation() {
  if (!packed()) take_panels(pack_panels(weight));
}

void Linear::pack_for_generation(const Embedding& tied_table) { take_panels(tied_table.panels); }

// The panels stand as the parameter "weight"; the weight's memory goes (the panels hold every value)
void Linear::take_panels(const Tensor& packed_weight) {
  if (lora) throw std::invalid_argument("Linear::pack_for_generation: this layer has a LoRA adapter (merge it first)");
  panels = packed_weight;
  set_parameter("weight", panels);
  weight = Tensor();
}

void Linear::add_lora(int64_t rank, double alpha) {
  if (packed())
    throw std::invalid_argument("Linear::add_lora: this layer's weight is packed for generation (it only generates)");
  if (lora) throw std::invalid_argument("Linear::add_lora: this layer has an adapter already");
  lora = register_module("lora", std::make_shared<LoRA>(in_features, out_features, rank, alpha));
  weight.requires_grad_(false);
  if (bias.defined()) bias.requires_grad_(false);
}

void Linear::merge_lora() {
  if (!lora) throw std::invalid_argument("Linear::merge_lora: this layer has no adapter");
  {
    NoGradGuard no_grad;
    weight.copy_(weight + lora->delta_weight());
  }
  unregister_module("lora");
  lora.reset();
}

RMSNorm::RMSNorm(int64_t dim, double eps_) : eps(eps_) {
  if (dim < 0) throw std::invalid_argument(fmt::format("RMSNorm: negative size {}", dim));
  if (!(eps_ >= 0) || !std::isfinite(eps_))
    throw std::invalid_argument(fmt::format("RMSNorm: eps must be a finite number >= 0, got {}", eps_));
  weight = ones({dim});
  register_parameter("weight", weight);
}

Tensor RMSNorm::forward(const Tensor& x) const { return rms_norm(x, weight, eps); }

LoRA::LoRA(int64_t in, int64_t out, int64_t r, double alpha_) : rank(r), alpha(alpha_) {
  if (r < 1 || in < 1 || out < 1)
    throw std::invalid_argument(fmt::format("LoRA: rank {} must be at least 1 (layer {} -> {})", r, in, out));
  if (!std::isfinite(alpha_)) throw std::invalid_argument(fmt::format("LoRA: alpha must be finite, got {}", alpha_));
  scale = alpha / double(rank);
  A = empty({r, in});
  kaiming_uniform_(A, std::sqrt(5.0));
  register_parameter("A", A);
  B = register_parameter("B", zeros({out, r}));
}

Tensor LoRA::forward(const Tensor& x) const { return linear(linear(x, A), B) * scale; }

Tensor LoRA::delta_weight() const { return matmul(B, A) * scale; }

Embedding::Embedding(int64_t num, int64_t dim) : num_embeddings(num) {
  if (num < 0 || dim < 0) throw std::invalid_argument(fmt::format("Embedding: negative size ({}, {})", num, dim));
  weight = empty({num, dim});
  if (!SkipInitGuard::active()) normal_(weight, 0.0, 1.0);
  register_parameter("weight", weight);
}

// A table kept in bfloat16 (keep_weights_in_bfloat16, for generation) hands its rows on widened to float32
// (exact): the residual stream they start stays float32.
void Embedding::pack_for_generation() {
  if (packed()) return;
  num_embeddings = weight.size(0);
  panels = pack_panels(weight);
  set_parameter("weight", panels);
  weight = Tensor();
}

Tensor Embedding::forward(const Tensor& indices) const {
  Tensor rows = packed() ? panel_rows(panels, indices, num_embeddings) : embedding(weight, indices);
  return rows.dtype() == DType::BFloat16 ? rows.to(DType::Float32) : rows;
}

Dropout::Dropout(double prob) : p(prob) {
  if (p < 0.0 || p > 1.0)
    throw std::invalid_argument(fmt::format("Dropout: probability has to be between 0 and 1, but got {}", p));
}

Tensor Dropout::forward(const Tensor& x) const { return autograd::dropout(x, p, is_training()); }

}  // namespace nn
