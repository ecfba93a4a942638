// Array, and arrays to and from other libraries without copying: DLPack both ways (versioned
// and legacy capsules, the consumer's stream honoured) and __cuda_array_interface__ in.
#include <Python.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <optional>

#include "bindings.hpp"
#include "eagle/core/dlpack.hpp"
#include "eagle/core/error.hpp"

namespace eagle::python {

namespace {

constexpr const char* kVersioned = "dltensor_versioned";
constexpr const char* kVersionedUsed = "used_dltensor_versioned";
constexpr const char* kLegacy = "dltensor";
constexpr const char* kLegacyUsed = "used_dltensor";

// DLPack 0.x's managed tensor, what producers without max_version support hand out.
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

// A reference to a Python object that a C++ Array keeps alive; dropped under the GIL.
std::shared_ptr<void> keep_python(nb::handle obj) {
  return {obj.inc_ref().ptr(), [](void* p) {
            if (!Py_IsInitialized()) return;
            nb::gil_scoped_acquire gil;
            Py_DECREF(static_cast<PyObject*>(p));
          }};
}

void capsule_versioned_destructor(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, kVersioned)) return;  // consumed: the consumer owns it
  auto* t = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule, kVersioned));
  if (t != nullptr && t->deleter != nullptr) t->deleter(t);
}

void capsule_legacy_destructor(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, kLegacy)) return;
  auto* t = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kLegacy));
  if (t != nullptr && t->deleter != nullptr) t->deleter(t);
}

nb::object export_capsule(const Array& array, bool versioned) {
  DLManagedTensorVersioned* t = to_dlpack(array);
  if (versioned) {
    PyObject* cap = PyCapsule_New(t, kVersioned, capsule_versioned_destructor);
    if (cap == nullptr) {
      t->deleter(t);
      throw nb::python_error();
    }
    return nb::steal(cap);
  }
  if ((t->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0) {
    t->deleter(t);
    PyErr_SetString(PyExc_BufferError,
                    "__dlpack__: a read-only eagle array cannot be exported through a DLPack 0.x "
                    "capsule (it has no read-only flag): ask for max_version=(1, 0)");
    throw nb::python_error();
  }
  auto* legacy =
      new DLManagedTensor{t->dl_tensor, t, [](DLManagedTensor* self) {
                            auto* v = static_cast<DLManagedTensorVersioned*>(self->manager_ctx);
                            v->deleter(v);
                            delete self;
                          }};
  PyObject* cap = PyCapsule_New(legacy, kLegacy, capsule_legacy_destructor);
  if (cap == nullptr) {
    legacy->deleter(legacy);
    throw nb::python_error();
  }
  return nb::steal(cap);
}

// The Array of a DLPack capsule; the capsule is marked used once the Array owns the tensor.
Array import_capsule(nb::handle capsule) {
  PyObject* c = capsule.ptr();
  if (PyCapsule_IsValid(c, kVersioned)) {
    auto* t = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(c, kVersioned));
    Array a = from_dlpack(t);  // on failure the capsule still owns the tensor
    PyCapsule_SetName(c, kVersionedUsed);
    return a;
  }
  if (PyCapsule_IsValid(c, kLegacy)) {
    auto* legacy = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, kLegacy));
    auto* v = new DLManagedTensorVersioned{};
    v->version = {1, 0};
    v->manager_ctx = legacy;
    v->deleter = [](DLManagedTensorVersioned* self) {
      auto* l = static_cast<DLManagedTensor*>(self->manager_ctx);
      if (l->deleter != nullptr) l->deleter(l);
      delete self;
    };
    v->dl_tensor = legacy->dl_tensor;
    try {
      Array a = from_dlpack(v);
      PyCapsule_SetName(c, kLegacyUsed);
      return a;
    } catch (...) {
      delete v;  // the legacy tensor stays the capsule's
      throw;
    }
  }
  throw InvalidArgument(
      "asarray: the object's __dlpack__ returned no unused 'dltensor_versioned' or 'dltensor' "
      "capsule");
}

