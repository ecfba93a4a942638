#include <gtest/gtest.h>

#include "eagle/eagle.hpp"

TEST(Smoke, Builds) { EXPECT_EQ(eagle::itemsize(eagle::DType::f32), 4u); }
