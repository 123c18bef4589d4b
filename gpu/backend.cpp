// gpu/backend.cpp — the CUDA device: availability, the caching allocator, host↔device copies, and the
// Backend table that autograd reaches through Tensor::device(). Kernels live in elementwise.cu,
// reduce.cu and llama.cu, the cuBLAS products in matmul.cpp.
//
// Every kernel and copy runs on the legacy default stream, so GPU work is ordered exactly as the host
// issued it. That is what makes the caching allocator simple: a block freed by a tensor can be handed to
// the next allocation at once, because any kernel still reading it was queued earlier on the same stream.
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "gpu/check.h"
#include "gpu/gpu.h"
#include "gpu/kernels.h"

namespace gpu {

namespace detail {

void check_launch(const char* op) {
  static const bool sync_each_op = [] {
    const char* env = std::getenv("SCRATCHGRAD_CUDA_SYNC");
    return env && *env && std::strcmp(env, "0") != 0;
  }();
  check(cudaGetLastError(), op, "kernel launch");
  if (sync_each_op) check(cudaDeviceSynchronize(), op, "kernel (SCRATCHGRAD_CUDA_SYNC)");
}

}  // namespace detail

using detail::check;

// ---------------------------------------------------------------- availability

namespace {

struct Availability {
  int count = 0;
  std::string reason;
};

const Availability& availability() {
  static const Availability a = [] {
    Availability r;
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);  // fails cleanly (no crash) without a driver
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      r.reason = fmt::format("cudaGetDeviceCount: {} ({})", cudaGetErrorString(err), cudaGetErrorName(err));
    } else if (n == 0) {
      r.reason = "cudaGetDeviceCount found no CUDA device";
    }
    r.count = err == cudaSuccess ? n : 0;
    return r;
  }();
  return a;
}

}  // namespace

bool is_available() { return availability().count > 0; }
int device_count() { return availability().count; }
std::string unavailable_reason() { return availability().reason; }

std::string device_description() {
  if (!is_available()) return "no CUDA device (" + unavailable_reason() + ")";
  cudaDeviceProp prop{};
  GPU_CHECK(cudaGetDeviceProperties(&prop, 0), "device_description");
  int runtime = 0, driver = 0;
  (void)cudaRuntimeGetVersion(&runtime);
  (void)cudaDriverGetVersion(&driver);
  return fmt::format("{} (sm_{}{}, {:.1f} GiB, runtime {}.{}, driver {}.{})", prop.name, prop.major, prop.minor,
                     double(prop.totalGlobalMem) / double(1ull << 30), runtime / 1000, runtime % 1000 / 10,
                     driver / 1000, driver % 1000 / 10);
}

void synchronize() { GPU_CHECK(cudaDeviceSynchronize(), "synchronize"); }

// ---------------------------------------------------------------- caching allocator

namespace {

// Blocks are cudaMalloc'd (plain device memory, never managed memory) in rounded sizes — 512-byte steps up
// to 1 MiB, 2 MiB steps above — and kept in per-size free lists when their tensor dies. A training step
// allocates the same sizes every time, so after the first step it never calls cudaMalloc again.
class CachingAllocator {
 public:
  static size_t round(size_t nbytes) {
    constexpr size_t small = 512, large = size_t(2) << 20;
    nbytes = std::max<size_t>(nbytes, 1);
    return nbytes <= (size_t(1) << 20) ? (nbytes + small - 1) / small * small : (nbytes + large - 1) / large * large;
  }

  void* allocate(size_t nbytes) {
    const size_t size = round(nbytes);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.find(size);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        cached_ -= size;
        allocated_ += size;
        return p;
      }
    }
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, size);
    if (err == cudaErrorMemoryAllocation) {  // out of memory: give the cache back and try once more
      (void)cudaGetLastError();
      empty_cache();
      err = cudaMalloc(&p, size);
    }
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      throw std::runtime_error(fmt::format("gpu allocate: cudaMalloc of {} bytes failed: {} ({}); {} bytes in live "
                                           "tensors, {} cached",
                                           size, cudaGetErrorString(err), cudaGetErrorName(err), allocated(),
                                           cached()));
    }
    std::lock_guard<std::mutex> lock(mutex_);
    allocated_ += size;
    return p;
  }

  void deallocate(void* p, size_t nbytes) {
    if (!p) return;
    const size_t size = round(nbytes);
    std::lock_guard<std::mutex> lock(mutex_);
    free_[size].push_back(p);
    allocated_ -= size;
    cached_ += size;
  }

  void empty_cache() {
    std::unordered_map<size_t, std::vector<void*>> blocks;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      blocks.swap(free_);
      cached_ = 0;
    }
    // cudaFree waits for the device, so a block still read by a queued kernel is not freed under it
    for (auto& [size, list] : blocks)
      for (void* p : list) GPU_CHECK(cudaFree(p), "empty_cache");
  }

  size_t allocated() {
    std::lock_guard<std::mutex> lock(mutex_);
    return allocated_;
  }
  size_t cached() {
    std::lock_guard<std::mutex> lock(mutex_);
    return cached_;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  size_t allocated_ = 0, cached_ = 0;
};

// Never destroyed: tensors that outlive main() (statics) may still give their blocks back, and the CUDA
// runtime may already be gone by then. The driver reclaims everything at exit.
CachingAllocator& allocator() {
  static CachingAllocator* a = new CachingAllocator();
  return *a;
}

}  // namespace

