// test_dist.cpp — the dist API and nn::DistributedDataParallel, run by ctest as
// `mpirun -np 2 scratchgrad_dist_tests` (tests/CMakeLists.txt). Every rank runs every test: a collective
// must be called by all of them, and each rank checks its own result.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "nn/dist/data_parallel.h"
#include "nn/dist/distributed.h"
#include "nn/layers.h"
#include "ranks.h"

namespace {

using namespace autograd;

const std::vector<int64_t> kOddSizes = {1, 3, 7, 1001, 65537};  // below, at and past MPI's eager limits
const std::vector<DType> kDtypes = {DType::Float32, DType::Float64, DType::Int64};

// Element i of rank r's tensor: small integers, so every sum is exact in each dtype.
double value_at(int r, int64_t i) { return double((i * 7 + r * 13) % 101) - 50; }

Tensor rank_tensor(int r, int64_t n, DType dtype) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = value_at(r, i);
  return from_vector(v, {n}).to(dtype);
}

template <typename Reduce> std::vector<double> expected(int64_t n, Reduce reduce) {
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double acc = value_at(0, i);
    for (int r = 1; r < dist::world_size(); ++r) acc = reduce(acc, value_at(r, i));
    out[size_t(i)] = acc;
  }
  return out;
}

// The exception `call` throws, as text; fails the test if none is thrown.
template <typename F> std::string error_of(F call) {
  try {
    call();
  } catch (const std::exception& e) {
    return e.what();
  }
  ADD_FAILURE() << "no exception";
  return "";
}

TEST(Dist, EveryRankKnowsItsPlace) {
  EXPECT_EQ(dist::world_size(), 2) << "run under mpirun -np 2";
  EXPECT_GE(dist::rank(), 0);
  EXPECT_LT(dist::rank(), dist::world_size());
  EXPECT_TRUE(dist::launched_by_mpirun());
}

TEST(Dist, AllReduceSumsMaxesAndMinsOddSizesOfEveryDtype) {
  for (DType dtype : kDtypes)
    for (int64_t n : kOddSizes) {
      Tensor sum = rank_tensor(dist::rank(), n, dtype), max = sum.clone(), min = sum.clone();
      dist::all_reduce(sum, dist::ReduceOp::Sum);
      dist::all_reduce(max, dist::ReduceOp::Max);
      dist::all_reduce(min, dist::ReduceOp::Min);
      EXPECT_EQ(sum.dtype(), dtype);
      EXPECT_EQ(sum.to_vector<double>(), expected(n, [](double a, double b) { return a + b; })) << n;
      EXPECT_EQ(max.to_vector<double>(), expected(n, [](double a, double b) { return std::max(a, b); })) << n;
      EXPECT_EQ(min.to_vector<double>(), expected(n, [](double a, double b) { return std::min(a, b); })) << n;
    }
}

TEST(Dist, BroadcastCopiesTheRootsTensorFromEitherRoot) {
  for (int root = 0; root < dist::world_size(); ++root)
    for (DType dtype : kDtypes)
      for (int64_t n : kOddSizes) {
        Tensor t = rank_tensor(dist::rank(), n, dtype);
        dist::broadcast(t, root);
        EXPECT_EQ(t.to_vector<double>(), rank_tensor(root, n, dtype).to_vector<double>()) << n << " from " << root;
      }
}

TEST(Dist, AsyncAllReduceEqualsTheBlockingOne) {
  std::vector<Tensor> tensors;
  std::vector<dist::Work> works;
  for (int64_t n : kOddSizes) tensors.push_back(rank_tensor(dist::rank(), n, DType::Float32));
  for (Tensor& t : tensors) works.push_back(dist::all_reduce_async(t));  // several in flight at once
  for (dist::Work& w : works) w.wait();
  for (size_t k = 0; k < tensors.size(); ++k)
    EXPECT_EQ(tensors[k].to_vector<double>(), expected(kOddSizes[k], [](double a, double b) { return a + b; }));
}

