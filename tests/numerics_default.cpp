// numerics_default.cpp — the test program runs in exact numerics (numerics.h), because most suites compare
// with PyTorch's bits; SCRATCHGRAD_NUMERICS in the environment wins, which is how ctest's fast_numerics.*
// entries rerun the gradcheck suites in fast numerics. Suites about fast numerics use a NumericsGuard.
#include "autograd/numerics.h"

namespace {
[[maybe_unused]] const bool numerics_chosen = [] {
  if (!autograd::numerics_from_environment()) autograd::set_numerics(autograd::Numerics::exact);
  return true;
}();
}  // namespace