size_t allocated_bytes() { return allocator().allocated(); }
size_t cached_bytes() { return allocator().cached(); }
void empty_cache() { allocator().empty_cache(); }

// ---------------------------------------------------------------- the Backend table

namespace {

using autograd::AdamStep;
using autograd::BinaryOp;
using autograd::Tensor;
using autograd::UnaryOp;

// Only device 0 is driven: Backend::allocate is not told which device it serves.
void check_device(const Tensor& t, const char* op) {
  if (t.device().index != 0)
    throw std::invalid_argument(fmt::format("gpu {}: tensor on {}; this backend drives cuda:0 only", op,
                                            t.device().str()));
}

class CudaBackend final : public autograd::Backend {
 public:
  std::string unusable_reason() const override { return is_available() ? std::string() : unavailable_reason(); }
  void* allocate(size_t nbytes) override { return allocator().allocate(nbytes); }
  void deallocate(void* p, size_t nbytes) override { allocator().deallocate(p, nbytes); }

  void copy(const Tensor& src, const Tensor& dst) override {
    check_device(dst, "copy");
    kernels::copy(src, dst);
  }
  void fill(const Tensor& dst, double value) override {
    check_device(dst, "fill");
    kernels::fill(dst, value);
  }
  void unary(UnaryOp op, const Tensor& in, const Tensor& out, double scalar) override {
    kernels::unary(op, in, out, scalar);
  }
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) override {
    kernels::binary(op, a, b, out);
  }
  void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) override {
    kernels::where(cond, a, b, out);
  }
  void sum_to(const Tensor& in, const Tensor& out) override { kernels::sum_to(in, out); }
  void max_dim(const Tensor& in, int64_t dim, const Tensor& values, const Tensor& indices) override {
    kernels::max_dim(in, dim, values, indices);
  }
  void matmul(const Tensor& a, const Tensor& b, const Tensor& out) override { kernels::matmul(a, b, out); }
  void softmax(const Tensor& in, int64_t dim, bool log, const Tensor& out) override {
    kernels::softmax(in, dim, log, out);
  }
  void softmax_backward(const Tensor& y, const Tensor& g, int64_t dim, bool log, const Tensor& gx) override {
    kernels::softmax_backward(y, g, dim, log, gx);
  }
  void index_select_rows(const Tensor& weight, const Tensor& index, const Tensor& out) override {
    kernels::index_select_rows(weight, index, out);
  }
  void index_add_rows(const Tensor& grad, const Tensor& index, const Tensor& grad_weight) override {
    kernels::index_add_rows(grad, index, grad_weight);
  }
  void gather_rows(const Tensor& values, const Tensor& index, int64_t skip, const Tensor& out) override {
    kernels::gather_rows(values, index, skip, out);
  }
  void scatter_rows(const Tensor& grad, const Tensor& index, int64_t skip, const Tensor& grad_values) override {
    kernels::scatter_rows(grad, index, skip, grad_values);
  }
  void silu(const Tensor& x, const Tensor& y) override { kernels::silu(x, y); }
  void silu_backward(const Tensor& grad_y, const Tensor& x, const Tensor& grad_x) override {
    kernels::silu_backward(grad_y, x, grad_x);
  }
  void rms_norm(const Tensor& x, const Tensor& weight, double eps, const Tensor& y, const Tensor& rstd) override {
    kernels::rms_norm(x, weight, eps, y, rstd);
  }
  void rms_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& rstd, const Tensor& weight,
                         const Tensor& grad_x, const Tensor& grad_weight) override {
    kernels::rms_norm_backward(grad_y, x, rstd, weight, grad_x, grad_weight);
  }
  void rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse,
                        const Tensor& out) override {
    kernels::rotary_embedding(x, cos, sin, inverse, out);
  }
  void adam_update(const AdamStep& step, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                   const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq) override {
    kernels::adam_update(step, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq);
  }

  // Synchronous copies on the default stream: after copy_to_cpu returns, the host sees every earlier
  // kernel's result; after copy_from_cpu returns, the host buffer may be freed.
  void copy_to_cpu(const Tensor& src, void* dst, size_t nbytes) override {
    if (nbytes == 0) return;
    GPU_CHECK(cudaMemcpy(dst, src.raw_data(), nbytes, cudaMemcpyDeviceToHost), "copy_to_cpu");
  }
  void copy_from_cpu(const void* src, const Tensor& dst, size_t nbytes) override {
    check_device(dst, "copy_from_cpu");
    if (nbytes == 0) return;
    GPU_CHECK(cudaMemcpy(dst.raw_data(), src, nbytes, cudaMemcpyHostToDevice), "copy_from_cpu");
  }
};

}  // namespace

autograd::Backend& backend() {
  static CudaBackend* instance = new CudaBackend();  // never destroyed, like the allocator
  return *instance;
}

}  // namespace gpu

// Registration at start-up. Nothing here touches CUDA, so a program without a GPU starts normally and
// only fails (with the CUDA error string) when it first puts a tensor on the GPU. The anchor symbol is
// what the link option in cmake/CUDA.cmake (-Wl,--undefined=...) asks for: it makes the linker take this
// object file out of libscratchgrad_gpu.a even though no program calls into it by name.
extern "C" {
extern const int scratchgrad_gpu_registered;
const int scratchgrad_gpu_registered = (autograd::register_backend(autograd::DeviceType::CUDA, &gpu::backend()), 1);
}
