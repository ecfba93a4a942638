// Tests of the core layer: dtypes and the 16-bit float formats, devices and their descriptors,
// arrays (allocation, views, copies, accounting) and streams.
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

// left + middle + right (spelled out: GCC 12 warns falsely on "literal" + std::string).
std::string concat(std::string left, std::string_view middle, std::string_view right) {
  left += middle;
  left += right;
  return left;
}

float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint32_t float_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

uint16_t half_bits(float f) {
  return half(f).bits;
}
uint16_t bf16_bits(float f) {
  return bfloat16(f).bits;
}

float half_value(uint16_t bits) {
  half h;
  h.bits = bits;
  return static_cast<float>(h);
}

float bf16_value(uint16_t bits) {
  bfloat16 b;
  b.bits = bits;
  return static_cast<float>(b);
}

// ---------------------------------------------------------------------------------------------
// dtype

TEST(DTypeTest, ItemsizeOfEveryDType) {
  EXPECT_EQ(itemsize(DType::f64), 8u);
  EXPECT_EQ(itemsize(DType::f32), 4u);
  EXPECT_EQ(itemsize(DType::f16), 2u);
  EXPECT_EQ(itemsize(DType::bf16), 2u);
  EXPECT_EQ(itemsize(DType::i64), 8u);
  EXPECT_EQ(itemsize(DType::i32), 4u);
  EXPECT_EQ(itemsize(DType::u32), 4u);
  EXPECT_EQ(itemsize(DType::u8), 1u);
  EXPECT_EQ(itemsize(DType::boolean), 1u);
}

TEST(DTypeTest, ItemsizeMatchesHostTypes) {
  EXPECT_EQ(itemsize(dtype_of<double>), sizeof(double));
  EXPECT_EQ(itemsize(dtype_of<float>), sizeof(float));
  EXPECT_EQ(itemsize(dtype_of<half>), sizeof(half));
  EXPECT_EQ(itemsize(dtype_of<bfloat16>), sizeof(bfloat16));
  EXPECT_EQ(itemsize(dtype_of<int64_t>), sizeof(int64_t));
  EXPECT_EQ(itemsize(dtype_of<int32_t>), sizeof(int32_t));
  EXPECT_EQ(itemsize(dtype_of<uint32_t>), sizeof(uint32_t));
  EXPECT_EQ(itemsize(dtype_of<uint8_t>), sizeof(uint8_t));
  EXPECT_EQ(itemsize(dtype_of<bool>), sizeof(bool));
}

TEST(DTypeTest, NamesOfEveryDType) {
  EXPECT_EQ(dtype_name(DType::f64), "f64");
  EXPECT_EQ(dtype_name(DType::f32), "f32");
  EXPECT_EQ(dtype_name(DType::f16), "f16");
  EXPECT_EQ(dtype_name(DType::bf16), "bf16");
  EXPECT_EQ(dtype_name(DType::i64), "i64");
  EXPECT_EQ(dtype_name(DType::i32), "i32");
  EXPECT_EQ(dtype_name(DType::u32), "u32");
  EXPECT_EQ(dtype_name(DType::u8), "u8");
  EXPECT_EQ(dtype_name(DType::boolean), "bool");
}

TEST(DTypeTest, FromNameRoundTripsEveryDType) {
  for (DType d : kAllDTypes) {
    SCOPED_TRACE(std::string(dtype_name(d)));
    EXPECT_EQ(dtype_from_name(dtype_name(d)), d);
  }
}

TEST(DTypeTest, NamesAreDistinct) {
  for (DType a : kAllDTypes)
    for (DType b : kAllDTypes)
      if (a != b) {
        EXPECT_NE(dtype_name(a), dtype_name(b));
      }
}

TEST(DTypeTest, IsFloating) {
  EXPECT_TRUE(is_floating(DType::f64));
  EXPECT_TRUE(is_floating(DType::f32));
  EXPECT_TRUE(is_floating(DType::f16));
  EXPECT_TRUE(is_floating(DType::bf16));
  EXPECT_FALSE(is_floating(DType::i64));
  EXPECT_FALSE(is_floating(DType::i32));
  EXPECT_FALSE(is_floating(DType::u32));
  EXPECT_FALSE(is_floating(DType::u8));
  EXPECT_FALSE(is_floating(DType::boolean));
}

TEST(DTypeTest, UnknownNameErrorNamesTheText) {
  expect_throw_with<InvalidArgument>([] { dtype_from_name("float128"); }, {"'float128'"});
  expect_throw_with<InvalidArgument>([] { dtype_from_name("F32"); }, {"'F32'"});
  expect_throw_with<InvalidArgument>([] { dtype_from_name(""); }, {"''"});
  expect_throw_with<InvalidArgument>([] { dtype_from_name("f32 "); }, {"'f32 '"});
  expect_throw_with<InvalidArgument>([] { dtype_from_name("boolean"); }, {"'boolean'"});
}

// ---------------------------------------------------------------------------------------------
// half (IEEE binary16)

