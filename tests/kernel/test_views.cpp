// The strided-view kernels (eagle/kernel/views.hpp) on every device: gather a transpose into a
// contiguous array, add into and zero a column slice where it lies, and the refusals.
#include <gtest/gtest.h>

#include <vector>

#include "eagle/eagle.hpp"
#include "test_util.hpp"

namespace eagle {
namespace {

class Views : public test::OnDeviceWithStream {};
EAGLE_ON_EVERY_DEVICE(Views);

TEST_P(Views, GatherAddAndZeroGoWhereTheViewLies) {
  const Array m = test::random_array({3, 4}, DType::f32, device());
  const std::vector<float> hm = m.to_vector<float>();
  // The transpose [4, 3] (strides {1, 4}) gathered: out[j][i] = m[i][j].
  const Array t = Array::wrap(m.data(), {4, 3}, DType::f32, device(), {1, 4});
  const std::vector<Array> out = launch(kernels::gather_view(), {t}, {}, stream(), team_);
  stream().synchronize();
  ASSERT_EQ(out[0].shape(), (Shape{4, 3}));
  const std::vector<float> g = out[0].to_vector<float>();
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 4; ++j) EXPECT_EQ(g[j * 3 + i], hm[i * 4 + j]);
  // Columns 1 and 3 (strides {4, 2}): += c, then the other columns zeroed.
  const Array odd =
      Array::wrap(static_cast<float*>(m.data()) + 1, {3, 2}, DType::f32, device(), {4, 2});
  const Array c = test::random_array({3, 2}, DType::f32, device());
  const std::vector<float> hc = c.to_vector<float>();
  launch(kernels::add_to_view(), {odd, c}, {}, stream(), team_);
  const Array even = Array::wrap(m.data(), {3, 2}, DType::f32, device(), {4, 2});
  launch(kernels::zero_view(), {even}, {}, stream(), team_);
  stream().synchronize();
  const std::vector<float> got = m.to_vector<float>();
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t k = 0; k < 2; ++k) {
      EXPECT_EQ(got[i * 4 + 2 * k], 0.0f) << i << ", " << k;
      EXPECT_EQ(got[i * 4 + 2 * k + 1], hm[i * 4 + 2 * k + 1] + hc[i * 2 + k]) << i << ", " << k;
    }
}

// scatter_view copies into a view in every float dtype (16-bit ones as bits): the transpose of a
// bf16 matrix written from a contiguous one, then gathered back unchanged.
TEST_P(Views, ScatterWritesWhereTheViewLiesInSixteenBits) {
  for (DType dtype : {DType::bf16, DType::f16, DType::f32}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const Array m = test::random_array({3, 4}, dtype, device());
    const Array c = test::random_array({4, 3}, dtype, device());
    const Array t = Array::wrap(m.data(), {4, 3}, dtype, device(), {1, 4});
    launch(kernels::scatter_view(), {t, c}, {}, stream(), team_);
    const std::vector<Array> back = launch(kernels::gather_view(), {t}, {}, stream(), team_);
    stream().synchronize();
    const std::vector<double> hc = c.to_vector<double>(), got = m.to_vector<double>();
    EXPECT_EQ(back[0].to_vector<double>(), hc);
    for (std::size_t i = 0; i < 3; ++i)
      for (std::size_t j = 0; j < 4; ++j) EXPECT_EQ(got[i * 4 + j], hc[j * 3 + i]);
  }
  const Array m = test::random_array({2, 3}, DType::bf16, device());
  test::expect_invalid(
      [&] {
        launch(kernels::scatter_view(), {m, test::random_array({2, 3}, DType::f32, device())}, {},
               stream(), team_);
      },
      {"scatter_view", "'c'", "'view''s shape and dtype"});
}

// A [T, H, D] column slice of a packed [T, 3 H D] bf16 array (tokens 3 H D apart: a qkv
// projection's k), written from a contiguous one: only its bytes change.
TEST_P(Views, ScatterIntoAThreeDimensionalColumnSlice) {
  const int64_t T = 5, H = 2, D = 4, row = 3 * H * D;
  const Array m = test::random_array({T, row}, DType::bf16, device());
  const std::vector<double> before = m.to_vector<double>();
  const Array c = test::random_array({T, H, D}, DType::bf16, device());
  const auto item = static_cast<int64_t>(itemsize(DType::bf16));
  const Array k = Array::wrap(static_cast<char*>(m.data()) + H * D * item, {T, H, D}, DType::bf16,
                              device(), {row, D, 1});
  launch(kernels::scatter_view(), {k, c}, {}, stream(), team_);
  stream().synchronize();
  const std::vector<double> hc = c.to_vector<double>(), got = m.to_vector<double>();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < row; ++j) {
      const auto at = static_cast<std::size_t>(t * row + j);
      const bool in_k = j >= H * D && j < 2 * H * D;
      EXPECT_EQ(got[at], in_k ? hc[static_cast<std::size_t>(t * H * D + j - H * D)] : before[at])
          << t << ", " << j;
    }
}

TEST_P(Views, RefusesAMismatchedCotangentAndSixteenBitSums) {
  const Array m = test::random_array({2, 3}, DType::f32, device());
  const Array c = test::random_array({3, 3}, DType::f32, device());
  test::expect_invalid(
      [&] {
        launch(kernels::add_to_view(), {m, c}, {}, stream(), team_);
      },
      {"add_to_view", "'c'", "'view''s shape"});
  const Array h = test::random_array({2, 3}, DType::f16, device());
  EXPECT_THROW(launch(kernels::add_to_view(), {h, h}, {}, stream(), team_), NotSupported);
}

}  // namespace
}  // namespace eagle
