// backend.cpp — the device registry, and the composite entries of the kernel fence (backend.h): each
// written with the other entries, for a device that has no kernel of its own for it.
#include "autograd/backend.h"

#include <algorithm>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "autograd/cpu/kernels.h"
#include "autograd/node.h"
#include "autograd/numerics.h"
#include "autograd/reference/backend.h"

namespace autograd {

namespace {
Backend* cuda_backend = nullptr;

// A 0-d tensor holding `value`, on `like`'s device, with its dtype.
Tensor scalar_like(const Tensor& like, double value) {
  Tensor s = empty({}, like.dtype(), like.device());
  backend(like.device()).fill(s, value);
  return s;
}

// The values of a contiguous int64 tensor, on the host.
std::vector<int64_t> host_indices(Backend& device, const Tensor& index) {
  std::vector<int64_t> values(size_t(index.numel()));
  if (!values.empty()) device.copy_to_cpu(index, values.data(), values.size() * sizeof(int64_t));
  return values;
}
}  // namespace

void register_backend(DeviceType type, Backend* b) {
  if (type == DeviceType::CUDA) cuda_backend = b;
}

Backend& backend(Device device) {
  // CPU tensors: the fast kernels, or the plain loops of reference/ (numerics.h: kernels())
  if (device.is_cpu()) return kernels() == Kernels::reference ? reference::reference_backend() : cpu::cpu_backend();
  if (!cuda_backend)
    throw std::runtime_error(fmt::format("device {}: this build of scratchgrad has no CUDA support "
                                         "(configure with -DSCRATCHGRAD_CUDA=ON on a machine with nvcc)",
                                         device.str()));
  // A CUDA build on a machine without a usable GPU: every use says why, instead of failing later inside
  // an allocation with the driver's words (and has_backend(cuda) is false).
  static const std::string unusable = cuda_backend->unusable_reason();
  if (!unusable.empty()) throw std::runtime_error(fmt::format("no usable CUDA device: {}", unusable));
  return *cuda_backend;
}

bool has_registered_backend(DeviceType type) { return type == DeviceType::CPU || (type == DeviceType::CUDA && cuda_backend); }

void copy_across_devices(const Tensor& src, const Tensor& dst) {
  const size_t nbytes = size_t(src.numel()) * dtype_size(src.dtype());
  if (dst.device().is_cpu()) {
    backend(src.device()).copy_to_cpu(src, dst.raw_data(), nbytes);
  } else if (src.device().is_cpu()) {
    backend(dst.device()).copy_from_cpu(src.raw_data(), dst, nbytes);
  } else {  // between two accelerators: through the host
    Tensor host = empty(src.shape(), src.dtype(), Device::cpu());
    copy_across_devices(src, host);
    copy_across_devices(host, dst);
  }
}

// ---- composites

void Backend::masked_fill(const Tensor& x, const Tensor& mask, double value, const Tensor& out) {
  NoGradGuard no_grad;
  where(mask, scalar_like(x, value).expand(x.shape()), x, out);
}

void Backend::adam_update_rounding(const AdamStep& step, const Tensor& param, const Tensor& grad,
                                   const Tensor& exp_avg, const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq,
                                   const Tensor& rounded) {
  adam_update(step, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq);
  backend(param.device()).copy(param, rounded);  // the device's whole backend: this one may not hold bfloat16
}

void Backend::bfloat16_product_widened(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out) {
  Backend& device = backend(out.device());  // the device's whole backend: this one may not hold bfloat16
  const Tensor sixteen = empty(out.shape(), DType::BFloat16, out.device());
  if (bias.defined()) device.addmm(bias, a, b, sixteen);
  else device.matmul(a, b, sixteen);
  device.copy(sixteen, out);
}

void Backend::addmm(const Tensor& bias, const Tensor& a, const Tensor& b, const Tensor& out) {
  NoGradGuard no_grad;
  Tensor product = empty(out.shape(), out.dtype(), out.device());
  matmul(a, b, product);
  binary(BinaryOp::Add, bias.expand(out.shape()), product, out);  // the bias row broadcast over the rows
}

Tensor unpacked_weight(Backend& device, const Tensor& panels, int64_t out_features) {
  NoGradGuard no_grad;
  const int64_t count = panels.size(0), k = panels.size(1);
  const Tensor rows = empty({count * kPanelWidth, k}, panels.dtype(), panels.device());
  device.copy(panels.transpose(1, 2), rows.view({count, kPanelWidth, k}));  // one pass; the padding then dropped
  return rows.narrow(0, 0, out_features);  // (the first rows of a contiguous matrix: contiguous)
}

// W unpacked, then the product linear runs: addmm with a bias, matmul without (so linear's bits)
void Backend::panel_linear(const Tensor& x, const Tensor& panels, const Tensor& bias, const Tensor& out) {
  const Tensor weight_t = unpacked_weight(*this, panels, out.size(1)).t();
  if (bias.defined()) addmm(bias, x, weight_t, out);
  else matmul(x, weight_t, out);
}

void Backend::matmul_structured(const Tensor& a, const Tensor& b, const Tensor& out, MatmulStructure) {
  matmul(a, b, out);  // the full product has the same entries where the promised zeros are
}

void Backend::causal_scale(const Tensor&, const Tensor&, double, double) {
  throw std::logic_error("causal_scale: called on a backend without causal kernels (has_causal_kernels() is false)");
}

void Backend::causal_product(const Tensor& a, const Tensor& b, const Tensor& out, double divisor, double above) {
  matmul_structured(a, b, out, MatmulStructure::lower_c);
  causal_scale(out, out, divisor, above);
}

bool Backend::zero_above_diagonal(const Tensor&) {
  throw std::logic_error("zero_above_diagonal: called on a backend without causal kernels");
}

void Backend::flash_attention(const Tensor&, const Tensor&, const Tensor&, bool, double, const Tensor&, const Tensor&) {
  throw std::logic_error("flash_attention: called on a backend without it (has_flash_attention() is false)");
}

void Backend::flash_attention_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                       const Tensor&, bool, double, const Tensor&, const Tensor&, const Tensor&) {
  throw std::logic_error("flash_attention_backward: called on a backend without it (has_flash_attention() is false)");
}