TEST(HalfTest, KnownBitPatterns) {
  EXPECT_EQ(half_bits(0.0f), 0x0000);
  EXPECT_EQ(half_bits(-0.0f), 0x8000);
  EXPECT_EQ(half_bits(1.0f), 0x3c00);
  EXPECT_EQ(half_bits(-1.0f), 0xbc00);
  EXPECT_EQ(half_bits(-2.0f), 0xc000);
  EXPECT_EQ(half_bits(0.5f), 0x3800);
  EXPECT_EQ(half_bits(0.333251953125f), 0x3555);  // nearest half to 1/3, exactly
  EXPECT_EQ(half_bits(65504.0f), 0x7bff);         // largest finite
  EXPECT_EQ(half_bits(-65504.0f), 0xfbff);
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(half_bits(-std::ldexp(1.0f, -24)), 0x8001);
  EXPECT_EQ(half_bits(std::ldexp(1023.0f, -24)), 0x03ff);  // largest subnormal
  EXPECT_EQ(half_bits(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(half_bits(-std::numeric_limits<float>::infinity()), 0xfc00);
}

TEST(HalfTest, KnownValuesFromBits) {
  EXPECT_EQ(half_value(0x3c00), 1.0f);
  EXPECT_EQ(half_value(0xc000), -2.0f);
  EXPECT_EQ(half_value(0x7bff), 65504.0f);
  EXPECT_EQ(half_value(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(half_value(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(half_value(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(half_value(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(half_value(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(float_to_bits(half_value(0x8000)), 0x80000000u);  // -0 keeps its sign
  EXPECT_TRUE(std::isnan(half_value(0x7e00)));
  EXPECT_TRUE(std::isnan(half_value(0x7c01)));  // signalling NaN pattern
  EXPECT_TRUE(std::isnan(half_value(0xfe00)));
}

TEST(HalfTest, NanStaysNan) {
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  const float nans[] = {qnan, -qnan,
                        bits_to_float(0x7f800001u),  // signalling, payload only in the low bits
                        bits_to_float(0x7fffffffu)};
  for (float f : nans) {
    const uint16_t b = half_bits(f);
    EXPECT_EQ(b & 0x7c00, 0x7c00) << std::hex << b;
    EXPECT_NE(b & 0x03ff, 0) << std::hex << b;  // not an infinity
    EXPECT_TRUE(std::isnan(half_value(b)));
  }
}

TEST(HalfTest, OverflowRoundsToInfinity) {
  EXPECT_EQ(half_bits(65519.0f), 0x7bff);  // below the halfway point to 2^16: stays finite
  EXPECT_EQ(half_bits(65520.0f), 0x7c00);  // halfway: ties to even, which is "2^16" = inf
  EXPECT_EQ(half_bits(1e6f), 0x7c00);
  EXPECT_EQ(half_bits(-1e6f), 0xfc00);
  EXPECT_EQ(half_bits(std::numeric_limits<float>::max()), 0x7c00);
}

TEST(HalfTest, RoundToNearestEven) {
  const float ulp1 = std::ldexp(1.0f, -10);  // spacing of halves in [1, 2)
  // Exactly halfway between 1 and 1+ulp: ties to the even mantissa (1.0).
  EXPECT_EQ(half_bits(1.0f + ulp1 / 2), 0x3c00);
  // Halfway between 1+ulp (odd) and 1+2ulp (even): rounds up.
  EXPECT_EQ(half_bits(1.0f + 3 * ulp1 / 2), 0x3c02);
  // Just above halfway rounds up; just below rounds down.
  EXPECT_EQ(half_bits(1.0f + ulp1 / 2 + std::ldexp(1.0f, -20)), 0x3c01);
  EXPECT_EQ(half_bits(1.0f + ulp1 / 2 - std::ldexp(1.0f, -20)), 0x3c00);
  // A carry from the mantissa into the exponent: 2 - ulp/2 ties to even 2.0.
  EXPECT_EQ(half_bits(2.0f - ulp1 / 2), 0x4000);
  EXPECT_EQ(half_bits(2.0f - ulp1 / 4), 0x4000);
  // Subnormals: half of the smallest subnormal ties to 0, 1.5 of it ties to 2 (even).
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(half_bits(std::ldexp(3.0f, -25)), 0x0002);
  EXPECT_EQ(half_bits(std::ldexp(5.0f, -25)), 0x0002);
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -26)), 0x0000);
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -25) + std::ldexp(1.0f, -30)), 0x0001);
  // Rounding the largest subnormal up lands on the smallest normal.
  EXPECT_EQ(half_bits(std::ldexp(2047.0f, -25)), 0x0400);
  EXPECT_EQ(half_bits(-std::ldexp(2047.0f, -25)), 0x8400);
}

TEST(HalfTest, EveryNonNanPatternRoundTripsExactly) {
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    const float f = half_value(static_cast<uint16_t>(b));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(half_value(half_bits(f)))) << std::hex << b;
      continue;
    }
    ASSERT_EQ(half_bits(f), b) << std::hex << b;
  }
}

TEST(HalfTest, RandomFloatsRoundTripWithinHalfAnUlp) {
  std::mt19937 rng(12345);
  std::uniform_real_distribution<float> mag(-14.0f, 15.9f);
  std::uniform_int_distribution<int> sign(0, 1);
  for (int i = 0; i < 20000; ++i) {
    const float f = (sign(rng) ? -1.0f : 1.0f) * std::exp2(mag(rng));
    const float back = half(f);
    // Normal range: relative error at most 2^-11 (half an ulp of an 11-bit significand).
    EXPECT_LE(std::fabs(back - f), std::ldexp(std::fabs(f), -11)) << f;
  }
  std::uniform_real_distribution<float> small(-6e-5f, 6e-5f);
  for (int i = 0; i < 2000; ++i) {
    const float f = small(rng);
    // Subnormal range: absolute error at most half the subnormal step 2^-24.
    EXPECT_LE(std::fabs(static_cast<float>(half(f)) - f), std::ldexp(1.0f, -25)) << f;
  }
}

// ---------------------------------------------------------------------------------------------
// bfloat16

TEST(BFloat16Test, KnownBitPatterns) {
  EXPECT_EQ(bf16_bits(0.0f), 0x0000);
  EXPECT_EQ(bf16_bits(-0.0f), 0x8000);
  EXPECT_EQ(bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(bf16_bits(-2.0f), 0xc000);
  EXPECT_EQ(bf16_bits(0.5f), 0x3f00);
  EXPECT_EQ(bf16_bits(65504.0f), 0x4780);  // 65504 rounds to 65536 in bf16
  EXPECT_EQ(bf16_bits(65280.0f), 0x477f);  // representable exactly
  EXPECT_EQ(bf16_bits(std::ldexp(1.0f, -24)), 0x3380);
  EXPECT_EQ(bf16_bits(std::ldexp(1.0f, -133)), 0x0001);  // smallest bf16 subnormal
  EXPECT_EQ(bf16_bits(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(bf16_bits(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(bf16_bits(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to infinity
}

TEST(BFloat16Test, KnownValuesFromBits) {
  EXPECT_EQ(bf16_value(0x3f80), 1.0f);
  EXPECT_EQ(bf16_value(0xc000), -2.0f);
  EXPECT_EQ(bf16_value(0x4780), 65536.0f);
  EXPECT_EQ(bf16_value(0x3380), std::ldexp(1.0f, -24));
  EXPECT_EQ(bf16_value(0x7f7f), bits_to_float(0x7f7f0000u));  // largest finite
  EXPECT_EQ(bf16_value(0x7f80), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(bf16_value(0x7fc0)));
  EXPECT_TRUE(std::isnan(bf16_value(0x7f81)));
}

TEST(BFloat16Test, NanStaysNan) {
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  const float nans[] = {qnan, -qnan,
                        bits_to_float(0x7f800001u),  // payload only in bits truncation drops
                        bits_to_float(0x7fffffffu),  // rounding would carry into the sign
                        bits_to_float(0xff800001u)};
  for (float f : nans) {
    const uint16_t b = bf16_bits(f);
    EXPECT_EQ(b & 0x7f80, 0x7f80) << std::hex << b;
    EXPECT_NE(b & 0x007f, 0) << std::hex << b;
    EXPECT_TRUE(std::isnan(bf16_value(b)));
    EXPECT_EQ(b & 0x8000, (float_to_bits(f) >> 16) & 0x8000) << "sign kept";
  }
}

TEST(BFloat16Test, RoundToNearestEven) {
  const float ulp1 = std::ldexp(1.0f, -7);            // spacing of bf16 in [1, 2)
  EXPECT_EQ(bf16_bits(1.0f + ulp1 / 2), 0x3f80);      // tie to even (down)
  EXPECT_EQ(bf16_bits(1.0f + 3 * ulp1 / 2), 0x3f82);  // tie to even (up)
  EXPECT_EQ(bf16_bits(1.0f + ulp1 / 2 + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_EQ(bf16_bits(1.0f + ulp1 / 2 - std::ldexp(1.0f, -20)), 0x3f80);
  EXPECT_EQ(bf16_bits(2.0f - ulp1 / 2), 0x4000);  // a tie; the carry reaches the exponent
  EXPECT_EQ(bf16_bits(2.0f - ulp1 / 4), 0x4000);
  EXPECT_EQ(bf16_bits(bits_to_float(0x3f808000u)), 0x3f80);
  EXPECT_EQ(bf16_bits(bits_to_float(0x3f818000u)), 0x3f82);
  EXPECT_EQ(bf16_bits(bits_to_float(0xbf818000u)), 0xbf82);
}

TEST(BFloat16Test, EveryNonNanPatternRoundTripsExactly) {
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    const float f = bf16_value(static_cast<uint16_t>(b));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_value(bf16_bits(f)))) << std::hex << b;
      continue;
    }
    ASSERT_EQ(bf16_bits(f), b) << std::hex << b;
  }
}

TEST(BFloat16Test, RandomFloatsRoundTripWithinHalfAnUlp) {
  std::mt19937 rng(777);
  std::uniform_real_distribution<float> mag(-120.0f, 120.0f);
  std::uniform_int_distribution<int> sign(0, 1);
  for (int i = 0; i < 20000; ++i) {
    const float f = (sign(rng) ? -1.0f : 1.0f) * std::exp2(mag(rng));
    const float back = bfloat16(f);
    EXPECT_LE(std::fabs(back - f), std::ldexp(std::fabs(f), -8)) << f;
    // bf16 is a truncated float: the low 16 bits of the result are zero.
    EXPECT_EQ(float_to_bits(back) & 0xffffu, 0u);
  }
}

// ---------------------------------------------------------------------------------------------
// Device

TEST(DeviceTest, CpuAndCuda) {
  const Device cpu = Device::cpu();
  EXPECT_TRUE(cpu.is_cpu());
  EXPECT_FALSE(cpu.is_cuda());
  EXPECT_EQ(cpu.kind(), DeviceKind::cpu);
  EXPECT_EQ(cpu.ordinal(), 0);
  EXPECT_EQ(cpu.str(), "cpu");

  const Device gpu = Device::cuda(3);
  EXPECT_TRUE(gpu.is_cuda());
  EXPECT_FALSE(gpu.is_cpu());
  EXPECT_EQ(gpu.kind(), DeviceKind::cuda);
  EXPECT_EQ(gpu.ordinal(), 3);
  EXPECT_EQ(gpu.str(), "cuda:3");
  EXPECT_EQ(Device::cuda(0).str(), "cuda:0");
}

TEST(DeviceTest, Equality) {
  EXPECT_EQ(Device::cpu(), Device::cpu());
  EXPECT_EQ(Device::cuda(1), Device::cuda(1));
  EXPECT_NE(Device::cuda(0), Device::cuda(1));
  EXPECT_NE(Device::cpu(), Device::cuda(0));
  EXPECT_FALSE(Device::cpu() != Device::cpu());
}

TEST(DeviceTest, NegativeOrdinalThrows) {
  expect_throw_with<InvalidArgument>([] { Device::cuda(-1); }, {"-1"});
  EXPECT_THROW(Device::cuda(std::numeric_limits<int>::min()), InvalidArgument);
}

TEST(DeviceTest, Parse) {
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_EQ(Device::parse("cuda"), Device::cuda(0));
  EXPECT_EQ(Device::parse("cuda:0"), Device::cuda(0));
  EXPECT_EQ(Device::parse("cuda:3"), Device::cuda(3));
  EXPECT_EQ(Device::parse("cuda:17"), Device::cuda(17));
  for (Device d : {Device::cpu(), Device::cuda(0), Device::cuda(5), Device::cuda(123)})
    EXPECT_EQ(Device::parse(d.str()), d);
}

TEST(DeviceTest, ParseRejectsBadStrings) {
  for (const char* bad :
       {"", "CPU", "gpu", "cuda:", "cuda:-1", "cuda:x", "cuda:1x", "cuda:1 ", " cpu", "cpu:0",
        "cuda0", "cuda:+1", "cuda:99999999999999999999", "cuda::1", "Cuda:0"}) {
    SCOPED_TRACE(bad);
    expect_throw_with<InvalidArgument>([&] { Device::parse(bad); }, {concat("'", bad, "'")});
  }
}

TEST(DeviceTest, CudaCountIsConsistent) {
  const int n = cuda_device_count();
  EXPECT_GE(n, 0);
  EXPECT_EQ(cuda_available(), n > 0);
#ifndef EAGLE_HAVE_CUDA
  EXPECT_EQ(n, 0);
#endif
}

// ---------------------------------------------------------------------------------------------
// DeviceProperties

DeviceProperties h200_like() {
  DeviceProperties p;
  p.device = "cuda:3";
  p.name = "NVIDIA H200 \"SXM\" \\ 141GB";  // quotes and a backslash must survive the trip
  p.sm = 90;
  p.multiprocessors = 132;
  p.l2_bytes = 62914560;
  p.shared_mem_per_block = 49152;
  p.shared_mem_per_block_optin = 232448;
  p.shared_mem_per_multiprocessor = 233472;
  p.total_memory = 150754820096;  // more than 2^32: must stay 64-bit
  p.max_threads_per_block = 1024;
  p.warp_size = 32;
  return p;
}

TEST(DevicePropertiesTest, QueryCpu) {
  const DeviceProperties p = DeviceProperties::query(Device::cpu());
  EXPECT_EQ(p.device, "cpu");
  EXPECT_FALSE(p.name.empty());
  EXPECT_EQ(p.sm, 0);
  EXPECT_EQ(p.multiprocessors, static_cast<int>(std::thread::hardware_concurrency()));
  EXPECT_EQ(DeviceProperties::from_json(p.to_json()), p);
}

TEST(DevicePropertiesTest, QueryOfAbsentCudaDeviceThrows) {
  const Device absent = Device::cuda(cuda_device_count());
  expect_throw_with<InvalidArgument>([&] { DeviceProperties::query(absent); }, {absent.str()});
  EXPECT_THROW(DeviceProperties::query(Device::cuda(63)), InvalidArgument);
}

TEST(DevicePropertiesTest, JsonRoundTrip) {
  const DeviceProperties p = h200_like();
  const std::string json = p.to_json();
  const DeviceProperties q = DeviceProperties::from_json(json);
  EXPECT_EQ(q, p);
  EXPECT_EQ(q.total_memory, 150754820096);
  EXPECT_EQ(q.name, "NVIDIA H200 \"SXM\" \\ 141GB");
  EXPECT_EQ(q.to_json(), json);
  // Each field must matter for equality (so the round trip above means something).
  DeviceProperties r = p;
  r.warp_size = 64;
  EXPECT_NE(r, p);
  r = p;
  r.l2_bytes += 1;
  EXPECT_NE(r, p);
}

TEST(DevicePropertiesTest, JsonAcceptsReorderedFieldsAndWhitespace) {
  const std::string json =
      "  {\n \"warp_size\" : 32, \"max_threads_per_block\":1024,\"total_memory\": 150754820096,\n"
      "\t\"shared_mem_per_multiprocessor\": 233472, \"shared_mem_per_block_optin\": 232448,"
      " \"shared_mem_per_block\": 49152, \"l2_bytes\": 62914560, \"multiprocessors\": 132,"
      " \"sm\": 90, \"name\": \"NVIDIA H200 \\\"SXM\\\" \\\\ 141GB\", \"device\": \"cuda:3\" }  ";
  EXPECT_EQ(DeviceProperties::from_json(json), h200_like());
}

TEST(DevicePropertiesTest, JsonNormalisesTheDevice) {
  DeviceProperties p = h200_like();
  std::string json = p.to_json();
  const std::string from = "\"cuda:3\"";
  json.replace(json.find(from), from.size(), "\"cuda\"");
  EXPECT_EQ(DeviceProperties::from_json(json).device, "cuda:0");
}

TEST(DevicePropertiesTest, JsonNegativeIntegers) {
  DeviceProperties p = h200_like();
  p.l2_bytes = -5;  // not meaningful, but the format carries signed integers
  EXPECT_EQ(DeviceProperties::from_json(p.to_json()), p);
}

TEST(DevicePropertiesTest, JsonMissingFieldIsNamed) {
  const char* fields[] = {"device",
                          "name",
                          "sm",
                          "multiprocessors",
                          "l2_bytes",
                          "shared_mem_per_block",
                          "shared_mem_per_block_optin",
                          "shared_mem_per_multiprocessor",
                          "total_memory",
                          "max_threads_per_block",
                          "warp_size"};
  for (const char* field : fields) {
    SCOPED_TRACE(field);
    // Rename the key so that exactly this field is missing.
    std::string json = h200_like().to_json();
    const std::string key = concat("\"", field, "\":");
    const auto at = json.find(key);
    ASSERT_NE(at, std::string::npos);
    json.replace(at, key.size(), concat("\"x_", field, "\":"));
    expect_throw_with<InvalidArgument>([&] { DeviceProperties::from_json(json); },
                                       {concat("missing field '", field, "'")});
  }
}

TEST(DevicePropertiesTest, JsonNonIntegerFieldIsNamed) {
  std::string json = h200_like().to_json();
  const std::string from = "\"sm\": 90";
  json.replace(json.find(from), from.size(), "\"sm\": \"ninety\"");
  expect_throw_with<InvalidArgument>([&] { DeviceProperties::from_json(json); },
                                     {"'sm'", "integer", "ninety"});

  json = h200_like().to_json();
  const std::string mem = "\"total_memory\": 150754820096";
  json.replace(json.find(mem), mem.size(), "\"total_memory\": \"12GB\"");
  expect_throw_with<InvalidArgument>([&] { DeviceProperties::from_json(json); },
                                     {"'total_memory'", "12GB"});

  // An integer that does not fit in 64 bits is not an integer eagle can hold.
  json = h200_like().to_json();
  json.replace(json.find(mem), mem.size(), "\"total_memory\": 99999999999999999999999");
  expect_throw_with<InvalidArgument>([&] { DeviceProperties::from_json(json); },
                                     {"'total_memory'"});
}

TEST(DevicePropertiesTest, JsonFractionalNumberNamesTheField) {
  std::string json = h200_like().to_json();
  const std::string from = "\"sm\": 90";
  json.replace(json.find(from), from.size(), "\"sm\": 9.5");
  expect_throw_with<InvalidArgument>([&] { DeviceProperties::from_json(json); },
                                     {"field 'sm'", "integer"});
}

TEST(DevicePropertiesTest, JsonRoundTripsControlCharactersInTheName) {
  DeviceProperties p = h200_like();
  p.name = std::string("odd\x01name\twith\ncontrols \"quoted\" \\ slash");
  EXPECT_EQ(DeviceProperties::from_json(p.to_json()), p);
}

TEST(DevicePropertiesTest, JsonMalformedInputThrows) {
  const std::string good = h200_like().to_json();
  for (const std::string& bad :
       {std::string(""), std::string("[]"), std::string("{"), std::string("{\"device\" \"cpu\"}"),
        good + "x", good.substr(0, good.size() - 1), std::string("{\"device\": cpu}"),
        std::string("{}")}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(DeviceProperties::from_json(bad), InvalidArgument);
  }
  // A number that is not an integer.
  std::string real = good;
  const std::string sm = "\"sm\": 90";
  real.replace(real.find(sm), sm.size(), "\"sm\": 9.5");
  EXPECT_THROW(DeviceProperties::from_json(real), InvalidArgument);
  // A device string that is not a device.
  std::string json = good;
  const std::string from = "\"cuda:3\"";
  json.replace(json.find(from), from.size(), "\"gpu:3\"");
  expect_throw_with<InvalidArgument>([&] { DeviceProperties::from_json(json); }, {"gpu:3"});
}

// ---------------------------------------------------------------------------------------------
// Array: creation and copies for every dtype

template <class T>
std::vector<T> sample_values(std::size_t n) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double x = static_cast<double>(i);
    if constexpr (std::is_same_v<T, bool>) {
      v[i] = (i % 3) == 1;
    } else if constexpr (std::is_same_v<T, uint8_t>) {
      v[i] = static_cast<uint8_t>((i * 37 + 11) % 256);
    } else if constexpr (std::is_same_v<T, uint32_t>) {
      v[i] = static_cast<uint32_t>(4000000000u - i * 7919u);  // above INT32_MAX
    } else if constexpr (std::is_same_v<T, int64_t>) {
      v[i] = (i % 2 ? -1 : 1) * (int64_t{1} << 40) + static_cast<int64_t>(i);
    } else if constexpr (std::is_same_v<T, int32_t>) {
      v[i] = static_cast<int32_t>(i * 1000) - 5000;
    } else {
      v[i] = T(static_cast<float>((x - 6.0) * 0.25));  // exact in every float format
    }
  }
  return v;
}

template <class T>
double as_double(T v) {
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
    return static_cast<double>(static_cast<float>(v));
  } else {
    return static_cast<double>(v);
  }
}

template <class T>
bool same_value(T a, T b) {
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
    return a.bits == b.bits;
  } else {
    return a == b;
  }
}

template <class T>
void check_from_and_back(Device device) {
  SCOPED_TRACE(std::string(dtype_name(dtype_of<T>)) + " on " + device.str());
  const std::vector<T> values = sample_values<T>(15);
  const Array a = Array::from(values, {3, 5}, device);
  EXPECT_TRUE(a.defined());
  EXPECT_EQ(a.dtype(), dtype_of<T>);
  EXPECT_EQ(a.device(), device);
  EXPECT_EQ(a.shape(), (Shape{3, 5}));
  EXPECT_EQ(a.strides(), (Shape{5, 1}));
  EXPECT_EQ(a.ndim(), 2);
  EXPECT_EQ(a.numel(), 15);
  EXPECT_EQ(a.nbytes(), 15 * sizeof(T));
  EXPECT_EQ(a.byte_offset(), 0);
  EXPECT_TRUE(a.is_contiguous());
  EXPECT_TRUE(a.owning());
  EXPECT_EQ(a.storage()->device(), device);
  EXPECT_EQ(a.storage()->bytes(), a.nbytes());

  const std::vector<T> back = a.template to_vector<T>();
  ASSERT_EQ(back.size(), values.size());
  for (std::size_t i = 0; i < values.size(); ++i)
    EXPECT_TRUE(same_value<T>(back[i], values[i])) << "element " << i;

  const std::vector<double> as_f64 = a.template to_vector<double>();
  for (std::size_t i = 0; i < values.size(); ++i)
    EXPECT_EQ(as_f64[i], as_double<T>(values[i])) << i;

  // A copy to the CPU and back to the device keeps the values.
  const Array host = a.to(Device::cpu());
  EXPECT_EQ(host.device(), Device::cpu());
  EXPECT_NE(host.data(), a.data());
  const Array again = host.to(device);
  EXPECT_EQ(again.device(), device);
  const std::vector<T> round = again.template to_vector<T>();
  for (std::size_t i = 0; i < values.size(); ++i)
    EXPECT_TRUE(same_value<T>(round[i], values[i])) << i;
}

class ArrayOnDevice : public OnDevice {};
EAGLE_ON_EVERY_DEVICE(ArrayOnDevice);

TEST_P(ArrayOnDevice, FromAndToVectorForEveryDType) {
  check_from_and_back<double>(device());
  check_from_and_back<float>(device());
  check_from_and_back<half>(device());
  check_from_and_back<bfloat16>(device());
  check_from_and_back<int64_t>(device());
  check_from_and_back<int32_t>(device());
  check_from_and_back<uint32_t>(device());
  check_from_and_back<uint8_t>(device());
  check_from_and_back<bool>(device());
}

TEST_P(ArrayOnDevice, ToVectorConvertsBetweenTypes) {
  const Array a = Array::from(std::vector<float>{1.5f, -2.0f, 3.0f, 0.0f}, {4}, device());
  EXPECT_EQ(a.to_vector<int32_t>(), (std::vector<int32_t>{1, -2, 3, 0}));
  EXPECT_EQ(a.to_vector<bool>(), (std::vector<bool>{true, true, true, false}));
  const auto h = a.to_vector<half>();
  EXPECT_EQ(h[0].bits, 0x3e00);
  EXPECT_EQ(h[1].bits, 0xc000);
  const Array b = Array::from(std::vector<bool>{true, false, true}, {3}, device());
  EXPECT_EQ(b.dtype(), DType::boolean);
  EXPECT_EQ(b.to_vector<double>(), (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(b.to_vector<uint8_t>(), (std::vector<uint8_t>{1, 0, 1}));
}

TEST_P(ArrayOnDevice, EmptyForEveryDType) {
  for (DType d : kAllDTypes) {
    SCOPED_TRACE(std::string(dtype_name(d)));
    const std::size_t before = bytes_in_use(device());
    {
      const Array a = Array::empty({7, 3, 2}, d, device());
      EXPECT_EQ(a.dtype(), d);
      EXPECT_EQ(a.device(), device());
      EXPECT_EQ(a.shape(), (Shape{7, 3, 2}));
      EXPECT_EQ(a.strides(), (Shape{6, 2, 1}));
      EXPECT_EQ(a.numel(), 42);
      EXPECT_EQ(a.nbytes(), 42 * itemsize(d));
      EXPECT_TRUE(a.is_contiguous());
      EXPECT_TRUE(a.owning());
      EXPECT_NE(a.data(), nullptr);
      EXPECT_EQ(bytes_in_use(device()), before + a.nbytes());
    }
    EXPECT_EQ(bytes_in_use(device()), before);
  }
}

TEST_P(ArrayOnDevice, ZeroSizedAndScalarArrays) {
  const Array z = Array::empty({4, 0, 3}, DType::f32, device());
  EXPECT_EQ(z.numel(), 0);
  EXPECT_EQ(z.nbytes(), 0u);
  EXPECT_TRUE(z.is_contiguous());
  EXPECT_TRUE(z.to_vector<float>().empty());
  EXPECT_EQ(z.to(Device::cpu()).shape(), (Shape{4, 0, 3}));
  const auto [lo, hi] = z.byte_span();
  EXPECT_EQ(lo, hi);

  const Array s = Array::from(std::vector<double>{2.5}, {}, device());
  EXPECT_EQ(s.ndim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.nbytes(), 8u);
  EXPECT_TRUE(s.strides().empty());
  EXPECT_EQ(s.to_vector<double>(), (std::vector<double>{2.5}));
}

TEST_P(ArrayOnDevice, BytesInUseTracksOwningStorage) {
  const std::size_t before = bytes_in_use(device());
  {
    const Array a = Array::empty({1000, 3}, DType::f64, device());
    EXPECT_EQ(bytes_in_use(device()), before + 24000);
    {
      // Views share the storage: no new bytes.
      const Array s = a.slice(0, 10, 20);
      const Array r = a.reshape({3000});
      const Array w = Array::wrap(a.data(), {3000}, DType::f64, device());
      EXPECT_FALSE(w.owning());
      EXPECT_EQ(bytes_in_use(device()), before + 24000);
      const Array b = Array::empty({5}, DType::u8, device());
      EXPECT_EQ(bytes_in_use(device()), before + 24005);
    }
    EXPECT_EQ(bytes_in_use(device()), before + 24000);
  }
  EXPECT_EQ(bytes_in_use(device()), before);

  // A view keeps the storage (and its accounting) alive after the original is gone.
  Array view;
  {
    const Array a = Array::empty({64}, DType::i32, device());
    view = a.slice(0, 8, 16);
  }
  EXPECT_EQ(bytes_in_use(device()), before + 256);
  view = Array();
  EXPECT_EQ(bytes_in_use(device()), before);
}

TEST_P(ArrayOnDevice, BytesInUseIsPerDevice) {
  const Device other = device().is_cpu() ? Device::cuda(0) : Device::cpu();
  const std::size_t other_before = bytes_in_use(other);
  const std::size_t before = bytes_in_use(device());
  const Array a = Array::empty({4096}, DType::f32, device());
  EXPECT_EQ(bytes_in_use(device()), before + 16384);
  EXPECT_EQ(bytes_in_use(other), other_before);
}

TEST_P(ArrayOnDevice, StorageAllocateAccounting) {
  const std::size_t before = bytes_in_use(device());
  {
    auto s = Storage::allocate(device(), 1000);
    EXPECT_TRUE(s->owning());
    EXPECT_EQ(s->bytes(), 1000u);
    EXPECT_EQ(s->device(), device());
    EXPECT_NE(s->data(), nullptr);
    EXPECT_EQ(bytes_in_use(device()), before + 1000);
  }
  EXPECT_EQ(bytes_in_use(device()), before);
}

TEST_P(ArrayOnDevice, NonContiguousViewCopiedWithToGathers) {
  // A 3x4 row-major matrix and its transpose as a strided view of the same memory.
  std::vector<float> v(12);
  std::iota(v.begin(), v.end(), 0.0f);
  const Array m = Array::from(v, {3, 4}, device());
  const Array t = Array::wrap(m.data(), {4, 3}, DType::f32, device(), {1, 4});
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.strides(), (Shape{1, 4}));
  const std::vector<float> want = {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11};
  for (Device dst : {Device::cpu(), device()}) {
    const Array c = t.to(dst);
    EXPECT_TRUE(c.is_contiguous());
    EXPECT_EQ(c.shape(), (Shape{4, 3}));
    EXPECT_EQ(c.device(), dst);
    EXPECT_EQ(c.to_vector<float>(), want);
  }
  EXPECT_EQ(t.to_vector<float>(), want);

  // Negative strides: the same matrix read backwards in both dimensions.
  const Array r =
      Array::wrap(static_cast<float*>(m.data()) + 11, {3, 4}, DType::f32, device(), {-4, -1});
  EXPECT_FALSE(r.is_contiguous());
  std::vector<float> reversed(v.rbegin(), v.rend());
  EXPECT_EQ(r.to_vector<float>(), reversed);
  EXPECT_EQ(r.to(device()).to_vector<float>(), reversed);
  const auto [lo, hi] = r.byte_span();
  EXPECT_EQ(lo, reinterpret_cast<uintptr_t>(m.data()));
  EXPECT_EQ(hi, reinterpret_cast<uintptr_t>(m.data()) + 48);

  // A column slice (a strided view with an offset), then gathered.
  std::vector<int64_t> w(24);
  std::iota(w.begin(), w.end(), int64_t{100});
  const Array big = Array::from(w, {4, 6}, device());
  const Array cols = big.slice(1, 2, 5);
  EXPECT_FALSE(cols.is_contiguous());
  EXPECT_EQ(cols.to(device()).to_vector<int64_t>(),
            (std::vector<int64_t>{102, 103, 104, 108, 109, 110, 114, 115, 116, 120, 121, 122}));
  // A broadcast-like view (stride 0) repeats one row.
  const Array rep = Array::wrap(big.data(), {3, 6}, DType::i64, device(), {0, 1});
  EXPECT_EQ(rep.to_vector<int64_t>(),
            (std::vector<int64_t>{100, 101, 102, 103, 104, 105, 100, 101, 102, 103, 104, 105, 100,
                                  101, 102, 103, 104, 105}));
}

TEST_P(ArrayOnDevice, CopyFromAcrossDevicesAndWithStream) {
  const Array dst = Array::empty({2, 3}, DType::f32, device());
  const Array src = Array::from(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}, Device::cpu());
  dst.copy_from(src);
  EXPECT_EQ(dst.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  const Stream stream(device());
  const Array src2 = Array::from(std::vector<float>{6, 5, 4, 3, 2, 1}, {2, 3}, device());
  dst.copy_from(src2, &stream);
  stream.synchronize();
  EXPECT_EQ(dst.to_vector<float>(), (std::vector<float>{6, 5, 4, 3, 2, 1}));
  const Array back = Array::empty({2, 3}, DType::f32, Device::cpu());
  back.copy_from(dst, &stream);
  stream.synchronize();
  EXPECT_EQ(back.to_vector<float>(), (std::vector<float>{6, 5, 4, 3, 2, 1}));
  // Copying an empty array is a no-op, not an error.
  Array::empty({0}, DType::f32, device()).copy_from(Array::empty({0}, DType::f32, Device::cpu()));
}

TEST_P(ArrayOnDevice, CopyFromIntoASliceWritesTheParent) {
  const Array a = Array::from(std::vector<int32_t>(12, 0), {4, 3}, device());
  a.slice(0, 1, 3).copy_from(
      Array::from(std::vector<int32_t>{1, 2, 3, 4, 5, 6}, {2, 3}, Device::cpu()));
  EXPECT_EQ(a.to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 0, 1, 2, 3, 4, 5, 6, 0, 0, 0}));
}

TEST_P(ArrayOnDevice, CopyFromErrors) {
  const Array a = Array::empty({2, 3}, DType::f32, device());
  expect_throw_with<InvalidArgument>(
      [&] {
        a.copy_from(Array::empty({3, 2}, DType::f32, device()));
      },
      {"f32[3,2]", "f32[2,3]"});
  expect_throw_with<InvalidArgument>(
      [&] {
        a.copy_from(Array::empty({2, 3}, DType::f64, device()));
      },
      {"f64[2,3]", "f32[2,3]"});
  expect_throw_with<InvalidArgument>(
      [&] { a.copy_from(Array::empty({6}, DType::f32, Device::cpu())); }, {"f32[6]"});
  // Shape and dtype agree, but one side is a strided view.
  const Array big = Array::empty({3, 4}, DType::f32, device());
  const Array t = Array::wrap(big.data(), {2, 2}, DType::f32, device(), {4, 1});
  ASSERT_FALSE(t.is_contiguous());
  const Array dense = Array::empty({2, 2}, DType::f32, device());
  expect_throw_with<InvalidArgument>([&] { dense.copy_from(t); }, {"contiguous"});
  expect_throw_with<InvalidArgument>([&] { t.copy_from(dense); }, {"contiguous"});
  expect_throw_with<InvalidArgument>([&] { a.slice(1, 0, 2).copy_from(dense); }, {"contiguous"});
}

TEST(ArrayTest, DefaultIsUndefined) {
  const Array a;
  EXPECT_FALSE(a.defined());
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_FALSE(a.owning());
  EXPECT_EQ(a.device(), Device::cpu());
  EXPECT_EQ(a.storage(), nullptr);
}

TEST(ArrayTest, BoolBytesOtherThanZeroOrOneReadAsTrue) {
  std::vector<uint8_t> bytes{0, 1, 2, 255};
  Array a = Array::wrap(bytes.data(), {4}, DType::boolean, Device::cpu());
  EXPECT_EQ(a.to_vector<bool>(), (std::vector<bool>{false, true, true, true}));
  EXPECT_EQ(a.to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 1, 1}));
}

TEST(ArrayTest, Describe) {
  EXPECT_EQ(Array::empty({4, 8}, DType::f32, Device::cpu()).describe(), "f32[4,8] on cpu");
  EXPECT_EQ(Array::empty({}, DType::boolean, Device::cpu()).describe(), "bool[] on cpu");
  EXPECT_EQ(shape_str({}), "[]");
  EXPECT_EQ(shape_str({2, 0, 7}), "[2,0,7]");
  EXPECT_EQ(contiguous_strides({2, 3, 4}), (Shape{12, 4, 1}));
  EXPECT_EQ(contiguous_strides({}), Shape{});
  EXPECT_EQ(contiguous_strides({5, 0, 2}), (Shape{0, 2, 1}));
}

TEST(ArrayTest, FromErrors) {
  expect_throw_with<InvalidArgument>(
      [] {
        Array::from(std::vector<float>{1, 2, 3}, {2, 2}, Device::cpu());
      },
      {"[2,2]", "3"});
  expect_throw_with<InvalidArgument>([] { Array::from(std::vector<float>{}, {-1}, Device::cpu()); },
                                     {"negative"});
  expect_throw_with<InvalidArgument>(
      [] {
        Array::empty({2, -3}, DType::f32, Device::cpu());
      },
      {"negative", "dim 1"});
}

TEST(ArrayTest, CudaArrayOnAbsentDeviceThrows) {
  const Device absent = Device::cuda(cuda_device_count());
  const std::size_t before = bytes_in_use(absent);
  expect_throw_with<InvalidArgument>([&] { Array::empty({4}, DType::f32, absent); },
                                     {absent.str(), "not attached"});
  EXPECT_THROW(Array::from(std::vector<float>{1, 2}, {2}, absent), InvalidArgument);
  EXPECT_THROW(Storage::allocate(absent, 16), InvalidArgument);
  EXPECT_THROW(Array::empty({2}, DType::f32, Device::cpu()).to(absent), InvalidArgument);
  EXPECT_EQ(bytes_in_use(absent), before);
}

TEST(ArrayTest, WrapBorrowsCallerMemory) {
  std::vector<float> buf = {1, 2, 3, 4, 5, 6};
  const std::size_t before = bytes_in_use(Device::cpu());
  const Array a = Array::wrap(buf.data(), {2, 3}, DType::f32, Device::cpu());
  EXPECT_EQ(bytes_in_use(Device::cpu()), before);
  EXPECT_FALSE(a.owning());
  EXPECT_FALSE(a.storage()->owning());
  EXPECT_EQ(a.data(), buf.data());
  EXPECT_EQ(a.strides(), (Shape{3, 1}));
  EXPECT_EQ(a.storage()->bytes(), 24u);
  buf[4] = 50;  // writes to the caller's memory are seen through the array
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 50, 6}));
  a.copy_from(Array::from(std::vector<float>{9, 8, 7, 6, 5, 4}, {2, 3}, Device::cpu()));
  EXPECT_EQ(buf, (std::vector<float>{9, 8, 7, 6, 5, 4}));
}

