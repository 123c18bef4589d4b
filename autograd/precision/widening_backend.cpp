// precision/widening_backend.cpp — bfloat16 entries computed in float32 and rounded once (see widening_backend.h).
#include "autograd/precision/widening_backend.h"

#include <algorithm>
#include <vector>

#include "autograd/node.h"
#include "autograd/reference/strided.h"

namespace autograd {

// ---------------------------------------------------------------- the two conversions

namespace {
constexpr int64_t kTile = 32;  // a 32 x 32 tile of a transposed copy: both sides' lines stay in L1 while it runs

// Whether t's elements fill one run of memory in row-major order or in its transpose's (a matrix written
// through .t(), as a weight's gradient is).
bool is_dense(const Tensor& t) { return t.is_contiguous() || (t.dim() == 2 && t.t().is_contiguous()); }

// dst = convert(src) for every element (same shape). A training step under autocast converts several times
// its parameter count (each weight rounded, each weight gradient widened, the logits both ways), so the
// loops are written to be fast: where both lie in memory in the same order, one plain loop (or the backend's
// own loop for such a run, BFloat16Runs: the CPU's is vectorised and threaded); tiles when a matrix meets
// its transpose, each tile converted along its source's rows into a small buffer and then written out along
// the destination's; the index walk otherwise.
template <typename S, typename D, typename Convert>
void convert_each(const Tensor& src, const Tensor& dst, Convert convert, void (*run)(const S*, D*, int64_t) = nullptr,
                  void (*run_rows)(const S*, const int64_t*, D*, const int64_t*, int64_t, int64_t) = nullptr) {
  const S* s = static_cast<const S*>(src.raw_data());
  D* d = static_cast<D*>(dst.raw_data());
  if (src.strides() == dst.strides() && src.shape() == dst.shape() && is_dense(src)) {  // the same order in memory
    if (run) return run(s, d, src.numel());
    for (int64_t i = 0, n = src.numel(); i < n; ++i) d[i] = convert(s[i]);
    return;
  }
  if (src.dim() == 2 && src.strides()[1] == 1) {
    const int64_t rows = src.size(0), cols = src.size(1), sr = src.strides()[0], dr = dst.strides()[0],
                  dc = dst.strides()[1];
    D tile[kTile * kTile];
    for (int64_t r0 = 0; r0 < rows; r0 += kTile)
      for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
        const int64_t h = std::min(kTile, rows - r0), w = std::min(kTile, cols - c0);
        for (int64_t r = 0; r < h; ++r)
          for (int64_t c = 0; c < w; ++c) tile[r * kTile + c] = convert(s[(r0 + r) * sr + c0 + c]);
        for (int64_t c = 0; c < w; ++c)
          for (int64_t r = 0; r < h; ++r) d[(r0 + r) * dr + (c0 + c) * dc] = tile[r * kTile + c];
      }
    return;
  }
  if (src.dim() == 0) {
    d[0] = convert(s[0]);
    return;
  }
  // the index walk over every dim but the last, then a plain loop along it (a panel's rows: ops/panels.cpp)
  const int64_t length = src.size(-1), s_step = src.strides().back(), d_step = dst.strides().back();
  if (run_rows && s_step == 1 && d_step == 1) {  // each row a run of the backend's loop
    std::vector<int64_t> from_at, to_at;
    for (reference::Index i(Shape(src.shape().begin(), src.shape().end() - 1)); i.valid(); i.next()) {
      from_at.push_back(reference::position(src, i));
      to_at.push_back(reference::position(dst, i));
    }
    return run_rows(s, from_at.data(), d, to_at.data(), int64_t(from_at.size()), length);
  }
  for (reference::Index i(Shape(src.shape().begin(), src.shape().end() - 1)); i.valid(); i.next()) {
    const S* from = s + reference::position(src, i);
    D* to = d + reference::position(dst, i);
    for (int64_t j = 0; j < length; ++j) to[j * d_step] = convert(from[j * s_step]);
  }
}
}  // namespace

void round_into_bfloat16(const Tensor& src, const Tensor& dst, const BFloat16Runs& runs) {
  convert_each<float, bfloat16>(src, dst, [](float x) { return round_to_bfloat16(x); }, runs.round, runs.round_rows);
}