int64_t Backend::find_index_outside(const Tensor& index, int64_t limit, int64_t allowed) {
  const std::vector<int64_t> values = host_indices(*this, index);
  auto bad = std::find_if(values.begin(), values.end(),
                          [&](int64_t v) { return (v < 0 || v >= limit) && v != allowed; });
  return bad == values.end() ? -1 : int64_t(bad - values.begin());
}

bool Backend::add_rows_into_gradient(const Tensor& grad, const Tensor& index, const Tensor& grad_weight) {
  const std::vector<int64_t> ids = host_indices(*this, index);
  std::unordered_map<int64_t, int64_t> slot_of_row;  // row → its place among the distinct rows
  std::vector<int64_t> rows, slots(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const auto [at, first_time] = slot_of_row.try_emplace(ids[i], int64_t(rows.size()));
    if (first_time) rows.push_back(ids[i]);
    slots[i] = at->second;
  }
  const Device device = grad.device();
  Tensor sums = zeros({int64_t(rows.size()), grad_weight.size(1)}, grad.dtype(), device);
  index_add_rows(grad, from_vector(slots, {int64_t(slots.size())}).to(device), sums);
  index_add_rows(sums, from_vector(rows, {int64_t(rows.size())}).to(device), grad_weight);
  return true;
}

int64_t Backend::nll_loss(const Tensor& log_probs, const Tensor& targets, int64_t ignore_index, const Tensor& out) {
  const std::vector<int64_t> t = host_indices(*this, targets);
  const int64_t count = std::count_if(t.begin(), t.end(), [&](int64_t v) { return v != ignore_index; });
  Tensor picked = empty({log_probs.size(0)}, log_probs.dtype(), log_probs.device());
  gather_rows(log_probs, targets, ignore_index, picked);
  sum_to(picked, out);                                  // Σ logp[i, t_i]
  unary(UnaryOp::DivScalar, out, out, double(count));  // / count
  unary(UnaryOp::Neg, out, out, 0.0);                   // −
  return count;
}

void Backend::nll_loss_backward(const Tensor& grad, const Tensor& targets, int64_t ignore_index, int64_t count,
                                const Tensor& grad_in) {
  NoGradGuard no_grad;
  Tensor coef = empty({}, grad.dtype(), grad.device());  // −g / count, then one per row
  unary(UnaryOp::Neg, grad, coef, 0.0);
  unary(UnaryOp::DivScalar, coef, coef, double(count));
  Tensor per_row = empty({grad_in.size(0)}, grad.dtype(), grad.device());
  copy(coef.reshape({1}).expand({grad_in.size(0)}), per_row);
  scatter_rows(per_row, targets, ignore_index, grad_in);
}

