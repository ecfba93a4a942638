// The test support library: include this one header. Pieces, by responsibility:
//   random.hpp   the suite's one random source (EAGLE_TEST_SEED), integer / index / ragged data
//   arrays.hpp   arrays from host values and back
//   poison.hpp   NaN and sentinel poison, padding rows of ragged buffers
//   compare.hpp  relative error, per-dtype tolerances, elementwise checks, expected exceptions
//   env.hpp      scoped environment variables
//   dense.hpp    float64 Dense tensors (the reference math's data form) and oracles/ (one
//                float64 oracle per kind of op) are included where needed
//   engine_sweep.hpp  every op x dtype x knob of an engine against the reference engine
//   kernel_check.hpp  eager kernel launches against float64 values (launch and launch_into)
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "arrays.hpp"
#include "compare.hpp"
#include "eagle/eagle.hpp"
#include "env.hpp"
#include "poison.hpp"
#include "random.hpp"

namespace eagle::test {

// Every device test runs on the CPU and on cuda:0; the CUDA half skips without a GPU.
class OnDevice : public ::testing::TestWithParam<Device> {
 protected:
  void SetUp() override {
    if (GetParam().is_cuda() && !cuda_available()) GTEST_SKIP() << "no CUDA device";
  }
  Device device() const { return GetParam(); }
};

// A device test with a stream on its device and a CPU thread team of two.
class OnDeviceWithStream : public OnDevice {
 protected:
  void SetUp() override {
    OnDevice::SetUp();
    if (IsSkipped()) return;
    stream_ = std::make_unique<Stream>(device());
  }
  const Stream& stream() const { return *stream_; }
  ThreadTeam team_{2};
  std::unique_ptr<Stream> stream_;
};

inline std::string device_name(const ::testing::TestParamInfo<Device>& info) {
  return info.param.is_cpu() ? "cpu" : "cuda";
}

#define EAGLE_ON_EVERY_DEVICE(Suite)                                                            \
  INSTANTIATE_TEST_SUITE_P(Devices, Suite,                                                      \
                           ::testing::Values(::eagle::Device::cpu(), ::eagle::Device::cuda(0)), \
                           ::eagle::test::device_name)

// A descriptor of a GPU that need not be attached ("cuda:0" at `sm`): planning, capabilities
// and declines read nothing else.
inline DeviceProperties stand_in_gpu(int sm, int multiprocessors = 132) {
  DeviceProperties d;
  d.device = "cuda:0";
  d.name = "stand-in GPU";
  d.sm = sm;
  d.multiprocessors = multiprocessors;
  return d;
}

}  // namespace eagle::test
