// bench_ops — Google Benchmark microbenchmarks of the ops the character model's training step is made of,
// at the seed's sizes (D 24, T 8, B 16, V 13) and at the large ones (D 256, T 128, B 32, 4 heads, V 65).
//
//   build/bin/bench_ops                                  all of them
//   build/bin/bench_ops --benchmark_filter=Matmul        some of them
//   SCRATCHGRAD_THREADS=2 build/bin/bench_ops            BLIS and the CPU kernels on 2 threads
//   SCRATCHGRAD_NUMERICS=exact build/bin/bench_ops       the exact kernels (default: fast, see numerics.h)
//
// Each reports a rate next to its time: GFLOP/s for products (2·M·N·K per matrix), GB/s for the
// memory-bound ops (bytes each element must at least be read and written once, float32).
// Forward ops run with no input requiring grad, so no graph is recorded: the kernel plus dispatch.
// Rates are per wall-clock second (UseRealTime), so BLIS's threads count; on a busy machine the CPU
// column (the calling thread's CPU time) is the steadier one. ("Library was built as DEBUG" is
// Debian's libbenchmark describing itself, not this program.)
#include <benchmark/benchmark.h>
#include <blis.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "autograd/backend.h"
#include "autograd/cpu/kernels.h"
#include "autograd/cpu/runtime/core_peak.h"
#include "nn/nn.h"
#include "optim/optim.h"

using namespace autograd;

