// The tape kernels of reverse mode (eagle/kernel/tape.hpp): a row written at the turn the index
// cell holds, a strided view taped as it lies (its row contiguous), an index past the tape
// writing nothing, and the row read back. The loops' use is in tests/diff/test_diff_control.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "eagle/eagle.hpp"
#include "eagle/kernel/tape.hpp"
#include "test_util.hpp"

namespace eagle {
namespace {

class Tape : public test::OnDeviceWithStream {
 protected:
  Array cell(uint32_t v) { return Array::from(std::vector<uint32_t>{v}, {1}, device()); }
};
EAGLE_ON_EVERY_DEVICE(Tape);

TEST_P(Tape, AStridedViewIsTapedAtTheIndexAndReadBack) {
  const Array m = test::random_array({2, 3}, DType::f64, device());
  // m transposed: [3, 2] with strides {1, 3}, a view of m's memory.
  const Array view = Array::wrap(m.data(), {3, 2}, DType::f64, device(), {1, 3});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Array tape = Array::from(std::vector<double>(3 * 6, nan), {3, 3, 2}, device());
  launch(kernels::tape_write(), {view, cell(1), tape}, {}, stream(), team_);
  launch(kernels::tape_write(), {view, cell(3), tape}, {}, stream(), team_);  // past the tape
  const std::vector<Array> back =
      launch(kernels::tape_read(), {tape, cell(1)}, {}, stream(), team_);
  stream().synchronize();
  const std::vector<double> hm = m.to_vector<double>(), got = tape.to_vector<double>();
  const std::vector<double> row = back[0].to_vector<double>();
  ASSERT_EQ(back[0].shape(), (Shape{3, 2}));
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 2; ++j) {
      EXPECT_EQ(got[6 + i * 2 + j], hm[j * 3 + i]) << i << ", " << j;
      EXPECT_EQ(row[i * 2 + j], hm[j * 3 + i]) << i << ", " << j;
    }
  for (std::size_t k : {0u, 1u, 2u, 3u, 4u, 5u, 12u, 13u, 14u, 15u, 16u, 17u})
    EXPECT_TRUE(std::isnan(got[k])) << "rows 0 and 2 are untouched: element " << k;
}

TEST_P(Tape, ATapeOfTheWrongShapeIsRefused) {
  const Array src = test::random_array({3, 2}, DType::f32, device());
  const Array tape = test::random_array({4, 2, 3}, DType::f32, device());
  test::expect_invalid(
      [&] {
        launch(kernels::tape_write(), {src, cell(0), tape}, {}, stream(), team_);
      },
      {"tape_write", "'tape'", "[cap] + src's shape"});
}

}  // namespace
}  // namespace eagle
