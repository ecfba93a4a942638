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

TEST(StreamTest, BorrowRefusesACpuHandleAndAnAbsentDevice) {
  Stream cpu = Stream::borrow(Device::cpu(), nullptr);
  EXPECT_EQ(cpu.native(), nullptr);
  EXPECT_FALSE(cpu.borrowed());
  int not_a_stream = 0;
  expect_throw_with<InvalidArgument>([&] { Stream::borrow(Device::cpu(), &not_a_stream); },
                                     {"borrow", "nullptr"});
  const Device absent = Device::cuda(cuda_device_count());
  expect_throw_with<InvalidArgument>([&] { Stream::borrow(absent, nullptr); },
                                     {"borrow", absent.str()});
}

// A borrowed stream orders eagle's work on the caller's stream and outlives eagle's handle: the
// owner destroys it after eagle's Stream is gone (a double destroy would fail under memcheck).
TEST_P(StreamOnDevice, BorrowedStreamIsUsedAndNotDestroyed) {
  if (device().is_cpu()) GTEST_SKIP() << "a borrowed stream is a CUDA stream";
  Stream owner(device());
  Array src = Array::from(std::vector<float>{1, 2, 3}, {3}, device());
  Array dst = Array::empty({3}, DType::f32, device());
  {
    Stream borrowed = Stream::borrow(device(), owner.native());
    EXPECT_TRUE(borrowed.borrowed());
    EXPECT_EQ(borrowed.native(), owner.native());
    dst.copy_from(src, &borrowed);
    borrowed.synchronize();
    Stream legacy = Stream::borrow(device(), nullptr);  // the legacy default stream
    EXPECT_NO_THROW(legacy.synchronize());
  }
  EXPECT_EQ(dst.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_NO_THROW(owner.synchronize());  // still a live stream
}

}  // namespace
}  // namespace eagle