namespace {

double numel(const Shape& s) {
  double n = 1;
  for (int64_t d : s) n *= double(d);
  return n;
}

Tensor random_input(const Shape& shape) { return randn(shape); }

void set_rate(benchmark::State& state, const char* name, double per_iteration) {
  state.counters[name] = benchmark::Counter(per_iteration, benchmark::Counter::kIsIterationInvariantRate);
}

// ---- matmul: a [.., M, K] @ b [.., K, N] ----

void matmul_bench(benchmark::State& state, Shape a_shape, Shape b_shape) {
  manual_seed(0);
  Tensor a = random_input(a_shape), b = random_input(b_shape);
  const int64_t M = a_shape[a_shape.size() - 2], K = a_shape.back(), N = b_shape.back();
  const double batch = numel(a_shape) / double(M * K);
  for (auto _ : state) benchmark::DoNotOptimize(matmul(a, b));
  set_rate(state, "FLOPS", 2.0 * batch * double(M) * double(N) * double(K));
}

// a [.., M, K] @ b [.., N, K]ᵀ, b a transposed view (q @ kᵀ as attention takes it, no copy)
void matmul_transposed_b_bench(benchmark::State& state, Shape a_shape, Shape b_shape) {
  manual_seed(0);
  Tensor a = random_input(a_shape), b = random_input(b_shape).mT();
  const int64_t M = a_shape[a_shape.size() - 2], K = a_shape.back(), N = b_shape[b_shape.size() - 2];
  const double batch = numel(a_shape) / double(M * K);
  for (auto _ : state) benchmark::DoNotOptimize(matmul(a, b));
  set_rate(state, "FLOPS", 2.0 * batch * double(M) * double(N) * double(K));
}

// The same product in each numerics (numerics.h) at a square size, beside BLIS's own sgemm called
// directly (the kernels BLIS chose for this CPU: skx on AVX-512 machines): the fast kernels' target is
// 90% of BLIS at 1024³.
// A (m x k) and B (k x n) from seed 0; a transposed operand is a transposed view of a contiguous tensor, as
// Linear's weight and the weight gradient's input are
std::pair<Tensor, Tensor> product_operands(int64_t m, int64_t n, int64_t k, bool a_t, bool b_t) {
  manual_seed(0);
  Tensor a = a_t ? random_input({k, m}).t() : random_input({m, k});
  Tensor b = b_t ? random_input({n, k}).t() : random_input({k, n});
  return {a, b};
}

void matmul_numerics_bench(benchmark::State& state, Numerics mode, int64_t m, int64_t n, int64_t k, bool a_t = false,
                           bool b_t = false) {
  const auto [a, b] = product_operands(m, n, k, a_t, b_t);
  NumericsGuard guard(mode);
  // one product untimed: the first output's pages are faulted in then (51 MB at GPT-2's head), and
  // later ones reuse its buffer from the cache, as a training step's products do
  benchmark::DoNotOptimize(matmul(a, b));
  for (auto _ : state) benchmark::DoNotOptimize(matmul(a, b));
  set_rate(state, "FLOPS", 2.0 * double(m) * double(n) * double(k));
}

// The same product in fast numerics with the caches emptied before each one: 256 MB written first, more than
// the last-level cache of the machines here, so that its operands come from memory, as a training step's
// weights do, where the repetitions above find them in the cache. Timed by hand, the emptying left out.
void matmul_cold_bench(benchmark::State& state, int64_t m, int64_t n, int64_t k, bool a_t, bool b_t) {
  const auto [a, b] = product_operands(m, n, k, a_t, b_t);
  NumericsGuard guard(Numerics::fast);
  std::vector<float> sweep(size_t(64) << 20);
  benchmark::DoNotOptimize(matmul(a, b));
  for (auto _ : state) {
    for (size_t i = 0; i < sweep.size(); i += 16) sweep[i] += 1.0f;  // one store in each 64-byte line
    benchmark::ClobberMemory();
    const auto start = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(matmul(a, b));
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  set_rate(state, "FLOPS", 2.0 * double(m) * double(n) * double(k));
}

void blis_sgemm_bench(benchmark::State& state, int64_t m, int64_t n, int64_t k, bool a_t = false, bool b_t = false) {
  manual_seed(0);
  Tensor a = random_input(a_t ? Shape{k, m} : Shape{m, k}), b = random_input(b_t ? Shape{n, k} : Shape{k, n});
  Tensor c = zeros({m, n});
  float one = 1, zero = 0;
  // BLIS takes each operand's row and column strides: a transposed operand is the same memory read
  // with them swapped
  const int64_t ars = a_t ? 1 : k, acs = a_t ? m : 1, brs = b_t ? 1 : n, bcs = b_t ? k : 1;
  for (auto _ : state) {
    bli_sgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, m, n, k, &one, static_cast<float*>(a.raw_data()), ars, acs,
              static_cast<float*>(b.raw_data()), brs, bcs, &zero, static_cast<float*>(c.raw_data()), n, 1);
    benchmark::ClobberMemory();
  }
  state.SetLabel(blis_kernel_name());
  set_rate(state, "FLOPS", 2.0 * double(m) * double(n) * double(k));
}

// x @ W^T as nn::Linear does it (the weight passed as a transposed view, no copy), with the bias.
void linear_bench(benchmark::State& state, int64_t rows, int64_t in, int64_t out) {
  manual_seed(0);
  Tensor x = random_input({rows, in}), w = random_input({out, in}), bias = random_input({out});
  for (auto _ : state) benchmark::DoNotOptimize(linear(x, w, bias));
  set_rate(state, "FLOPS", 2.0 * double(rows) * double(in) * double(out));
}

// ---- causal attention, forward and backward: the dense ops, causal_scores / tril_matmul, and the flash op ----
// softmax(masked(q kᵀ / √d)) @ v on [B, T, d], then backward from a fixed gradient. FLOPS counts the
// dense products (6 of B·T·T·d multiply-adds), so the skipping variant's rate shows what it saves.
enum class Attention { dense, skipping, flash };
void causal_attention_bench(benchmark::State& state, int64_t B, int64_t T, int64_t d, Attention kind) {
  manual_seed(0);
  Tensor q = random_input({B, T, d}).requires_grad_(), k = random_input({B, T, d}).requires_grad_();
  Tensor v = random_input({B, T, d}).requires_grad_(), g = random_input({B, T, d});
  const Tensor blocked = ones({T, T}, DType::Bool).triu(1);
  const double scale = std::sqrt(double(d));
  for (auto _ : state) {
    Tensor out = kind == Attention::flash ? scaled_dot_product_attention(q, k, v, /*causal=*/true)
                 : kind == Attention::skipping
                     ? tril_matmul(softmax(causal_scores(q, k, scale), -1), v)
                     : matmul(softmax((matmul(q, k.mT()) / scale).masked_fill(blocked, -std::numeric_limits<double>::infinity()), -1), v);
    out.backward(g);
    for (const Tensor* t : {&q, &k, &v}) t->set_grad(Tensor());  // as zero_grad(set_to_none=True)
  }
  set_rate(state, "FLOPS", 2.0 * 6.0 * double(B) * double(T) * double(T) * double(d));
}

// The same on gpt6's heads: q, k, v [B, T, H, hd] seen as [B, H, T, hd] (the layout nn::MultiHeadAttention
// hands the ops), √hd = 8; causal_scores alone too. FLOPS as above: the dense products.
void causal_attention_heads_bench(benchmark::State& state, int64_t B, int64_t T, int64_t H, int64_t hd, bool scores_only) {
  manual_seed(0);
  auto heads = [&] { return random_input({B, T, H, hd}).requires_grad_(); };
  Tensor q = heads(), k = heads(), v = heads(), g = random_input({B, T, H, hd});
  const double scale = std::sqrt(double(hd));
  for (auto _ : state) {
    if (scores_only) {
      NoGradGuard no_grad;
      benchmark::DoNotOptimize(causal_scores(q.transpose(1, 2), k.transpose(1, 2), scale));
      continue;
    }
    Tensor out = tril_matmul(softmax(causal_scores(q.transpose(1, 2), k.transpose(1, 2), scale), -1), v.transpose(1, 2));
    out.transpose(1, 2).backward(g);
    for (const Tensor* t : {&q, &k, &v}) t->set_grad(Tensor());
  }
  set_rate(state, "FLOPS", 2.0 * (scores_only ? 1.0 : 6.0) * double(B * H) * double(T) * double(T) * double(hd));
}

// ---- memory-bound ops ----

void softmax_bench(benchmark::State& state, Shape shape) {
  manual_seed(0);
  Tensor x = random_input(shape);
  for (auto _ : state) benchmark::DoNotOptimize(softmax(x, -1));
  set_rate(state, "bytes", 2.0 * 4.0 * numel(shape));  // read x, write the result
}

// The GPT feed-forward's GELU (tanh form) over [rows, cols]: forward, or backward (the kernel that turns
// dy into dx, called directly: the graph's bookkeeping is not timed). Numerics: SCRATCHGRAD_NUMERICS.
void gelu_bench(benchmark::State& state, Shape shape, bool backward) {
  manual_seed(0);
  Tensor x = random_input(shape), dy = random_input(shape), out = empty(shape);
  Backend& cpu = backend(Device::cpu());
  for (auto _ : state) {
    if (backward) cpu.gelu_backward(dy, x, /*tanh=*/true, out);
    else cpu.gelu(x, /*tanh=*/true, out);
    benchmark::DoNotOptimize(out.raw_data());
  }
  set_rate(state, "bytes", (backward ? 3.0 : 2.0) * 4.0 * numel(shape));
}

// layer_norm over the last dim of [rows, cols], with a weight and a bias: forward, or backward (dx, dγ, dβ).
void layer_norm_bench(benchmark::State& state, int64_t rows, int64_t cols, bool backward) {
  manual_seed(0);
  Tensor x = random_input({rows, cols}), dy = random_input({rows, cols}), y = empty({rows, cols});
  Tensor weight = random_input({cols}), bias = random_input({cols}), mean = empty({rows}), rstd = empty({rows});
  Tensor dx = empty({rows, cols}), dweight = empty({cols}), dbias = empty({cols});
  Backend& cpu = backend(Device::cpu());
  cpu.layer_norm(x, weight, bias, 1e-5, y, mean, rstd);
  for (auto _ : state) {
    if (backward) cpu.layer_norm_backward(dy, x, mean, rstd, weight, dx, dweight, dbias);
    else cpu.layer_norm(x, weight, bias, 1e-5, y, mean, rstd);
    benchmark::DoNotOptimize(backward ? dx.raw_data() : y.raw_data());
  }
  set_rate(state, "bytes", (backward ? 3.0 : 2.0) * 4.0 * double(rows * cols));
}

// The attention mask: x [.., T, T] where a broadcast [T, T] bool mask says "blocked" above the diagonal.
void masked_fill_bench(benchmark::State& state, Shape shape) {
  manual_seed(0);
  const int64_t T = shape.back();
  Tensor x = random_input(shape);
  Tensor blocked = tril(ones({T, T})) == 0.0;
  const double neg_inf = -std::numeric_limits<double>::infinity();
  for (auto _ : state) benchmark::DoNotOptimize(masked_fill(x, blocked, neg_inf));
  set_rate(state, "bytes", 2.0 * 4.0 * numel(shape));
}

// Backward of tok(idx): scatter-add of [B, T, D] gradient rows into a [V, D] table gradient. The forward
// graph is kept (retain_graph) and the table's .grad cleared each time, so only the backward is timed.
void embedding_backward_bench(benchmark::State& state, int64_t V, int64_t D, int64_t B, int64_t T) {
  manual_seed(0);
  Tensor weight = random_input({V, D}).requires_grad_();
  Tensor idx = randint(0, V, {B, T});
  Tensor out = embedding(weight, idx);
  Tensor grad = random_input({B, T, D});
  for (auto _ : state) {
    out.backward(grad, /*retain_graph=*/true);
    weight.set_grad(Tensor());
  }
  set_rate(state, "bytes", 4.0 * (double(B * T * D) + double(V * D)));  // read the rows, write the table
}

// cross_entropy(logits [N, V], targets [N]) forward and backward, as the training step runs it.
void cross_entropy_bench(benchmark::State& state, int64_t N, int64_t V) {
  manual_seed(0);
  Tensor logits = random_input({N, V}).requires_grad_();
  Tensor targets = randint(0, V, {N});
  for (auto _ : state) {
    Tensor loss = cross_entropy(logits, targets);
    loss.backward();
    logits.set_grad(Tensor());
  }
  set_rate(state, "bytes", 2.0 * 4.0 * double(N * V));  // forward reads logits, backward writes their grad
}

// One Adam step over the parameters of a char model whose grads come from one real training step.
void adam_step_bench(benchmark::State& state, int64_t D, int64_t T, int64_t heads, int64_t V) {
  manual_seed(7);
  nn::MiniSelfAttention model({.vocab = V, .dim = D, .context = T, .heads = heads});
  optim::Adam opt(model.parameters(), {.lr = 0.01});
  Tensor idx = randint(0, V, {4, T}), targets = randint(0, V, {4 * T});
  cross_entropy(model(idx).view({-1, V}), targets).backward();
  for (auto _ : state) opt.step();
  // each parameter: read param, grad, exp_avg, exp_avg_sq; write param, exp_avg, exp_avg_sq
  set_rate(state, "bytes", 7.0 * 4.0 * double(model.num_parameters()));
  state.counters["params"] = double(model.num_parameters());
}

// ---- one core's arithmetic peak: the ceiling the product rates above are fractions of ----
// The library's FMA loop (autograd/cpu/runtime/core_peak.h, which the MFU figures of bench_gpt2_train and
// the trainer divide by): fused (the fast kernels' way) or a multiply then an add (the exact kernels' way).
// bits: 256 (AVX2, 8 floats, 12 chains) or 512 (AVX-512, 16 floats, 24 chains)
void core_peak_bench(benchmark::State& state, int bits, bool fused) {
  constexpr int64_t kPeakRounds = 1 << 14;  // rounds per benchmark iteration
  if (autograd::cpu::core_peak_rounds(bits, fused, 1) == 0) {
    state.SkipWithError(bits == 512 ? "this CPU has no AVX-512" : "this CPU has no AVX2 with FMA");
    return;
  }
  double flops = 0;
  for (auto _ : state) flops = autograd::cpu::core_peak_rounds(bits, fused, kPeakRounds);
  set_rate(state, "FLOPS", flops);
}

// The bfloat16 peak: 24 chains of vdpbf16ps (32 multiply-adds into 16 float32 lanes each), the ceiling of
// the bfloat16 products below (cpu/kernels/matmul_bfloat16.cpp).
void core_peak_bf16_bench(benchmark::State& state) {
  constexpr int64_t kPeakRounds = 1 << 14;
  if (autograd::cpu::bfloat16_peak_rounds(1) == 0) {
    state.SkipWithError("this CPU has no AVX512_BF16");
    return;
  }
  double flops = 0;
  for (auto _ : state) flops = autograd::cpu::bfloat16_peak_rounds(kPeakRounds);
  set_rate(state, "FLOPS", flops);
}

// The peak of the path bfloat16 products take on this CPU (core_peak.h's bfloat16_core_peak_flops, which a
// bf16 run's MFU divides by): the vdpbf16ps loop above where the CPU has AVX512_BF16, else the float32 FMA
// loop at the width the fast kernels use (the portable path widens, then multiplies in float32). The label
// names the path.
void core_peak_bf16_path_bench(benchmark::State& state) {
  constexpr int64_t kPeakRounds = 1 << 14;
  const bool dot = autograd::cpu::bfloat16_peak_rounds(1) > 0;
  const int bits = autograd::cpu::core_peak_rounds(512, true, 1) > 0 && std::string(autograd::cpu::core_peak_isa()) == "avx512"
                       ? 512
                       : autograd::cpu::core_peak_rounds(256, true, 1) > 0 ? 256 : 128;
  if (!dot && autograd::cpu::core_peak_rounds(bits, true, 1) == 0) {
    state.SkipWithError("this CPU has no vector FMA loop");
    return;
  }
  double flops = 0;
  for (auto _ : state)
    flops = dot ? autograd::cpu::bfloat16_peak_rounds(kPeakRounds) : autograd::cpu::core_peak_rounds(bits, true, kPeakRounds);
  state.SetLabel(std::string(autograd::cpu::bfloat16_kernel_name()) + (dot ? ": vdpbf16ps" : ": float32 FMA"));
  set_rate(state, "FLOPS", flops);
}

// The bfloat16 product kernel (bfloat16 operands, float32 sums and output) on the operands of
// matmul_numerics_bench rounded to bfloat16: the rate to set beside the float32 kernels' at the same size.
void matmul_bf16_bench(benchmark::State& state, int64_t m, int64_t n, int64_t k, bool a_t = false, bool b_t = false) {
  const auto [a32, b32] = product_operands(m, n, k, a_t, b_t);
  // a transposed operand stays a transposed view (rounded in its own layout), as in the float32 benches
  const Tensor a_view = a_t ? a32.t().to(DType::BFloat16).t() : a32.to(DType::BFloat16);
  const Tensor b_view = b_t ? b32.t().to(DType::BFloat16).t() : b32.to(DType::BFloat16);
  Tensor out = empty({m, n});
  autograd::cpu::bfloat16_matmul(a_view, b_view, out);
  for (auto _ : state) {
    autograd::cpu::bfloat16_matmul(a_view, b_view, out);
    benchmark::ClobberMemory();
  }
  state.SetLabel(autograd::cpu::bfloat16_kernel_name());
  set_rate(state, "FLOPS", 2.0 * double(m) * double(n) * double(k));
}

// One row times every Linear weight of `blocks` SmolLM2-135M blocks (q, k, v, o: 576 wide, 3 kv heads of 64;
// gate, up, down: 1536), as a cached generation step reads them: 14.2 MB a block, the blocks together larger
// than the L3 cache, so each weight comes from memory. The rate is the weights' bytes a second: the
// one-row kernel's share of bench_llama's bandwidth bound (bench/bandwidth.h) without the rest of the step.
// In place (x·Wᵀ reading W as it is) or packed (panel_linear on pack_panels(W), autograd/ops/panels.cpp).
void row_products_bench(benchmark::State& state, int64_t blocks, DType dtype, bool packed) {
  manual_seed(0);
  const int64_t d = 576, kv = 192, ffn = 1536;
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{d, d}, {kv, d}, {kv, d}, {d, d}, {ffn, d}, {ffn, d}, {d, ffn}};
  std::vector<Tensor> weights;  // [N, K], used transposed as Linear uses them
  double bytes = 0;
  for (int64_t b = 0; b < blocks; ++b)
    for (const auto& [n, k] : shapes) {
      weights.push_back(random_input({n, k}).to(dtype));
      bytes += double(n * k) * double(dtype_size(dtype));
    }
  const Tensor x = random_input({1, d}).to(dtype), x_wide = random_input({1, ffn}).to(dtype);
  std::vector<std::pair<Tensor, int64_t>> panels;  // packed: what nn::pack_weights_for_generation makes
  if (packed)
    for (Tensor& w : weights) {
      panels.emplace_back(pack_panels(w), w.size(0));
      w = Tensor();  // (the packed copy replaces it, as in a packed model)
    }
  for (auto _ : state) {
    if (packed)
      for (const auto& [p, n] : panels) benchmark::DoNotOptimize(panel_linear(p.size(1) == d ? x : x_wide, p, n));
    else
      for (const Tensor& w : weights) benchmark::DoNotOptimize(matmul(w.size(1) == d ? x : x_wide, w.t()));
  }
  set_rate(state, "bytes", bytes);
}

}  // namespace

