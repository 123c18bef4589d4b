// bandwidth.h — the memory's read bandwidth, measured as a cached generation step reads its weights: what
// bench_gpt2_generate and bench_llama put beside a step as its bound (a step cannot read its weights faster).
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace bench {

// The memory's read bandwidth in GB/s, measured as a cached step reads: `bytes` (the weights' size) in a
// buffer of their own, read on the OpenMP team of `threads` that the products split over (the same threads
// on the same cores), best of kReadPasses passes. Each thread reads its share as kReadStreams interleaved
// streams, a cache line from each in turn, into independent sums: a step's x·Wᵀ reads rows of a weight side
// by side, and one stream alone keeps too few reads in flight (on two threads of the AMD EPYC here, one
// stream a thread read 25–45% slower than four: slower than a step reads its weights). The sums' total is
// printed, so the reads stay.
constexpr int kReadPasses = 10;
constexpr int64_t kReadStreams = 4;

inline uint64_t read_pass(const std::vector<uint64_t>& buffer, int64_t threads) {
  const int64_t lines = int64_t(buffer.size()) / 8;  // 64-byte cache lines of 8 words
  uint64_t total = 0;
#pragma omp parallel num_threads(int(threads)) reduction(+ : total)
  {
#ifdef _OPENMP
    const int64_t t = omp_get_thread_num(), n = omp_get_num_threads();
#else
    const int64_t t = 0, n = 1;
#endif
    const int64_t first = lines * t / n, count = lines * (t + 1) / n - first, per_stream = count / kReadStreams;
    const uint64_t* share = buffer.data() + first * 8;
    uint64_t sums[8] = {};
    for (int64_t i = 0; i < per_stream; ++i)
      for (int64_t s = 0; s < kReadStreams; ++s) {
        const uint64_t* line = share + (s * per_stream + i) * 8;
        for (int w = 0; w < 8; ++w) sums[w] += line[w];
      }
    for (int64_t i = per_stream * kReadStreams * 8; i < count * 8; ++i) sums[0] += share[i];  // the lines left over
    for (uint64_t x : sums) total += x;
  }
  return total;
}

inline double read_bandwidth_gb_s(double bytes, int64_t threads) {
  const std::vector<uint64_t> buffer(size_t(bytes / 8), 1);  // written once: every page is in memory
  double best_s = 1e30;
  uint64_t total = 0;
  for (int pass = 0; pass < kReadPasses; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    total += read_pass(buffer, threads);
    best_s = std::min(best_s, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  const double gb_s = double(buffer.size() * 8) / best_s / 1e9;
  std::printf("read bandwidth: %.2f GB/s on %lld thread(s), best of %d passes over a %.1f MB buffer, %lld streams a "
              "thread (checksum %llu)\n",
              gb_s, (long long)threads, kReadPasses, bytes / 1e6, (long long)kReadStreams, (unsigned long long)(total & 0xffff));
  return gb_s;
}

}  // namespace bench
