// Tests of streams.
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

// ---------------------------------------------------------------------------------------------
// Stream

TEST(StreamTest, CpuStream) {
  Stream s(Device::cpu());
  EXPECT_EQ(s.device(), Device::cpu());
  EXPECT_EQ(s.native(), nullptr);
  EXPECT_NO_THROW(s.synchronize());
  EXPECT_NO_THROW(s.synchronize());
  Stream moved(std::move(s));
  EXPECT_EQ(moved.device(), Device::cpu());
  EXPECT_NO_THROW(moved.synchronize());
}

TEST(StreamTest, AbsentCudaDeviceThrows) {
  const Device absent = Device::cuda(cuda_device_count());
  expect_throw_with<InvalidArgument>([&] { Stream s(absent); }, {absent.str()});
  EXPECT_THROW({ Stream s(Device::cuda(40)); }, InvalidArgument);
}

class StreamOnDevice : public OnDevice {};
EAGLE_ON_EVERY_DEVICE(StreamOnDevice);

TEST_P(StreamOnDevice, MoveTransfersTheHandle) {
  Stream a(device());
  void* handle = a.native();
  EXPECT_EQ(handle != nullptr, device().is_cuda());
  Stream b(std::move(a));
  EXPECT_EQ(b.native(), handle);
  EXPECT_EQ(b.device(), device());
  EXPECT_EQ(a.native(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
  Stream c(Device::cpu());
  c = std::move(b);
  EXPECT_EQ(c.native(), handle);
  EXPECT_EQ(c.device(), device());
  EXPECT_NO_THROW(c.synchronize());
  Stream& alias = c;
  c = std::move(alias);  // self-move keeps the stream
  EXPECT_EQ(c.native(), handle);
}

}  // namespace
}  // namespace eagle
