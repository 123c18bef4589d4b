// inspect/anomaly.cpp — anomaly checks (see anomaly.h).
#include "autograd/inspect/anomaly.h"
#include "autograd/inspect/call_site.h"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace autograd::inspect {

namespace {
bool anomaly_enabled = false;

struct NonFinite {
  int64_t nan_at = -1, inf_at = -1;  // flat index of the first NaN / first ±Inf, or -1
  double inf_value = 0;
};

NonFinite scan(const Tensor& t) {
  NonFinite r;
  if (!t.defined() || !is_floating(t.dtype())) return r;
  NoGradGuard no_grad;  // reading the values must not record (and check) a conversion node
  std::vector<double> values = t.detach().to_vector<double>();
  for (size_t i = 0; i < values.size() && (r.nan_at < 0 || r.inf_at < 0); ++i) {
    if (std::isnan(values[i]) && r.nan_at < 0) r.nan_at = int64_t(i);
    if (std::isinf(values[i]) && r.inf_at < 0) {
      r.inf_at = int64_t(i);
      r.inf_value = values[i];
    }
  }
  return r;
}

std::string called_from(const Node& node) {
  return node.call_site.empty() ? std::string() : ", called from \"" + std::string(node.call_site) + "\"";
}
}  // namespace

bool is_anomaly_enabled() { return anomaly_enabled; }
void set_anomaly_enabled(bool enabled) { anomaly_enabled = enabled; }

void check_anomaly_forward(const Tensor& out, std::span<const Tensor> inputs) {
  if (!anomaly_enabled) return;
  NonFinite o = scan(out);
  if (o.nan_at < 0 && o.inf_at < 0) return;
  bool input_nan = false, input_inf = false;
  for (const Tensor& t : inputs) {
    NonFinite i = scan(t);
    input_nan = input_nan || i.nan_at >= 0;
    input_inf = input_inf || i.inf_at >= 0;
  }
  const Node& node = *out.grad_fn();
  const std::string_view op = node.name;  // -inf by request: a mask (masked_fill, causal_scores)
  const bool fills = op.starts_with("MaskedFill") || op.starts_with("CausalScores");
  std::string what;
  int64_t at = -1;
  if (o.nan_at >= 0 && !input_nan) {
    what = "nan", at = o.nan_at;
  } else if (o.inf_at >= 0 && !input_inf && !fills) {
    what = o.inf_value > 0 ? "inf" : "-inf", at = o.inf_at;
  } else {
    return;  // carried over from an input, not produced here
  }
  throw std::runtime_error(fmt::format(
      "anomaly: forward of {} produced {} from finite inputs (first at flat index {} of its output, shape {}); "
      "node {}, recorded by {}{}",
      recording_function(node), what, at, out.shape_str(), node.name, recorded_at(node), called_from(node)));
}

void check_anomaly_backward(const Node& node, const Grads& grads) {
  if (!anomaly_enabled) return;
  for (size_t i = 0; i < grads.size(); ++i) {
    NonFinite g = scan(grads[i]);
    if (g.nan_at < 0 && g.inf_at < 0) continue;
    const bool nan_first = g.nan_at >= 0 && (g.inf_at < 0 || g.nan_at < g.inf_at);
    std::string what = nan_first ? "nan" : (g.inf_value > 0 ? "inf" : "-inf");
    throw std::runtime_error(fmt::format(
        "anomaly: backward of {} returned {} in the gradient for input {} (first at flat index {}, shape {}); "
        "the node was recorded by {}{}",
        node.name, what, i, nan_first ? g.nan_at : g.inf_at, grads[i].shape_str(), recorded_at(node),
        called_from(node)));
  }
}

}  // namespace autograd::inspect
