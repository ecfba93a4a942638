// Tests of the test support library itself.
#include <gtest/gtest.h>

#include <cmath>

#include "eagle/eagle.hpp"
#include "test_util.hpp"

namespace eagle {
namespace {

// The test helpers themselves: every dtype gets random values of its own type and a poison.
TEST(TestUtil, RandomArrayAndPoisonServeEveryDType) {
  for (DType d : {DType::f64, DType::f32, DType::f16, DType::bf16, DType::i64, DType::i32,
                  DType::u32, DType::u8, DType::boolean}) {
    Array a = test::random_array({64}, d, Device::cpu());
    EXPECT_EQ(a.dtype(), d) << dtype_name(d);
    test::poison(a);
    const auto v = a.to_vector<double>();
    if (is_floating(d)) {
      EXPECT_TRUE(std::isnan(v[0])) << dtype_name(d);
    } else if (d == DType::boolean) {
      const auto* bytes = static_cast<const uint8_t*>(a.data());
      EXPECT_EQ(bytes[0], 0xAB);
    } else {
      EXPECT_NE(v[0], 0.0) << dtype_name(d);
      EXPECT_NE(v[0], 1.0) << dtype_name(d);
    }
  }
}

}  // namespace
}  // namespace eagle
