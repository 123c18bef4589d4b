// test_ops_forward.cpp — forward values of every op against PyTorch 1.13.
//
// tests/reference/make_fixtures.py ran each op in PyTorch on fixed inputs and wrote inputs and outputs
// to tests/reference/fixtures/ops/*.txt (format described in the script; floats as exact hex). Here each
// case name maps to a lambda doing the same computation with the engine. Every fixture case needs a
// lambda and every lambda a fixture case, so neither side can silently drop an op.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/test_helpers.h"

namespace {

using namespace autograd;

const std::string kFixtureDir = std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/reference/fixtures/ops/";
const std::vector<std::string> kFixtureFiles = {"elementwise.txt", "reduce.txt", "matmul.txt", "nn.txt", "shape.txt"};
constexpr double kInf = std::numeric_limits<double>::infinity();

// ---------------------------------------------------------------- fixture parsing

struct FixtureTensor {
  std::string name;  // inputs only
  DType dtype = DType::Float32;
  Shape shape;
  std::vector<double> values;

  Tensor make() const { return from_vector(values, shape, dtype); }
};

struct FixtureCase {
  std::string name;
  std::vector<FixtureTensor> inputs, outputs;
};

DType parse_dtype(const std::string& s) {
  if (s == "float32") return DType::Float32;
  if (s == "float64") return DType::Float64;
  if (s == "int64") return DType::Int64;
  if (s == "bool") return DType::Bool;
  throw std::runtime_error("unknown dtype '" + s + "'");
}

// "<dtype> <ndim> <dims...> <values...>" from the rest of an in/out line.
FixtureTensor parse_tensor(std::istringstream& in) {
  FixtureTensor t;
  std::string dtype, word;
  int64_t ndim = 0;
  if (!(in >> dtype >> ndim)) throw std::runtime_error("missing dtype or rank");
  t.dtype = parse_dtype(dtype);
  t.shape.resize(size_t(ndim));
  for (int64_t& d : t.shape)
    if (!(in >> d)) throw std::runtime_error("missing dimension");
  while (in >> word) {
    char* end = nullptr;
    double v = std::strtod(word.c_str(), &end);  // reads hex floats, inf, -inf and nan
    if (*end != '\0') throw std::runtime_error("bad number '" + word + "'");
    t.values.push_back(v);
  }
  if (int64_t(t.values.size()) != shape_numel(t.shape))
    throw std::runtime_error("value count " + std::to_string(t.values.size()) + " does not match shape " +
                             shape_to_string(t.shape));
  return t;
}

std::vector<FixtureCase> load_cases(const std::string& file) {
  std::ifstream in(kFixtureDir + file);
  if (!in) throw std::runtime_error("cannot open fixture " + kFixtureDir + file);
  std::vector<FixtureCase> cases;
  std::string line;
  int line_no = 0;
  bool open = false;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string kind;
    words >> kind;
    try {
      if (kind == "case") {
        if (open) throw std::runtime_error("case without end");
        cases.emplace_back();
        words >> cases.back().name;
        open = true;
      } else if (kind == "in" && open) {
        std::string name;
        words >> name;
        cases.back().inputs.push_back(parse_tensor(words));
        cases.back().inputs.back().name = name;
      } else if (kind == "out" && open) {
        cases.back().outputs.push_back(parse_tensor(words));
      } else if (kind == "end" && open) {
        open = false;
      } else {
        throw std::runtime_error("unexpected '" + kind + "'");
      }
    } catch (const std::exception& e) {
      throw std::runtime_error(file + ":" + std::to_string(line_no) + ": " + e.what());
    }
  }
  if (open) throw std::runtime_error(file + ": last case has no end");
  return cases;
}

// ---------------------------------------------------------------- the engine side of every case

