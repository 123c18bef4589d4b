// attention.cpp — forward passes, line for line with the Python they come from.
#include "nn/attention.h"

#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

namespace nn {

using namespace autograd;

static constexpr double kNegInf = -std::numeric_limits<double>::infinity();

static Tensor rand_parameter(int64_t rows, int64_t cols) { return rand({rows, cols}); }

// ---------------------------------------------------------------- which causal attention

bool uses_flash_attention(AttentionKernel kernel, int64_t t, int64_t head_dim, const Tensor& x, bool weights_dropout) {
  switch (kernel) {
    case AttentionKernel::composed: return false;
    case AttentionKernel::flash:
      if (weights_dropout)
        throw std::invalid_argument("attention kernel flash: scaled_dot_product_attention has no dropout on the "
                                    "attention weights; set the dropout to 0, call eval(), or use composed");
      return true;
    case AttentionKernel::automatic:
      // Only where nobody compares bits with PyTorch (fast numerics), where the [t, t] matrices are worth
      // avoiding (long sequences, longer than a head is wide), and on the device that has the kernel.
      return !weights_dropout && t > kFlashAttentionAbove && t > head_dim && x.device().is_cpu() &&
             numerics() == Numerics::fast;
  }
  return false;
}

const char* attention_kernel_name(AttentionKernel kernel) {
  switch (kernel) {
    case AttentionKernel::automatic: return "automatic";
    case AttentionKernel::composed: return "composed";
    case AttentionKernel::flash: return "flash";
  }
  return "?";
}

AttentionKernel parse_attention_kernel(const std::string& text, const std::string& what) {
  if (text == "automatic" || text == "auto") return AttentionKernel::automatic;
  if (text == "composed") return AttentionKernel::composed;
  if (text == "flash") return AttentionKernel::flash;
  throw std::invalid_argument(fmt::format("{}: unknown attention kernel '{}' (expected automatic, composed or flash)",
                                          what, text));
}

// ---------------------------------------------------------------- SelfAttention_v1

SelfAttention_v1::SelfAttention_v1(int64_t d_in, int64_t d_out) {
  W_query = register_parameter("W_query", rand_parameter(d_in, d_out));
  W_key = register_parameter("W_key", rand_parameter(d_in, d_out));
  W_value = register_parameter("W_value", rand_parameter(d_in, d_out));
}

Tensor SelfAttention_v1::forward(const Tensor& x) const {
  Tensor keys = x.matmul(W_key);
  Tensor queries = x.matmul(W_query);
  Tensor values = x.matmul(W_value);
  Tensor attn_scores = queries.matmul(keys.t());  // omega
  Tensor attn_weights = softmax(attn_scores / std::sqrt(double(keys.size(-1))), -1);
  return attn_weights.matmul(values);
}

// ---------------------------------------------------------------- SelfAttention_v2

SelfAttention_v2::SelfAttention_v2(int64_t d_in, int64_t d_out, bool qkv_bias) {
  W_query = register_module("W_query", std::make_shared<Linear>(d_in, d_out, qkv_bias));
  W_key = register_module("W_key", std::make_shared<Linear>(d_in, d_out, qkv_bias));
  W_value = register_module("W_value", std::make_shared<Linear>(d_in, d_out, qkv_bias));
}

Tensor SelfAttention_v2::attention_weights(const Tensor& x) const {
  Tensor keys = (*W_key)(x);
  Tensor queries = (*W_query)(x);
  Tensor attn_scores = queries.matmul(keys.t());
  return softmax(attn_scores / std::sqrt(double(keys.size(-1))), -1);
}

Tensor SelfAttention_v2::forward(const Tensor& x) const {
  Tensor values = (*W_value)(x);
  return attention_weights(x).matmul(values);
}

// ---------------------------------------------------------------- CausalAttention

CausalAttention::CausalAttention(int64_t d_in, int64_t d_out_, int64_t context_length, double p, bool qkv_bias)
    : d_out(d_out_) {
  W_query = register_module("W_query", std::make_shared<Linear>(d_in, d_out, qkv_bias));
  W_key = register_module("W_key", std::make_shared<Linear>(d_in, d_out, qkv_bias));
  W_value = register_module("W_value", std::make_shared<Linear>(d_in, d_out, qkv_bias));
  dropout = register_module("dropout", std::make_shared<Dropout>(p));
  mask = register_buffer("mask", triu(ones({context_length, context_length}), 1));
}

Tensor CausalAttention::forward(const Tensor& x) const {
  const int64_t num_tokens = x.size(1);
  Tensor keys = (*W_key)(x);
  Tensor queries = (*W_query)(x);
  Tensor values = (*W_value)(x);

  Tensor attn_scores = queries.matmul(keys.transpose(1, 2));
  Tensor future = mask.to_bool().slice(0, 0, num_tokens).slice(1, 0, num_tokens);
  attn_scores.masked_fill_(future, kNegInf);
  Tensor attn_weights = softmax(attn_scores / std::sqrt(double(keys.size(-1))), -1);
  attn_weights = (*dropout)(attn_weights);
  return attn_weights.matmul(values);
}

// ---------------------------------------------------------------- MultiHeadAttentionWrapper

MultiHeadAttentionWrapper::MultiHeadAttentionWrapper(int64_t d_in, int64_t d_out, int64_t context_length, double p,
                                                     int64_t num_heads, bool qkv_bias) {
  heads = register_module("heads", std::make_shared<ModuleList<CausalAttention>>());
  for (int64_t i = 0; i < num_heads; ++i)
    heads->push_back(std::make_shared<CausalAttention>(d_in, d_out, context_length, p, qkv_bias));
}

Tensor MultiHeadAttentionWrapper::forward(const Tensor& x) const {
  std::vector<Tensor> outputs;
  for (const auto& head : *heads) outputs.push_back((*head)(x));
  return cat(outputs, -1);
}

// ---------------------------------------------------------------- MultiHeadAttention (the book's)

MultiHeadAttention::MultiHeadAttention(int64_t d_in, int64_t d_out_, int64_t context_length, double p,
                                       int64_t heads, bool qkv_bias)
    : d_out(d_out_), num_heads(heads) {
  if (heads <= 0 || d_out % heads != 0)
    throw std::invalid_argument(fmt::format("MultiHeadAttention: d_out ({}) must be divisible by num_heads ({})",
                                            d_out, heads));
  head_dim = d_out / num_heads;
  W_query = register_module("W_query", std::make_shared<Linear>(d_in, d_out, qkv_bias));
  W_key = register_module("W_key", std::make_shared<Linear>(d_in, d_out, qkv_bias));
  W_value = register_module("W_value", std::make_shared<Linear>(d_in, d_out, qkv_bias));
  out_proj = register_module("out_proj", std::make_shared<Linear>(d_out, d_out));
  dropout = register_module("dropout", std::make_shared<Dropout>(p));
  mask = register_buffer("mask", triu(ones({context_length, context_length}), 1));
}

Tensor MultiHeadAttention::forward(const Tensor& x) const {
  const int64_t b = x.size(0), num_tokens = x.size(1);
  Tensor keys = (*W_key)(x);  // (b, num_tokens, d_out)
  Tensor queries = (*W_query)(x);
  Tensor values = (*W_value)(x);

  // split d_out into heads → (b, num_tokens, num_heads, head_dim)
  keys = keys.view({b, num_tokens, num_heads, head_dim});
  values = values.view({b, num_tokens, num_heads, head_dim});
  queries = queries.view({b, num_tokens, num_heads, head_dim});

  // heads become a batch dim → (b, num_heads, num_tokens, head_dim)
  keys = keys.transpose(1, 2);
  queries = queries.transpose(1, 2);
  values = values.transpose(1, 2);

  // Past kFlashAttentionAbove tokens under fast numerics: the same attention without the [T, T] weights
  // (scaled_dot_product_attention scales by 1/√head_dim and masks the future, as the lines below do).
  if (uses_flash_attention(attention, num_tokens, head_dim, x, dropout->p > 0 && dropout->is_training())) {
    Tensor context_vec = scaled_dot_product_attention(queries, keys, values, /*causal=*/true).transpose(1, 2);
    context_vec = context_vec.contiguous().view({b, num_tokens, d_out});
    return (*out_proj)(context_vec);
  }

  // The book's lines, as one op each: queries @ keysᵀ with the future masked to -inf and divided by
  // √head_dim (causal_scores: the same bits, without computing the masked half), the softmax, dropout, and
  // the product with the values (tril_matmul: the weights are zero above the diagonal, so the same bits as
  // attn_weights @ values, again without the zeros' half). See autograd/ops/attention.cpp.
  Tensor attn_scores = causal_scores(queries, keys, std::sqrt(double(keys.size(-1))));
  Tensor attn_weights = softmax(attn_scores, -1);
  attn_weights = (*dropout)(attn_weights);

  Tensor context_vec = tril_matmul(attn_weights, values).transpose(1, 2);  // (b, num_tokens, num_heads, head_dim)
  context_vec = context_vec.contiguous().view({b, num_tokens, d_out});
  return (*out_proj)(context_vec);  // combine heads
}

// ---------------------------------------------------------------- the workshop's MultiHeadAttention

WorkshopMultiHeadAttention::WorkshopMultiHeadAttention(int64_t d_model, int64_t num_heads) : h(num_heads) {
  if (num_heads <= 0 || d_model % num_heads != 0)
    throw std::invalid_argument(fmt::format("MultiHeadAttention: d_model ({}) must be divisible by num_heads ({})",
                                            d_model, num_heads));
  d_k = d_model / num_heads;
  W_q = register_module("W_q", std::make_shared<Linear>(d_model, d_model));
  W_k = register_module("W_k", std::make_shared<Linear>(d_model, d_model));
  W_v = register_module("W_v", std::make_shared<Linear>(d_model, d_model));
  W_o = register_module("W_o", std::make_shared<Linear>(d_model, d_model));
}

Tensor WorkshopMultiHeadAttention::forward(const Tensor& x, const Tensor& mask) const {
  const int64_t B = x.size(0), T = x.size(1), D = x.size(2);
  Tensor q = (*W_q)(x).view({B, T, h, d_k}).transpose(1, 2);
  Tensor k = (*W_k)(x).view({B, T, h, d_k}).transpose(1, 2);
  Tensor v = (*W_v)(x).view({B, T, h, d_k}).transpose(1, 2);
  Tensor scores = q.matmul(k.transpose(-2, -1)) / std::pow(double(d_k), 0.5);
  if (mask.defined()) scores = scores.masked_fill(mask == 0.0, kNegInf);
  Tensor attn = softmax(scores, -1);
  Tensor ctx = attn.matmul(v).transpose(1, 2).contiguous().view({B, T, D});
  return (*W_o)(ctx);
}

// ---------------------------------------------------------------- torch.nn.MultiheadAttention

MultiheadAttention::MultiheadAttention(int64_t e, int64_t heads, bool batch_first_)
    : embed_dim(e), num_heads(heads), batch_first(batch_first_) {
  if (heads <= 0 || e % heads != 0)
    throw std::invalid_argument(fmt::format("MultiheadAttention: embed_dim ({}) must be divisible by num_heads ({})",
                                            e, heads));
  if (!batch_first) throw std::invalid_argument("MultiheadAttention: only batch_first=true is supported");
  head_dim = e / heads;
  // torch's order of draws: the parameters are created empty, out_proj (a Linear) initialises itself,
  // then _reset_parameters: xavier_uniform_(in_proj_weight), in_proj_bias = 0, out_proj.bias = 0.
  in_proj_weight = register_parameter("in_proj_weight", empty({3 * e, e}));
  in_proj_bias = register_parameter("in_proj_bias", empty({3 * e}));
  out_proj = register_module("out_proj", std::make_shared<Linear>(e, e));
  NoGradGuard no_grad;
  xavier_uniform_(in_proj_weight);
  in_proj_bias.zero_();
  out_proj->bias.zero_();
}

std::pair<Tensor, Tensor> MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                                      const Tensor& attn_mask) const {
  if (query.dim() != 3 || query.size(-1) != embed_dim)
    throw std::invalid_argument(fmt::format("MultiheadAttention: expected query [batch, tokens, {}], got {}",
                                            embed_dim, query.shape_str()));
  const int64_t B = query.size(0), T = query.size(1), S = key.size(1), E = embed_dim;
  std::vector<Tensor> w = chunk(in_proj_weight, 3, 0), b = chunk(in_proj_bias, 3, 0);
  auto heads_of = [&](const Tensor& t, int64_t len) { return t.view({B, len, num_heads, head_dim}).transpose(1, 2); };
  Tensor q = heads_of(linear(query, w[0], b[0]), T);
  Tensor k = heads_of(linear(key, w[1], b[1]), S);
  Tensor v = heads_of(linear(value, w[2], b[2]), S);
  // PyTorch scales q before the product: q / √head_dim
  Tensor scores = (q / std::sqrt(double(head_dim))).matmul(k.transpose(-2, -1));
  if (attn_mask.defined())
    scores = attn_mask.dtype() == DType::Bool ? scores.masked_fill(attn_mask, kNegInf) : scores + attn_mask;
  Tensor attn = softmax(scores, -1);
  Tensor ctx = attn.matmul(v).transpose(1, 2).contiguous().view({B, T, E});
  return {(*out_proj)(ctx), attn.mean(1)};
}

}  // namespace nn
