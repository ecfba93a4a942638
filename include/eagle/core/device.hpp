// Devices and their serialisable properties descriptor. There is no "current" device.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace eagle {

enum class DeviceKind : uint8_t { cpu, cuda };

class Device {
 public:
  static Device cpu() { return Device(DeviceKind::cpu, 0); }
  // Throws InvalidArgument when ordinal is negative.
  static Device cuda(int ordinal);
  // Parses "cpu", "cuda" (= cuda:0) or "cuda:N".
  static Device parse(std::string_view text);

  DeviceKind kind() const { return kind_; }
  int ordinal() const { return ordinal_; }
  bool is_cpu() const { return kind_ == DeviceKind::cpu; }
  bool is_cuda() const { return kind_ == DeviceKind::cuda; }
  std::string str() const;

  friend bool operator==(Device a, Device b) {
    return a.kind_ == b.kind_ && a.ordinal_ == b.ordinal_;
  }
  friend bool operator!=(Device a, Device b) { return !(a == b); }

 private:
  Device(DeviceKind kind, int ordinal) : kind_(kind), ordinal_(ordinal) {}
  DeviceKind kind_;
  int ordinal_;
};

// Number of CUDA devices the driver reports; 0 without a GPU or in a build without CUDA.
int cuda_device_count();
// True when this build has CUDA and at least one device is usable.
bool cuda_available();

// What planners and kernels need to know about a device. Serialisable, so a plan can be
// made for a device that is not attached (ahead of time) from a saved descriptor.
struct DeviceProperties {
  std::string device;  // Device::str(), e.g. "cuda:0"
  std::string name;
  int sm = 0;               // major * 10 + minor; 0 on the CPU
  int multiprocessors = 0;  // SMs on a GPU, hardware threads on the CPU
  int64_t l2_bytes = 0;
  int64_t shared_mem_per_block = 0;        // default limit per block
  int64_t shared_mem_per_block_optin = 0;  // limit after cudaFuncSetAttribute
  int64_t shared_mem_per_multiprocessor = 0;
  int64_t total_memory = 0;
  int max_threads_per_block = 0;
  int warp_size = 0;

  // Reads the properties of an attached device; throws InvalidArgument for a missing one.
  static DeviceProperties query(Device device);
  std::string to_json() const;
  // Throws InvalidArgument naming the field on malformed input, and naming the field and its
  // range on an integer its field cannot hold (the int fields take [INT_MIN, INT_MAX]).
  static DeviceProperties from_json(std::string_view json);
  friend bool operator==(const DeviceProperties&, const DeviceProperties&) = default;
};

}  // namespace eagle
