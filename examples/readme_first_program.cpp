// readme_first_program — the README's first program ("A first program"), kept here as an example: make step
// steps from its loss.backward() into the loops of its nodes (docs/autograd.md). tests/step/ checks that
// this file holds the README's code as it is.
#include <iostream>
#include "autograd/autograd.h"
using namespace autograd;

int main() {
  Tensor x = tensor({{1.0, 2.0}, {3.0, 4.0}}).requires_grad_();
  Tensor w = tensor({{0.5}, {-1.0}}).requires_grad_();
  Tensor y = softmax(x.matmul(w).t(), -1);  // a [1, 2] row of probabilities
  Tensor loss = (y * y).sum();
  loss.backward();
  std::cout << loss << "\n" << x.grad() << "\n" << w.grad() << "\n";
}
