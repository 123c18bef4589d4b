// layers.cpp — Linear, Embedding, Dropout, and the initialisers they use.
#include "nn/layers.h"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace nn {

using namespace autograd;

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
  kaiming_uniform_(weight, std::sqrt(5.0));  // weight first, then bias: the order of torch's draws
  register_parameter("weight", weight);
  if (has_bias) {
    bias = empty({out});
    const double bound = linear_bias_bound(in);
    uniform_(bias, -bound, bound);
    register_parameter("bias", bias);
  }
}

Tensor Linear::forward(const Tensor& x) const { return linear(x, weight, bias); }

Embedding::Embedding(int64_t num, int64_t dim) {
  if (num < 0 || dim < 0) throw std::invalid_argument(fmt::format("Embedding: negative size ({}, {})", num, dim));
  weight = empty({num, dim});
  normal_(weight, 0.0, 1.0);
  register_parameter("weight", weight);
}

Tensor Embedding::forward(const Tensor& indices) const { return embedding(weight, indices); }

Dropout::Dropout(double prob) : p(prob) {
  if (p < 0.0 || p > 1.0)
    throw std::invalid_argument(fmt::format("Dropout: probability has to be between 0 and 1, but got {}", p));
}

Tensor Dropout::forward(const Tensor& x) const { return autograd::dropout(x, p, is_training()); }

}  // namespace nn