TEST(ArrayTest, WrapKeepAliveLivesUntilTheLastView) {
  auto released = std::make_shared<int>(0);
  std::vector<double> buf(8, 1.0);
  Array slice;
  {
    std::shared_ptr<void> keep(new int(0), [released](void* p) {
      ++*released;
      delete static_cast<int*>(p);
    });
    Array a = Array::wrap(buf.data(), {8}, DType::f64, Device::cpu(), {}, std::move(keep));
    slice = a.slice(0, 2, 4);
    EXPECT_EQ(*released, 0);
  }
  EXPECT_EQ(*released, 0);  // the slice still holds it
  slice = Array();
  EXPECT_EQ(*released, 1);
}

TEST(ArrayTest, WrapErrors) {
  std::vector<float> buf(8);
  expect_throw_with<InvalidArgument>(
      [&] {
        Array::wrap(buf.data(), {2, 4}, DType::f32, Device::cpu(), {4});
      },
      {"strides has 1", "shape has 2"});
  expect_throw_with<InvalidArgument>(
      [&] {
        Array::wrap(buf.data(), {2, -4}, DType::f32, Device::cpu());
      },
      {"negative"});
  expect_throw_with<InvalidArgument>([&] { Array::wrap(nullptr, {2}, DType::f32, Device::cpu()); },
                                     {"null"});
  // Null is fine for an array of no elements.
  const Array z = Array::wrap(nullptr, {0}, DType::f32, Device::cpu());
  EXPECT_EQ(z.numel(), 0);
}

