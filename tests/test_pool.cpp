// The block pool behind TensorImpl, Storage and Node (autograd/memory/pool.h).
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "autograd/autograd.h"
#include "autograd/memory/pool.h"

using namespace autograd;

namespace {
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kPoolOn = false;
#else
constexpr bool kPoolOn = true;
#endif
}  // namespace

TEST(Pool, FreedBlocksAreReusedOnTheSameThread) {
  if (!kPoolOn) GTEST_SKIP() << "the pool is off under AddressSanitizer";
  void* a = memory::pool_allocate(200);
  memory::pool_deallocate(a, 200);
  void* b = memory::pool_allocate(250);  // the same 64-byte class (193..256 bytes)
  EXPECT_EQ(a, b);
  memory::pool_deallocate(b, 250);
}

TEST(Pool, BlocksHoldWhatTheyWereAskedFor) {
  for (size_t bytes : {1, 63, 64, 65, 500, 1024, 1025, 5000}) {
    auto* p = static_cast<unsigned char*>(memory::pool_allocate(bytes));
    std::memset(p, 0xab, bytes);  // the whole block is writable (ASan/valgrind would notice otherwise)
    memory::pool_deallocate(p, bytes);
  }
}

TEST(Pool, ObjectsMayDieOnAnotherThread) {
  std::vector<std::shared_ptr<std::array<double, 20>>> made;
  for (int i = 0; i < 1000; ++i) made.push_back(memory::make_pooled<std::array<double, 20>>());
  std::thread other([&] { made.clear(); });  // their blocks go to the other thread's lists, freed at its exit
  other.join();
  std::thread maker([&] {
    for (int i = 0; i < 1000; ++i) made.push_back(memory::make_pooled<std::array<double, 20>>());
  });
  maker.join();
  made.clear();  // blocks made on a thread that has exited come back here
  SUCCEED();
}

TEST(Pool, TensorsAndGraphsStillWork) {
  for (int round = 0; round < 3; ++round) {  // later rounds run on recycled blocks
    Tensor x = ones({4, 3}).requires_grad_();
    Tensor y = (x * 2.0).sum();
    y.backward();
    EXPECT_EQ(x.grad().to_vector<float>(), std::vector<float>(12, 2.0f));
  }
}
