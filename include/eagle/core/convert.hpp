// The one rule by which eagle turns a real number into an integer, on the host and in CUDA
// device code alike (no CUDA header needed).
//
//   saturating_cast<Int>(v): NaN -> 0; otherwise v truncated toward zero, clamped to Int's range
//   (+inf and anything >= Int's max + 1 -> max; -inf and anything <= Int's min -> min).
//
// A plain static_cast of such a value is undefined behaviour in C++ and gives different answers
// on different hardware; this gives one defined answer everywhere (torch's results for in-range
// values, saturation like CUDA's __float2int_rz for the rest).
//
// Integer to integer conversions wrap instead (two's complement, as static_cast does since
// C++20): static_cast<int32_t>(int64_t{1} << 32) == 0. Integer arithmetic that overflows wraps
// too (see the reference engine).
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "eagle/core/hd.hpp"

namespace eagle {

namespace convert_detail {
// 2^n as a double, at compile time.
template <int n>
EAGLE_HD constexpr double two_to_the() {
  double p = 1.0;
  for (int b = 0; b < n; ++b) p *= 2.0;
  return p;
}
}  // namespace convert_detail

template <class Int>
EAGLE_HD Int saturating_cast(double v) {
  static_assert(std::is_integral_v<Int> && !std::is_same_v<Int, bool>,
                "saturating_cast converts to an integer type (bool: test v != 0 instead)");
  using U = std::make_unsigned_t<Int>;
  constexpr Int max = std::is_signed_v<Int> ? static_cast<Int>(static_cast<U>(~U(0)) >> 1)
                                            : static_cast<Int>(~U(0));
  constexpr Int min = std::is_signed_v<Int> ? static_cast<Int>(-max - 1) : Int(0);
  // 2^(bits-1) (signed) or 2^bits (unsigned): exact in a double, unlike max itself for 64 bits.
  constexpr double past_max = convert_detail::two_to_the<std::numeric_limits<Int>::digits>();
  if (v != v) return Int(0);  // NaN
  if (v >= past_max) return max;
  if (v <= static_cast<double>(min)) return min;
  return static_cast<Int>(v);  // in range after truncation: defined
}

}  // namespace eagle
