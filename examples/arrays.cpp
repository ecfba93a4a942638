// Arrays, devices and streams: what every other example passes around.
// Shows: Device, Array::from / empty / wrap, views (slice, reshape), copies between devices,
// to_vector, bytes_in_use, DeviceProperties, Stream, saturating_cast (real to integer).
// Pitfalls: there is no current device: every array names its own; Array::wrap borrows memory
// the caller keeps alive; a view shares storage with what it views.
#include <cstdint>
#include <cstdio>
#include <vector>

#include "eagle/core/convert.hpp"
#include "eagle/eagle.hpp"

using namespace eagle;

bool run(Device device) {
  float host[4] = {5, 6, 7, 8};
  // [readme:arrays]
  Device cpu = Device::cpu();  // or Device::cuda(0), Device::parse("cuda:1")
  Array x = Array::from(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}, device);  // owning copy
  Array y = Array::empty({1024}, DType::bf16, device);   // f64 f32 f16 bf16 i64 i32 u32 u8 bool
  Array w = Array::wrap(host, {4}, DType::f32, cpu);     // borrows memory (strides optional)
  Array row = x.slice(0, 1, 2), flat = x.reshape({6});   // views share x's storage
  Array h = x.to(cpu);                                   // a contiguous copy on the CPU
  x.copy_from(h);                                        // copies back (same shape and dtype)
  std::vector<double> values = row.to_vector<double>();  // {4, 5, 6}
  std::size_t held = bytes_in_use(device);               // owning storage eagle holds there
  DeviceProperties p = DeviceProperties::query(device);  // sm, SMs, L2, shared memory, ...
  DeviceProperties q = DeviceProperties::from_json(p.to_json());  // serialisable
  Stream s(device);                               // a cudaStream_t (CPU: synchronous)
  s.synchronize();                                // waits for what was issued on it
  int32_t big = saturating_cast<int32_t>(1e300);  // INT32_MAX: truncate, clamp, NaN -> 0
  // [/readme]
  std::printf("%s: %s, %zu bytes held\n", device.str().c_str(), x.describe().c_str(), held);
  return values == std::vector<double>{4, 5, 6} && flat.numel() == 6 && y.nbytes() == 2048 &&
         w.to_vector<float>()[3] == 8 && p == q && held >= x.nbytes() && big == INT32_MAX;
}

int main() {
  for (Device device : {Device::cpu(), Device::cuda(0)}) {
    if (device.is_cuda() && !cuda_available()) continue;
    if (!run(device)) {
      std::printf("arrays: wrong result on %s\n", device.str().c_str());
      return 1;
    }
  }
  return 0;
}