// ---- the GPT's and the Llama family's kernels: on a host copy, so every device gives the CPU's (PyTorch's) bits

namespace {
// A CPU copy of a tensor of this device (undefined stays undefined).
Tensor on_host(const Tensor& t) {
  NoGradGuard no_grad;
  return t.defined() ? t.to(Device::cpu()).contiguous() : Tensor();
}
// A contiguous CPU tensor to compute `dst` into (undefined if dst is).
Tensor host_output(const Tensor& dst) { return dst.defined() ? empty(dst.shape(), dst.dtype(), Device::cpu()) : Tensor(); }
// Copies a host result back into dst (contiguous, on this device).
void copy_back(const Tensor& host, const Tensor& dst) {
  if (dst.defined()) copy_across_devices(host, dst);
}
}  // namespace

void Backend::layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y,
                         const Tensor& mean, const Tensor& rstd) {
  Tensor hy = host_output(y), hmean = host_output(mean), hrstd = host_output(rstd);
  cpu::layer_norm(on_host(x), on_host(weight), on_host(bias), eps, hy, hmean, hrstd);
  copy_back(hy, y);
  copy_back(hmean, mean);
  copy_back(hrstd, rstd);
}

void Backend::layer_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                  const Tensor& weight, const Tensor& grad_x, const Tensor& grad_weight,
                                  const Tensor& grad_bias) {
  Tensor hx = host_output(grad_x), hw = host_output(grad_weight), hb = host_output(grad_bias);
  cpu::layer_norm_backward(on_host(grad_y), on_host(x), on_host(mean), on_host(rstd), on_host(weight), hx, hw, hb);
  copy_back(hx, grad_x);
  copy_back(hw, grad_weight);
  copy_back(hb, grad_bias);
}

void Backend::gelu(const Tensor& x, bool tanh, const Tensor& y) {
  Tensor hy = host_output(y);
  cpu::gelu(on_host(x), tanh, hy);
  copy_back(hy, y);
}

void Backend::gelu_backward(const Tensor& grad_y, const Tensor& x, bool tanh, const Tensor& grad_x) {
  Tensor hx = host_output(grad_x);
  cpu::gelu_backward(on_host(grad_y), on_host(x), tanh, hx);
  copy_back(hx, grad_x);
}

void Backend::silu(const Tensor& x, const Tensor& y) {
  Tensor hy = host_output(y);
  cpu::silu(on_host(x), hy);
  copy_back(hy, y);
}

void Backend::silu_backward(const Tensor& grad_y, const Tensor& x, const Tensor& grad_x) {
  Tensor hx = host_output(grad_x);
  cpu::silu_backward(on_host(grad_y), on_host(x), hx);
  copy_back(hx, grad_x);
}

void Backend::rms_norm(const Tensor& x, const Tensor& weight, double eps, const Tensor& y, const Tensor& rstd) {
  Tensor hy = host_output(y), hrstd = host_output(rstd);
  cpu::rms_norm(on_host(x), on_host(weight), eps, hy, hrstd);
  copy_back(hy, y);
  copy_back(hrstd, rstd);
}

void Backend::rms_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& rstd, const Tensor& weight,
                                const Tensor& grad_x, const Tensor& grad_weight) {
  Tensor hx = host_output(grad_x), hw = host_output(grad_weight);
  cpu::rms_norm_backward(on_host(grad_y), on_host(x), on_host(rstd), on_host(weight), hx, hw);
  copy_back(hx, grad_x);
  copy_back(hw, grad_weight);
}

void Backend::rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse,
                               const Tensor& out) {
  Tensor hout = host_output(out);
  cpu::rotary_embedding(on_host(x), on_host(cos), on_host(sin), inverse, hout);
  copy_back(hout, out);
}

void Backend::var(const Tensor& x, double correction, bool take_sqrt, bool all, const Tensor& out) {
  Tensor h = host_output(out);
  cpu::var(on_host(x), correction, take_sqrt, all, h);
  copy_back(h, out);
}

void Backend::norm2(const Tensor& x, const Tensor& out) {
  Tensor h = host_output(out);
  cpu::norm2(on_host(x), h);
  copy_back(h, out);
}

void Backend::norm2_each(const std::vector<Tensor>& xs, const Tensor& out) {
  for (size_t i = 0; i < xs.size(); ++i) norm2(xs[i], out.select(0, int64_t(i)));
}

}  // namespace autograd
