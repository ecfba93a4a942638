// Devices, dtypes, device properties and streams.
#include <nanobind/stl/string.h>

#include <map>
#include <memory>
#include <mutex>

#include "bindings.hpp"
#include "eagle/core/device.hpp"
#include "eagle/core/dtype.hpp"
#include "eagle/core/error.hpp"
#include "eagle/core/stream.hpp"

namespace eagle::python {

const Stream& eager_stream(Device device) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Stream>> streams;
  std::lock_guard lock(mutex);
  auto& s = streams[device.str()];
  if (!s) s = std::make_unique<Stream>(device);
  return *s;
}

Shape to_shape(nb::handle seq) {
  Shape shape;
  if (nb::isinstance<nb::int_>(seq)) return {nb::cast<int64_t>(seq)};
  for (nb::handle d : seq) shape.push_back(nb::cast<int64_t>(d));
  return shape;
}

nb::tuple shape_tuple(const Shape& shape) {
  nb::list out;
  for (int64_t d : shape) out.append(d);
  return nb::tuple(out);
}

void bind_core(nb::module_& m) {
  nb::enum_<DeviceKind>(m, "DeviceKind", "Where a device's memory lives.")
      .value("cpu", DeviceKind::cpu)
      .value("cuda", DeviceKind::cuda);

  nb::class_<Device>(m, "Device",
                     "A device: the CPU or one CUDA GPU. There is no current device: every array "
                     "and graph says where it lives.")
      .def(
          "__init__",
          [](Device* self, const std::string& text) { new (self) Device(Device::parse(text)); },
          nb::arg("text"), "Parses 'cpu', 'cuda' (cuda:0) or 'cuda:N'.")
      .def_prop_ro("kind", &Device::kind)
      .def_prop_ro("ordinal", &Device::ordinal)
      .def_prop_ro("is_cpu", &Device::is_cpu)
      .def_prop_ro("is_cuda", &Device::is_cuda)
      .def("__str__", &Device::str)
      .def("__repr__", [](Device d) { return "eagle.Device('" + d.str() + "')"; })
      .def("__eq__", [](Device a, Device b) { return a == b; })
      .def("__hash__", [](Device d) { return std::hash<std::string>()(d.str()); });
  nb::implicitly_convertible<std::string, Device>();
  m.def("cuda_device_count", &cuda_device_count, "CUDA devices the driver reports (0 without).");
  m.def("cuda_available", &cuda_available, "Whether this build has CUDA and a usable GPU.");

  auto dtype = nb::enum_<DType>(m, "DType", "Element types.");
  for (DType d : {DType::f64, DType::f32, DType::f16, DType::bf16, DType::i64, DType::i32,
                  DType::u32, DType::u8, DType::boolean}) {
    const std::string name(dtype_name(d));
    dtype.value(name == "bool" ? "bool_" : name.c_str(), d);
  }
  dtype.def_prop_ro("itemsize", [](DType d) { return itemsize(d); })
      .def_prop_ro("is_floating", [](DType d) { return is_floating(d); })
      .def_prop_ro("name", [](DType d) { return std::string(dtype_name(d)); })
      .def_static(
          "from_name", [](const std::string& n) { return dtype_from_name(n); }, nb::arg("name"),
          "The dtype named 'f32', 'bf16', ... (InvalidArgument for an unknown name).");

  nb::class_<DeviceProperties>(m, "DeviceProperties",
                               "What planners and kernels know about a device; serialisable.")
      .def_static("query", &DeviceProperties::query, nb::arg("device"))
      .def_static("from_json", &DeviceProperties::from_json, nb::arg("json"))
      .def("to_json", &DeviceProperties::to_json)
      .def_ro("device", &DeviceProperties::device)
      .def_ro("name", &DeviceProperties::name)
      .def_ro("sm", &DeviceProperties::sm)
      .def_ro("multiprocessors", &DeviceProperties::multiprocessors)
      .def_ro("l2_bytes", &DeviceProperties::l2_bytes)
      .def_ro("total_memory", &DeviceProperties::total_memory)
      .def("__eq__", [](const DeviceProperties& a, const DeviceProperties& b) { return a == b; });

  nb::class_<Stream>(m, "Stream",
                     "An ordered queue of work on one device (a non-blocking CUDA "
                     "stream on a GPU; on the CPU work runs when issued).")
      .def(nb::init<Device>(), nb::arg("device"))
      .def_prop_ro("device", &Stream::device)
      .def_prop_ro(
          "handle", [](const Stream& s) { return reinterpret_cast<uintptr_t>(s.native()); },
          "The cudaStream_t as an integer (0 on the CPU).")
      .def("synchronize", &Stream::synchronize, nb::call_guard<nb::gil_scoped_release>());
}

}  // namespace eagle::python
