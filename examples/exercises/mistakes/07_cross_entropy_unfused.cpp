// expect: Not stable
// A deliberate mistake for the checker's tests (tests/exercises/): log(softmax(x)), unfused.
#include "../exercises.h"

namespace exercises {

Tensor my_cross_entropy(const Tensor& logits, const Tensor& targets) {
  const int64_t N = logits.size(0), C = logits.size(1);
  Tensor is_target = eq(arange(C).view({1, C}), targets.view({N, 1})).to(logits.dtype());
  return -(log(softmax(logits, 1)) * is_target).sum() / double(N);
}

}  // namespace exercises
