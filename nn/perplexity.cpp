// perplexity.cpp — the sliding-window loss.
#include "nn/perplexity.h"

#include <stdexcept>

#include <fmt/format.h>

namespace nn {

using namespace autograd;

TextLoss sliding_window_loss(const std::function<Tensor(const Tensor&)>& logits_of, const std::vector<int64_t>& ids,
                             int64_t context, int64_t stride) {
  if (ids.size() < 2) throw std::invalid_argument(fmt::format("sliding_window_loss: {} tokens, need at least 2", ids.size()));
  if (context < 1 || stride < 1 || stride > context)
    throw std::invalid_argument(
        fmt::format("sliding_window_loss: stride {} must be between 1 and the context {}", stride, context));
  NoGradGuard no_grad;
  const int64_t last = int64_t(ids.size()) - 1;  // the last id is only ever a target
  TextLoss loss;
  int64_t scored = 0;  // targets ids[1..scored] are done
  for (int64_t begin = 0;; begin += stride) {
    const int64_t end = std::min(begin + context, last);  // inputs ids[begin, end), targets ids[begin + 1, end + 1)
    const int64_t fresh = end - scored;                    // the window's last `fresh` targets are new
    const std::vector<int64_t> input(ids.begin() + begin, ids.begin() + end);
    const std::vector<int64_t> targets(ids.begin() + scored + 1, ids.begin() + end + 1);
    const Tensor logits = logits_of(from_vector(input, {1, end - begin}));
    const Tensor scored_logits = logits[0].narrow(0, end - begin - fresh, fresh);
    loss.total_nll += cross_entropy(scored_logits, from_vector(targets, {fresh})).item() * double(fresh);
    loss.predictions += fresh;
    scored = end;
    if (end == last) break;
  }
  return loss;
}

}  // namespace nn