// A case's inputs by name; a misspelt name fails loudly instead of giving an undefined tensor.
class In {
 public:
  explicit In(std::map<std::string, Tensor> tensors) : tensors_(std::move(tensors)) {}
  const Tensor& operator[](const std::string& name) const {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) throw std::runtime_error("the fixture has no input '" + name + "'");
    return it->second;
  }

 private:
  std::map<std::string, Tensor> tensors_;
};

using Outs = std::vector<Tensor>;
using OpFn = std::function<Outs(const In&)>;

Outs both(const std::pair<Tensor, Tensor>& p) { return {p.first, p.second}; }

const std::map<std::string, OpFn>& engine_ops() {
  static const std::map<std::string, OpFn> ops = [] {
    std::map<std::string, OpFn> m = {
        // ---- elementwise.txt
        {"add", [](const In& in) -> Outs { return {in["a"] + in["b"]}; }},
        {"add_broadcast", [](const In& in) -> Outs { return {in["a"] + in["b"]}; }},
        {"add_f64", [](const In& in) -> Outs { return {in["a"] + in["b"]}; }},
        {"add_int", [](const In& in) -> Outs { return {in["a"] + in["b"]}; }},
        {"sub_broadcast", [](const In& in) -> Outs { return {in["a"] - in["b"]}; }},
        {"mul", [](const In& in) -> Outs { return {in["a"] * in["b"]}; }},
        {"mul_broadcast", [](const In& in) -> Outs { return {in["a"] * in["b"]}; }},
        {"mul_transposed", [](const In& in) -> Outs { return {in["a"].t() * in["b"]}; }},
        {"mul_scalar_tensor", [](const In& in) -> Outs { return {in["a"] * in["b"]}; }},
        {"div", [](const In& in) -> Outs { return {in["a"] / in["b"]}; }},
        {"div_broadcast", [](const In& in) -> Outs { return {in["a"] / in["b"]}; }},
        {"div_f64", [](const In& in) -> Outs { return {in["a"] / in["b"]}; }},
        {"div_int", [](const In& in) -> Outs { return {in["a"] / in["b"]}; }},
        {"add_scalar", [](const In& in) -> Outs { return {in["a"] + 2.5}; }},
        {"sub_scalar", [](const In& in) -> Outs { return {in["a"] - 2.5}; }},
        {"rsub_scalar", [](const In& in) -> Outs { return {2.5 - in["a"]}; }},
        {"mul_scalar", [](const In& in) -> Outs { return {in["a"] * -1.5}; }},
        {"div_scalar", [](const In& in) -> Outs { return {in["a"] / 3.0}; }},
        {"rdiv_scalar", [](const In& in) -> Outs { return {3.0 / in["a"]}; }},
        {"scalar_f64", [](const In& in) -> Outs { return {(1.0 - in["a"] * 0.1) / 7.0 + 3.0 / in["a"]}; }},
        {"mul_int_fraction", [](const In& in) -> Outs { return {in["a"] * 0.5}; }},
        {"neg", [](const In& in) -> Outs { return {-in["a"]}; }},
        {"exp", [](const In& in) -> Outs { return {in["a"].exp()}; }},
        {"exp_transposed", [](const In& in) -> Outs { return {in["a"].t().exp()}; }},
        {"exp_f64", [](const In& in) -> Outs { return {in["a"].exp()}; }},
        {"log", [](const In& in) -> Outs { return {in["a"].log()}; }},
        {"log_f64", [](const In& in) -> Outs { return {in["a"].log()}; }},
        {"log_special", [](const In& in) -> Outs { return {in["a"].log()}; }},
        {"sqrt", [](const In& in) -> Outs { return {in["a"].sqrt()}; }},
        {"sqrt_f64", [](const In& in) -> Outs { return {in["a"].sqrt()}; }},
        {"tanh", [](const In& in) -> Outs { return {in["a"].tanh()}; }},
        {"tanh_f64", [](const In& in) -> Outs { return {in["a"].tanh()}; }},
        {"relu", [](const In& in) -> Outs { return {in["a"].relu()}; }},
        {"relu_sliced", [](const In& in) -> Outs { return {in["a"].slice(1, 1, std::nullopt, 2).relu()}; }},
        {"abs", [](const In& in) -> Outs { return {in["a"].abs()}; }},
        {"abs_int", [](const In& in) -> Outs { return {in["a"].abs()}; }},
        {"pow_2", [](const In& in) -> Outs { return {in["a"].pow(2.0)}; }},
        {"pow_3", [](const In& in) -> Outs { return {in["a"].pow(3.0)}; }},
        {"pow_half", [](const In& in) -> Outs { return {in["a"].pow(0.5)}; }},
        {"pow_neg", [](const In& in) -> Outs { return {in["a"].pow(-1.5)}; }},
        {"pow_2_5", [](const In& in) -> Outs { return {in["a"].pow(2.5)}; }},
        {"pow_f64", [](const In& in) -> Outs { return {in["a"].pow(1.7)}; }},
        {"where", [](const In& in) -> Outs { return {where(in["c"], in["a"], in["b"])}; }},
        {"where_broadcast", [](const In& in) -> Outs { return {where(in["c"], in["a"], in["b"])}; }},
        {"where_scalar", [](const In& in) -> Outs { return {where(in["c"], in["a"], -2.0)}; }},
        {"where_transposed", [](const In& in) -> Outs { return {where(in["c"].t(), in["a"].t(), in["b"])}; }},
        {"lt", [](const In& in) -> Outs { return {in["a"] < in["b"]}; }},
        {"le", [](const In& in) -> Outs { return {in["a"] <= in["b"]}; }},
        {"gt", [](const In& in) -> Outs { return {in["a"] > in["b"]}; }},
        {"ge", [](const In& in) -> Outs { return {in["a"] >= in["b"]}; }},
        {"eq", [](const In& in) -> Outs { return {in["a"] == in["b"]}; }},
        {"ne", [](const In& in) -> Outs { return {in["a"] != in["b"]}; }},
        {"cmp_scalar", [](const In& in) -> Outs {
           const Tensor& a = in["a"];
           return {a < 1.0, a <= 1.0, a > 0.5, a >= 0.0, a == 1.0, a != -1.0};
         }},
        {"cmp_int_fraction", [](const In& in) -> Outs {
           const Tensor& a = in["a"];
           return {a < 0.5, a <= 1.5, a > -0.5, a >= 2.5, a == 1.5};
         }},
        {"to_f64", [](const In& in) -> Outs { return {in["a"].to(DType::Float64)}; }},
        {"to_f32", [](const In& in) -> Outs { return {in["a"].to(DType::Float32)}; }},
        {"to_f32_transposed", [](const In& in) -> Outs { return {in["a"].t().to(DType::Float32)}; }},
        {"to_int", [](const In& in) -> Outs { return {in["a"].to(DType::Int64)}; }},
        {"to_bool", [](const In& in) -> Outs { return {in["a"].to(DType::Bool)}; }},
        {"bool_to_f32", [](const In& in) -> Outs { return {in["a"].to(DType::Float32)}; }},
        {"clone_transposed", [](const In& in) -> Outs { return {in["a"].t().clone()}; }},
        {"contiguous_transposed", [](const In& in) -> Outs { return {in["a"].t().contiguous()}; }},

        // ---- reduce.txt
        {"sum_all", [](const In& in) -> Outs { return {in["a"].sum()}; }},
        {"sum_dim", [](const In& in) -> Outs { return {in["a"].sum(1)}; }},
        {"sum_dim_keepdim", [](const In& in) -> Outs { return {in["a"].sum(-1, true)}; }},
        {"sum_dims", [](const In& in) -> Outs { return {sum(in["a"], {0, 2}, false)}; }},
        {"sum_dims_keepdim", [](const In& in) -> Outs { return {sum(in["a"], {2, 0}, true)}; }},
        {"sum_transposed", [](const In& in) -> Outs { return {in["a"].t().sum(0)}; }},
        {"sum_f64", [](const In& in) -> Outs { return {in["a"].sum(), in["a"].sum(1)}; }},
        {"sum_long", [](const In& in) -> Outs { return {in["a"].sum()}; }},
        {"sum_long_dim", [](const In& in) -> Outs { return {in["a"].sum(0)}; }},
        {"sum_int", [](const In& in) -> Outs { return {in["a"].sum(), in["a"].sum(0)}; }},
        {"sum_bool", [](const In& in) -> Outs { return {in["a"].sum(), in["a"].sum(1)}; }},
        {"sum_to", [](const In& in) -> Outs {
           const Tensor& a = in["a"];
           return {a.sum_to({3, 1}), a.sum_to({1, 4}), a.sum_to({2, 1, 4})};
         }},
        {"mean_all", [](const In& in) -> Outs { return {in["a"].mean()}; }},
        {"mean_dim", [](const In& in) -> Outs { return {in["a"].mean(1)}; }},
        {"mean_dim_keepdim", [](const In& in) -> Outs { return {in["a"].mean(-1, true)}; }},
        {"mean_transposed", [](const In& in) -> Outs { return {in["a"].t().mean(0)}; }},
        {"mean_f64", [](const In& in) -> Outs { return {in["a"].mean(), in["a"].mean(0)}; }},
        {"max_dim", [](const In& in) -> Outs { return both(in["a"].max(1)); }},
        {"max_dim_keepdim", [](const In& in) -> Outs { return both(in["a"].max(-1, true)); }},
        {"max_dim_transposed", [](const In& in) -> Outs { return both(in["a"].t().max(1)); }},
        {"max_dim_ties", [](const In& in) -> Outs { return both(in["a"].max(1)); }},
        {"max_all", [](const In& in) -> Outs { return {in["a"].max()}; }},
        {"max_f64", [](const In& in) -> Outs {
           auto [v, i] = in["a"].max(0);
           return {in["a"].max(), v, i};
         }},
        {"max_int", [](const In& in) -> Outs {
           auto [v, i] = in["a"].max(1);
           return {in["a"].max(), v, i};
         }},
        {"argmax", [](const In& in) -> Outs {
           const Tensor& a = in["a"];
           return {a.argmax(), a.argmax(2), a.argmax(0, true)};
         }},

        // ---- matmul.txt
        {"dot", [](const In& in) -> Outs { return {matmul(in["a"], in["b"])}; }},
        {"vec_mat", [](const In& in) -> Outs { return {matmul(in["a"], in["b"])}; }},
        {"mat_vec", [](const In& in) -> Outs { return {matmul(in["a"], in["b"])}; }},
        {"mat_mat", [](const In& in) -> Outs { return {matmul(in["a"], in["b"])}; }},
        {"vec_batched", [](const In& in) -> Outs { return {matmul(in["a"], in["b"])}; }},
        {"batched_vec", [](const In& in) -> Outs { return {matmul(in["a"], in["b"])}; }},
        {"batched_3d", [](const In& in) -> Outs { return {matmul(in["a"], in["b"])}; }},
        {"batched_4d", [](const In& in) -> Outs { return {matmul(in["a"], in["b"])}; }},
        {"broadcast_batch", [](const In& in) -> Outs { return {matmul(in["a"], in["b"])}; }},
        {"mat_batched", [](const In& in) -> Outs { return {matmul(in["a"], in["b"])}; }},
        {"fold_3d_2d", [](const In& in) -> Outs { return {matmul(in["a"], in["b"])}; }},
        {"fold_4d_2d", [](const In& in) -> Outs { return {matmul(in["a"], in["b"])}; }},
        {"fold_transposed", [](const In& in) -> Outs { return {matmul(in["a"].transpose(1, 2), in["b"].t())}; }},
        {"transposed", [](const In& in) -> Outs { return {matmul(in["a"].t(), in["b"].t())}; }},
        {"batched_mT", [](const In& in) -> Outs { return {matmul(in["a"], in["b"].mT())}; }},
        {"mat_mat_f64", [](const In& in) -> Outs { return {matmul(in["a"], in["b"])}; }},
        {"large", [](const In& in) -> Outs { return {matmul(in["a"], in["b"])}; }},
        {"large_transposed", [](const In& in) -> Outs { return {matmul(in["a"].t(), in["b"].t())}; }},
        {"large_batched", [](const In& in) -> Outs { return {matmul(in["a"], in["b"])}; }},
        {"large_broadcast", [](const In& in) -> Outs { return {matmul(in["a"], in["b"])}; }},
        {"large_fold", [](const In& in) -> Outs { return {matmul(in["a"], in["b"])}; }},
        {"large_f64", [](const In& in) -> Outs { return {matmul(in["a"], in["b"])}; }},
        {"linear", [](const In& in) -> Outs { return {linear(in["x"], in["w"], in["b"])}; }},
        {"linear_no_bias", [](const In& in) -> Outs { return {linear(in["x"], in["w"])}; }},
        {"linear_vector", [](const In& in) -> Outs { return {linear(in["x"], in["w"], in["b"])}; }},
        {"linear_large", [](const In& in) -> Outs { return {linear(in["x"], in["w"], in["b"])}; }},

        // ---- nn.txt (softmax_dim*/log_softmax_dim* are added below)
        {"softmax_transposed", [](const In& in) -> Outs { return {in["x"].t().softmax(-1), in["x"].t().softmax(0)}; }},
        {"log_softmax_transposed",
         [](const In& in) -> Outs { return {in["x"].t().log_softmax(-1), in["x"].t().log_softmax(0)}; }},
        {"softmax_f64", [](const In& in) -> Outs { return {in["x"].softmax(-1), in["x"].log_softmax(-1)}; }},
        {"softmax_large_values", [](const In& in) -> Outs { return {in["x"].softmax(-1), in["x"].log_softmax(-1)}; }},
        {"softmax_long_row", [](const In& in) -> Outs { return {in["x"].softmax(-1), in["x"].log_softmax(-1)}; }},
        {"softmax_masked_rows", [](const In& in) -> Outs {
           Tensor filled = in["x"].masked_fill(in["m"], -kInf);
           return {filled.softmax(-1), filled.log_softmax(-1)};
         }},
        {"softmax_inf_values", [](const In& in) -> Outs { return {in["x"].softmax(-1), in["x"].log_softmax(-1)}; }},
        {"causal_attention", [](const In& in) -> Outs {
           Tensor scores = matmul(in["q"], in["k"].mT()) / std::sqrt(3.0);
           Tensor causal = ones({4, 4}, DType::Bool).triu(1);
           return {matmul(scores.masked_fill(causal, -kInf).softmax(-1), in["v"])};
         }},
        {"causal_scores", [](const In& in) -> Outs { return {causal_scores(in["q"], in["k"], std::sqrt(3.0))}; }},
        {"tril_matmul", [](const In& in) -> Outs { return {tril_matmul(in["p"], in["v"])}; }},
        {"masked_fill", [](const In& in) -> Outs { return {in["x"].masked_fill(in["m"], 0.5)}; }},
        {"masked_fill_broadcast", [](const In& in) -> Outs { return {in["x"].masked_fill(in["m"], -kInf)}; }},
        {"masked_fill_broadcast_col", [](const In& in) -> Outs { return {in["x"].masked_fill(in["m"], -1e9)}; }},
        {"masked_fill_transposed", [](const In& in) -> Outs { return {in["x"].t().masked_fill(in["m"], kInf)}; }},
        {"masked_fill_f64", [](const In& in) -> Outs { return {in["x"].masked_fill(in["m"], -0.25)}; }},
        {"embedding", [](const In& in) -> Outs { return {embedding(in["w"], in["i"])}; }},
        {"embedding_transposed", [](const In& in) -> Outs { return {embedding(in["w"].t(), in["i"])}; }},
        {"embedding_f64", [](const In& in) -> Outs { return {embedding(in["w"], in["i"])}; }},
        {"cross_entropy", [](const In& in) -> Outs { return {cross_entropy(in["x"], in["t"])}; }},
        {"cross_entropy_ignore", [](const In& in) -> Outs { return {cross_entropy(in["x"], in["t"])}; }},
        {"cross_entropy_ignore_custom", [](const In& in) -> Outs { return {cross_entropy(in["x"], in["t"], 2)}; }},
        {"cross_entropy_all_ignored", [](const In& in) -> Outs { return {cross_entropy(in["x"], in["t"])}; }},
        {"cross_entropy_transposed", [](const In& in) -> Outs { return {cross_entropy(in["x"].t(), in["t"])}; }},
        {"cross_entropy_f64", [](const In& in) -> Outs { return {cross_entropy(in["x"], in["t"])}; }},
        {"cross_entropy_large", [](const In& in) -> Outs { return {cross_entropy(in["x"], in["t"])}; }},
        {"nll_loss", [](const In& in) -> Outs { return {nll_loss(in["x"], in["t"])}; }},
        {"nll_loss_ignore", [](const In& in) -> Outs { return {nll_loss(in["x"], in["t"])}; }},
        {"nll_loss_log_softmax", [](const In& in) -> Outs { return {nll_loss(in["x"].log_softmax(1), in["t"])}; }},

        // ---- shape.txt
        {"view", [](const In& in) -> Outs {
           const Tensor& a = in["a"];
           return {a.view({2, 6}), a.view({-1}), a.view({4, 1, 3})};
         }},
        {"view_transposed_split", [](const In& in) -> Outs { return {in["a"].t().view({2, 2, 3})}; }},
        {"reshape_copy", [](const In& in) -> Outs { return {in["a"].t().reshape({-1}), in["a"].t().reshape({2, 6})}; }},
        {"transpose", [](const In& in) -> Outs {
           const Tensor& a = in["a"];
           return {a.transpose(0, 2), a.transpose(-1, -2), a.mT()};
         }},
        {"permute", [](const In& in) -> Outs { return {in["a"].permute({2, 0, 1}), in["a"].permute({1, 2, 0})}; }},
        {"unsqueeze_squeeze", [](const In& in) -> Outs {
           const Tensor& a = in["a"];
           return {a.unsqueeze(0), a.unsqueeze(-1), a.squeeze(), a.squeeze(2)};
         }},
        {"expand", [](const In& in) -> Outs {
           const Tensor& a = in["a"];
           return {a.expand({3, 4}), a.expand({2, 3, 4}), a.expand({2, -1, 2})};
         }},
        {"narrow", [](const In& in) -> Outs {
           const Tensor& a = in["a"];
           return {a.narrow(1, 1, 3), a.narrow(0, 2, 2), a.t().narrow(0, 1, 2)};
         }},
        {"slice_step", [](const In& in) -> Outs {  // a[:, 1::2], a[1:5:3], a[-3:], a.t()[::2, 1:]
           const Tensor& a = in["a"];
           return {a.slice(1, 1, std::nullopt, 2), a.slice(0, 1, 5, 3), a.slice(0, -3, std::nullopt),
                   a.t().slice(0, std::nullopt, std::nullopt, 2).slice(1, 1, std::nullopt)};
         }},
        {"select", [](const In& in) -> Outs {  // a[1], a[:, -1], a[:, :, 0], a.transpose(0, 1)[1]
           const Tensor& a = in["a"];
           return {a[1], a.select(1, -1), a.select(2, 0), a.transpose(0, 1)[1]};
         }},
        {"cat", [](const In& in) -> Outs {
           const Tensor &a = in["a"], &b = in["b"], &c = in["c"];
           return {cat({a, b}, 0), cat({a, c.t(), a}, 1), cat({a, b, a}, -2)};
         }},
        {"cat_f64", [](const In& in) -> Outs { return {cat({in["a"], in["b"]}, 1)}; }},
        {"cat_int", [](const In& in) -> Outs { return {cat({in["a"], in["b"]})}; }},
        {"stack", [](const In& in) -> Outs {
           const Tensor &a = in["a"], &b = in["b"];
           return {stack({a, b}), stack({a, b}, 1), stack({a, b, a}, -1)};
         }},
        {"stack_transposed", [](const In& in) -> Outs { return {stack({in["a"].t(), in["b"]}, 1)}; }},
        {"chunk", [](const In& in) -> Outs { return chunk(in["a"], 3, 1); }},
        {"chunk_rows", [](const In& in) -> Outs { return chunk(in["a"], 4, 0); }},
        {"tril_triu", [](const In& in) -> Outs {
           const Tensor& a = in["a"];
           return {a.tril(), a.triu(), a.tril(-1), a.triu(1), a.tril(2), a.triu(-2)};
         }},
        {"tril_triu_batched", [](const In& in) -> Outs { return {in["a"].tril(), in["a"].triu(1)}; }},
        {"tril_triu_transposed", [](const In& in) -> Outs { return {in["a"].t().tril(), in["a"].t().triu()}; }},
        {"triu_bool", [](const In&) -> Outs { return {ones({4, 4}, DType::Bool).triu(1)}; }},
        {"flatten", [](const In& in) -> Outs {
           const Tensor& a = in["a"];
           return {a.flatten(), a.flatten(1), a.flatten(0, 1), flatten(a, -2, -1), a.flatten(1, 1), a.flatten(-3, 0)};
         }},
        {"flatten_transposed", [](const In& in) -> Outs {
           const Tensor t = in["a"].transpose(0, 2);  // [4, 3, 2], not contiguous: flatten copies
           return {t.flatten(1), t.flatten(0, 1)};
         }},
        {"flatten_0d", [](const In& in) -> Outs {
           const Tensor& a = in["a"];
           return {a.flatten(), a.flatten(0, -1), a.flatten(-1, 0)};
         }},
        {"flatten_empty", [](const In& in) -> Outs {
           const Tensor& a = in["a"];
           return {a.flatten(0, 1), a.flatten(1), a.flatten()};
         }},
        {"flatten_int", [](const In& in) -> Outs { return {in["a"].flatten(1)}; }},
    };
    for (int64_t d : {0, 1, 2, -1}) {
      m["softmax_dim" + std::to_string(d)] = [d](const In& in) -> Outs { return {in["x"].softmax(d)}; };
      m["log_softmax_dim" + std::to_string(d)] = [d](const In& in) -> Outs { return {in["x"].log_softmax(d)}; };
    }
    return m;
  }();
  return ops;
}