TEST(ArrayTest, SliceOffsetsAndViews) {
  std::vector<int32_t> v(24);
  std::iota(v.begin(), v.end(), 0);
  const Array a = Array::from(v, {4, 6}, Device::cpu());
  const char* base = static_cast<const char*>(a.data());

  const Array rows = a.slice(0, 1, 3);
  EXPECT_EQ(rows.shape(), (Shape{2, 6}));
  EXPECT_EQ(rows.strides(), (Shape{6, 1}));
  EXPECT_EQ(rows.byte_offset(), 24);
  EXPECT_EQ(rows.data(), base + 24);
  EXPECT_TRUE(rows.is_contiguous());
  EXPECT_EQ(rows.storage(), a.storage());
  EXPECT_EQ(rows.to_vector<int32_t>(), std::vector<int32_t>(v.begin() + 6, v.begin() + 18));

  const Array cols = a.slice(1, 2, 5);
  EXPECT_EQ(cols.shape(), (Shape{4, 3}));
  EXPECT_EQ(cols.strides(), (Shape{6, 1}));
  EXPECT_EQ(cols.byte_offset(), 8);
  EXPECT_FALSE(cols.is_contiguous());
  EXPECT_EQ(cols.to_vector<int32_t>(),
            (std::vector<int32_t>{2, 3, 4, 8, 9, 10, 14, 15, 16, 20, 21, 22}));

  // Slices of slices accumulate offsets.
  const Array inner = rows.slice(1, 1, 4);
  EXPECT_EQ(inner.byte_offset(), 24 + 4);
  EXPECT_EQ(inner.to_vector<int32_t>(), (std::vector<int32_t>{7, 8, 9, 13, 14, 15}));
  const Array one = a.slice(0, 3, 4).slice(1, 5, 6);
  EXPECT_EQ(one.byte_offset(), (3 * 6 + 5) * 4);
  EXPECT_EQ(one.to_vector<int32_t>(), (std::vector<int32_t>{23}));

  // Whole and empty ranges.
  EXPECT_EQ(a.slice(0, 0, 4).to_vector<int32_t>(), v);
  const Array empty = a.slice(0, 2, 2);
  EXPECT_EQ(empty.shape(), (Shape{0, 6}));
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_EQ(a.slice(1, 6, 6).numel(), 0);
}

