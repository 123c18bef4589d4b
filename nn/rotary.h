// rotary.h — the tables of the rotary position embedding (autograd::rotary_embedding), as Hugging Face's
// Llama computes them: the inverse frequencies θ^(−2i/d) (with Llama 3.1's rope_scaling when given), and
// for each position p the cosines and sines of p·inv_freq. Both in float32, rounded as PyTorch 1.13's
// portable CPU kernels round Hugging Face's formulas, so the tables have the bits a PyTorch run has.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "autograd/tensor.h"

namespace nn {

using autograd::Tensor;

// config.json's rope_scaling of type "llama3" (Llama 3.1 and 3.2): wavelengths 2π/inv_freq above
// original_max_position_embeddings / low_freq_factor are stretched by `factor`, those below
// original_max_position_embeddings / high_freq_factor kept, and those between blended smoothly.
struct RopeScaling {
  std::string type = "llama3";
  double factor = 8, low_freq_factor = 1, high_freq_factor = 4;
  int64_t original_max_position_embeddings = 8192;
};

// float32 [head_dim/2]: inv_freq[i] = 1 / theta^(2i / head_dim), then rescaled by `scaling` when given.
// Refuses an odd or non-positive head_dim, a theta that is not positive, a scaling of another type or with
// factors out of range (each naming the value).
Tensor rope_inverse_frequencies(int64_t head_dim, double theta, const std::optional<RopeScaling>& scaling);

// cos and sin, float32 [count, head_dim/2], of the angles p·inv_freq[i] for positions p = start .. start+count−1
// (p as a float32 times inv_freq[i], then cosf/sinf). start is the position offset of cached generation.
std::pair<Tensor, Tensor> rope_tables(const Tensor& inv_freq, int64_t start, int64_t count);

}  // namespace nn
