// print.cpp — `std::cout << t` and fmt::format("{}", t) print the way PyTorch prints (see format.cpp).
#include <ostream>

#include "autograd/print/format_rules.h"
#include "autograd/node.h"
#include "autograd/print/tensor_print.h"

namespace autograd {

using print::PrintData;
using print::format_tensor;

std::string to_string(const Tensor& t) {
  if (!t.defined()) return "tensor(undefined)";
  PrintData data;
  data.dtype = t.dtype();
  data.shape = t.shape();
  if (is_floating(t.dtype())) data.floats = t.to_vector<double>();
  else data.ints = t.to_vector<int64_t>();
  std::vector<std::string> suffixes;
  if (t.device().is_cuda()) suffixes.push_back("device='" + t.device().str() + "'");
  if (t.grad_fn()) suffixes.push_back(std::string("grad_fn=<") + t.grad_fn()->grad_fn_name() + ">");
  else if (t.requires_grad()) suffixes.push_back("requires_grad=True");
  return format_tensor(data, suffixes);
}

std::string shape_tuple(const Tensor& t) {
  std::string s = "(";
  for (int64_t d = 0; d < t.dim(); ++d) s += (d ? ", " : "") + std::to_string(t.size(d));
  return s + (t.dim() == 1 ? ",)" : ")");
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << to_string(t); }

}  // namespace autograd