// seed sizes: D 24, T 8, B 16 (128 rows), V 13
BENCHMARK_CAPTURE(matmul_bench, seed_128x24x24, Shape{128, 24}, Shape{24, 24})->UseRealTime();
BENCHMARK_CAPTURE(matmul_bench, seed_batched_16x8x24x8, Shape{16, 8, 24}, Shape{16, 24, 8})->UseRealTime();
BENCHMARK_CAPTURE(linear_bench, seed_128x24_to_24, 128, 24, 24)->UseRealTime();
// large: D 256, T 128, B 32 (4096 rows); the batched product is 32 sequences of 128x64 @ 64x128
BENCHMARK_CAPTURE(matmul_bench, large_4096x256x256, Shape{4096, 256}, Shape{256, 256})->UseRealTime();
BENCHMARK_CAPTURE(matmul_bench, large_batched_32x128x64x128, Shape{32, 128, 64}, Shape{32, 64, 128})->UseRealTime();
BENCHMARK_CAPTURE(linear_bench, large_4096x256_to_256, 4096, 256, 256)->UseRealTime();
BENCHMARK_CAPTURE(matmul_numerics_bench, exact_1024x1024x1024, Numerics::exact, 1024, 1024, 1024)->UseRealTime();
BENCHMARK_CAPTURE(matmul_numerics_bench, fast_1024x1024x1024, Numerics::fast, 1024, 1024, 1024)->UseRealTime();
BENCHMARK_CAPTURE(blis_sgemm_bench, blis_1024x1024x1024, 1024, 1024, 1024)->UseRealTime();
BENCHMARK_CAPTURE(matmul_numerics_bench, exact_4096x256x256, Numerics::exact, 4096, 256, 256)->UseRealTime();
BENCHMARK_CAPTURE(matmul_numerics_bench, fast_4096x256x256, Numerics::fast, 4096, 256, 256)->UseRealTime();
BENCHMARK_CAPTURE(blis_sgemm_bench, blis_4096x256x256, 4096, 256, 256)->UseRealTime();
// gpt6's feed-forward products (4096 rows, D 256, 4D 1024), fast beside BLIS: forward x·Wᵀ (the weight
// a transposed view), the input gradient g·W, the weight gradient gᵀ·x (the gradient a transposed view)
BENCHMARK_CAPTURE(matmul_numerics_bench, fast_gpt6_expand_4096x1024x256_bt, Numerics::fast, 4096, 1024, 256, false, true)->UseRealTime();
BENCHMARK_CAPTURE(blis_sgemm_bench, blis_gpt6_expand_4096x1024x256_bt, 4096, 1024, 256, false, true)->UseRealTime();
BENCHMARK_CAPTURE(matmul_numerics_bench, fast_gpt6_contract_4096x256x1024_bt, Numerics::fast, 4096, 256, 1024, false, true)->UseRealTime();
BENCHMARK_CAPTURE(blis_sgemm_bench, blis_gpt6_contract_4096x256x1024_bt, 4096, 256, 1024, false, true)->UseRealTime();
BENCHMARK_CAPTURE(matmul_numerics_bench, fast_gpt6_input_grad_4096x256x1024, Numerics::fast, 4096, 256, 1024)->UseRealTime();
BENCHMARK_CAPTURE(blis_sgemm_bench, blis_gpt6_input_grad_4096x256x1024, 4096, 256, 1024)->UseRealTime();
BENCHMARK_CAPTURE(matmul_numerics_bench, fast_gpt6_weight_grad_1024x256x4096_at, Numerics::fast, 1024, 256, 4096, true, false)->UseRealTime();
BENCHMARK_CAPTURE(blis_sgemm_bench, blis_gpt6_weight_grad_1024x256x4096_at, 1024, 256, 4096, true, false)->UseRealTime();
BENCHMARK_CAPTURE(matmul_numerics_bench, fast_gpt6_weight_grad_256x1024x4096_at, Numerics::fast, 256, 1024, 4096, true, false)->UseRealTime();
BENCHMARK_CAPTURE(blis_sgemm_bench, blis_gpt6_weight_grad_256x1024x4096_at, 256, 1024, 4096, true, false)->UseRealTime();
// GPT-2 124M's training step at B 4, T 64 (256 rows, D 768; bench_gpt2_train): each Linear's three products,
// fast beside BLIS. Forward x·Wᵀ (bt), the input gradient g·W, the weight gradient gᵀ·x (at); per block
// q, k, v and the projection (768 → 768 each; GPT-2's fused c_attn, 768 → 2304, for comparison), the
// feed-forward's expand (768 → 3072) and contract (3072 → 768); once, the head tied to the embedding
// (768 → 50257). Their FLOPs weighted by these rates give the step's time in products alone (docs/gpt2.md).
BENCHMARK_CAPTURE(matmul_numerics_bench, fast_gpt2_qkv_forward_256x2304x768_bt, Numerics::fast, 256, 2304, 768, false, true)->UseRealTime();
BENCHMARK_CAPTURE(blis_sgemm_bench, blis_gpt2_qkv_forward_256x2304x768_bt, 256, 2304, 768, false, true)->UseRealTime();
BENCHMARK_CAPTURE(matmul_numerics_bench, fast_gpt2_qkv_input_grad_256x768x2304, Numerics::fast, 256, 768, 2304, false, false)->UseRealTime();
BENCHMARK_CAPTURE(blis_sgemm_bench, blis_gpt2_qkv_input_grad_256x768x2304, 256, 768, 2304, false, false)->UseRealTime();
BENCHMARK_CAPTURE(matmul_numerics_bench, fast_gpt2_qkv_weight_grad_2304x768x256_at, Numerics::fast, 2304, 768, 256, true, false)->UseRealTime();
BENCHMARK_CAPTURE(blis_sgemm_bench, blis_gpt2_qkv_weight_grad_2304x768x256_at, 2304, 768, 256, true, false)->UseRealTime();
BENCHMARK_CAPTURE(matmul_numerics_bench, fast_gpt2_proj_forward_256x768x768_bt, Numerics::fast, 256, 768, 768, false, true)->UseRealTime();
BENCHMARK_CAPTURE(blis_sgemm_bench, blis_gpt2_proj_forward_256x768x768_bt, 256, 768, 768, false, true)->UseRealTime();
BENCHMARK_CAPTURE(matmul_numerics_bench, fast_gpt2_proj_input_grad_256x768x768, Numerics::fast, 256, 768, 768, false, false)->UseRealTime();
BENCHMARK_CAPTURE(blis_sgemm_bench, blis_gpt2_proj_input_grad_256x768x768, 256, 768, 768, false, false)->UseRealTime();
BENCHMARK_CAPTURE(matmul_numerics_bench, fast_gpt2_proj_weight_grad_768x768x256_at, Numerics::fast, 768, 768, 256, true, false)->UseRealTime();
BENCHMARK_CAPTURE(blis_sgemm_bench, blis_gpt2_proj_weight_grad_768x768x256_at, 768, 768, 256, true, false)->UseRealTime();
BENCHMARK_CAPTURE(matmul_numerics_bench, fast_gpt2_expand_forward_256x3072x768_bt, Numerics::fast, 256, 3072, 768, false, true)->UseRealTime();
BENCHMARK_CAPTURE(blis_sgemm_bench, blis_gpt2_expand_forward_256x3072x768_bt, 256, 3072, 768, false, true)->UseRealTime();
BENCHMARK_CAPTURE(matmul_numerics_bench, fast_gpt2_expand_input_grad_256x768x3072, Numerics::fast, 256, 768, 3072, false, false)->UseRealTime();
BENCHMARK_CAPTURE(blis_sgemm_bench, blis_gpt2_expand_input_grad_256x768x3072, 256, 768, 3072, false, false)->UseRealTime();
BENCHMARK_CAPTURE(matmul_numerics_bench, fast_gpt2_expand_weight_grad_3072x768x256_at, Numerics::fast, 3072, 768, 256, true, false)->UseRealTime();
BENCHMARK_CAPTURE(blis_sgemm_bench, blis_gpt2_expand_weight_grad_3072x768x256_at, 3072, 768, 256, true, false)->UseRealTime();
BENCHMARK_CAPTURE(matmul_numerics_bench, fast_gpt2_contract_forward_256x768x3072_bt, Numerics::fast, 256, 768, 3072, false, true)->UseRealTime();
BENCHMARK_CAPTURE(blis_sgemm_bench, blis_gpt2_contract_forward_256x768x3072_bt, 256, 768, 3072, false, true)->UseRealTime();
BENCHMARK_CAPTURE(matmul_numerics_bench, fast_gpt2_contract_input_grad_256x3072x768, Numerics::fast, 256, 3072, 768, false, false)->UseRealTime();
BENCHMARK_CAPTURE(blis_sgemm_bench, blis_gpt2_contract_input_grad_256x3072x768, 256, 3072, 768, false, false)->UseRealTime();
BENCHMARK_CAPTURE(matmul_numerics_bench, fast_gpt2_contract_weight_grad_768x3072x256_at, Numerics::fast, 768, 3072, 256, true, false)->UseRealTime();
BENCHMARK_CAPTURE(blis_sgemm_bench, blis_gpt2_contract_weight_grad_768x3072x256_at, 768, 3072, 256, true, false)->UseRealTime();
BENCHMARK_CAPTURE(matmul_numerics_bench, fast_gpt2_head_forward_256x50257x768_bt, Numerics::fast, 256, 50257, 768, false, true)->UseRealTime();
BENCHMARK_CAPTURE(blis_sgemm_bench, blis_gpt2_head_forward_256x50257x768_bt, 256, 50257, 768, false, true)->UseRealTime();
BENCHMARK_CAPTURE(matmul_numerics_bench, fast_gpt2_head_input_grad_256x768x50257, Numerics::fast, 256, 768, 50257, false, false)->UseRealTime();
BENCHMARK_CAPTURE(blis_sgemm_bench, blis_gpt2_head_input_grad_256x768x50257, 256, 768, 50257, false, false)->UseRealTime();
BENCHMARK_CAPTURE(matmul_numerics_bench, fast_gpt2_head_weight_grad_50257x768x256_at, Numerics::fast, 50257, 768, 256, true, false)->UseRealTime();
BENCHMARK_CAPTURE(blis_sgemm_bench, blis_gpt2_head_weight_grad_50257x768x256_at, 50257, 768, 256, true, false)->UseRealTime();
// The same products with cold caches (matmul_cold_bench): inside a step their operands come from memory.
BENCHMARK_CAPTURE(matmul_cold_bench, fast_cold_gpt2_qkv_forward_256x2304x768_bt, 256, 2304, 768, false, true)->UseManualTime();
BENCHMARK_CAPTURE(matmul_cold_bench, fast_cold_gpt2_qkv_input_grad_256x768x2304, 256, 768, 2304, false, false)->UseManualTime();
BENCHMARK_CAPTURE(matmul_cold_bench, fast_cold_gpt2_qkv_weight_grad_2304x768x256_at, 2304, 768, 256, true, false)->UseManualTime();
BENCHMARK_CAPTURE(matmul_cold_bench, fast_cold_gpt2_proj_forward_256x768x768_bt, 256, 768, 768, false, true)->UseManualTime();
BENCHMARK_CAPTURE(matmul_cold_bench, fast_cold_gpt2_proj_input_grad_256x768x768, 256, 768, 768, false, false)->UseManualTime();
BENCHMARK_CAPTURE(matmul_cold_bench, fast_cold_gpt2_proj_weight_grad_768x768x256_at, 768, 768, 256, true, false)->UseManualTime();
BENCHMARK_CAPTURE(matmul_cold_bench, fast_cold_gpt2_expand_forward_256x3072x768_bt, 256, 3072, 768, false, true)->UseManualTime();
BENCHMARK_CAPTURE(matmul_cold_bench, fast_cold_gpt2_expand_input_grad_256x768x3072, 256, 768, 3072, false, false)->UseManualTime();
BENCHMARK_CAPTURE(matmul_cold_bench, fast_cold_gpt2_expand_weight_grad_3072x768x256_at, 3072, 768, 256, true, false)->UseManualTime();
BENCHMARK_CAPTURE(matmul_cold_bench, fast_cold_gpt2_contract_forward_256x768x3072_bt, 256, 768, 3072, false, true)->UseManualTime();
BENCHMARK_CAPTURE(matmul_cold_bench, fast_cold_gpt2_contract_input_grad_256x3072x768, 256, 3072, 768, false, false)->UseManualTime();
BENCHMARK_CAPTURE(matmul_cold_bench, fast_cold_gpt2_contract_weight_grad_768x3072x256_at, 768, 3072, 256, true, false)->UseManualTime();
BENCHMARK_CAPTURE(matmul_cold_bench, fast_cold_gpt2_head_forward_256x50257x768_bt, 256, 50257, 768, false, true)->UseManualTime();
BENCHMARK_CAPTURE(matmul_cold_bench, fast_cold_gpt2_head_input_grad_256x768x50257, 256, 768, 50257, false, false)->UseManualTime();
BENCHMARK_CAPTURE(matmul_cold_bench, fast_cold_gpt2_head_weight_grad_50257x768x256_at, 50257, 768, 256, true, false)->UseManualTime();
// gpt6's attention products, 128 = B·H items of T 128 and head size 64: scores q·kᵀ, context p·v, and
// their gradients (g·v ᵀ, pᵀ·g)
BENCHMARK_CAPTURE(matmul_bench, gpt6_scores_128x128x64x128, Shape{128, 128, 64}, Shape{128, 64, 128})->UseRealTime();
BENCHMARK_CAPTURE(matmul_transposed_b_bench, gpt6_scores_kt_128x128x64x128, Shape{128, 128, 64}, Shape{128, 128, 64})->UseRealTime();
BENCHMARK_CAPTURE(matmul_bench, gpt6_context_128x128x128x64, Shape{128, 128, 128}, Shape{128, 128, 64})->UseRealTime();