TEST(ArrayTest, SliceErrors) {
  const Array a = Array::empty({4, 6}, DType::f32, Device::cpu());
  expect_throw_with<InvalidArgument>([&] { a.slice(-1, 0, 1); }, {"dim -1", "f32[4,6]"});
  expect_throw_with<InvalidArgument>([&] { a.slice(2, 0, 1); }, {"dim 2"});
  expect_throw_with<InvalidArgument>([&] { a.slice(0, -1, 2); }, {"[-1, 2)", "dim 0"});
  expect_throw_with<InvalidArgument>([&] { a.slice(0, 3, 2); }, {"[3, 2)"});
  expect_throw_with<InvalidArgument>([&] { a.slice(0, 0, 5); }, {"[0, 5)", "[0, 4]"});
  expect_throw_with<InvalidArgument>([&] { a.slice(1, 5, 7); }, {"dim 1"});
  const Array s = Array::from(std::vector<float>{1}, {}, Device::cpu());
  EXPECT_THROW(s.slice(0, 0, 1), InvalidArgument);
}

TEST(ArrayTest, Reshape) {
  std::vector<double> v(24);
  std::iota(v.begin(), v.end(), 0.0);
  const Array a = Array::from(v, {4, 6}, Device::cpu());
  for (const Shape& s : {Shape{24}, Shape{2, 12}, Shape{2, 3, 4}, Shape{1, 24, 1}}) {
    const Array r = a.reshape(s);
    EXPECT_EQ(r.shape(), s);
    EXPECT_EQ(r.strides(), contiguous_strides(s));
    EXPECT_EQ(r.data(), a.data());
    EXPECT_EQ(r.storage(), a.storage());
    EXPECT_EQ(r.to_vector<double>(), v);
  }
  // A contiguous slice reshapes and keeps its offset.
  const Array rows = a.slice(0, 2, 4).reshape({3, 4});
  EXPECT_EQ(rows.byte_offset(), 2 * 6 * 8);
  EXPECT_EQ(rows.to_vector<double>(), std::vector<double>(v.begin() + 12, v.end()));
  // Scalars and empty arrays.
  EXPECT_EQ(Array::from(std::vector<float>{3}, {1}, Device::cpu()).reshape({}).ndim(), 0);
  EXPECT_EQ(Array::empty({0, 5}, DType::f32, Device::cpu()).reshape({5, 0}).numel(), 0);
}

