// The order in which an op makes its graph's nodes is the code's, not the compiler's. C++ leaves the order
// of a call's arguments unspecified, and GCC's order differs between x86-64 and aarch64: linear, which made
// two nodes as arguments of one call, made them in opposite orders there, and the
// backward pass (newest node first) then ran, and added gradients, in opposite orders too. These pin the
// order the ops write out, one statement per node; on either CPU a return to the old form fails on one of
// them (make test-arm64 runs them on aarch64; tests/arm64/same_bits.sh compares a whole GPT's graph).
#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <set>
#include <string>

#include "autograd/autograd.h"
#include "tests/test_helpers.h"

namespace {

using namespace autograd;
using testing_helpers::leaf;

// The first node named `name` in the graph behind `root` (breadth first), or null.
std::shared_ptr<Node> find_node(const Tensor& root, const std::string& name) {
  std::deque<std::shared_ptr<Node>> queue = {root.grad_fn()};
  std::set<const Node*> seen;
  while (!queue.empty()) {
    std::shared_ptr<Node> node = queue.front();
    queue.pop_front();
    if (!node || !seen.insert(node.get()).second) continue;
    if (name == node->name) return node;
    for (const Edge& e : node->inputs) queue.push_back(e.node);
  }
  return nullptr;
}

}  // namespace

TEST(NodeOrder, LinearOnABatchTransposesTheWeightBeforeFlatteningTheRows) {
  const Tensor x = leaf({2, 3, 4}, 1), weight = leaf({5, 4}, 2), bias = leaf({5}, 3);
  const Tensor y = linear(x, weight, bias);
  const std::shared_ptr<Node> addmm = find_node(y, "AddmmBackward0");
  ASSERT_TRUE(addmm) << "linear on a batch records one AddmmBackward0";
  ASSERT_EQ(addmm->inputs.size(), 3u);
  const std::shared_ptr<Node>& rows = addmm->inputs[1].node;     // x flattened to [6, 4]
  const std::shared_ptr<Node>& weight_t = addmm->inputs[2].node;  // weight.t()
  ASSERT_TRUE(rows && weight_t);
  EXPECT_STREQ(weight_t->name, "TBackward0");
  EXPECT_LT(weight_t->sequence_nr, rows->sequence_nr) << "weight.t() is made first, then x's reshape ("
                                                      << rows->name << ")";
}

TEST(NodeOrder, ADotProductMakesTheColumnBeforeTheRow) {
  const Tensor a = leaf({7}, 4), b = leaf({7}, 5);
  const Tensor d = matmul(a, b);
  const std::shared_ptr<Node> dot = find_node(d, "DotBackward0");
  ASSERT_TRUE(dot) << "a 1-D matmul records DotBackward0";
  ASSERT_EQ(dot->inputs.size(), 2u);
  const std::shared_ptr<Node>& row = dot->inputs[0].node;     // a.unsqueeze(0)
  const std::shared_ptr<Node>& column = dot->inputs[1].node;  // b.unsqueeze(1)
  ASSERT_TRUE(row && column);
  EXPECT_LT(column->sequence_nr, row->sequence_nr) << "b.unsqueeze(1) is made first, then a.unsqueeze(0)";
}