// dst = src, both bfloat16: the 16 bits as they are (no float32 in the middle)
void copy_bfloat16(const Tensor& src, const Tensor& dst) {
  convert_each<bfloat16, bfloat16>(src, dst, [](bfloat16 x) { return x; });
}

void widen_into_float32(const Tensor& src, const Tensor& dst, const BFloat16Runs& runs) {
  convert_each<bfloat16, float>(src, dst, [](bfloat16 x) { return widen(x); }, runs.widen, runs.widen_rows);
}

Tensor widen_to_float32(const Tensor& t, const BFloat16Runs& runs) {
  Tensor wide = empty(t.shape(), DType::Float32, t.device());
  widen_into_float32(t, wide, runs);
  return wide;
}

// ---------------------------------------------------------------- the wrapper

namespace {

// out[i, :] = weight[index[i], :] for a bfloat16 weight (any strides) and a contiguous bfloat16 out.
void copy_rows(const Tensor& weight, const Tensor& index, const Tensor& out) {
  const bfloat16* w = static_cast<const bfloat16*>(weight.raw_data());
  bfloat16* o = static_cast<bfloat16*>(out.raw_data());
  const int64_t dim = weight.size(1), rs = weight.strides()[0], cs = weight.strides()[1];
  const std::vector<int64_t> rows = index.contiguous().to_vector<int64_t>();
  for (size_t i = 0; i < rows.size(); ++i)
    for (int64_t j = 0; j < dim; ++j) o[int64_t(i) * dim + j] = w[rows[i] * rs + j * cs];
}

bool is_bf16(const Tensor& t) { return t.defined() && t.dtype() == DType::BFloat16; }
template <typename... T> bool any_bf16(const T&... t) { return (is_bf16(t) || ...); }


// A scalar that meets a bfloat16 tensor is that tensor's dtype first (PyTorch casts the wrapped number).
double scalar_for(const Tensor& in, double s) { return is_bf16(in) ? widen(round_to_bfloat16(float(s))) : s; }

// A float32 tensor laid out in memory as t is where t is a transposed matrix (a weight's gradient is made
// in the transposed view of the weight's layout), so that rounding it into t reads and writes in one order.
Tensor float32_like(const Tensor& t) {
  if (t.dim() == 2 && !t.is_contiguous() && t.t().is_contiguous())
    return empty({t.size(1), t.size(0)}, DType::Float32, t.device()).t();
  return empty(t.shape(), DType::Float32, t.device());
}

// What an entry writes: float32 scratch for a bfloat16 output (holding its values where the entry also
// reads them: gradients added into, Adam's state), rounded into it by store(); other outputs as they are.
class Output {
 public:
  enum Mode { write, read_write };
  explicit Output(const Tensor& target, Mode mode = write) : target_(target) {
    if (!is_bf16(target)) wide_ = target;
    else wide_ = mode == read_write ? widen_to_float32(target) : float32_like(target);
  }
  operator const Tensor&() const { return wide_; }
  // `runs`: the backend's loops for a run of memory (BFloat16Runs), or none: the plain one
  void store(const BFloat16Runs& runs) const {
    if (is_bf16(target_)) round_into_bfloat16(wide_, target_, runs);
  }

 private:
  Tensor target_, wide_;
};

class WideningBackend final : public Backend {
 public:
  WideningBackend(Backend& inner, BFloat16Product product, BFloat16RowPanels row_panels, BFloat16Runs runs)
      : in_(inner), product_(product), row_panels_(row_panels), runs_(runs) {}

  // What an entry reads: a float32 copy of a bfloat16 tensor (through the backend's loop for a run, when
  // it lies in memory in one order: vectorised and threaded on the CPU), any other tensor as it is.
  Tensor wide(const Tensor& t) const { return is_bf16(t) ? widen_to_float32(t, runs_) : t; }

  std::string unusable_reason() const override { return in_.unusable_reason(); }
  void* allocate(size_t nbytes) override { return in_.allocate(nbytes); }
  void deallocate(void* p, size_t nbytes) override { in_.deallocate(p, nbytes); }
  void copy_to_cpu(const Tensor& src, void* dst, size_t nbytes) override { in_.copy_to_cpu(src, dst, nbytes); }
  void copy_from_cpu(const void* src, const Tensor& dst, size_t nbytes) override { in_.copy_from_cpu(src, dst, nbytes); }
  bool has_causal_kernels() const override { return in_.has_causal_kernels(); }
  bool has_flash_attention() const override { return in_.has_flash_attention(); }

