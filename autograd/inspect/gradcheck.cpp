// gradcheck.cpp — numerical vs analytical Jacobians.
#include "autograd/inspect/gradcheck.h"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "autograd/node.h"
#include "autograd/ops.h"

namespace autograd::inspect {

namespace {

// f's output as a flat vector of doubles, computed without recording a graph.
std::vector<double> evaluate(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& inputs) {
  NoGradGuard no_grad;
  return f(inputs).to_vector<double>();
}

// Writes `value` into flat element `index` of a (possibly non-contiguous) tensor, in place.
void poke(const Tensor& t, int64_t index, double value) {
  int64_t offset = 0, rest = index;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    offset += (rest % t.shape()[size_t(d)]) * t.strides()[size_t(d)];
    rest /= t.shape()[size_t(d)];
  }
  static_cast<double*>(t.raw_data())[offset] = value;
}

double peek(const Tensor& t, int64_t index) {
  int64_t offset = 0, rest = index;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    offset += (rest % t.shape()[size_t(d)]) * t.strides()[size_t(d)];
    rest /= t.shape()[size_t(d)];
  }
  return static_cast<double*>(t.raw_data())[offset];
}

}  // namespace

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& inputs,
                          GradcheckOptions opt) {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].requires_grad() && inputs[i].dtype() != DType::Float64)
      throw std::invalid_argument(fmt::format("gradcheck: input {} is {}; finite differences need float64 inputs", i,
                                              dtype_name(inputs[i].dtype())));
  const int64_t n_out = int64_t(evaluate(f, inputs).size());

  // analytical[i][o][e] = d out[o] / d input_i[e], one backward per output element
  std::vector<std::vector<std::vector<double>>> analytical(inputs.size());
  for (int64_t o = 0; o < n_out; ++o) {
    for (const Tensor& x : inputs)
      if (x.requires_grad()) x.set_grad(Tensor());
    Tensor out = f(inputs);
    std::vector<double> seed(size_t(n_out), 0.0);
    seed[size_t(o)] = 1.0;
    if (out.requires_grad()) out.backward(from_vector(seed, out.shape(), out.dtype()));
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i].requires_grad()) continue;
      Tensor g = inputs[i].grad();
      analytical[i].push_back(g.defined() ? g.to_vector<double>() : std::vector<double>(size_t(inputs[i].numel()), 0.0));
    }
  }

  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    if (!x.requires_grad()) continue;
    for (int64_t e = 0; e < x.numel(); ++e) {
      const double original = peek(x, e);
      poke(x, e, original + opt.eps);
      std::vector<double> plus = evaluate(f, inputs);
      poke(x, e, original - opt.eps);
      std::vector<double> minus = evaluate(f, inputs);
      poke(x, e, original);
      for (int64_t o = 0; o < n_out; ++o) {
        double numerical = (plus[size_t(o)] - minus[size_t(o)]) / (2 * opt.eps);
        double analytic = analytical[i][size_t(o)][size_t(e)];
        if (std::abs(numerical - analytic) > opt.atol + opt.rtol * std::abs(numerical) || std::isnan(analytic) != std::isnan(numerical))
          return {false, fmt::format("gradcheck: Jacobian mismatch for input {} (shape {}), element {}, output {}: "
                                     "backward gives {:.10g}, finite differences give {:.10g}",
                                     i, x.shape_str(), e, o, analytic, numerical)};
      }
    }
  }
  for (const Tensor& x : inputs)
    if (x.requires_grad()) x.set_grad(Tensor());
  return {true, ""};
}

}  // namespace autograd::inspect
