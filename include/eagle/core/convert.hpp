// Defined conversions of floating values to integers, for host and CUDA device code alike:
// truncation toward zero, saturating at the integer type's range, NaN becoming 0.
#pragma once

#include <cstdint>
#include <limits>

#ifdef __CUDACC__
#define EAGLE_CONVERT_HD __host__ __device__ __forceinline__
#else
#define EAGLE_CONVERT_HD inline
#endif

namespace eagle {

template <class Int>
EAGLE_CONVERT_HD Int saturating_cast(double v) {
  if (v != v) return Int(0);
  constexpr double lo = static_cast<double>(std::numeric_limits<Int>::lowest());
  // max + 1 is a power of two, exact in double; anything at or above it saturates.
  constexpr double hi_excl = static_cast<double>(std::numeric_limits<Int>::max() / 2 + 1) * 2.0;
  if (v <= lo) return std::numeric_limits<Int>::lowest();
  if (v >= hi_excl) return std::numeric_limits<Int>::max();
  return static_cast<Int>(v);
}

}  // namespace eagle
