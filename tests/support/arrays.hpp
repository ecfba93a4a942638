// Arrays from host values and back, in any dtype: what the random and poison helpers build on.
#pragma once

#include <cstdint>
#include <vector>

#include "eagle/core/convert.hpp"
#include "eagle/eagle.hpp"

namespace eagle::test {

inline int64_t numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// An array of `dtype` holding `values` (converted; bool: non-zero is true), on `device`.
// `v` converted to the integer type Int by eagle's rule (saturating_cast: clamped, NaN -> 0).
template <class Int>
std::vector<Int> saturated(const std::vector<double>& v) {
  std::vector<Int> out;
  out.reserve(v.size());
  for (double x : v) out.push_back(saturating_cast<Int>(x));
  return out;
}

inline Array from_doubles(const std::vector<double>& v, const Shape& shape, DType dtype,
                          Device device) {
  switch (dtype) {
    case DType::f64:
      return Array::from(v, shape, device);
    case DType::f32:
      return Array::from(std::vector<float>(v.begin(), v.end()), shape, device);
    case DType::f16:
      return Array::from(std::vector<half>(v.begin(), v.end()), shape, device);
    case DType::bf16:
      return Array::from(std::vector<bfloat16>(v.begin(), v.end()), shape, device);
    case DType::i64:
      return Array::from(saturated<int64_t>(v), shape, device);
    case DType::i32:
      return Array::from(saturated<int32_t>(v), shape, device);
    case DType::u32:
      return Array::from(saturated<uint32_t>(v), shape, device);
    case DType::u8:
      return Array::from(saturated<uint8_t>(v), shape, device);
    case DType::boolean: {
      std::vector<bool> b;
      for (double x : v) b.push_back(x != 0);
      return Array::from(b, shape, device);
    }
  }
  return Array();
}

// An integer (or any) array from integer values, e.g. cu_seqlens, ids or targets.
inline Array from_ints(const std::vector<int64_t>& v, const Shape& shape, DType dtype,
                       Device device) {
  return from_doubles(std::vector<double>(v.begin(), v.end()), shape, dtype, device);
}

// The values of `a` (any device) as doubles.
inline std::vector<double> values(const Array& a) {
  return a.to_vector<double>();
}

}  // namespace eagle::test
