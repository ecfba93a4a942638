// Tests of eager launches: what recording refuses is refused here too, before anything runs.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "eagle/eagle.hpp"
#include "test_util.hpp"
#include "testing_kernels.hpp"
#include "typed_kernels.hpp"

namespace eagle {
namespace {

using test::expect_throw_with;

class Eager : public test::OnDeviceWithStream {};
EAGLE_ON_EVERY_DEVICE(Eager);

TEST_P(Eager, OutputOverlappingAnInputIsRefused) {
  const Array buf = test::random_array({16}, DType::f32, device());
  const auto before = buf.to_vector<float>();
  const Array a = buf.slice(0, 0, 8), shifted = buf.slice(0, 4, 12);
  const Array b = test::random_array({8}, DType::f32, device());
  expect_throw_with<InvalidArgument>(
      [&] {
        launch_into(kernels::add(), {a, b}, {}, {shifted}, stream(), team_);
      },
      {"kernel add", "'out'", "overlaps", "'a'", "exactly the same view"});
  EXPECT_EQ(buf.to_vector<float>(), before);  // nothing ran
  // The very same view of a per-sample kernel is an in-place update.
  launch_into(kernels::add(), {a, b}, {}, {a}, stream(), team_);
  stream().synchronize();
  const auto hb = b.to_vector<float>();
  const auto got = buf.to_vector<float>();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(got[i], before[i] + hb[i]);
}

TEST_P(Eager, InPlaceIntoANonPerSampleKernelIsRefused) {
  const Array x = test::random_array({64}, DType::f32, device());
  const Array out = Array::empty({1}, DType::f32, device());
  // sum reduces: its output overlapping its input would race.
  const Array head = x.slice(0, 0, 1);
  expect_throw_with<InvalidArgument>(
      [&] { launch_into(kernels::sum(), {x}, {}, {head}, stream(), team_); },
      {"kernel sum", "overlaps"});
}

TEST_P(Eager, ReadOnlyOutputIsRefused) {
  const Array x = test::random_array({8}, DType::f32, device());
  const Array out = Array::empty({8}, DType::f32, device());
  test::poison(out);
  expect_throw_with<InvalidArgument>(
      [&] { launch_into(kernels::copy(), {x}, {}, {out.as_read_only()}, stream(), team_); },
      {"kernel copy", "'out'", "read-only"});
  // Reading a read-only array is fine.
  launch_into(kernels::copy(), {x.as_read_only()}, {}, {out}, stream(), team_);
  stream().synchronize();
  EXPECT_EQ(out.to_vector<float>(), x.to_vector<float>());
}

TEST_P(Eager, UndefinedArraysAreRefused) {
  const Array x = test::random_array({8}, DType::f32, device());
  expect_throw_with<InvalidArgument>(
      [&] {
        launch(kernels::add(), {x, Array()}, {}, stream(), team_);
      },
      {"kernel add", "'b'", "undefined"});
  expect_throw_with<InvalidArgument>(
      [&] { launch_into(kernels::copy(), {x}, {}, {Array()}, stream(), team_); },
      {"kernel copy", "output 0", "undefined"});
}

TEST_P(Eager, StridedArrayForAContiguousParameterIsRefused) {
  const Array m = test::random_array({4, 6}, DType::f32, device());
  expect_throw_with<InvalidArgument>(
      [&] { launch(kernels::copy(), {m.slice(1, 0, 3)}, {}, stream(), team_); },
      {"kernel copy", "'x'", "contiguous", "[6,1]"});
}

TEST_P(Eager, AWrittenViewWhoseStridesOverlapItselfIsRefused) {
  // A strided read-write parameter takes views, but not one giving two elements one address.
  const Array row = test::random_array({1, 4}, DType::f32, device());
  const auto before = row.to_vector<float>();
  const Array repeated = Array::wrap(row.data(), {3, 4}, DType::f32, device(), {0, 1});
  expect_throw_with<InvalidArgument>(
      [&] { launch(test::typed_strided_scale(), {repeated}, {2.0}, stream(), team_); },
      {"typed_strided_scale", "'x'", "[0,1]", "one address"});
  EXPECT_EQ(row.to_vector<float>(), before);
  // A real strided view (every other column) is scaled in place.
  const Array m = test::random_array({3, 6}, DType::f32, device());
  const auto hm = m.to_vector<float>();
  const Array cols = Array::wrap(m.data(), {3, 3}, DType::f32, device(), {6, 2});
  launch(test::typed_strided_scale(), {cols}, {2.0}, stream(), team_);
  stream().synchronize();
  const auto got = m.to_vector<float>();
  for (int i = 0; i < 18; ++i) EXPECT_EQ(got[i], (i % 2 == 0 ? 2.0f : 1.0f) * hm[i]) << i;
}

TEST_P(Eager, ArrayOnAnotherDeviceIsRefused) {
  if (!cuda_available()) GTEST_SKIP() << "needs a GPU and the CPU";
  const Device other = device().is_cpu() ? Device::cuda(0) : Device::cpu();
  const Array x = test::random_array({8}, DType::f32, other);
  expect_throw_with<InvalidArgument>([&] { launch(kernels::copy(), {x}, {}, stream(), team_); },
                                     {"'x'", "is on " + other.str()});
}

}  // namespace
}  // namespace eagle
