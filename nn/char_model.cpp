// char_model.cpp — forward pass of the character model, as in the workshop's Python.
#include "nn/char_model.h"

#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

namespace nn {

using namespace autograd;

MiniSelfAttention::MiniSelfAttention(const CharModelConfig& c) : config(c) {
  if (c.vocab <= 0 || c.dim <= 0 || c.context <= 0 || c.heads <= 0 || c.dim % c.heads != 0)
    throw std::invalid_argument(fmt::format("MiniSelfAttention: invalid config vocab={} dim={} context={} heads={} "
                                            "(dim must be divisible by heads)",
                                            c.vocab, c.dim, c.context, c.heads));
  // same construction order as the Python, so the same seed gives the same initial weights
  tok = register_module("tok", std::make_shared<Embedding>(c.vocab, c.dim));
  pos = register_module("pos", std::make_shared<Embedding>(c.context, c.dim));
  q = register_module("q", std::make_shared<Linear>(c.dim, c.dim));
  k = register_module("k", std::make_shared<Linear>(c.dim, c.dim));
  v = register_module("v", std::make_shared<Linear>(c.dim, c.dim));
  head = register_module("head", std::make_shared<Linear>(c.dim, c.vocab));
  mask = register_buffer("mask", tril(ones({c.context, c.context})));
  for (auto& [name, p] : named_parameters()) p.impl().name = name;  // "q.weight": traces and graphs show it
}

Tensor MiniSelfAttention::forward(const Tensor& idx) const {
  if (idx.dim() != 2 || idx.size(1) > config.context || idx.size(1) == 0)
    throw std::invalid_argument(fmt::format("MiniSelfAttention: expected indices [B, t] with 1 <= t <= {}, got {}",
                                            config.context, idx.shape_str()));
  const int64_t B = idx.size(0), t = idx.size(1), D = config.dim, H = config.heads;
  const double neg_inf = -std::numeric_limits<double>::infinity();
  // Each line's label (the workshop's Python) goes with the nodes it records: traces, graphs, anomaly errors.
  CallSite line("x = tok(idx) + pos(arange(t))");
  // (the two lookups one statement each: as operands of one +, their order would be the compiler's)
  const Tensor positions = (*pos)(arange(t).to(idx.device()));
  Tensor x = (*tok)(idx) + positions;
  if (uses_flash_attention(attention, t, D / H, x, /*weights_dropout=*/false)) return attend_flash(x);
  if (skip_masked_half && t > kSkipMaskedHalfAbove && x.device().is_cpu()) return attend_skipping_masked_half(x);
  Tensor blocked = mask.slice(0, 0, t).slice(1, 0, t) == 0.0;
  if (H == 1) {
    line.set("att = (q(x) @ k(x).transpose(-2, -1)) / D**0.5");
    Tensor att = (*q)(x).matmul((*k)(x).transpose(-2, -1)) / std::pow(double(D), 0.5);
    line.set("att = att.masked_fill(mask[:t, :t] == 0, -inf)");
    att = att.masked_fill(blocked, neg_inf);
    line.set("x = softmax(att, dim=-1) @ v(x)");
    x = softmax(att, -1).matmul((*v)(x));
    line.set("return head(x)");
    return (*head)(x);
  }
  // several heads: [B, t, D] → [B, H, t, D/H], attend per head, stitch back
  const int64_t hd = D / H;
  auto split = [&](const Tensor& y) { return y.view({B, t, H, hd}).transpose(1, 2); };
  line.set("att = (split(q(x)) @ split(k(x)).transpose(-2, -1)) / hd**0.5");
  Tensor att = split((*q)(x)).matmul(split((*k)(x)).transpose(-2, -1)) / std::pow(double(hd), 0.5);
  line.set("att = att.masked_fill(mask[:t, :t] == 0, -inf)");
  att = att.masked_fill(blocked, neg_inf);
  line.set("ctx = (softmax(att, dim=-1) @ split(v(x))).transpose(1, 2).view(B, t, D)");
  Tensor ctx = softmax(att, -1).matmul(split((*v)(x))).transpose(1, 2).contiguous().view({B, t, D});
  line.set("return head(ctx)");
  return (*head)(ctx);
}

// The same steps as forward() from the attention on, through causal_scores and tril_matmul: the same
// bits, with the masked half of both products (and of their gradients) skipped — see
// autograd/ops/attention.cpp. Layers are called in forward()'s order (q, k, then v after the softmax),
// so the graph's nodes, and the order backward adds gradients in, are the same as there.
Tensor MiniSelfAttention::attend_skipping_masked_half(const Tensor& x) const {
  const int64_t B = x.size(0), t = x.size(1), D = config.dim, H = config.heads, hd = D / H;
  auto split = [&](const Tensor& y) { return H == 1 ? y : y.view({B, t, H, hd}).transpose(1, 2); };
  CallSite line("att = causal_scores(q(x), k(x), hd**0.5)");
  Tensor qx = split((*q)(x));
  Tensor kx = split((*k)(x));
  Tensor att = causal_scores(qx, kx, std::pow(double(hd), 0.5));
  line.set("ctx = tril_matmul(softmax(att, dim=-1), v(x))");
  Tensor weights = softmax(att, -1);
  Tensor ctx = tril_matmul(weights, split((*v)(x)));
  if (H > 1) ctx = ctx.transpose(1, 2).contiguous().view({B, t, D});
  line.set("return head(ctx)");
  return (*head)(ctx);
}

// The same attention through scaled_dot_product_attention (autograd/ops/flash_attention.cpp): its scale
// is 1/√(head dim), which is D**0.5's inverse with one head and hd**0.5's with several, as above. The
// [t, t] weights are never made, forward or backward; the values agree with the composed ops' to rounding.
Tensor MiniSelfAttention::attend_flash(const Tensor& x) const {
  const int64_t B = x.size(0), t = x.size(1), D = config.dim, H = config.heads, hd = D / H;
  auto split = [&](const Tensor& y) { return H == 1 ? y : y.view({B, t, H, hd}).transpose(1, 2); };
  CallSite line("ctx = scaled_dot_product_attention(q(x), k(x), v(x), is_causal=True)");
  Tensor qx = split((*q)(x));
  Tensor kx = split((*k)(x));
  Tensor vx = split((*v)(x));
  Tensor ctx = scaled_dot_product_attention(qx, kx, vx, /*causal=*/true);
  if (H > 1) ctx = ctx.transpose(1, 2).contiguous().view({B, t, D});
  line.set("return head(ctx)");
  return (*head)(ctx);
}

// The workshop's batch():  ix = randint(len(data) - T - 1, (B,))
//                           x = stack([data[i:i+T] for i in ix]);  y = stack([data[i+1:i+T+1] for i in ix])
// The same draw and the same rows, gathered in one copy each instead of through 2·B slices and two
// stacks (which took longer than the whole cross-entropy of a seed-size step).
std::pair<Tensor, Tensor> random_windows(const Tensor& data, int64_t batch, int64_t context) {
  if (data.dim() != 1 || data.size(0) < context + 2)
    throw std::invalid_argument(fmt::format("random_windows: expected 1-D data with at least context + 2 = {} values, "
                                            "got {}",
                                            context + 2, data.shape_str()));
  Tensor starts = randint(0, data.size(0) - context - 1, {batch});
  // Every window of `context` values as rows of one view (row j starts at data[j]); y's start one later.
  const int64_t windows = data.size(0) - context, step = data.strides()[0];
  Tensor x_windows = data.as_strided({windows, context}, {step, step}, data.offset());
  Tensor y_windows = data.as_strided({windows, context}, {step, step}, data.offset() + step);
  // embedding(table, ix) is the row lookup table[ix]
  if (starts.device() != data.device()) starts = starts.to(data.device());
  return {embedding(x_windows, starts), embedding(y_windows, starts)};
}

}  // namespace nn
