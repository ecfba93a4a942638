// Tests of the checked shape arithmetic every layer uses to turn shapes into counts, bytes and
// byte extents, and of the overlap test for output layouts.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "eagle/core/error.hpp"
#include "eagle/core/shape.hpp"
#include "test_util.hpp"

namespace eagle {
namespace {

using test::expect_throw_with;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TEST(ShapeTest, CheckedNumelCountsElements) {
  EXPECT_EQ(checked_numel(Shape{}, "t"), 1);
  EXPECT_EQ(checked_numel({2, 3, 4}, "t"), 24);
  EXPECT_EQ(checked_numel({kMax}, "t"), kMax);
  // A zero dim makes the array empty whatever the other dims are: nothing to overflow.
  EXPECT_EQ(checked_numel({kMax, kMax, 0}, "t"), 0);
}

TEST(ShapeTest, CheckedNumelRefusesOverflowAndNegativeDims) {
  expect_throw_with<InvalidArgument>(
      [] {
        checked_numel({int64_t{1} << 32, int64_t{1} << 31}, "f");
      },
      {"f: ", "[4294967296,2147483648]", "more elements than fit", "int64"});
  // The product wraps to 0 in 64-bit arithmetic: still refused.
  expect_throw_with<InvalidArgument>(
      [] {
        checked_numel({int64_t{1} << 32, int64_t{1} << 32}, "f");
      },
      {"int64"});
  expect_throw_with<InvalidArgument>(
      [] {
        checked_numel({3, -2}, "who");
      },
      {"who: ", "[3,-2]", "negative size in dim 1"});
}

TEST(ShapeTest, CheckedNbytesMultipliesByTheItemsize) {
  EXPECT_EQ(checked_nbytes({2, 3}, DType::f64, "t"), 48u);
  EXPECT_EQ(checked_nbytes({0}, DType::f32, "t"), 0u);
  EXPECT_EQ(checked_nbytes({kMax}, DType::u8, "t"), static_cast<std::size_t>(kMax));
  // 2^62 f32 elements are countable but take 2^64 bytes: the multiplication used to wrap to 0.
  expect_throw_with<InvalidArgument>(
      [] { checked_nbytes({int64_t{1} << 62}, DType::f32, "g"); },
      {"g: ", "[4611686018427387904]", "f32", "bytes", "more than fit in int64"});
  expect_throw_with<InvalidArgument>([] { checked_nbytes({-1}, DType::f32, "g"); },
                                     {"g: ", "negative"});
}

TEST(ShapeTest, CheckedByteExtentCoversEveryStride) {
  const ByteExtent dense = checked_byte_extent({2, 3}, {3, 1}, DType::f32, "t");
  EXPECT_EQ(dense.lo, 0);
  EXPECT_EQ(dense.hi, 24);
  const ByteExtent reversed = checked_byte_extent({4}, {-1}, DType::f64, "t");
  EXPECT_EQ(reversed.lo, -24);
  EXPECT_EQ(reversed.hi, 8);
  const ByteExtent empty = checked_byte_extent({0, 5}, {kMax, kMax}, DType::f64, "t");
  EXPECT_EQ(empty.lo, 0);
  EXPECT_EQ(empty.hi, 0);
  expect_throw_with<InvalidArgument>(
      [] { checked_byte_extent({2}, {int64_t{1} << 61}, DType::f32, "h"); },
      {"h: ", "[2]", "strides [2305843009213693952]", "do not fit in int64"});
  expect_throw_with<InvalidArgument>(
      [] {
        checked_byte_extent({3, 3}, {kMax / 3, kMax / 3}, DType::u8, "h");
      },
      {"do not fit in int64"});
  expect_throw_with<InvalidArgument>(
      [] {
        checked_byte_extent({2, 2}, {1}, DType::u8, "h");
      },
      {"h: ", "strides [1]", "one entry per dim"});
  expect_throw_with<InvalidArgument>([] { checked_byte_extent({-2}, {1}, DType::u8, "h"); },
                                     {"negative"});
}

TEST(ShapeTest, ContiguousStridesDoNotOverflowPastAZeroDim) {
  EXPECT_EQ(contiguous_strides({2, 3, 4}), (Shape{12, 4, 1}));
  EXPECT_EQ(contiguous_strides({5, 0, 2}), (Shape{0, 2, 1}));
  // Unchecked callers may pass an empty shape with huge dims: no signed overflow (UBSan).
  EXPECT_EQ(contiguous_strides({0, kMax, kMax}).back(), 1);
}

TEST(ShapeTest, MayOverlapSpotsSharedAddresses) {
  EXPECT_FALSE(may_overlap(Shape{2, 3}, Shape{3, 1}));
  EXPECT_FALSE(may_overlap(Shape{2, 3}, Shape{1, 2}));   // column-major
  EXPECT_FALSE(may_overlap(Shape{2, 3}, Shape{10, 2}));  // padded rows
  EXPECT_FALSE(may_overlap(Shape{4}, Shape{-1}));        // reversed
  EXPECT_FALSE(may_overlap(Shape{1, 3}, Shape{0, 1}));   // stride 0 on a dim of size 1
  EXPECT_FALSE(may_overlap(Shape{0, 3}, Shape{0, 0}));   // no elements
  EXPECT_TRUE(may_overlap(Shape{2, 3}, Shape{0, 1}));    // broadcast rows share memory
  EXPECT_TRUE(may_overlap(Shape{3}, Shape{0}));
  EXPECT_TRUE(may_overlap(Shape{2, 2}, Shape{1, 1}));  // offsets 0, 1, 1, 2
  EXPECT_TRUE(may_overlap(Shape{2, 3}, Shape{2, 1}));  // rows overlap by one element
  // |INT64_MIN| has no int64 value: not provably apart.
  EXPECT_TRUE(may_overlap(Shape{2}, Shape{std::numeric_limits<int64_t>::min()}));
  EXPECT_TRUE(may_overlap(Shape{2, 2}, Shape{1}));  // malformed: not provably apart
}

}  // namespace
}  // namespace eagle