// obj.<name>(*args, **{kwnames: ...}) by vectorcall: no bound method, no keyword dict (an
// execute asks every foreign operand for its capsule at every call). args[0] is obj; `name` is
// an interned string that lives as long as the process.
nb::object call_method(PyObject* name, PyObject** args, std::size_t positional, PyObject* kwnames) {
  PyObject* out =
      PyObject_VectorcallMethod(name, args, positional | PY_VECTORCALL_ARGUMENTS_OFFSET, kwnames);
  if (out == nullptr) throw nb::python_error();
  return nb::steal(out);
}

// obj.__dlpack__'s capsule, asked with the stream handshake for a CUDA producer.
nb::object dlpack_capsule(nb::handle obj, const Stream* stream) {
  static PyObject* const dlpack = PyUnicode_InternFromString("__dlpack__");
  static PyObject* const dlpack_device = PyUnicode_InternFromString("__dlpack_device__");
  PyObject* self[1] = {obj.ptr()};
  nb::tuple dev = nb::cast<nb::tuple>(call_method(dlpack_device, self, 1, nullptr));
  const int type = nb::cast<int>(dev[0]);
  const bool cuda = type == kDLCUDA || type == kDLCUDAManaged;
  // Made once and never freed, like the interned method names.
  static PyObject* const max_version =
      nb::make_tuple(DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION).release().ptr();
  static PyObject* const with_stream = nb::make_tuple("stream", "max_version").release().ptr();
  static PyObject* const versioned_only = nb::make_tuple("max_version").release().ptr();
  static PyObject* const stream_only = nb::make_tuple("stream").release().ptr();
  // The producer orders its pending work before the stream eagle uses (1: legacy default).
  nb::object stream_arg;
  if (cuda)
    stream_arg = stream != nullptr && stream->native() != nullptr
                     ? nb::int_(reinterpret_cast<uintptr_t>(stream->native()))
                     : nb::int_(1);
  try {
    PyObject* args[3] = {obj.ptr(), cuda ? stream_arg.ptr() : max_version, max_version};
    return call_method(dlpack, args, 1, cuda ? with_stream : versioned_only);
  } catch (nb::python_error& e) {
    if (!e.matches(PyExc_TypeError)) throw;  // a producer from before DLPack 1.0
  }
  PyObject* args[2] = {obj.ptr(), stream_arg.ptr()};
  return call_method(dlpack, args, 1, cuda ? stream_only : nullptr);
}

DType dtype_of_typestr(const std::string& typestr) {
  static const std::pair<const char*, DType> table[] = {
      {"f8", DType::f64}, {"f4", DType::f32}, {"f2", DType::f16}, {"i8", DType::i64},
      {"i4", DType::i32}, {"u4", DType::u32}, {"u1", DType::u8},  {"b1", DType::boolean}};
  if (typestr.size() == 3 && typestr[0] != '>') {
    for (const auto& [code, d] : table)
      if (typestr.compare(1, 2, code) == 0) return d;
  }
  throw InvalidArgument("asarray: __cuda_array_interface__ typestr '" + typestr +
                        "' is not an eagle dtype (f8 f4 f2 i8 i4 u4 u1 b1, little-endian)");
}

Array from_cuda_array_interface(nb::handle obj) {
  nb::dict cai = nb::cast<nb::dict>(obj.attr("__cuda_array_interface__"));
  if (cai.contains("stream") && !cai["stream"].is_none())
    throw NotSupported(
        "asarray: the __cuda_array_interface__ names a stream with pending work; eagle imports "
        "it only through __dlpack__ (which orders that work before eagle's stream), or "
        "synchronize the producer first");
  const DType dtype = dtype_of_typestr(nb::cast<std::string>(cai["typestr"]));
  const Shape shape = to_shape(cai["shape"]);
  nb::tuple data = nb::cast<nb::tuple>(cai["data"]);
  const auto ptr = nb::cast<uintptr_t>(data[0]);
  Shape strides;
  if (cai.contains("strides") && !cai["strides"].is_none()) {
    const auto item = static_cast<int64_t>(itemsize(dtype));
    for (int64_t s : to_shape(cai["strides"])) {
      if (s % item != 0)
        throw InvalidArgument(
            "asarray: __cuda_array_interface__ strides must be multiples of "
            "the item size");
      strides.push_back(s / item);
    }
  }
  int ordinal = 0;
  if (ptr != 0) {
    // The array's device is the current CUDA device of its producer; eagle has no current
    // device, so a pointer's device would need the driver: take cuda:0 unless told otherwise.
    if (nb::hasattr(obj, "device") && nb::hasattr(obj.attr("device"), "id"))
      ordinal = nb::cast<int>(obj.attr("device").attr("id"));
  }
  Array a = Array::wrap(reinterpret_cast<void*>(ptr), shape, dtype, Device::cuda(ordinal), strides,
                        keep_python(obj));
  return nb::cast<bool>(data[1]) ? a.as_read_only() : a;
}