BENCHMARK_CAPTURE(causal_attention_bench, dense_32x128x256, 32, 128, 256, Attention::dense)->UseRealTime();
BENCHMARK_CAPTURE(causal_attention_bench, skipping_32x128x256, 32, 128, 256, Attention::skipping)->UseRealTime();
BENCHMARK_CAPTURE(causal_attention_bench, flash_32x128x256, 32, 128, 256, Attention::flash)->UseRealTime();
BENCHMARK_CAPTURE(causal_attention_bench, dense_8x512x256, 8, 512, 256, Attention::dense)->UseRealTime();
BENCHMARK_CAPTURE(causal_attention_bench, skipping_8x512x256, 8, 512, 256, Attention::skipping)->UseRealTime();
BENCHMARK_CAPTURE(causal_attention_bench, flash_8x512x256, 8, 512, 256, Attention::flash)->UseRealTime();
// the GPT's shape: 12 heads of 64
BENCHMARK_CAPTURE(causal_attention_bench, skipping_48x1024x64, 48, 1024, 64, Attention::skipping)->UseRealTime();
BENCHMARK_CAPTURE(causal_attention_heads_bench, gpt6_heads_32x128x4x64, 32, 128, 4, 64, false)->UseRealTime();
BENCHMARK_CAPTURE(causal_attention_heads_bench, gpt6_scores_32x128x4x64, 32, 128, 4, 64, true)->UseRealTime();
BENCHMARK_CAPTURE(causal_attention_bench, flash_48x1024x64, 48, 1024, 64, Attention::flash)->UseRealTime();

