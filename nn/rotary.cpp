// rotary.cpp — the inverse frequencies and cos/sin tables of the rotary embedding. Each value is computed
// in float with the roundings PyTorch 1.13 gives Hugging Face's tensor formulas (modeling_rope_utils.py:
// the default and the llama3 rope parameters; LlamaRotaryEmbedding.forward), one scalar at a time:
//   a Python number meeting a float32 tensor is rounded to float first;
//   `number / tensor` is PyTorch's reciprocal(tensor) · number: two roundings, not one division.
#include "nn/rotary.h"

#include <cmath>
#include <numbers>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

namespace nn {

namespace {

void check_scaling(const RopeScaling& s) {
  if (s.type != "llama3")
    throw std::invalid_argument(fmt::format("rope_scaling: type '{}' is not supported (only 'llama3')", s.type));
  if (!(s.factor > 0) || !(s.low_freq_factor > 0) || !(s.high_freq_factor > s.low_freq_factor) ||
      s.original_max_position_embeddings <= 0)
    throw std::invalid_argument(fmt::format("rope_scaling: expected factor > 0, 0 < low_freq_factor < high_freq_factor "
                                            "and original_max_position_embeddings > 0, got factor {}, low_freq_factor "
                                            "{}, high_freq_factor {}, original_max_position_embeddings {}",
                                            s.factor, s.low_freq_factor, s.high_freq_factor,
                                            s.original_max_position_embeddings));
}

// number / x for a float32 tensor x, as PyTorch computes it: (1/x) · float(number).
float divided_by(double number, float x) { return (1.0f / x) * float(number); }

// Llama 3.1's rescaling of one inverse frequency (_compute_llama3_parameters):
//   wavelen = 2π / f;  long wavelengths (> old/low) are slowed down by `factor`, short ones (< old/high) kept,
//   and in between  f' = (1 − s)·f/factor + s·f  with  s = (old/wavelen − low) / (high − low).
float llama3_frequency(float f, const RopeScaling& s) {
  const double old_context = double(s.original_max_position_embeddings);
  const float low_freq_wavelen = float(old_context / s.low_freq_factor);
  const float high_freq_wavelen = float(old_context / s.high_freq_factor);
  const float wavelen = divided_by(2 * std::numbers::pi, f);
  const float kept_or_slowed = wavelen > low_freq_wavelen ? f / float(s.factor) : f;
  const float smooth = (divided_by(old_context, wavelen) - float(s.low_freq_factor)) /
                       float(s.high_freq_factor - s.low_freq_factor);
  const float smoothed = ((1.0f - smooth) * kept_or_slowed) / float(s.factor) + smooth * kept_or_slowed;
  const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
  return medium ? smoothed : kept_or_slowed;
}

}  // namespace

Tensor rope_inverse_frequencies(int64_t head_dim, double theta, const std::optional<RopeScaling>& scaling) {
  if (head_dim <= 0 || head_dim % 2 != 0)
    throw std::invalid_argument(fmt::format("rope: head_dim must be even and positive, got {}", head_dim));
  if (!(theta > 0) || !std::isfinite(theta))
    throw std::invalid_argument(fmt::format("rope: rope_theta must be a positive number, got {}", theta));
  if (scaling) check_scaling(*scaling);
  std::vector<float> inv_freq(size_t(head_dim / 2));
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    // 1 / theta^(arange(0, d, 2).float() / d): the exponent a float division, powf, then the reciprocal
    const float exponent = float(2 * i) / float(head_dim);
    float f = 1.0f / std::pow(float(theta), exponent);
    if (scaling) f = llama3_frequency(f, *scaling);
    inv_freq[size_t(i)] = f;
  }
  return autograd::from_vector(inv_freq, {head_dim / 2});
}

std::pair<Tensor, Tensor> rope_tables(const Tensor& inv_freq, int64_t start, int64_t count) {
  if (inv_freq.dim() != 1 || inv_freq.dtype() != autograd::DType::Float32)
    throw std::invalid_argument(fmt::format("rope_tables: inv_freq must be a 1-D float32 tensor, got {} {}",
                                            autograd::dtype_name(inv_freq.dtype()), inv_freq.shape_str()));
  if (start < 0 || count < 0)
    throw std::invalid_argument(fmt::format("rope_tables: start {} and count {} must not be negative", start, count));
  const std::vector<float> f = inv_freq.contiguous().to(autograd::Device::cpu()).to_vector<float>();
  const int64_t h = int64_t(f.size());
  std::vector<float> cos(size_t(count * h)), sin(size_t(count * h));
  for (int64_t t = 0; t < count; ++t) {
    const float position = float(start + t);  // position_ids.float()
    for (int64_t j = 0; j < h; ++j) {
      const float angle = position * f[size_t(j)];
      cos[size_t(t * h + j)] = std::cos(angle);
      sin[size_t(t * h + j)] = std::sin(angle);
    }
  }
  const autograd::Device device = inv_freq.device();
  return {autograd::from_vector(cos, {count, h}).to(device), autograd::from_vector(sin, {count, h}).to(device)};
}

}  // namespace nn
