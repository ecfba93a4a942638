// Element types and the host-side 16-bit float formats.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace eagle {

enum class DType : uint8_t { f64, f32, f16, bf16, i64, i32, u32, u8, boolean };

std::size_t itemsize(DType dtype);
std::string_view dtype_name(DType dtype);
// Inverse of dtype_name; throws InvalidArgument naming the text on an unknown name.
DType dtype_from_name(std::string_view name);
bool is_floating(DType dtype);

// IEEE binary16, stored as bits; converts through float on the host.
struct half {
  uint16_t bits = 0;
  half() = default;
  half(float f);           // NOLINT(google-explicit-constructor): behaves like a number
  operator float() const;  // NOLINT(google-explicit-constructor)
};

// bfloat16 (the top half of a float32), round-to-nearest-even on conversion.
struct bfloat16 {
  uint16_t bits = 0;
  bfloat16() = default;
  bfloat16(float f) {  // NOLINT(google-explicit-constructor)
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      bits = static_cast<uint16_t>((u >> 16) | 0x40u);  // keep NaN a NaN
    } else {
      u += 0x7fffu + ((u >> 16) & 1u);
      bits = static_cast<uint16_t>(u >> 16);
    }
  }
  operator float() const {  // NOLINT(google-explicit-constructor)
    uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

template <class T>
struct dtype_of_t;
template <>
struct dtype_of_t<double> {
  static constexpr DType value = DType::f64;
};
template <>
struct dtype_of_t<float> {
  static constexpr DType value = DType::f32;
};
template <>
struct dtype_of_t<half> {
  static constexpr DType value = DType::f16;
};
template <>
struct dtype_of_t<bfloat16> {
  static constexpr DType value = DType::bf16;
};
template <>
struct dtype_of_t<int64_t> {
  static constexpr DType value = DType::i64;
};
template <>
struct dtype_of_t<int32_t> {
  static constexpr DType value = DType::i32;
};
template <>
struct dtype_of_t<uint32_t> {
  static constexpr DType value = DType::u32;
};
template <>
struct dtype_of_t<uint8_t> {
  static constexpr DType value = DType::u8;
};
template <>
struct dtype_of_t<bool> {
  static constexpr DType value = DType::boolean;
};
template <class T>
inline constexpr DType dtype_of = dtype_of_t<T>::value;

// Calls f(T{}) with T the host type of `d` (double, float, half, bfloat16, int64_t, int32_t,
// uint32_t, uint8_t, bool): one switch for code written once over every dtype.
template <class F>
void visit_dtype(DType d, F&& f) {
  switch (d) {
    case DType::f64:
      return f(double{});
    case DType::f32:
      return f(float{});
    case DType::f16:
      return f(half{});
    case DType::bf16:
      return f(bfloat16{});
    case DType::i64:
      return f(int64_t{});
    case DType::i32:
      return f(int32_t{});
    case DType::u32:
      return f(uint32_t{});
    case DType::u8:
      return f(uint8_t{});
    case DType::boolean:
      return f(bool{});
  }
}

}  // namespace eagle