TEST(ArrayTest, ReshapeErrors) {
  const Array a = Array::empty({4, 6}, DType::f32, Device::cpu());
  expect_throw_with<InvalidArgument>([&] { a.reshape({5, 5}); }, {"[5,5]", "25", "24"});
  expect_throw_with<InvalidArgument>([&] { a.reshape({25}); }, {"25"});
  expect_throw_with<InvalidArgument>([&] { a.reshape({-4, -6}); }, {"negative"});
  const Array cols = a.slice(1, 0, 3);
  expect_throw_with<InvalidArgument>([&] { cols.reshape({12}); }, {"contiguous"});
  const Array t = Array::wrap(a.data(), {6, 4}, DType::f32, Device::cpu(), {1, 6});
  expect_throw_with<InvalidArgument>([&] { t.reshape({24}); }, {"contiguous"});
}

TEST(ArrayTest, OnStorage) {
  auto storage = Storage::allocate(Device::cpu(), 64);
  const char* base = static_cast<const char*>(storage->data());
  const Array a = Array::on_storage(storage, {4}, DType::f32, 16);
  EXPECT_EQ(a.data(), base + 16);
  EXPECT_EQ(a.byte_offset(), 16);
  EXPECT_EQ(a.storage(), storage);
  EXPECT_TRUE(a.owning());
  EXPECT_TRUE(a.is_contiguous());
  const Array exact = Array::on_storage(storage, {2, 2}, DType::f64, 32);  // ends at 64
  EXPECT_EQ(exact.data(), base + 32);
  const Array whole = Array::on_storage(storage, {64}, DType::u8);
  EXPECT_EQ(whole.data(), base);
  // Views over the same storage alias.
  a.copy_from(Array::from(std::vector<float>{1, 2, 3, 4}, {4}, Device::cpu()));
  EXPECT_EQ(whole.slice(0, 16, 20).to_vector<uint8_t>(),
            (std::vector<uint8_t>{0x00, 0x00, 0x80, 0x3f}));  // 1.0f, little-endian
  // The view keeps the storage alive.
  std::weak_ptr<Storage> weak = storage;
  storage.reset();
  EXPECT_FALSE(weak.expired());
}