// ---------------------------------------------------------------- comparison

struct Tolerance {
  double rtol, atol;
};

// float32 results agree with PyTorch to rounding; float64 to 1e-12.
Tolerance tolerance_for(const std::string& case_name, DType dtype) {
  if (dtype == DType::Float64) return {1e-12, 1e-12};
  // Long float32 accumulations add their terms in a different order than PyTorch (BLIS's blocked kernels
  // against MKL's for the products over K = 32; PyTorch's multi-accumulator sum over 300 rows). Each
  // order rounds differently, by up to about (terms) x 2^-24 x (term size), here with terms of size <= 1.
  static const std::map<std::string, Tolerance> accumulations = {
      {"large", {1e-6, 2e-6}},         {"large_transposed", {1e-6, 2e-6}}, {"large_batched", {1e-6, 2e-6}},
      {"large_broadcast", {1e-6, 2e-6}}, {"large_fold", {1e-6, 2e-6}},     {"linear_large", {1e-6, 2e-6}},
      {"sum_long_dim", {1e-6, 1e-5}},
  };
  auto it = accumulations.find(case_name);
  return it != accumulations.end() ? it->second : Tolerance{1e-6, 1e-7};
}

void expect_matches(const Tensor& got, const FixtureTensor& want, const Tolerance& tol, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what << ": the engine returned an undefined tensor";
  EXPECT_EQ(dtype_name(got.dtype()), dtype_name(want.dtype)) << what;
  ASSERT_EQ(got.shape_str(), shape_to_string(want.shape)) << what;
  std::vector<double> values = got.to_vector<double>();
  const bool exact = !is_floating(want.dtype);
  int reported = 0;
  for (size_t i = 0; i < values.size() && reported < 5; ++i) {
    double g = values[i], w = want.values[i];
    bool ok = std::isnan(w) ? std::isnan(g)
              : std::isinf(w) || exact ? g == w
                                       : std::abs(g - w) <= tol.atol + tol.rtol * std::abs(w);
    if (!ok) {
      ++reported;
      ADD_FAILURE() << what << ", element " << i << ": engine gives " << g << ", PyTorch gives " << w
                    << " (difference " << (g - w) << ")";
    }
  }
}