TEST(Dist, AllGatherStacksTheRanksTensorsInRankOrder) {
  Tensor mine = rank_tensor(dist::rank(), 5, DType::Float64).view({5, 1});
  Tensor all = dist::all_gather(mine);
  ASSERT_EQ(all.shape(), (Shape{dist::world_size(), 5, 1}));
  for (int r = 0; r < dist::world_size(); ++r)
    EXPECT_EQ(all[r].to_vector<double>(), rank_tensor(r, 5, DType::Float64).to_vector<double>());
}

TEST(Dist, SumInRankOrderAddsThePartsOneAfterAnotherInRankOrder) {
  // Parts whose sum depends on the order of additions: big and small magnitudes.
  auto part = [](int r, int k) {
    return (rank_tensor(r, 33, DType::Float32) * std::pow(10.0, (r * 3 + k) % 7 - 3) + 0.1).contiguous();
  };
  const int per_rank = 3;
  std::vector<Tensor> mine;
  for (int k = 0; k < per_rank; ++k) mine.push_back(part(dist::rank(), k));
  Tensor total = dist::sum_in_rank_order(mine);
  Tensor reference = part(0, 0).clone();  // what one process adding every part in order gets
  for (int r = 0; r < dist::world_size(); ++r)
    for (int k = (r == 0 ? 1 : 0); k < per_rank; ++k) reference.add_(part(r, k));
  EXPECT_EQ(total.to_vector<float>(), reference.to_vector<float>());
}

TEST(Dist, BadTensorsAreRefusedNamingTheCallAndShape) {
  Tensor wide = zeros({3, 4});
  Tensor strided = wide.t();
  EXPECT_NE(error_of([&] { dist::all_reduce(strided); }).find("dist::all_reduce: the tensor of shape [4, 3] is not contiguous"),
            std::string::npos);
  Tensor flags = zeros({2}, DType::Bool);
  EXPECT_NE(error_of([&] { dist::broadcast(flags, 0); }).find("dist::broadcast: dtype bool is not supported"),
            std::string::npos);
  Tensor t = zeros({2});
  EXPECT_NE(error_of([&] { dist::broadcast(t, 5); }).find("root 5 is not a rank"), std::string::npos);
  // Different sizes on different ranks: every rank sees the disagreement and throws the same error.
  Tensor uneven = zeros({dist::rank() + 2});
  EXPECT_NE(error_of([&] { dist::all_reduce(uneven); }).find("the ranks passed different tensors (sizes 2 to 3"),
            std::string::npos);
  Tensor after = ones({4});  // and the ranks are still in step afterwards
  dist::all_reduce(after);
  EXPECT_EQ(after.to_vector<double>(), std::vector<double>(4, dist::world_size()));
}

// ---------------------------------------------------------------- DistributedDataParallel

struct TwoLayers : nn::Module {
  std::shared_ptr<nn::Linear> first, second;
  TwoLayers() {
    first = register_module("first", std::make_shared<nn::Linear>(6, 40));
    second = register_module("second", std::make_shared<nn::Linear>(40, 3));
  }
  Tensor operator()(const Tensor& x) const { return (*second)((*first)(x).tanh()); }
};

Tensor testing_input(int r) {
  std::vector<double> v;
  for (int i = 0; i < 5 * 6; ++i) v.push_back(std::sin(0.37 * i + r));
  return from_vector(v, {5, 6}).to(DType::Float32);
}
Tensor shard_loss(const TwoLayers& model, int r) { return model(testing_input(r)).pow(2.0).mean(); }

TEST(DataParallel, RankZerosParametersReachEveryRank) {
  manual_seed(100 + uint64_t(dist::rank()));  // each rank starts from different values
  TwoLayers model;
  nn::DistributedDataParallel ddp(model);
  for (const Tensor& p : model.parameters()) {
    Tensor gathered = dist::all_gather(p);
    for (int r = 1; r < dist::world_size(); ++r)
      EXPECT_EQ(gathered[r].to_vector<float>(), gathered[0].to_vector<float>());
  }
  Tensor mine = from_vector(std::vector<int64_t>{int64_t(dist::checksum(model.parameters()))}, {1});
  std::vector<int64_t> checksums = dist::all_gather(mine).to_vector<int64_t>();
  EXPECT_EQ(checksums[1], checksums[0]);
}

