// Shared helpers for the tests: the device parameter, random inputs, poison and tolerances.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "eagle/eagle.hpp"

namespace eagle::test {

// Every device test runs on the CPU and on cuda:0; the CUDA half skips without a GPU.
class OnDevice : public ::testing::TestWithParam<Device> {
 protected:
  void SetUp() override {
    if (GetParam().is_cuda() && !cuda_available()) GTEST_SKIP() << "no CUDA device";
  }
  Device device() const { return GetParam(); }
};

inline std::string device_name(const ::testing::TestParamInfo<Device>& info) {
  return info.param.is_cpu() ? "cpu" : "cuda";
}

#define EAGLE_ON_EVERY_DEVICE(Suite)                                                            \
  INSTANTIATE_TEST_SUITE_P(Devices, Suite,                                                      \
                           ::testing::Values(::eagle::Device::cpu(), ::eagle::Device::cuda(0)), \
                           ::eagle::test::device_name)

// Fresh random values in [lo, hi) from a seed that differs per call (never zeros).
inline std::vector<double> random_values(std::size_t n, double lo = -1.0, double hi = 1.0) {
  static std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// A random array of `dtype` on `device` (values converted from doubles in [lo, hi)).
inline Array random_array(const Shape& shape, DType dtype, Device device, double lo = -1.0,
                          double hi = 1.0) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  auto v = random_values(static_cast<std::size_t>(n), lo, hi);
  switch (dtype) {
    case DType::f64:
      return Array::from(v, shape, device);
    case DType::f32:
      return Array::from(std::vector<float>(v.begin(), v.end()), shape, device);
    case DType::f16:
      return Array::from(std::vector<half>(v.begin(), v.end()), shape, device);
    case DType::bf16:
      return Array::from(std::vector<bfloat16>(v.begin(), v.end()), shape, device);
    case DType::i64: {
      std::vector<int64_t> w;
      for (double x : v) w.push_back(static_cast<int64_t>(x * 100));
      return Array::from(w, shape, device);
    }
    case DType::i32: {
      std::vector<int32_t> w;
      for (double x : v) w.push_back(static_cast<int32_t>(x * 100));
      return Array::from(w, shape, device);
    }
    case DType::u32: {
      std::vector<uint32_t> w;
      for (double x : v) w.push_back(static_cast<uint32_t>((x + 1) * 1000));
      return Array::from(w, shape, device);
    }
    case DType::boolean: {
      std::vector<bool> w;
      for (double x : v) w.push_back(x > 0);
      return Array::from(w, shape, device);
    }
    case DType::u8: {
      std::vector<uint8_t> w;
      for (double x : v) w.push_back(x > 0 ? 1 : 0);
      return Array::from(w, shape, device);
    }
  }
  return {};
}

// Fills an array with NaN (floats) or a large sentinel (integers), so unwritten elements show.
inline void poison(const Array& a) {
  std::vector<double> v(static_cast<std::size_t>(a.numel()),
                        is_floating(a.dtype()) ? std::nan("") : -123456789.0);
  Array host;
  switch (a.dtype()) {
    case DType::f64:
      host = Array::from(v, a.shape(), Device::cpu());
      break;
    case DType::f32:
      host = Array::from(std::vector<float>(v.begin(), v.end()), a.shape(), Device::cpu());
      break;
    case DType::f16:
      host = Array::from(std::vector<half>(v.begin(), v.end()), a.shape(), Device::cpu());
      break;
    case DType::bf16:
      host = Array::from(std::vector<bfloat16>(v.begin(), v.end()), a.shape(), Device::cpu());
      break;
    case DType::i64:
      host = Array::from(std::vector<int64_t>(v.begin(), v.end()), a.shape(), Device::cpu());
      break;
    case DType::i32:
      host = Array::from(std::vector<int32_t>(v.begin(), v.end()), a.shape(), Device::cpu());
      break;
    case DType::u32:
      host = Array::from(std::vector<uint32_t>(v.size(), 0xDEADBEEFu), a.shape(), Device::cpu());
      break;
    default: {
      // u8 and bool: a byte pattern no kernel writes (bool storage is bytes).
      std::vector<uint8_t> bytes(v.size(), 0xAB);
      host = Array::wrap(bytes.data(), a.shape(), a.dtype(), Device::cpu()).to(Device::cpu());
      break;
    }
  }
  a.copy_from(host);
}

// Relative error ||got - want|| / ||want||, NaN if any element of got is NaN (NaN never passes).
inline double rel_error(const std::vector<double>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i])) return std::nan("");
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

// Tolerances from the method: f32 far under 1e-3; 16-bit formats between 1e-3 and 1e-2.
inline double tolerance(DType d) {
  switch (d) {
    case DType::f64:
      return 1e-12;
    case DType::f32:
      return 1e-6;
    case DType::f16:
      return 2e-3;
    case DType::bf16:
      return 1e-2;
    default:
      return 0;
  }
}

#define EXPECT_CLOSE(got, want, tol)                                                       \
  do {                                                                                     \
    const double eagle_err_ = ::eagle::test::rel_error((got), (want));                     \
    EXPECT_TRUE(eagle_err_ <= (tol)) << "relative error " << eagle_err_ << " > " << (tol); \
  } while (0)

}  // namespace eagle::test
