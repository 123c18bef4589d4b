// numerics.h — the two numerics, and the two sets of CPU kernels, named and chosen in one place.
//
//   exact  PyTorch 1.13's portable CPU kernels, bit for bit: their order of additions, every multiply
//          and add rounded on its own (no fused multiply-add). The seed programs print PyTorch's numbers
//          because they run this way; the parity tests and the `make train` workshop run use it too.
//   fast   fused multiply-adds (one rounding instead of two) and whatever summation order is fastest on
//          this CPU: FMA micro-kernels for the products. Results agree with exact to float rounding
//          (the tests bound the difference), are deterministic, and do not depend on the thread count.
//          The default for everything that did not ask for PyTorch's bits.
//
// The setting is chosen, in order of precedence, by:
//   1. a NumericsGuard (this thread only, for a scope);
//   2. set_numerics (the whole process);
//   3. SCRATCHGRAD_NUMERICS=exact|fast in the environment, read once at start-up;
//   4. the default, fast.
// Kernels read it when they start (a kernel's OpenMP threads follow the thread that called it). Each
// kernel that has two versions says so next to its code; the others are the same in both numerics.
// The CUDA backend has one numerics of its own (cuBLAS and its kernels) and ignores the setting.
//
// The kernels that serve CPU tensors are chosen the same way:
//   cpu        autograd/cpu/: the fast kernels, in the numerics above. The default.
//   reference  autograd/reference/: each entry the textbook loop over strided tensors, with its math in a
//              comment above it — to read, to step through in a debugger, and the oracle the tests
//              compare cpu/ with. One thread, no SIMD; ignores the numerics (it has one: plain loops,
//              every operation rounded on its own). Slow: for small models.
// in the same order of precedence: a KernelsGuard, set_kernels, SCRATCHGRAD_KERNELS=cpu|reference, and
// the default (cpu; reference in a `make debug` build, which defines SCRATCHGRAD_DEFAULT_KERNELS_REFERENCE).
// Both allocate through the CPU's buffer cache, so a tensor made under one is freed correctly under the other.
#pragma once
#include <optional>
#include <string_view>

namespace autograd {

enum class Numerics { exact, fast };

// The numerics this thread's kernels use now.
Numerics numerics();
// Sets the process-wide numerics (what every thread without a NumericsGuard uses).
void set_numerics(Numerics mode);
// "exact" or "fast".
const char* numerics_name(Numerics mode);
// Parses "exact" or "fast"; anything else throws std::invalid_argument naming `what` (say, "--numerics")
// and the value.
Numerics parse_numerics(std::string_view text, std::string_view what = "numerics");
// The numerics SCRATCHGRAD_NUMERICS asks for, if it is set (throws on a value other than exact|fast).
std::optional<Numerics> numerics_from_environment();

// Uses `mode` on this thread until the guard goes out of scope (guards nest).
class NumericsGuard {
 public:
  explicit NumericsGuard(Numerics mode);
  ~NumericsGuard();
  NumericsGuard(const NumericsGuard&) = delete;
  NumericsGuard& operator=(const NumericsGuard&) = delete;

 private:
  std::optional<Numerics> previous_;
};

enum class Kernels { cpu, reference };

// The kernels this thread's CPU tensors use now (backend(Device::cpu()) returns them).
Kernels kernels();
// Sets the process-wide kernels (what every thread without a KernelsGuard uses).
void set_kernels(Kernels choice);
// "cpu" or "reference".
const char* kernels_name(Kernels choice);
// Parses "cpu" or "reference"; anything else throws std::invalid_argument naming `what` and the value.
Kernels parse_kernels(std::string_view text, std::string_view what = "kernels");
// The kernels SCRATCHGRAD_KERNELS asks for, if it is set (throws on a value other than cpu|reference).
std::optional<Kernels> kernels_from_environment();

// Uses `choice` on this thread until the guard goes out of scope (guards nest).
class KernelsGuard {
 public:
  explicit KernelsGuard(Kernels choice);
  ~KernelsGuard();
  KernelsGuard(const KernelsGuard&) = delete;
  KernelsGuard& operator=(const KernelsGuard&) = delete;

 private:
  std::optional<Kernels> previous_;
};

}  // namespace autograd
