// Tests of devices and their serialisable properties descriptor.
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

TEST(DevicePropertiesTest, JsonIntegerOutsideAnIntFieldIsRefusedNotTruncated) {
  // 4294967386 used to wrap to 90 in the int field: a descriptor that reads as sm 90.
  for (const char* field : {"sm", "multiprocessors", "max_threads_per_block", "warp_size"}) {
    for (const char* value : {"4294967386", "2147483648", "-2147483649"}) {
      SCOPED_TRACE(concat(field, " = ", value));
      const DeviceProperties p = h200_like();
      std::string json = p.to_json();
      const std::string key = concat("\"", field, "\": ");
      const auto at = json.find(key) + key.size();
      json.replace(at, json.find_first_of(",}", at) - at, value);
      expect_throw_with<InvalidArgument>(
          [&] { DeviceProperties::from_json(json); },
          {"DeviceProperties::from_json", concat(concat("field '", field, "' = "), value, ""),
           "outside the range of an int [-2147483648, 2147483647]"});
    }
  }
  // The edges of the range are accepted.
  DeviceProperties p = h200_like();
  p.sm = std::numeric_limits<int>::max();
  p.warp_size = std::numeric_limits<int>::min();
  EXPECT_EQ(DeviceProperties::from_json(p.to_json()), p);
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

}  // namespace
}  // namespace eagle
