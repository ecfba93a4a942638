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

// `v` converted to the integer type Int by eagle's rule (saturating_cast: clamped, NaN -> 0).
template <class Int>
std::vector<Int> saturated(const std::vector<double>& v) {
  std::vector<Int> out;
  out.reserve(v.size());
  for (double x : v) out.push_back(saturating_cast<Int>(x));
  return out;
}

// An array of `dtype` holding `values` (converted; integers by saturating_cast), on `device`.
inline Array from_doubles(const std::vector<double>& v, const Shape& shape, DType dtype,
                          Device device) {
  switch (dtype) {
    case DType::f64:
      return Array::from(v, shape, device);
    case DType::f32:
      return Array::from(std::vector<float>(v.begin(), v.end()), shape, device);
    case DType::f16:
      return Array::from(std::vector<half>(v.begin(), v.end()), shape, device);
    case DType::bf16:
      return Array::from(std::vector<bfloat16>(v.begin(), v.end()), shape, device);
    case DType::i64:
      return Array::from(saturated<int64_t>(v), shape, device);
    case DType::i32:
      return Array::from(saturated<int32_t>(v), shape, device);
    case DType::u32:
      return Array::from(saturated<uint32_t>(v), shape, device);
    case DType::u8:
      return Array::from(saturated<uint8_t>(v), shape, device);
    case DType::boolean: {
      std::vector<bool> b;
      for (double x : v) b.push_back(x != 0);
      return Array::from(b, shape, device);
    }
  }
  return Array();
}

// A random array of `dtype` on `device`: floats in [lo, hi); integers 100x that, truncated;
// u32 in [0, 2000); u8 and bool 0 or 1.
inline Array random_array(const Shape& shape, DType dtype, Device device, double lo = -1.0,
                          double hi = 1.0) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  auto v = random_values(static_cast<std::size_t>(n), lo, hi);
  for (double& x : v) {
    if (dtype == DType::i64 || dtype == DType::i32) x = std::trunc(x * 100);
    if (dtype == DType::u32) x = std::trunc((x + 1) * 1000);
    if (dtype == DType::u8 || dtype == DType::boolean) x = x > 0 ? 1 : 0;
  }
  return from_doubles(v, shape, dtype, device);
}

// Fills an array with NaN (floats), a large sentinel (integers) or the byte 0xAB (u8 and bool),
// so unwritten elements show.
inline void poison(const Array& a) {
  const std::size_t n = static_cast<std::size_t>(a.numel());
  if (a.dtype() == DType::u8 || a.dtype() == DType::boolean) {
    std::vector<uint8_t> bytes(n, 0xAB);
    a.copy_from(Array::wrap(bytes.data(), a.shape(), a.dtype(), Device::cpu()));
    return;
  }
  const double value = is_floating(a.dtype())    ? std::nan("")
                       : a.dtype() == DType::u32 ? 3735928559.0
                                                 : -123456789.0;
  a.copy_from(from_doubles(std::vector<double>(n, value), a.shape(), a.dtype(), Device::cpu()));
}

// Expects `fn` to throw exception type E whose message contains every one of `needles`.
template <class E, class Fn>
void expect_throw_with(Fn&& fn, std::initializer_list<std::string> needles) {
  try {
    fn();
    ADD_FAILURE() << "expected an exception, none was thrown";
  } catch (const E& e) {
    const std::string what = e.what();
    for (const auto& n : needles)
      EXPECT_NE(what.find(n), std::string::npos) << "message '" << what << "' lacks '" << n << "'";
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type, message: " << e.what();
  }
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
