// ops/panels.cpp — a Linear's weight laid out for generation, and linear on it.
//
// A cached generation step multiplies one row by every weight: it reads each weight once, so it runs at the
// memory's speed at best. W [N, K] is used transposed, Wᵀ's column j being W's row j, and a kernel that adds
// 16 columns in 16 vector lanes (each column's sum one chain over p, the order every product here keeps)
// must read 16 rows of W side by side: 16 streams with a stride between them, which the prefetchers serve at
// about 70% of the memory's speed. Packed, the same values lie in the order that kernel reads them:
//
//   panels[i, p, l] = W[16i + l, p]        panel i = Wᵀ's columns 16i .. 16i + 15, p by p
//
// one run of memory per panel, read front to back (bench_ops' row_products_bench, 30 SmolLM2 blocks: 25.5 GB/s
// in place, 33.8 packed on one thread of an AMD EPYC Zen 5; 42.7 and 60.0 on two). Rows past N are zeros. The packing is a copy that generation
// makes once (nn::pack_weights_for_generation), never per step; there is no gradient through it.
#include <fmt/format.h>

#include "autograd/autocast.h"
#include "autograd/backend.h"
#include "autograd/ops.h"
#include "autograd/ops/checks.h"

namespace autograd {

Tensor pack_panels(const Tensor& weight) {
  if (weight.dim() != 2)
    throw std::invalid_argument(fmt::format("pack_panels: expected a weight [out, in], got {}", weight.shape_str()));
  check_floating(weight, "pack_panels");
  NoGradGuard no_grad;
  const int64_t n = weight.size(0), k = weight.size(1), width = kPanelWidth, whole = n / width, rest = n % width;
  // [P, K, 16]: panel i's row p is W[16i .. 16i + 15, p]; W's values are copied straight into place (no
  // intermediate copy: packing a 49,152-row table holds the table and its panels, no more)
  Tensor panels = empty({whole + (rest > 0), k, width}, weight.dtype(), weight.device());
  if (whole > 0) panels.narrow(0, 0, whole).copy_(weight.narrow(0, 0, whole * width).view({whole, width, k}).transpose(1, 2));
  if (rest > 0) {  // the last panel: its rows, then zeros
    Tensor last = panels.select(0, whole);
    last.fill_(0.0);
    last.narrow(1, 0, rest).copy_(weight.narrow(0, whole * width, rest).t());
  }
  return panels;
}

Tensor unpack_panels(const Tensor& panels, int64_t out_features) {
  if (panels.dim() != 3 || panels.size(2) != kPanelWidth || out_features < 0 ||
      out_features > panels.size(0) * kPanelWidth || out_features <= (panels.size(0) - 1) * kPanelWidth)
    throw std::invalid_argument(fmt::format("unpack_panels: panels {} do not hold a weight of {} rows (pack_panels makes "
                                            "[ceil(rows / {}), in, {}])",
                                            panels.shape_str(), out_features, kPanelWidth, kPanelWidth));
  return unpacked_weight(backend(panels.device()), panels, out_features);
}

Tensor panel_linear(const Tensor& x, const Tensor& panels, int64_t out_features, const Tensor& bias) {
  constexpr const char* op = "panel_linear";
  if (panels.dim() != 3 || panels.size(2) != kPanelWidth || out_features <= (panels.size(0) - 1) * kPanelWidth ||
      out_features > panels.size(0) * kPanelWidth)
    throw std::invalid_argument(fmt::format("{}: panels {} do not hold a weight of {} rows (pack_panels makes "
                                            "[ceil(rows / {}), in, {}])",
                                            op, panels.shape_str(), out_features, kPanelWidth, kPanelWidth));
  if (x.dim() == 0 || x.size(-1) != panels.size(1))
    throw std::invalid_argument(fmt::format("{}: input of shape {} does not match the packed weight's {} in_features",
                                            op, x.shape_str(), panels.size(1)));
  if (bias.defined() && (bias.dim() != 1 || bias.size(0) != out_features))
    throw std::invalid_argument(
        fmt::format("{}: bias of shape {} does not match out_features {}", op, bias.shape_str(), out_features));
  if (autocast_applies(x, panels))  // bfloat16 operands and bias, float32 sums, as linear under autocast
    return panel_linear(autocast_operand(x), autocast_operand(panels), out_features, autocast_operand(bias))
        .to(DType::Float32);
  check_floating(x, op);
  check_same_dtype(x, panels, op);
  check_same_device(x, panels, op);
  if (bias.defined()) check_same_dtype(x, bias, op);
  if (is_grad_enabled() && (x.requires_grad() || panels.requires_grad() || (bias.defined() && bias.requires_grad())))
    throw std::invalid_argument(fmt::format("{}: a weight packed for generation has no gradient (run it under "
                                            "NoGradGuard, or train the unpacked weight)",
                                            op));
  Shape out_shape(x.shape().begin(), x.shape().end() - 1);
  const int64_t rows = shape_numel(out_shape);
  out_shape.push_back(out_features);
  Tensor out = empty({rows, out_features}, x.dtype(), x.device());
  backend(x.device()).panel_linear(x.reshape({rows, x.size(-1)}).contiguous(), panels, bias.defined() ? bias.contiguous() : bias,
                                   out);
  return out.view(out_shape);
}

Tensor panel_rows(const Tensor& panels, const Tensor& indices, int64_t num_rows) {
  if (panels.dim() != 3 || panels.size(2) != kPanelWidth || num_rows <= (panels.size(0) - 1) * kPanelWidth ||
      num_rows > panels.size(0) * kPanelWidth)
    throw std::invalid_argument(fmt::format("panel_rows: panels {} do not hold a table of {} rows", panels.shape_str(),
                                            num_rows));
  if (indices.dtype() != DType::Int64)
    throw std::invalid_argument(fmt::format("panel_rows: indices must be int64, got {}", dtype_name(indices.dtype())));
  NoGradGuard no_grad;
  std::vector<Tensor> rows;
  for (int64_t i : indices.cpu().contiguous().to_vector<int64_t>()) {
    if (i < 0 || i >= num_rows)
      throw std::invalid_argument(fmt::format("panel_rows: index {} is out of range for a table of {} rows", i, num_rows));
    rows.push_back(panels.select(0, i / kPanelWidth).select(1, i % kPanelWidth));  // row i: lane i % 16, p by p
  }
  Shape shape = indices.shape();
  shape.push_back(panels.size(1));
  if (rows.empty()) return empty(shape, panels.dtype(), panels.device());
  return stack(rows, 0).reshape(shape);
}

}  // namespace autograd
