// debug.cpp — anomaly checks and call-site labels (see debug.h).
#include "autograd/debug.h"

#include <cmath>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>

namespace autograd {

namespace {
bool anomaly_enabled = false;
thread_local std::string call_site;

// Index of the first NaN/Inf element, or -1.
int64_t first_non_finite(const Tensor& t) {
  if (!t.defined() || !is_floating(t.dtype())) return -1;
  std::vector<double> values = t.to(DType::Float64).to_vector<double>();
  for (size_t i = 0; i < values.size(); ++i)
    if (!std::isfinite(values[i])) return int64_t(i);
  return -1;
}

std::string where_text(const Node& node) {
  std::string s = fmt::format("{}:{}", std::filesystem::path(node.where.file_name()).filename().string(),
                              node.where.line());
  if (!node.call_site.empty()) s += " (called from " + node.call_site + ")";
  return s;
}
}  // namespace

bool is_anomaly_enabled() { return anomaly_enabled; }
void set_anomaly_enabled(bool enabled) { anomaly_enabled = enabled; }

void check_anomaly_forward(const Tensor& out, const char* op) {
  if (!anomaly_enabled) return;
  int64_t bad = first_non_finite(out);
  if (bad < 0) return;
  const Node& node = *out.grad_fn();
  throw std::runtime_error(fmt::format("anomaly: forward of {} produced a non-finite value at flat index {} "
                                       "(output shape {}), recorded at {}",
                                       op, bad, out.shape_str(), where_text(node)));
}

void check_anomaly_backward(const Node& node, const Grads& grads) {
  if (!anomaly_enabled) return;
  for (size_t i = 0; i < grads.size(); ++i) {
    int64_t bad = first_non_finite(grads[i]);
    if (bad >= 0)
      throw std::runtime_error(fmt::format(
          "anomaly: {} returned a non-finite gradient for input {} at flat index {} (shape {}); the forward op "
          "was recorded at {}",
          node.name, i, bad, grads[i].shape_str(), where_text(node)));
  }
}

CallSite::CallSite(std::string label) : previous_(call_site) { call_site = std::move(label); }
CallSite::CallSite(std::source_location where) : previous_(call_site) {
  call_site = fmt::format("{}:{}", std::filesystem::path(where.file_name()).filename().string(), where.line());
}
CallSite::~CallSite() { call_site = previous_; }
const std::string& current_call_site() { return call_site; }

}  // namespace autograd