void run_fixture_file(const std::string& file) {
  std::vector<FixtureCase> cases = load_cases(file);
  ASSERT_FALSE(cases.empty()) << file;
  for (const FixtureCase& c : cases) {
    SCOPED_TRACE(file + ": case " + c.name);
    auto op = engine_ops().find(c.name);
    if (op == engine_ops().end()) {
      ADD_FAILURE() << "no engine lambda for fixture case '" << c.name << "' (add one to engine_ops())";
      continue;
    }
    std::map<std::string, Tensor> inputs;
    for (const FixtureTensor& t : c.inputs) inputs[t.name] = t.make();
    Outs outs;
    try {
      outs = op->second(In(inputs));
    } catch (const std::exception& e) {
      ADD_FAILURE() << "the engine threw: " << e.what();
      continue;
    }
    ASSERT_EQ(outs.size(), c.outputs.size()) << "number of outputs";
    for (size_t i = 0; i < outs.size(); ++i)
      expect_matches(outs[i], c.outputs[i], tolerance_for(c.name, c.outputs[i].dtype), "output " + std::to_string(i));
  }
}

TEST(OpsForward, Elementwise) { run_fixture_file("elementwise.txt"); }
TEST(OpsForward, Reductions) { run_fixture_file("reduce.txt"); }
TEST(OpsForward, Matmul) { run_fixture_file("matmul.txt"); }
TEST(OpsForward, NeuralNetworkOps) { run_fixture_file("nn.txt"); }
TEST(OpsForward, Shapes) { run_fixture_file("shape.txt"); }

TEST(OpsForward, EveryEngineCaseHasAFixture) {
  std::set<std::string> in_fixtures;
  for (const std::string& file : kFixtureFiles)
    for (const FixtureCase& c : load_cases(file)) in_fixtures.insert(c.name);
  for (const auto& [name, fn] : engine_ops())
    EXPECT_TRUE(in_fixtures.count(name)) << "engine case '" << name << "' has no fixture; rerun make_fixtures.py";
}

TEST(OpsForward, ParserReadsExactValues) {
  // hex floats are exact, and the special values come through
  std::istringstream line("float32 2 1 4 0x1.8p+1 -inf nan 0x1.99999ap-4");
  FixtureTensor t = parse_tensor(line);
  EXPECT_EQ(t.shape, (Shape{1, 4}));
  EXPECT_EQ(t.values[0], 3.0);
  EXPECT_TRUE(std::isinf(t.values[1]) && t.values[1] < 0);
  EXPECT_TRUE(std::isnan(t.values[2]));
  EXPECT_EQ(float(t.values[3]), 0.1f);
  std::istringstream bad("float32 1 3 0x1p+0 0x1p+1");
  EXPECT_THROW(parse_tensor(bad), std::runtime_error);
}

}  // namespace