TEST(ArrayTest, OnStorageBoundsErrors) {
  auto storage = Storage::allocate(Device::cpu(), 64);
  expect_throw_with<InvalidArgument>([&] { Array::on_storage(storage, {4}, DType::f32, 52); },
                                     {"16 bytes", "offset 52", "64 bytes"});
  expect_throw_with<InvalidArgument>([&] { Array::on_storage(storage, {17}, DType::f32); },
                                     {"68 bytes"});
  expect_throw_with<InvalidArgument>([&] { Array::on_storage(storage, {1}, DType::u8, -1); },
                                     {"offset -1"});
  expect_throw_with<InvalidArgument>([&] { Array::on_storage(storage, {1}, DType::u8, 64); },
                                     {"offset 64"});
  expect_throw_with<InvalidArgument>([&] { Array::on_storage(nullptr, {1}, DType::u8); }, {"null"});
  expect_throw_with<InvalidArgument>([&] { Array::on_storage(storage, {-2}, DType::u8); },
                                     {"negative"});
  // A zero-byte view at the very end fits.
  EXPECT_EQ(Array::on_storage(storage, {0}, DType::f32, 64).numel(), 0);
}

TEST(ArrayTest, ByteSpan) {
  const Array a = Array::empty({3, 4}, DType::f32, Device::cpu());
  const uintptr_t base = reinterpret_cast<uintptr_t>(a.data());
  EXPECT_EQ(a.byte_span(), std::make_pair(base, base + 48));
  EXPECT_EQ(a.slice(0, 1, 2).byte_span(), std::make_pair(base + 16, base + 32));
  // A column: from its first element to one past its last.
  EXPECT_EQ(a.slice(1, 2, 3).byte_span(), std::make_pair(base + 8, base + 8 + 2 * 16 + 4));
  const Array t = Array::wrap(a.data(), {4, 3}, DType::f32, Device::cpu(), {1, 4});
  EXPECT_EQ(t.byte_span(), std::make_pair(base, base + 48));
  EXPECT_EQ(a.slice(0, 1, 1).byte_span(), std::make_pair(base + 16, base + 16));
  const Array bytes = Array::empty({5}, DType::u8, Device::cpu());
  const uintptr_t b = reinterpret_cast<uintptr_t>(bytes.data());
  EXPECT_EQ(bytes.byte_span(), std::make_pair(b, b + 5));
  EXPECT_EQ(bytes.slice(0, 4, 5).byte_span(), std::make_pair(b + 4, b + 5));
}

TEST(ArrayTest, CpuStorageIsAligned) {
  for (std::size_t n : {1, 3, 17, 1000}) {
    auto s = Storage::allocate(Device::cpu(), n);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(s->data()) % 64, 0u) << n;
  }
}

TEST(ArrayTest, BorrowErrors) {
  EXPECT_THROW(Storage::borrow(Device::cpu(), nullptr, 8), InvalidArgument);
  auto s = Storage::borrow(Device::cpu(), nullptr, 0);
  EXPECT_FALSE(s->owning());
  EXPECT_EQ(s->bytes(), 0u);
}

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