BENCHMARK_CAPTURE(softmax_bench, seed_16x8x8, Shape{16, 8, 8})->UseRealTime();
BENCHMARK_CAPTURE(softmax_bench, large_32x4x128x128, Shape{32, 4, 128, 128})->UseRealTime();
BENCHMARK_CAPTURE(gelu_bench, gpt6_forward_4096x1024, Shape{4096, 1024}, false)->UseRealTime();
BENCHMARK_CAPTURE(gelu_bench, gpt6_backward_4096x1024, Shape{4096, 1024}, true)->UseRealTime();
BENCHMARK_CAPTURE(layer_norm_bench, gpt6_forward_4096x256, 4096, 256, false)->UseRealTime();
BENCHMARK_CAPTURE(layer_norm_bench, gpt6_backward_4096x256, 4096, 256, true)->UseRealTime();
BENCHMARK_CAPTURE(masked_fill_bench, seed_16x8x8, Shape{16, 8, 8})->UseRealTime();
BENCHMARK_CAPTURE(masked_fill_bench, large_32x4x128x128, Shape{32, 4, 128, 128})->UseRealTime();

BENCHMARK_CAPTURE(embedding_backward_bench, seed_V13_D24_16x8, 13, 24, 16, 8)->UseRealTime();
BENCHMARK_CAPTURE(embedding_backward_bench, large_V65_D256_32x128, 65, 256, 32, 128)->UseRealTime();
BENCHMARK_CAPTURE(cross_entropy_bench, seed_128x13, 128, 13)->UseRealTime();
BENCHMARK_CAPTURE(cross_entropy_bench, large_4096x65, 4096, 65)->UseRealTime();