// PyTorch tensors by a fast export, for torch before 2.10 (later ones have the C exchange API,
// tried first): torch's own __dlpack__ is Python code costing ~4.5 us a call, its C-level
// _to_dlpack_versioned ~0.4 us. The fast export skips __dlpack__'s stream handshake,
// so it is taken only where none is needed: a CPU tensor, or a CUDA tensor used on the stream
// torch issues on now (eagle.Stream.borrow of torch's current stream, as eagle.torch does).
// The references are never dropped: the struct is static, and a static's destructor runs after
// the interpreter is gone.
struct TorchExport {
  PyObject* tensor_type = nullptr;  // torch.Tensor, once torch is imported
  nb::handle to_dlpack;             // torch._C._to_dlpack_versioned
  nb::handle current_stream;        // torch._C._cuda_getCurrentRawStream(device index)

  // Looks torch up in sys.modules (never imports it) until it is there.
  bool ready() {
    if (tensor_type != nullptr) return true;
    PyObject* torch = PyDict_GetItemString(PyImport_GetModuleDict(), "torch");  // borrowed
    if (torch == nullptr) return false;
    nb::handle t(torch);
    if (!nb::hasattr(t, "_C") || !nb::hasattr(t.attr("_C"), "_to_dlpack_versioned")) return false;
    auto keep = [](nb::object o) { return o.release(); };
    to_dlpack = keep(t.attr("_C").attr("_to_dlpack_versioned"));
    if (nb::hasattr(t.attr("_C"), "_cuda_getCurrentRawStream"))
      current_stream = keep(t.attr("_C").attr("_cuda_getCurrentRawStream"));
    tensor_type = keep(t.attr("Tensor")).ptr();
    return true;
  }
};

// The tensor's capsule by the fast export, or an invalid object when the handshake is needed.
// The capsule says where the tensor lives (no Python attribute reads); one that cannot be used
// without the handshake is dropped, which returns the tensor to torch.
nb::object torch_fast_capsule(nb::handle obj, const Stream* stream) {
  static TorchExport torch;
  if (!torch.ready() ||
      !PyObject_TypeCheck(obj.ptr(), reinterpret_cast<PyTypeObject*>(torch.tensor_type)))
    return {};
  nb::object capsule = torch.to_dlpack(obj);
  if (!PyCapsule_IsValid(capsule.ptr(), kVersioned)) return {};
  const DLDevice where =
      static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule.ptr(), kVersioned))
          ->dl_tensor.device;
  if (where.device_type == kDLCUDA) {
    if (stream == nullptr || !stream->borrowed() || !torch.current_stream.is_valid()) return {};
    if (where.device_id != stream->device().ordinal()) return {};
    const uintptr_t current = StreamMemo::current_stream(&torch, where.device_id, [&] {
      return nb::cast<uintptr_t>(torch.current_stream(where.device_id));
    });
    if (current != reinterpret_cast<uintptr_t>(stream->native())) return {};
  } else if (where.device_type != kDLCPU) {
    return {};
  }
  return capsule;
}

}  // namespace

