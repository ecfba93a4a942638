// Tests of the argument block: its byte layout (what a CUDA kernel receives) and how arrays are
// packed into it.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>

#include "eagle/eagle.hpp"
#include "test_util.hpp"

namespace eagle {
namespace {

using test::expect_throw_with;

TEST(ArgBlockTest, LayoutIsThatOfKernelArgsN) {
  ArgBlock b(3, 2);
  EXPECT_EQ(b.num_arrays(), 3);
  EXPECT_EQ(b.num_scalars(), 2);
  EXPECT_EQ(b.bytes(), sizeof(KernelArgsN<3, 2>));
  int x = 0;
  b.array(1) = make_array_arg(&x, {2, 5}, DType::i32);
  b.scalar(0).f = 1.5;
  b.scalar(1).i = -7;
  KernelArgsN<3, 2> n;
  std::memcpy(&n, b.data(), sizeof(n));
  EXPECT_EQ(n.arrays[1].data, &x);
  EXPECT_EQ(n.arrays[1].dims[1], 5);
  EXPECT_EQ(n.scalars[0].f, 1.5);
  EXPECT_EQ(n.scalars[1].i, -7);
  EXPECT_EQ(n.num_arrays, 3);
  EXPECT_EQ(n.num_scalars, 2);
  // The view a CPU implementation reads points into the same bytes.
  const KernelArgs v = b.view();
  EXPECT_EQ(v.num_arrays, 3);
  EXPECT_EQ(v.num_scalars, 2);
  EXPECT_EQ(v.arrays[1].data, &x);
  EXPECT_EQ(v.scalars[1].i, -7);
}

TEST(ArgBlockTest, NoScalarsStillHasTheirSlot) {
  ArgBlock b(1, 0);
  EXPECT_EQ(b.bytes(), sizeof(KernelArgsN<1, 0>));
  KernelArgsN<1, 0> n;
  std::memcpy(&n, b.data(), sizeof(n));
  EXPECT_EQ(n.num_arrays, 1);
  EXPECT_EQ(n.num_scalars, 0);
}

TEST(ArgBlockTest, ManyArraysAndScalars) {
  ArgBlock b(17, 9);
  EXPECT_EQ(b.bytes(), args_block_bytes(17, 9));
  for (int i = 0; i < 17; ++i) b.array(i).numel = i + 100;
  for (int i = 0; i < 9; ++i) b.scalar(i).i = i * 3;
  const KernelArgs v = b.view();
  for (int i = 0; i < 17; ++i) EXPECT_EQ(v.arrays[i].numel, i + 100);
  for (int i = 0; i < 9; ++i) EXPECT_EQ(v.scalars[i].i, i * 3);
  // A copy is independent.
  ArgBlock c = b;
  c.scalar(0).i = 99;
  EXPECT_EQ(b.scalar(0).i, 0);
}

TEST(ArrayArgTest, PacksShapeAndStrides) {
  int dummy = 0;
  ArrayArg a = make_array_arg(&dummy, {2, 3, 4, 5, 6, 7, 8, 9}, DType::f16);
  EXPECT_EQ(a.data, &dummy);
  EXPECT_EQ(a.numel, 2 * 3 * 4 * 5 * 6 * 7 * 8 * 9);
  EXPECT_EQ(a.ndim, 8);
  EXPECT_EQ(a.dtype, static_cast<int32_t>(DType::f16));
  const int64_t dims[] = {2, 3, 4, 5, 6, 7, 8, 9};
  int64_t stride = 1;
  for (int i = 7; i >= 0; --i) {
    EXPECT_EQ(a.dims[i], dims[i]);
    EXPECT_EQ(a.strides[i], stride);  // row-major when no strides are given
    stride *= dims[i];
  }

  a = make_array_arg(&dummy, {7, 9}, DType::i32, {1, 7});
  EXPECT_EQ(a.numel, 63);
  EXPECT_EQ(a.ndim, 2);
  EXPECT_EQ(a.strides[0], 1);
  EXPECT_EQ(a.strides[1], 7);
  for (int i = 2; i < kMaxDims; ++i) {
    EXPECT_EQ(a.dims[i], 1);
    EXPECT_EQ(a.strides[i], 0);
  }

  a = make_array_arg(&dummy, {}, DType::f64);
  EXPECT_EQ(a.numel, 1);
  EXPECT_EQ(a.ndim, 0);
  a = make_array_arg(&dummy, {4, 0, 3}, DType::u8);
  EXPECT_EQ(a.numel, 0);
}

TEST(ArrayArgTest, RankPastTheLimitIsRefused) {
  int dummy = 0;
  expect_throw_with<InvalidArgument>(
      [&] { make_array_arg(&dummy, Shape(9, 2), DType::f32, {}, "argument 'q'"); },
      {"argument 'q'", "9 dims", "at most 8"});
  expect_throw_with<InvalidArgument>(
      [&] {
        make_array_arg(&dummy, {int64_t{1} << 62, 8}, DType::f32, {}, "argument 'q'");
      },
      {"argument 'q'", "fit"});
}

TEST(ArrayArgTest, FromArraysKeepsTheirStrides) {
  const Array m = Array::empty({4, 5}, DType::f32, Device::cpu());
  const Array rows = m.slice(0, 1, 3);
  ArrayArg a = make_array_arg(rows, "argument 'x'");
  EXPECT_EQ(a.data, rows.data());
  EXPECT_EQ(a.numel, 10);
  EXPECT_EQ(a.dims[0], 2);
  EXPECT_EQ(a.dims[1], 5);
  const Array cols = m.slice(1, 1, 3);
  a = make_array_arg(cols, "argument 'x'");
  EXPECT_EQ(a.dims[1], 2);
  EXPECT_EQ(a.strides[0], 5);
  EXPECT_EQ(a.strides[1], 1);
  expect_throw_with<InvalidArgument>([&] { make_array_arg(Array(), "argument 'u'"); },
                                     {"argument 'u'", "undefined"});
}

}  // namespace
}  // namespace eagle