BENCHMARK_CAPTURE(adam_step_bench, seed_D24_T8, 24, 8, 1, 13)->UseRealTime();
BENCHMARK_CAPTURE(adam_step_bench, large_D256_T128_h4, 256, 128, 4, 65)->UseRealTime();

#if defined(__x86_64__) && defined(__GNUC__)
BENCHMARK_CAPTURE(core_peak_bench, avx2_fma, 256, true)->UseRealTime();
BENCHMARK_CAPTURE(core_peak_bench, avx2_mul_add, 256, false)->UseRealTime();
BENCHMARK_CAPTURE(core_peak_bench, avx512_fma, 512, true)->UseRealTime();
BENCHMARK_CAPTURE(core_peak_bench, avx512_mul_add, 512, false)->UseRealTime();
BENCHMARK(core_peak_bf16_bench)->Name("core_peak_bench/avx512_bf16_dot")->UseRealTime();
BENCHMARK(core_peak_bf16_path_bench)->Name("core_peak_bench/bf16_products_path")->UseRealTime();
BENCHMARK_CAPTURE(matmul_bf16_bench, bf16_1024x1024x1024, 1024, 1024, 1024)->UseRealTime();
BENCHMARK_CAPTURE(matmul_bf16_bench, bf16_gpt2_contract_forward_256x768x3072_bt, 256, 768, 3072, false, true)->UseRealTime();
BENCHMARK_CAPTURE(matmul_bf16_bench, bf16_gpt2_contract_input_grad_256x3072x768, 256, 3072, 768)->UseRealTime();
BENCHMARK_CAPTURE(matmul_bf16_bench, bf16_gpt2_contract_weight_grad_768x3072x256_at, 768, 3072, 256, true, false)->UseRealTime();
BENCHMARK_CAPTURE(matmul_bf16_bench, bf16_gpt2_head_forward_256x50257x768_bt, 256, 50257, 768, false, true)->UseRealTime();
BENCHMARK_CAPTURE(matmul_bf16_bench, bf16_gpt2_head_input_grad_256x768x50257, 256, 768, 50257)->UseRealTime();
BENCHMARK_CAPTURE(matmul_bf16_bench, bf16_gpt2_head_weight_grad_768x50257x256_at, 768, 50257, 256, true, false)->UseRealTime();
// one row times a weight (a cached generation step: the row path, memory-bound on the weight's bytes)
BENCHMARK_CAPTURE(matmul_bf16_bench, bf16_gpt2_step_qkv_1x2304x768_bt, 1, 2304, 768, false, true)->UseRealTime();
BENCHMARK_CAPTURE(matmul_bf16_bench, bf16_gpt2_step_head_1x50257x768_bt, 1, 50257, 768, false, true)->UseRealTime();
#endif

BENCHMARK_CAPTURE(row_products_bench, smollm2_30_blocks_fp32_in_place, 30, DType::Float32, false)->UseRealTime();
BENCHMARK_CAPTURE(row_products_bench, smollm2_30_blocks_fp32_packed, 30, DType::Float32, true)->UseRealTime();
BENCHMARK_MAIN();
