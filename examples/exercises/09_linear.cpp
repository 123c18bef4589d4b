// Exercise 9: a Linear layer, and the weight initialisation that gives PyTorch's numbers.
//
// y = x Wᵀ + b, with W [out, in] and b [out], over the last dim of x [..., in].
//
// A module registers its parameters under PyTorch's names (register_parameter("weight", t) returns t
// marked requires_grad: keep that), so state_dict() keys match torch's. torch.nn.Linear fills them in
// this order, from the global generator that manual_seed(s) seeds:
//
//     weight ~ U(−bound, bound),  bound = √3 · gain / √in,  gain = √(2 / (1 + a²)),  a = √5
//     bias   ~ U(−1/√in, 1/√in)
//
// (kaiming_uniform_ with a = √5: the bound is 1/√in up to rounding; compute it in double, in that
// order, and uniform_(t, from, to) then draws PyTorch's very floats.)
//
// Check it:  make exercise N=9      Explained in: docs/nn.md ("How a module is built", "Initial values")
#include <cmath>

#include "exercises.h"

namespace exercises {

MyLinear::MyLinear(int64_t in_features, int64_t out_features, bool has_bias) {
  (void)in_features;
  (void)out_features;
  (void)has_bias;
  not_implemented(9);  // YOUR CODE: weight = empty({out, in}); uniform_(...); register_parameter(...); ...
}

Tensor MyLinear::forward(const Tensor& x) const {
  (void)x;
  not_implemented(9);  // YOUR CODE
}

}  // namespace exercises

// Hints, one at a time:
// 1. Order matters: the weight's draws first, then the bias's — each draw moves the generator.
// 2. The forward: linear(x, weight, bias) is the engine's fused x Wᵀ + b (PyTorch's addmm, whose bits
//    the workshop's numbers need at rung 14); x.matmul(weight.t()) + bias is the same to rounding.
// 3. Without a bias, leave `bias` undefined and register only the weight; linear() takes an undefined bias.