nb::object foreign_capsule(nb::handle obj, const Stream* stream) {
  if (PyCapsule_CheckExact(obj.ptr())) return {};  // the caller's capsule: to_array consumes it
  if (nb::object fast = torch_fast_capsule(obj, stream); fast.is_valid()) return fast;
  if (nb::hasattr(obj, "__dlpack__")) return dlpack_capsule(obj, stream);
  return {};
}

plan::Operand operand_of_capsule(nb::handle capsule) {
  PyObject* c = capsule.ptr();
  if (PyCapsule_IsValid(c, kVersioned))
    return plan::Operand::dlpack(
        *static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(c, kVersioned)));
  if (PyCapsule_IsValid(c, kLegacy))
    return plan::Operand::dlpack(
        static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, kLegacy))->dl_tensor);
  throw InvalidArgument(
      "execute: the object's __dlpack__ returned no unused 'dltensor_versioned' or 'dltensor' "
      "capsule");
}

bool is_array_like(nb::handle obj) {
  return nb::isinstance<Array>(obj) || PyCapsule_CheckExact(obj.ptr()) ||
         nb::hasattr(obj, "__dlpack__") || nb::hasattr(obj, "__cuda_array_interface__");
}

namespace {
thread_local StreamMemo* innermost_memo = nullptr;
}  // namespace

StreamMemo::StreamMemo() : outer_(innermost_memo) {
  innermost_memo = this;
}

StreamMemo::~StreamMemo() {
  innermost_memo = outer_;
}

StreamMemo* StreamMemo::innermost() {
  return innermost_memo;
}

Array to_array(nb::handle obj, const Stream* stream) {
  if (nb::isinstance<Array>(obj)) return nb::cast<Array>(obj);
  if (PyCapsule_CheckExact(obj.ptr())) return import_capsule(obj);
  if (std::optional<Array> a = exchange_array(obj, stream)) return *std::move(a);
  if (nb::object capsule = foreign_capsule(obj, stream); capsule.is_valid())
    return import_capsule(capsule);
  if (nb::hasattr(obj, "__cuda_array_interface__")) return from_cuda_array_interface(obj);
  throw InvalidArgument(
      "expected an array: an eagle.Array or an object with __dlpack__ or "
      "__cuda_array_interface__ (numpy, torch, cupy), got " +
      nb::cast<std::string>(nb::str(obj.type())));
}

