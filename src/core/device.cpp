#include "eagle/core/device.hpp"

#include <charconv>
#include <limits>
#include <thread>

#include "eagle/core/error.hpp"
#include "util/cuda_check.hpp"
#include "util/json.hpp"

namespace eagle {

Device Device::cuda(int ordinal) {
  if (ordinal < 0)
    throw InvalidArgument("Device::cuda: ordinal must be >= 0, got " + std::to_string(ordinal));
  return Device(DeviceKind::cuda, ordinal);
}

Device Device::parse(std::string_view text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  if (text.substr(0, 5) == "cuda:") {
    int n = -1;
    auto tail = text.substr(5);
    auto [end, ec] = std::from_chars(tail.data(), tail.data() + tail.size(), n);
    if (ec == std::errc() && end == tail.data() + tail.size() && n >= 0) return cuda(n);
  }
  throw InvalidArgument("device: '" + std::string(text) + "' is not 'cpu', 'cuda' or 'cuda:N'");
}

std::string Device::str() const {
  return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(ordinal_);
}

int cuda_device_count() {
#ifdef EAGLE_HAVE_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
#else
  return 0;
#endif
}

bool cuda_available() {
  return cuda_device_count() > 0;
}

DeviceProperties DeviceProperties::query(Device device) {
  DeviceProperties p;
  p.device = device.str();
  if (device.is_cpu()) {
    p.name = "host cpu";
    p.multiprocessors = static_cast<int>(std::thread::hardware_concurrency());
    return p;
  }
  if (device.ordinal() >= cuda_device_count())
    throw InvalidArgument("DeviceProperties::query: device " + device.str() + " is not attached (" +
                          std::to_string(cuda_device_count()) + " CUDA devices)");
#ifdef EAGLE_HAVE_CUDA
  cudaDeviceProp prop{};
  EAGLE_CUDA_CHECK(cudaGetDeviceProperties(&prop, device.ordinal()));
  p.name = prop.name;
  p.sm = prop.major * 10 + prop.minor;
  p.multiprocessors = prop.multiProcessorCount;
  p.l2_bytes = prop.l2CacheSize;
  p.shared_mem_per_block = static_cast<int64_t>(prop.sharedMemPerBlock);
  p.shared_mem_per_block_optin = static_cast<int64_t>(prop.sharedMemPerBlockOptin);
  p.shared_mem_per_multiprocessor = static_cast<int64_t>(prop.sharedMemPerMultiprocessor);
  p.total_memory = static_cast<int64_t>(prop.totalGlobalMem);
  p.max_threads_per_block = prop.maxThreadsPerBlock;
  p.warp_size = prop.warpSize;
#endif
  return p;
}

std::string DeviceProperties::to_json() const {
  using detail::json_quote;
  auto num = [](int64_t v) { return std::to_string(v); };
  return "{\"device\": " + json_quote(device) + ", \"name\": " + json_quote(name) +
         ", \"sm\": " + num(sm) + ", \"multiprocessors\": " + num(multiprocessors) +
         ", \"l2_bytes\": " + num(l2_bytes) +
         ", \"shared_mem_per_block\": " + num(shared_mem_per_block) +
         ", \"shared_mem_per_block_optin\": " + num(shared_mem_per_block_optin) +
         ", \"shared_mem_per_multiprocessor\": " + num(shared_mem_per_multiprocessor) +
         ", \"total_memory\": " + num(total_memory) +
         ", \"max_threads_per_block\": " + num(max_threads_per_block) +
         ", \"warp_size\": " + num(warp_size) + "}";
}

DeviceProperties DeviceProperties::from_json(std::string_view json) {
  auto fields = detail::parse_flat_json(json, "DeviceProperties::from_json");
  auto take = [&](const char* key) -> const std::string& {
    auto it = fields.find(key);
    if (it == fields.end())
      throw InvalidArgument(std::string("DeviceProperties::from_json: missing field '") + key +
                            "'");
    return it->second;
  };
  auto integer = [&](const char* key) -> int64_t {
    const std::string& text = take(key);
    int64_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size())
      throw InvalidArgument(std::string("DeviceProperties::from_json: field '") + key +
                            "' must be an integer, got '" + text + "'");
    return v;
  };
  // An int field takes only what an int holds: a plain cast would wrap 4294967296 to 0.
  auto small = [&](const char* key) -> int {
    const int64_t v = integer(key);
    if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
      throw InvalidArgument(std::string("DeviceProperties::from_json: field '") + key +
                            "' = " + std::to_string(v) + " is outside the range of an int [" +
                            std::to_string(std::numeric_limits<int>::min()) + ", " +
                            std::to_string(std::numeric_limits<int>::max()) + "]");
    return static_cast<int>(v);
  };
  DeviceProperties p;
  p.device = Device::parse(take("device")).str();
  p.name = take("name");
  p.sm = small("sm");
  p.multiprocessors = small("multiprocessors");
  p.l2_bytes = integer("l2_bytes");
  p.shared_mem_per_block = integer("shared_mem_per_block");
  p.shared_mem_per_block_optin = integer("shared_mem_per_block_optin");
  p.shared_mem_per_multiprocessor = integer("shared_mem_per_multiprocessor");
  p.total_memory = integer("total_memory");
  p.max_threads_per_block = small("max_threads_per_block");
  p.warp_size = small("warp_size");
  return p;
}

}  // namespace eagle