  // The conversions to and from bfloat16 are this rule too: float32 in the middle, rounded once (a
  // float64 source is rounded to float32 first, as PyTorch converts a double to bfloat16).
  void copy(const Tensor& src, const Tensor& dst) override {
    if (!any_bf16(src, dst)) return in_.copy(src, dst);
    // float32 → bfloat16 rounds straight into dst: no float32 scratch the size of a whole weight matrix
    if (src.dtype() == DType::Float32 && is_bf16(dst) && src.shape() == dst.shape())
      return round_into_bfloat16(src, dst, runs_);
    if (is_bf16(src) && is_bf16(dst) && src.shape() == dst.shape()) return copy_bfloat16(src, dst);
    // and bfloat16 → float32 widens straight into dst (a weight's gradient leaving autocast)
    if (is_bf16(src) && dst.dtype() == DType::Float32 && src.shape() == dst.shape())
      return widen_into_float32(src, dst, runs_);
    Output o(dst);
    in_.copy(wide(src), o);
    o.store(runs_);
  }
  // bfloat16 panels: one row through `row_panels` (float32 sums, the bias added in float32 as addmm adds it,
  // rounded once); else the weight unpacked and multiplied as linear multiplies it (Backend's default)
  void panel_linear(const Tensor& x, const Tensor& panels, const Tensor& bias, const Tensor& out) override {
    if (!any_bf16(x, panels, bias, out)) return in_.panel_linear(x, panels, bias, out);
    if (row_panels_ && is_bf16(x) && is_bf16(panels) && x.size(0) == 1) {
      Output o(out);
      const Tensor& sum = o;
      if (row_panels_(x, panels, sum)) {
        if (bias.defined()) in_.binary(BinaryOp::Add, wide(bias).expand(sum.shape()), sum, sum);
        o.store(runs_);
        return;
      }
    }
    Backend::panel_linear(x, panels, bias, out);  // unpacked, then this backend's addmm or matmul
  }
  void fill(const Tensor& dst, double value) override {
    if (!any_bf16(dst)) return in_.fill(dst, value);
    Output o(dst);
    in_.fill(o, value);
    o.store(runs_);
  }
  void unary(UnaryOp op, const Tensor& in, const Tensor& out, double scalar) override {
    if (!any_bf16(in, out)) return in_.unary(op, in, out, scalar);
    Output o(out);
    in_.unary(op, wide(in), o, scalar_for(in, scalar));
    o.store(runs_);
  }
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) override {
    if (!any_bf16(a, b, out)) return in_.binary(op, a, b, out);
    Output o(out);
    in_.binary(op, wide(a), wide(b), o);
    o.store(runs_);
  }
  void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) override {
    if (!any_bf16(a, b, out)) return in_.where(cond, a, b, out);
    Output o(out);
    in_.where(cond, wide(a), wide(b), o);
    o.store(runs_);
  }
  void masked_fill(const Tensor& x, const Tensor& mask, double value, const Tensor& out) override {
    if (!any_bf16(x, out)) return in_.masked_fill(x, mask, value, out);
    Output o(out);
    in_.masked_fill(wide(x), mask, value, o);
    o.store(runs_);
  }

  void sum_to(const Tensor& in, const Tensor& out) override {
    if (!any_bf16(in, out)) return in_.sum_to(in, out);
    Output o(out);
    in_.sum_to(wide(in), o);
    o.store(runs_);
  }
  void max_dim(const Tensor& in, int64_t dim, const Tensor& values, const Tensor& indices) override {
    if (!any_bf16(in, values)) return in_.max_dim(in, dim, values, indices);
    Output o(values);
    in_.max_dim(wide(in), dim, o, indices);
    o.store(runs_);
  }

  // ---- products: bfloat16 operands go to `product`, whose float32 sums are rounded once if out is bfloat16
  void matmul(const Tensor& a, const Tensor& b, const Tensor& out) override {
    if (!any_bf16(a, b, out)) return in_.matmul(a, b, out);
    if (is_bf16(a) && is_bf16(b)) return product_(a, b, out, {});  // it rounds into a bfloat16 out itself
    Output o(out);
    in_.matmul(wide(a), wide(b), o);
    o.store(runs_);
  }
  void addmm(const Tensor& bias, const Tensor& a, const Tensor& b, const Tensor& out) override {
    if (!any_bf16(bias, a, b, out)) return in_.addmm(bias, a, b, out);
    // the float32 sums, then the bias in float32, rounded once into a bfloat16 out: as the product stores
    if (is_bf16(a) && is_bf16(b)) return product_(a, b, out, {.bias = wide(bias)});
    Output o(out);
    in_.addmm(wide(bias), wide(a), wide(b), o);
    o.store(runs_);
  }
  void bfloat16_product_widened(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out) override {
    if (!is_bf16(a) || !is_bf16(b) || out.dtype() != DType::Float32 || (bias.defined() && is_bf16(bias)))
      return Backend::bfloat16_product_widened(a, b, bias, out);
    product_(a, b, out, {.bias = bias, .rounded = true});
  }
  void matmul_structured(const Tensor& a, const Tensor& b, const Tensor& out, MatmulStructure structure) override {
    if (!any_bf16(a, b, out)) return in_.matmul_structured(a, b, out, structure);
    matmul(a, b, out);  // the full product has the same entries where the promised zeros are
  }
  void causal_product(const Tensor& a, const Tensor& b, const Tensor& out, double divisor, double above) override {
    if (!any_bf16(a, b, out)) return in_.causal_product(a, b, out, divisor, above);
    Output o(out);
    if (is_bf16(a) && is_bf16(b)) {
      product_(a, b, o, {});
      in_.causal_scale(o, o, divisor, above);
    } else {
      in_.causal_product(wide(a), wide(b), o, divisor, above);
    }
    o.store(runs_);
  }
  void causal_scale(const Tensor& dst, const Tensor& src, double divisor, double above) override {
    if (!any_bf16(dst, src)) return in_.causal_scale(dst, src, divisor, above);
    Output o(dst);
    in_.causal_scale(o, wide(src), divisor, above);
    o.store(runs_);
  }
  bool zero_above_diagonal(const Tensor& p) override { return in_.zero_above_diagonal(wide(p)); }

  void flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale,
                       const Tensor& out, const Tensor& lse) override {
    if (!any_bf16(q, k, v, out, lse)) return in_.flash_attention(q, k, v, causal, scale, out, lse);
    Output o(out), l(lse);
    in_.flash_attention(wide(q), wide(k), wide(v), causal, scale, o, l);
    o.store(runs_);
    l.store(runs_);
  }
  void flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                const Tensor& lse, const Tensor& grad_out, bool causal, double scale,
                                const Tensor& dq, const Tensor& dk, const Tensor& dv) override {
    if (!any_bf16(q, k, v, out, lse, grad_out, dq, dk, dv))
      return in_.flash_attention_backward(q, k, v, out, lse, grad_out, causal, scale, dq, dk, dv);
    Output oq(dq), ok(dk), ov(dv);
    in_.flash_attention_backward(wide(q), wide(k), wide(v), wide(out), wide(lse), wide(grad_out), causal, scale,
                                 oq, ok, ov);
    oq.store(runs_);
    ok.store(runs_);
    ov.store(runs_);
  }

  void softmax(const Tensor& in, int64_t dim, bool log, const Tensor& out) override {
    if (!any_bf16(in, out)) return in_.softmax(in, dim, log, out);
    Output o(out);
    in_.softmax(wide(in), dim, log, o);
    o.store(runs_);
  }
  void softmax_backward(const Tensor& y, const Tensor& g, int64_t dim, bool log, const Tensor& gx) override {
    if (!any_bf16(y, g, gx)) return in_.softmax_backward(y, g, dim, log, gx);
    Output o(gx);
    in_.softmax_backward(wide(y), wide(g), dim, log, o);
    o.store(runs_);
  }

  void index_select_rows(const Tensor& weight, const Tensor& index, const Tensor& out) override {
    if (!any_bf16(weight, out)) return in_.index_select_rows(weight, index, out);
    // a lookup only copies: bfloat16 rows go into a bfloat16 output as they are, and a table kept in
    // bfloat16 (generation's embedding, 50257 rows for GPT-2) is never widened whole for a few of its rows
    if (is_bf16(weight) && is_bf16(out) && out.is_contiguous()) return copy_rows(weight, index, out);
    Output o(out);
    in_.index_select_rows(wide(weight), index, o);
    o.store(runs_);
  }
  void index_add_rows(const Tensor& grad, const Tensor& index, const Tensor& grad_weight) override {
    if (!any_bf16(grad, grad_weight)) return in_.index_add_rows(grad, index, grad_weight);
    Output o(grad_weight, Output::read_write);
    in_.index_add_rows(wide(grad), index, o);
    o.store(runs_);
  }
  bool add_rows_into_gradient(const Tensor& grad, const Tensor& index, const Tensor& grad_weight) override {
    if (!any_bf16(grad, grad_weight)) return in_.add_rows_into_gradient(grad, index, grad_weight);
    Output o(grad_weight, Output::read_write);
    const bool done = in_.add_rows_into_gradient(wide(grad), index, o);
    if (done) o.store(runs_);
    return done;
  }
  int64_t find_index_outside(const Tensor& index, int64_t limit, int64_t allowed) override {
    return in_.find_index_outside(index, limit, allowed);
  }
  void gather_rows(const Tensor& values, const Tensor& index, int64_t skip, const Tensor& out) override {
    if (!any_bf16(values, out)) return in_.gather_rows(values, index, skip, out);
    Output o(out);
    in_.gather_rows(wide(values), index, skip, o);
    o.store(runs_);
  }
  void scatter_rows(const Tensor& grad, const Tensor& index, int64_t skip, const Tensor& grad_values) override {
    if (!any_bf16(grad, grad_values)) return in_.scatter_rows(grad, index, skip, grad_values);
    Output o(grad_values, Output::read_write);
    in_.scatter_rows(wide(grad), index, skip, o);
    o.store(runs_);
  }
  int64_t nll_loss(const Tensor& log_probs, const Tensor& targets, int64_t ignore_index, const Tensor& out) override {
    if (!any_bf16(log_probs, out)) return in_.nll_loss(log_probs, targets, ignore_index, out);
    Output o(out);
    const int64_t count = in_.nll_loss(wide(log_probs), targets, ignore_index, o);
    o.store(runs_);
    return count;
  }
  void nll_loss_backward(const Tensor& grad, const Tensor& targets, int64_t ignore_index, int64_t count,
                         const Tensor& grad_in) override {
    if (!any_bf16(grad, grad_in)) return in_.nll_loss_backward(grad, targets, ignore_index, count, grad_in);
    Output o(grad_in, Output::read_write);
    in_.nll_loss_backward(wide(grad), targets, ignore_index, count, o);
    o.store(runs_);
  }

  void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y,
                  const Tensor& mean, const Tensor& rstd) override {
    if (!any_bf16(x, weight, bias, y, mean, rstd)) return in_.layer_norm(x, weight, bias, eps, y, mean, rstd);
    Output oy(y), om(mean), orstd(rstd);
    in_.layer_norm(wide(x), wide(weight), wide(bias), eps, oy, om, orstd);
    oy.store(runs_);
    om.store(runs_);
    orstd.store(runs_);
  }
  void layer_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                           const Tensor& weight, const Tensor& grad_x, const Tensor& grad_weight,
                           const Tensor& grad_bias) override {
    if (!any_bf16(grad_y, x, mean, rstd, weight, grad_x, grad_weight, grad_bias))
      return in_.layer_norm_backward(grad_y, x, mean, rstd, weight, grad_x, grad_weight, grad_bias);
    Output ox(grad_x), ow(grad_weight), ob(grad_bias);
    in_.layer_norm_backward(wide(grad_y), wide(x), wide(mean), wide(rstd), wide(weight), ox, ow, ob);
    ox.store(runs_);
    ow.store(runs_);
    ob.store(runs_);
  }
  void gelu(const Tensor& x, bool tanh, const Tensor& y) override {
    if (!any_bf16(x, y)) return in_.gelu(x, tanh, y);
    Output o(y);
    in_.gelu(wide(x), tanh, o);
    o.store(runs_);
  }
  void gelu_backward(const Tensor& grad_y, const Tensor& x, bool tanh, const Tensor& grad_x) override {
    if (!any_bf16(grad_y, x, grad_x)) return in_.gelu_backward(grad_y, x, tanh, grad_x);
    Output o(grad_x);
    in_.gelu_backward(wide(grad_y), wide(x), tanh, o);
    o.store(runs_);
  }
  void silu(const Tensor& x, const Tensor& y) override {
    if (!any_bf16(x, y)) return in_.silu(x, y);
    Output o(y);
    in_.silu(wide(x), o);
    o.store(runs_);
  }
  void silu_backward(const Tensor& grad_y, const Tensor& x, const Tensor& grad_x) override {
    if (!any_bf16(grad_y, x, grad_x)) return in_.silu_backward(grad_y, x, grad_x);
    Output o(grad_x);
    in_.silu_backward(wide(grad_y), wide(x), o);
    o.store(runs_);
  }
  void rms_norm(const Tensor& x, const Tensor& weight, double eps, const Tensor& y, const Tensor& rstd) override {
    if (!any_bf16(x, weight, y, rstd)) return in_.rms_norm(x, weight, eps, y, rstd);
    Output oy(y), orstd(rstd);
    in_.rms_norm(wide(x), wide(weight), eps, oy, orstd);
    oy.store(runs_);
    orstd.store(runs_);
  }
  void rms_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& rstd, const Tensor& weight,
                         const Tensor& grad_x, const Tensor& grad_weight) override {
    if (!any_bf16(grad_y, x, rstd, weight, grad_x, grad_weight))
      return in_.rms_norm_backward(grad_y, x, rstd, weight, grad_x, grad_weight);
    Output ox(grad_x), ow(grad_weight);
    in_.rms_norm_backward(wide(grad_y), wide(x), wide(rstd), wide(weight), ox, ow);
    ox.store(runs_);
    ow.store(runs_);
  }
  void rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse,
                        const Tensor& out) override {
    if (!any_bf16(x, cos, sin, out)) return in_.rotary_embedding(x, cos, sin, inverse, out);
    Output o(out);
    in_.rotary_embedding(wide(x), wide(cos), wide(sin), inverse, o);
    o.store(runs_);
  }
  void var(const Tensor& x, double correction, bool take_sqrt, bool all, const Tensor& out) override {
    if (!any_bf16(x, out)) return in_.var(x, correction, take_sqrt, all, out);
    Output o(out);
    in_.var(wide(x), correction, take_sqrt, all, o);
    o.store(runs_);
  }
  void norm2(const Tensor& x, const Tensor& out) override {
    if (!any_bf16(x, out)) return in_.norm2(x, out);
    Output o(out);
    in_.norm2(wide(x), o);
    o.store(runs_);
  }
  void norm2_each(const std::vector<Tensor>& xs, const Tensor& out) override {
    bool any = is_bf16(out);
    for (const Tensor& x : xs) any = any || is_bf16(x);
    if (!any) return in_.norm2_each(xs, out);
    std::vector<Tensor> wides;
    for (const Tensor& x : xs) wides.push_back(wide(x));
    Output o(out);
    in_.norm2_each(wides, o);
    o.store(runs_);
  }

  void adam_update(const AdamStep& step, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                   const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq) override {
    if (!any_bf16(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq))
      return in_.adam_update(step, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq);
    Output p(param, Output::read_write), m(exp_avg, Output::read_write), v(exp_avg_sq, Output::read_write),
        vmax(max_exp_avg_sq, Output::read_write);
    in_.adam_update(step, p, wide(grad), m, v, vmax);
    for (const Output* o : {&p, &m, &v, &vmax}) o->store(runs_);
  }
  void adam_update_rounding(const AdamStep& step, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                            const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, const Tensor& rounded) override {
    // a float32 weight's step with its bfloat16 copy: the inner device's (one pass, on the CPU)
    if (!any_bf16(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq))
      return in_.adam_update_rounding(step, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, rounded);
    Backend::adam_update_rounding(step, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, rounded);
  }

 private:
  Backend& in_;
  BFloat16Product product_;
  BFloat16RowPanels row_panels_;
  BFloat16Runs runs_;  // the conversions of whole weights and gradients (copy)
};

}  // namespace

Backend& widening_backend(Backend& inner, BFloat16Product product, BFloat16RowPanels row_panels, BFloat16Runs runs) {
  return *new WideningBackend(inner, product, row_panels, runs);
}

}  // namespace autograd
