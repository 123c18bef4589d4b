// numerics.cpp — where the exact/fast and the cpu/reference choices are kept (see numerics.h).
#include "autograd/numerics.h"

#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace autograd {

namespace {

// The process-wide setting, decided from the environment on first use.
std::atomic<Numerics>& process_numerics() {
  static std::atomic<Numerics> mode{numerics_from_environment().value_or(Numerics::fast)};
  return mode;
}

// A NumericsGuard's choice for this thread, if one is active.
thread_local std::optional<Numerics> thread_numerics;

}  // namespace

Numerics numerics() { return thread_numerics ? *thread_numerics : process_numerics().load(std::memory_order_relaxed); }

void set_numerics(Numerics mode) {
  if (mode != Numerics::exact && mode != Numerics::fast)
    throw std::invalid_argument("set_numerics: unknown numerics " + std::to_string(int(mode)));
  process_numerics().store(mode, std::memory_order_relaxed);
}

const char* numerics_name(Numerics mode) { return mode == Numerics::exact ? "exact" : "fast"; }

Numerics parse_numerics(std::string_view text, std::string_view what) {
  if (text == "exact") return Numerics::exact;
  if (text == "fast") return Numerics::fast;
  throw std::invalid_argument(std::string(what) + ": unknown numerics '" + std::string(text) +
                              "' (expected exact or fast)");
}

std::optional<Numerics> numerics_from_environment() {
  const char* env = std::getenv("SCRATCHGRAD_NUMERICS");
  if (env == nullptr || *env == '\0') return std::nullopt;
  return parse_numerics(env, "SCRATCHGRAD_NUMERICS");
}

NumericsGuard::NumericsGuard(Numerics mode) : previous_(thread_numerics) { thread_numerics = mode; }
NumericsGuard::~NumericsGuard() { thread_numerics = previous_; }

// ---- the kernels

namespace {

#ifdef SCRATCHGRAD_DEFAULT_KERNELS_REFERENCE
constexpr Kernels kDefaultKernels = Kernels::reference;  // a `make debug` build: step into plain loops
#else
constexpr Kernels kDefaultKernels = Kernels::cpu;
#endif

std::atomic<Kernels>& process_kernels() {
  static std::atomic<Kernels> choice{kernels_from_environment().value_or(kDefaultKernels)};
  return choice;
}

thread_local std::optional<Kernels> thread_kernels;

}  // namespace

Kernels kernels() { return thread_kernels ? *thread_kernels : process_kernels().load(std::memory_order_relaxed); }

void set_kernels(Kernels choice) {
  if (choice != Kernels::cpu && choice != Kernels::reference)
    throw std::invalid_argument("set_kernels: unknown kernels " + std::to_string(int(choice)));
  process_kernels().store(choice, std::memory_order_relaxed);
}

const char* kernels_name(Kernels choice) { return choice == Kernels::reference ? "reference" : "cpu"; }

Kernels parse_kernels(std::string_view text, std::string_view what) {
  if (text == "cpu") return Kernels::cpu;
  if (text == "reference") return Kernels::reference;
  throw std::invalid_argument(std::string(what) + ": unknown kernels '" + std::string(text) +
                              "' (expected cpu or reference)");
}

std::optional<Kernels> kernels_from_environment() {
  const char* env = std::getenv("SCRATCHGRAD_KERNELS");
  if (env == nullptr || *env == '\0') return std::nullopt;
  return parse_kernels(env, "SCRATCHGRAD_KERNELS");
}

KernelsGuard::KernelsGuard(Kernels choice) : previous_(thread_kernels) { thread_kernels = choice; }
KernelsGuard::~KernelsGuard() { thread_kernels = previous_; }

}  // namespace autograd
