// Tests of dtypes and the host 16-bit float formats (half, bfloat16).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "eagle/eagle.hpp"
#include "test_util.hpp"

namespace eagle {
namespace {

using test::expect_throw_with;

using test::OnDevice;

constexpr DType kAllDTypes[] = {DType::f64, DType::f32, DType::f16, DType::bf16,   DType::i64,
                                DType::i32, DType::u32, DType::u8,  DType::boolean};

float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint32_t float_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

uint16_t half_bits(float f) {
  return half(f).bits;
}
uint16_t bf16_bits(float f) {
  return bfloat16(f).bits;
}

float half_value(uint16_t bits) {
  half h;
  h.bits = bits;
  return static_cast<float>(h);
}

float bf16_value(uint16_t bits) {
  bfloat16 b;
  b.bits = bits;
  return static_cast<float>(b);
}

// ---------------------------------------------------------------------------------------------
// dtype

TEST(DTypeTest, ItemsizeOfEveryDType) {
  EXPECT_EQ(itemsize(DType::f64), 8u);
  EXPECT_EQ(itemsize(DType::f32), 4u);
  EXPECT_EQ(itemsize(DType::f16), 2u);
  EXPECT_EQ(itemsize(DType::bf16), 2u);
  EXPECT_EQ(itemsize(DType::i64), 8u);
  EXPECT_EQ(itemsize(DType::i32), 4u);
  EXPECT_EQ(itemsize(DType::u32), 4u);
  EXPECT_EQ(itemsize(DType::u8), 1u);
  EXPECT_EQ(itemsize(DType::boolean), 1u);
}

TEST(DTypeTest, ItemsizeMatchesHostTypes) {
  EXPECT_EQ(itemsize(dtype_of<double>), sizeof(double));
  EXPECT_EQ(itemsize(dtype_of<float>), sizeof(float));
  EXPECT_EQ(itemsize(dtype_of<half>), sizeof(half));
  EXPECT_EQ(itemsize(dtype_of<bfloat16>), sizeof(bfloat16));
  EXPECT_EQ(itemsize(dtype_of<int64_t>), sizeof(int64_t));
  EXPECT_EQ(itemsize(dtype_of<int32_t>), sizeof(int32_t));
  EXPECT_EQ(itemsize(dtype_of<uint32_t>), sizeof(uint32_t));
  EXPECT_EQ(itemsize(dtype_of<uint8_t>), sizeof(uint8_t));
  EXPECT_EQ(itemsize(dtype_of<bool>), sizeof(bool));
}

TEST(DTypeTest, NamesOfEveryDType) {
  EXPECT_EQ(dtype_name(DType::f64), "f64");
  EXPECT_EQ(dtype_name(DType::f32), "f32");
  EXPECT_EQ(dtype_name(DType::f16), "f16");
  EXPECT_EQ(dtype_name(DType::bf16), "bf16");
  EXPECT_EQ(dtype_name(DType::i64), "i64");
  EXPECT_EQ(dtype_name(DType::i32), "i32");
  EXPECT_EQ(dtype_name(DType::u32), "u32");
  EXPECT_EQ(dtype_name(DType::u8), "u8");
  EXPECT_EQ(dtype_name(DType::boolean), "bool");
}

TEST(DTypeTest, FromNameRoundTripsEveryDType) {
  for (DType d : kAllDTypes) {
    SCOPED_TRACE(std::string(dtype_name(d)));
    EXPECT_EQ(dtype_from_name(dtype_name(d)), d);
  }
}

TEST(DTypeTest, NamesAreDistinct) {
  for (DType a : kAllDTypes)
    for (DType b : kAllDTypes)
      if (a != b) {
        EXPECT_NE(dtype_name(a), dtype_name(b));
      }
}

TEST(DTypeTest, IsFloating) {
  EXPECT_TRUE(is_floating(DType::f64));
  EXPECT_TRUE(is_floating(DType::f32));
  EXPECT_TRUE(is_floating(DType::f16));
  EXPECT_TRUE(is_floating(DType::bf16));
  EXPECT_FALSE(is_floating(DType::i64));
  EXPECT_FALSE(is_floating(DType::i32));
  EXPECT_FALSE(is_floating(DType::u32));
  EXPECT_FALSE(is_floating(DType::u8));
  EXPECT_FALSE(is_floating(DType::boolean));
}

TEST(DTypeTest, UnknownNameErrorNamesTheText) {
  expect_throw_with<InvalidArgument>([] { dtype_from_name("float128"); }, {"'float128'"});
  expect_throw_with<InvalidArgument>([] { dtype_from_name("F32"); }, {"'F32'"});
  expect_throw_with<InvalidArgument>([] { dtype_from_name(""); }, {"''"});
  expect_throw_with<InvalidArgument>([] { dtype_from_name("f32 "); }, {"'f32 '"});
  expect_throw_with<InvalidArgument>([] { dtype_from_name("boolean"); }, {"'boolean'"});
}

// ---------------------------------------------------------------------------------------------
// half (IEEE binary16)

TEST(HalfTest, KnownBitPatterns) {
  EXPECT_EQ(half_bits(0.0f), 0x0000);
  EXPECT_EQ(half_bits(-0.0f), 0x8000);
  EXPECT_EQ(half_bits(1.0f), 0x3c00);
  EXPECT_EQ(half_bits(-1.0f), 0xbc00);
  EXPECT_EQ(half_bits(-2.0f), 0xc000);
  EXPECT_EQ(half_bits(0.5f), 0x3800);
  EXPECT_EQ(half_bits(0.333251953125f), 0x3555);  // nearest half to 1/3, exactly
  EXPECT_EQ(half_bits(65504.0f), 0x7bff);         // largest finite
  EXPECT_EQ(half_bits(-65504.0f), 0xfbff);
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(half_bits(-std::ldexp(1.0f, -24)), 0x8001);
  EXPECT_EQ(half_bits(std::ldexp(1023.0f, -24)), 0x03ff);  // largest subnormal
  EXPECT_EQ(half_bits(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(half_bits(-std::numeric_limits<float>::infinity()), 0xfc00);
}

TEST(HalfTest, KnownValuesFromBits) {
  EXPECT_EQ(half_value(0x3c00), 1.0f);
  EXPECT_EQ(half_value(0xc000), -2.0f);
  EXPECT_EQ(half_value(0x7bff), 65504.0f);
  EXPECT_EQ(half_value(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(half_value(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(half_value(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(half_value(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(half_value(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(float_to_bits(half_value(0x8000)), 0x80000000u);  // -0 keeps its sign
  EXPECT_TRUE(std::isnan(half_value(0x7e00)));
  EXPECT_TRUE(std::isnan(half_value(0x7c01)));  // signalling NaN pattern
  EXPECT_TRUE(std::isnan(half_value(0xfe00)));
}

TEST(HalfTest, NanStaysNan) {
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  const float nans[] = {qnan, -qnan,
                        bits_to_float(0x7f800001u),  // signalling, payload only in the low bits
                        bits_to_float(0x7fffffffu)};
  for (float f : nans) {
    const uint16_t b = half_bits(f);
    EXPECT_EQ(b & 0x7c00, 0x7c00) << std::hex << b;
    EXPECT_NE(b & 0x03ff, 0) << std::hex << b;  // not an infinity
    EXPECT_TRUE(std::isnan(half_value(b)));
  }
}

TEST(HalfTest, OverflowRoundsToInfinity) {
  EXPECT_EQ(half_bits(65519.0f), 0x7bff);  // below the halfway point to 2^16: stays finite
  EXPECT_EQ(half_bits(65520.0f), 0x7c00);  // halfway: ties to even, which is "2^16" = inf
  EXPECT_EQ(half_bits(1e6f), 0x7c00);
  EXPECT_EQ(half_bits(-1e6f), 0xfc00);
  EXPECT_EQ(half_bits(std::numeric_limits<float>::max()), 0x7c00);
}

TEST(HalfTest, RoundToNearestEven) {
  const float ulp1 = std::ldexp(1.0f, -10);  // spacing of halves in [1, 2)
  // Exactly halfway between 1 and 1+ulp: ties to the even mantissa (1.0).
  EXPECT_EQ(half_bits(1.0f + ulp1 / 2), 0x3c00);
  // Halfway between 1+ulp (odd) and 1+2ulp (even): rounds up.
  EXPECT_EQ(half_bits(1.0f + 3 * ulp1 / 2), 0x3c02);
  // Just above halfway rounds up; just below rounds down.
  EXPECT_EQ(half_bits(1.0f + ulp1 / 2 + std::ldexp(1.0f, -20)), 0x3c01);
  EXPECT_EQ(half_bits(1.0f + ulp1 / 2 - std::ldexp(1.0f, -20)), 0x3c00);
  // A carry from the mantissa into the exponent: 2 - ulp/2 ties to even 2.0.
  EXPECT_EQ(half_bits(2.0f - ulp1 / 2), 0x4000);
  EXPECT_EQ(half_bits(2.0f - ulp1 / 4), 0x4000);
  // Subnormals: half of the smallest subnormal ties to 0, 1.5 of it ties to 2 (even).
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(half_bits(std::ldexp(3.0f, -25)), 0x0002);
  EXPECT_EQ(half_bits(std::ldexp(5.0f, -25)), 0x0002);
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -26)), 0x0000);
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -25) + std::ldexp(1.0f, -30)), 0x0001);
  // Rounding the largest subnormal up lands on the smallest normal.
  EXPECT_EQ(half_bits(std::ldexp(2047.0f, -25)), 0x0400);
  EXPECT_EQ(half_bits(-std::ldexp(2047.0f, -25)), 0x8400);
}

TEST(HalfTest, EveryNonNanPatternRoundTripsExactly) {
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    const float f = half_value(static_cast<uint16_t>(b));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(half_value(half_bits(f)))) << std::hex << b;
      continue;
    }
    ASSERT_EQ(half_bits(f), b) << std::hex << b;
  }
}

TEST(HalfTest, RandomFloatsRoundTripWithinHalfAnUlp) {
  std::mt19937 rng(12345);
  std::uniform_real_distribution<float> mag(-14.0f, 15.9f);
  std::uniform_int_distribution<int> sign(0, 1);
  for (int i = 0; i < 20000; ++i) {
    const float f = (sign(rng) ? -1.0f : 1.0f) * std::exp2(mag(rng));
    const float back = half(f);
    // Normal range: relative error at most 2^-11 (half an ulp of an 11-bit significand).
    EXPECT_LE(std::fabs(back - f), std::ldexp(std::fabs(f), -11)) << f;
  }
  std::uniform_real_distribution<float> small(-6e-5f, 6e-5f);
  for (int i = 0; i < 2000; ++i) {
    const float f = small(rng);
    // Subnormal range: absolute error at most half the subnormal step 2^-24.
    EXPECT_LE(std::fabs(static_cast<float>(half(f)) - f), std::ldexp(1.0f, -25)) << f;
  }
}

// ---------------------------------------------------------------------------------------------
// bfloat16

TEST(BFloat16Test, KnownBitPatterns) {
  EXPECT_EQ(bf16_bits(0.0f), 0x0000);
  EXPECT_EQ(bf16_bits(-0.0f), 0x8000);
  EXPECT_EQ(bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(bf16_bits(-2.0f), 0xc000);
  EXPECT_EQ(bf16_bits(0.5f), 0x3f00);
  EXPECT_EQ(bf16_bits(65504.0f), 0x4780);  // 65504 rounds to 65536 in bf16
  EXPECT_EQ(bf16_bits(65280.0f), 0x477f);  // representable exactly
  EXPECT_EQ(bf16_bits(std::ldexp(1.0f, -24)), 0x3380);
  EXPECT_EQ(bf16_bits(std::ldexp(1.0f, -133)), 0x0001);  // smallest bf16 subnormal
  EXPECT_EQ(bf16_bits(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(bf16_bits(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(bf16_bits(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to infinity
}

TEST(BFloat16Test, KnownValuesFromBits) {
  EXPECT_EQ(bf16_value(0x3f80), 1.0f);
  EXPECT_EQ(bf16_value(0xc000), -2.0f);
  EXPECT_EQ(bf16_value(0x4780), 65536.0f);
  EXPECT_EQ(bf16_value(0x3380), std::ldexp(1.0f, -24));
  EXPECT_EQ(bf16_value(0x7f7f), bits_to_float(0x7f7f0000u));  // largest finite
  EXPECT_EQ(bf16_value(0x7f80), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(bf16_value(0x7fc0)));
  EXPECT_TRUE(std::isnan(bf16_value(0x7f81)));
}

TEST(BFloat16Test, NanStaysNan) {
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  const float nans[] = {qnan, -qnan,
                        bits_to_float(0x7f800001u),  // payload only in bits truncation drops
                        bits_to_float(0x7fffffffu),  // rounding would carry into the sign
                        bits_to_float(0xff800001u)};
  for (float f : nans) {
    const uint16_t b = bf16_bits(f);
    EXPECT_EQ(b & 0x7f80, 0x7f80) << std::hex << b;
    EXPECT_NE(b & 0x007f, 0) << std::hex << b;
    EXPECT_TRUE(std::isnan(bf16_value(b)));
    EXPECT_EQ(b & 0x8000, (float_to_bits(f) >> 16) & 0x8000) << "sign kept";
  }
}

TEST(BFloat16Test, RoundToNearestEven) {
  const float ulp1 = std::ldexp(1.0f, -7);            // spacing of bf16 in [1, 2)
  EXPECT_EQ(bf16_bits(1.0f + ulp1 / 2), 0x3f80);      // tie to even (down)
  EXPECT_EQ(bf16_bits(1.0f + 3 * ulp1 / 2), 0x3f82);  // tie to even (up)
  EXPECT_EQ(bf16_bits(1.0f + ulp1 / 2 + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_EQ(bf16_bits(1.0f + ulp1 / 2 - std::ldexp(1.0f, -20)), 0x3f80);
  EXPECT_EQ(bf16_bits(2.0f - ulp1 / 2), 0x4000);  // a tie; the carry reaches the exponent
  EXPECT_EQ(bf16_bits(2.0f - ulp1 / 4), 0x4000);
  EXPECT_EQ(bf16_bits(bits_to_float(0x3f808000u)), 0x3f80);
  EXPECT_EQ(bf16_bits(bits_to_float(0x3f818000u)), 0x3f82);
  EXPECT_EQ(bf16_bits(bits_to_float(0xbf818000u)), 0xbf82);
}

TEST(BFloat16Test, EveryNonNanPatternRoundTripsExactly) {
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    const float f = bf16_value(static_cast<uint16_t>(b));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_value(bf16_bits(f)))) << std::hex << b;
      continue;
    }
    ASSERT_EQ(bf16_bits(f), b) << std::hex << b;
  }
}

TEST(BFloat16Test, RandomFloatsRoundTripWithinHalfAnUlp) {
  std::mt19937 rng(777);
  std::uniform_real_distribution<float> mag(-120.0f, 120.0f);
  std::uniform_int_distribution<int> sign(0, 1);
  for (int i = 0; i < 20000; ++i) {
    const float f = (sign(rng) ? -1.0f : 1.0f) * std::exp2(mag(rng));
    const float back = bfloat16(f);
    EXPECT_LE(std::fabs(back - f), std::ldexp(std::fabs(f), -8)) << f;
    // bf16 is a truncated float: the low 16 bits of the result are zero.
    EXPECT_EQ(float_to_bits(back) & 0xffffu, 0u);
  }
}

// ---------------------------------------------------------------------------------------------
// Device

}  // namespace
}  // namespace eagle
