// compat.h — the few C++20 library pieces the engine uses that a compiler's standard library may lack.
//
// GCC 12's libstdc++ (the native build) has all of them, and there every name below is the std one
// itself: nothing changes. Emscripten 3.1.6's libc++ (the WebAssembly build of the lab, examples/lab/)
// lacks <source_location>, std::bit_cast, <memory_resource> and floating-point std::to_chars; its clang
// has the builtins that stand in for the first two, and fmt (already a dependency) for the last.
#pragma once
#include <version>  // the library's feature-test macros

#include <cstddef>
#include <cstdint>
#include <string>

#if __cpp_lib_source_location
#include <source_location>
#endif
#if __cpp_lib_bit_cast
#include <bit>
#endif
#if __has_include(<memory_resource>)
#include <memory_resource>
#else
#include <new>
#include <vector>
#include <experimental/memory_resource>
#endif
#if __cpp_lib_to_chars
#include <charconv>
#else
#include <fmt/format.h>
#endif

namespace autograd::compat {

// ---- std::source_location: where a node was recorded (node.h) ----
#if __cpp_lib_source_location
using std::source_location;
#else
// The same interface, filled by the builtins std::source_location::current() is made of.
struct source_location {
  static constexpr source_location current(const char* file = __builtin_FILE(), const char* function = __builtin_FUNCTION(),
                                           std::uint_least32_t line = __builtin_LINE()) noexcept {
    source_location where;
    where.file_ = file;
    where.function_ = function;
    where.line_ = line;
    return where;
  }
  constexpr const char* file_name() const noexcept { return file_; }
  constexpr const char* function_name() const noexcept { return function_; }  // "addmm", not the signature
  constexpr std::uint_least32_t line() const noexcept { return line_; }
  constexpr std::uint_least32_t column() const noexcept { return 0; }

 private:
  const char* file_ = "";
  const char* function_ = "";
  std::uint_least32_t line_ = 0;
};
#endif

// ---- std::bit_cast: a float's bits (random/, the state blob) ----
#if __cpp_lib_bit_cast
using std::bit_cast;
#else
template <typename To, typename From> constexpr To bit_cast(const From& from) noexcept {
  static_assert(sizeof(To) == sizeof(From), "bit_cast: the two types must have the same size");
  return __builtin_bit_cast(To, from);
}
#endif

// ---- std::pmr: the engine's per-pass arena (engine.cpp, memory/node_table.h) ----
#if __has_include(<memory_resource>)
namespace pmr = std::pmr;
#else
// libc++ 13 has memory_resource and polymorphic_allocator (as std::experimental::pmr) but no
// monotonic_buffer_resource. This one ignores the buffer and takes every block from the heap: the
// arena only saves allocations, so the results are the same, a little slower.
namespace pmr {
using std::experimental::pmr::memory_resource;
template <typename T> using vector = std::vector<T, std::experimental::pmr::polymorphic_allocator<T>>;
class monotonic_buffer_resource : public memory_resource {
 public:
  monotonic_buffer_resource(void*, std::size_t) {}

 private:
  void* do_allocate(std::size_t bytes, std::size_t align) override { return ::operator new(bytes, std::align_val_t(align)); }
  void do_deallocate(void* p, std::size_t, std::size_t align) override { ::operator delete(p, std::align_val_t(align)); }
  bool do_is_equal(const memory_resource& other) const noexcept override { return this == &other; }
};
}  // namespace pmr
#endif

// ---- std::to_chars(double, scientific): the shortest digits that read back as v ----
// "-5.960464477539063e-08" (at least two exponent digits, as to_chars writes them). v must be finite.
#if __cpp_lib_to_chars
inline std::string shortest_scientific(double v) {
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  return std::string(buf, res.ptr);
}
#else
// fmt's "{}" is shortest round-trip too (Dragonbox), but picks fixed or exponent notation itself
// ("0.00123", "1e+16", "123.5"): read its digits and decimal exponent back, and lay them out as to_chars does.
inline std::string shortest_scientific(double v) {
  std::string text = fmt::format("{}", v);
  std::string sign;
  if (text[0] == '-') {
    sign = "-";
    text.erase(0, 1);
  }
  int exponent = 0;
  if (const size_t e = text.find('e'); e != std::string::npos) {
    exponent = std::stoi(text.substr(e + 1));
    text.resize(e);
  }
  size_t point = text.find('.');
  if (point == std::string::npos) point = text.size();
  else text.erase(point, 1);
  // text holds only digits now, the decimal point after `point` of them
  const size_t first = text.find_first_not_of('0');
  if (first == std::string::npos) return sign + "0e+00";
  exponent += int(point) - int(first) - 1;  // of the first significant digit
  std::string digits = text.substr(first);
  digits.erase(digits.find_last_not_of('0') + 1);
  std::string out = sign + digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  return out + fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', exponent < 0 ? -exponent : exponent);
}
#endif

}  // namespace autograd::compat
