// Tests of saturating_cast, the one real-to-integer conversion rule (host side; the same header
// compiles for CUDA device code).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "eagle/core/convert.hpp"

namespace eagle {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

template <class Int>
void expect_saturates() {
  using L = std::numeric_limits<Int>;
  SCOPED_TRACE(sizeof(Int) * 8);
  EXPECT_EQ(saturating_cast<Int>(kNaN), Int(0));
  EXPECT_EQ(saturating_cast<Int>(-kNaN), Int(0));
  EXPECT_EQ(saturating_cast<Int>(kInf), L::max());
  EXPECT_EQ(saturating_cast<Int>(-kInf), L::min());
  EXPECT_EQ(saturating_cast<Int>(1e30), L::max());
  EXPECT_EQ(saturating_cast<Int>(-1e30), L::min());
  EXPECT_EQ(saturating_cast<Int>(static_cast<double>(L::max())), L::max());
  EXPECT_EQ(saturating_cast<Int>(static_cast<double>(L::min())), L::min());
  // Truncation toward zero inside the range.
  EXPECT_EQ(saturating_cast<Int>(2.9), Int(2));
  EXPECT_EQ(saturating_cast<Int>(0.0), Int(0));
  EXPECT_EQ(saturating_cast<Int>(-0.0), Int(0));
  if constexpr (L::is_signed) {
    EXPECT_EQ(saturating_cast<Int>(-2.9), Int(-2));
    EXPECT_EQ(saturating_cast<Int>(-0.5), Int(0));
  } else {
    EXPECT_EQ(saturating_cast<Int>(-2.9), Int(0));
    EXPECT_EQ(saturating_cast<Int>(-0.5), Int(0));
  }
}

TEST(SaturatingCastTest, EveryIntegerTypeSaturatesAndMapsNaNToZero) {
  expect_saturates<int64_t>();
  expect_saturates<int32_t>();
  expect_saturates<int16_t>();
  expect_saturates<int8_t>();
  expect_saturates<uint64_t>();
  expect_saturates<uint32_t>();
  expect_saturates<uint16_t>();
  expect_saturates<uint8_t>();
}

TEST(SaturatingCastTest, EdgesOfTheRange) {
  // 2^63 is the first double above INT64_MAX; the double below it converts exactly.
  EXPECT_EQ(saturating_cast<int64_t>(9223372036854775808.0), INT64_MAX);
  EXPECT_EQ(saturating_cast<int64_t>(std::nextafter(9223372036854775808.0, 0.0)),
            int64_t{9223372036854774784});
  EXPECT_EQ(saturating_cast<int32_t>(2147483647.9), INT32_MAX);
  EXPECT_EQ(saturating_cast<int32_t>(2147483648.0), INT32_MAX);
  EXPECT_EQ(saturating_cast<int32_t>(-2147483648.9), INT32_MIN);
  EXPECT_EQ(saturating_cast<uint32_t>(4294967295.5), UINT32_MAX);
  EXPECT_EQ(saturating_cast<uint32_t>(4294967296.0), UINT32_MAX);
  EXPECT_EQ(saturating_cast<uint8_t>(255.99), 255);
  EXPECT_EQ(saturating_cast<uint8_t>(256.0), 255);
  EXPECT_EQ(saturating_cast<uint64_t>(18446744073709551616.0), UINT64_MAX);
  // A float argument converts exactly to double first.
  EXPECT_EQ(saturating_cast<int32_t>(3e9f), INT32_MAX);
}

}  // namespace
}  // namespace eagle