TEST(DataParallel, GradientsAreTheMeanOverTheRanksAndOverlapBackward) {
  manual_seed(7);
  TwoLayers model, reference;
  reference.load_state_dict(model.state_dict());
  // A small cap: one bucket per parameter, so three of the four start while backward still runs.
  nn::DistributedDataParallel ddp(model, {.bucket_cap_bytes = 1});
  EXPECT_EQ(ddp.bucket_sizes(), (std::vector<size_t>{1, 1, 1, 1}));
  shard_loss(model, dist::rank()).backward();
  ddp.finish_gradient_sync();
  EXPECT_EQ(ddp.buckets_started_in_backward(), 4);
  EXPECT_EQ(ddp.buckets_started_after_backward(), 0);
  // The reference: every rank's shard gradient, computed here one after another, summed and halved.
  std::vector<std::vector<float>> sum;
  for (int r = 0; r < dist::world_size(); ++r) {
    reference.zero_grad();
    shard_loss(reference, r).backward();
    std::vector<Tensor> params = reference.parameters();
    for (size_t k = 0; k < params.size(); ++k) {
      std::vector<float> g = params[k].grad().to_vector<float>();
      if (r == 0) sum.push_back(g);
      else
        for (size_t i = 0; i < g.size(); ++i) sum[k][i] += g[i];
    }
  }
  std::vector<Tensor> params = model.parameters();
  for (size_t k = 0; k < params.size(); ++k) {
    std::vector<float> mean = sum[k];
    for (float& x : mean) x = float(double(x) * (1.0 / dist::world_size()));
    EXPECT_EQ(params[k].grad().to_vector<float>(), mean) << "parameter " << k;  // two ranks: the same additions
  }
}

TEST(DataParallel, WithoutSyncBackwardOnlyAccumulatesAndBigBucketsWaitForTheEnd) {
  manual_seed(8);
  TwoLayers model;
  nn::DistributedDataParallel ddp(model, {.bucket_cap_bytes = size_t(1) << 20, .overlap = true});
  EXPECT_EQ(ddp.bucket_sizes(), (std::vector<size_t>{4}));  // everything fits one bucket
  ddp.set_require_sync(false);
  shard_loss(model, dist::rank()).backward();  // a first micro-batch: local only
  EXPECT_EQ(ddp.buckets_started_in_backward(), 0);
  ddp.set_require_sync(true);
  shard_loss(model, dist::rank()).backward();
  EXPECT_EQ(ddp.buckets_started_in_backward(), 1);  // the one bucket, when its last gradient (first.weight) arrived
  ddp.finish_gradient_sync();
  for (const Tensor& p : model.parameters()) {  // the mean is the same on every rank
    Tensor gathered = dist::all_gather(p.grad().contiguous());
    EXPECT_EQ(gathered[1].to_vector<float>(), gathered[0].to_vector<float>());
  }
}

TEST(DataParallel, TheTrainersChecksumCompareStopsOnAMismatch) {
  manual_seed(9);
  TwoLayers model;
  nn::DistributedDataParallel ddp(model);
  cli::Ranks ranks;
  EXPECT_NO_THROW(ranks.check_same_parameters(model, 6));
  if (dist::rank() == 1) {
    NoGradGuard no_grad;
    model.second->bias.add_(ones({3}) * 1e-6);
  }
  const std::string error = error_of([&] { ranks.check_same_parameters(model, 7); });
  EXPECT_NE(error.find("the ranks' parameters differ after step 7 (checksums rank 0:"), std::string::npos) << error;
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  dist::init();
  return RUN_ALL_TESTS();  // each rank prints its own results; mpirun fails if any rank does
}