void bind_array(nb::module_& m) {
  nb::class_<Array>(m, "Array",
                    "A typed, strided view of device or host memory, owning or borrowed. Arrays "
                    "made from other libraries share their memory (no copy).")
      .def_prop_ro("shape", [](const Array& a) { return shape_tuple(a.shape()); })
      .def_prop_ro(
          "strides", [](const Array& a) { return shape_tuple(a.strides()); }, "In elements.")
      .def_prop_ro("dtype", &Array::dtype)
      .def_prop_ro("device", &Array::device)
      .def_prop_ro("ndim", &Array::ndim)
      .def_prop_ro("numel", &Array::numel)
      .def_prop_ro("nbytes", &Array::nbytes)
      .def_prop_ro("read_only", &Array::read_only)
      .def_prop_ro("owning", &Array::owning)
      .def_prop_ro("is_contiguous", &Array::is_contiguous)
      .def_prop_ro(
          "data_ptr", [](const Array& a) { return reinterpret_cast<uintptr_t>(a.data()); },
          "Address of the first element.")
      .def("as_read_only", &Array::as_read_only, "A read-only view of the same elements.")
      .def(
          "slice", [](const Array& a, int dim, int64_t b, int64_t e) { return a.slice(dim, b, e); },
          nb::arg("dim"), nb::arg("begin"), nb::arg("end"), "Rows [begin, end) of `dim` (a view).")
      .def(
          "reshape", [](const Array& a, nb::handle shape) { return a.reshape(to_shape(shape)); },
          nb::arg("shape"), "Same elements, new shape (contiguous arrays only).")
      .def("to", &Array::to, nb::arg("device"), nb::call_guard<nb::gil_scoped_release>(),
           "A new contiguous copy on `device`.")
      .def(
          "copy_from", [](const Array& self, nb::handle src) { self.copy_from(to_array(src)); },
          nb::arg("src"), "Copies `src` (same shape and dtype, both contiguous) into this array.")
      // The numpy views are Python code (eagle/_arrays.py); bound here so the stubs show them.
      .def(
          "numpy",
          [](nb::handle self) {
            return nb::module_::import_("eagle._arrays").attr("to_numpy")(self);
          },
          "The values as a numpy array: zero copy for a CPU array, a host copy otherwise.")
      .def(
          "tolist",
          [](nb::handle self) {
            return nb::module_::import_("eagle._arrays").attr("to_numpy")(self).attr("tolist")();
          },
          "The values as nested Python lists (a host copy).")
      .def(
          "__array__",
          [](nb::handle self, nb::handle dtype, nb::handle copy) {
            (void)copy;  // numpy asks; a CPU array is shared, any other array is copied anyway
            nb::object values = nb::module_::import_("eagle._arrays").attr("to_numpy")(self);
            return dtype.is_none() ? values : values.attr("astype")(dtype);
          },
          nb::arg("dtype") = nb::none(), nb::arg("copy") = nb::none(),
          "numpy's conversion protocol (np.asarray(a)).")
      .def("__len__",
           [](const Array& a) {
             if (a.ndim() == 0) throw nb::type_error("len() of a 0-d array");
             return a.shape()[0];
           })
      .def("__repr__", [](const Array& a) { return "eagle.Array(" + a.describe() + ")"; })
      .def(
          "__dlpack__",
          [](const Array& self, nb::handle stream, std::optional<std::pair<int, int>> max_version,
             std::optional<std::pair<int, int>> dl_device, std::optional<bool> copy) {
            Array a = self;
            if (dl_device) {
              const Device want = dl_device->first == kDLCPU ? Device::cpu()
                                  : dl_device->first == kDLCUDA
                                      ? Device::cuda(dl_device->second)
                                      : throw nb::buffer_error(
                                            "__dlpack__: dl_device must be "
                                            "CPU or CUDA");
              if (want != a.device()) {
                if (copy && !*copy)
                  throw nb::buffer_error("__dlpack__: dl_device differs and copy=False");
                a = a.to(want);
              }
            }
            if (copy && *copy && a.storage() == self.storage()) a = a.to(a.device());
            if (a.device().is_cpu() && !stream.is_none() && nb::cast<int64_t>(stream) != -1)
              throw nb::buffer_error("__dlpack__: stream must be None for a CPU array");
            // eagle's work is complete when g() returns (it waits): nothing is pending on
            // eagle's side for the consumer's stream to wait for.
            const bool versioned = max_version && max_version->first >= 1;
            return export_capsule(a, versioned);
          },
          nb::kw_only(), nb::arg("stream") = nb::none(), nb::arg("max_version") = nb::none(),
          nb::arg("dl_device") = nb::none(), nb::arg("copy") = nb::none(),
          "DLPack export (shares memory; read-only arrays carry the read-only flag).")
      .def(
          "__dlpack_device__",
          [](const Array& a) {
            return nb::make_tuple(a.device().is_cpu() ? int(kDLCPU) : int(kDLCUDA),
                                  a.device().is_cpu() ? 0 : a.device().ordinal());
          },
          "(device type, ordinal) as DLPack numbers them.");

  m.def(
      "_import", [](nb::handle obj, const Stream* stream) { return to_array(obj, stream); },
      nb::arg("obj"), nb::arg("stream") = nb::none(),
      "An array-like object (DLPack, __cuda_array_interface__) as an Array, without copying.");
  m.def("_is_array_like", &is_array_like, nb::arg("obj"));
  m.def(
      "empty",
      [](nb::handle shape, DType dtype, Device device) {
        return Array::empty(to_shape(shape), dtype, device);
      },
      nb::arg("shape"), nb::arg("dtype") = DType::f32, nb::arg("device") = Device::cpu(),
      "A new contiguous array with unspecified contents.");
  m.def("bytes_in_use", &bytes_in_use, nb::arg("device"),
        "Bytes eagle holds allocated on `device`.");
}

}  // namespace eagle::python
