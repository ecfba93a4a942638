#include "eagle/core/dtype.hpp"

#include <cmath>
#include <string>

#include "eagle/core/error.hpp"

namespace eagle {

namespace {
struct DTypeInfo {
  DType dtype;
  std::string_view name;
  std::size_t size;
  bool floating;
};
constexpr DTypeInfo kInfo[] = {
    {DType::f64, "f64", 8, true},       {DType::f32, "f32", 4, true},
    {DType::f16, "f16", 2, true},       {DType::bf16, "bf16", 2, true},
    {DType::i64, "i64", 8, false},      {DType::i32, "i32", 4, false},
    {DType::u32, "u32", 4, false},      {DType::u8, "u8", 1, false},
    {DType::boolean, "bool", 1, false},
};
const DTypeInfo& info(DType d) {
  return kInfo[static_cast<int>(d)];
}
}  // namespace

std::size_t itemsize(DType dtype) {
  return info(dtype).size;
}
std::string_view dtype_name(DType dtype) {
  return info(dtype).name;
}
bool is_floating(DType dtype) {
  return info(dtype).floating;
}

DType dtype_from_name(std::string_view name) {
  for (const auto& i : kInfo)
    if (i.name == name) return i.dtype;
  throw InvalidArgument("dtype: unknown name '" + std::string(name) +
                        "' (expected f64, f32, f16, bf16, i64, i32, u32, u8 or bool)");
}

// binary16 <-> binary32 with round-to-nearest-even, subnormals, infinities and NaN.
half::half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) {  // NaN
    bits = static_cast<uint16_t>(sign | 0x7e00u);
    return;
  }
  if (abs >= 0x477ff000u) {  // rounds to >= 65536: infinity
    bits = static_cast<uint16_t>(sign | 0x7c00u);
    return;
  }
  if (abs < 0x38800000u) {  // below the smallest normal half: subnormal or zero
    float a;
    std::memcpy(&a, &abs, 4);
    // a * 2^24 is the subnormal mantissa; nearbyint rounds half to even by default.
    bits = static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(a * 16777216.0f)));
    return;
  }
  uint32_t mant = abs & 0x7fffffu;
  uint32_t exp = (abs >> 23) - 127 + 15;
  uint32_t h = (exp << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // may carry into the exponent
  bits = static_cast<uint16_t>(sign | h);
}

half::operator float() const {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exp = (bits >> 10) & 0x1fu;
  const uint32_t mant = bits & 0x3ffu;
  float out;
  if (exp == 0) {
    out = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -out : out;
  }
  uint32_t x = exp == 31 ? (sign | 0x7f800000u | (mant << 13))
                         : (sign | ((exp - 15 + 127) << 23) | (mant << 13));
  std::memcpy(&out, &x, 4);
  return out;
}

}  // namespace eagle
