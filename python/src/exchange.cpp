// Tensors through their producer's DLPack C exchange API (DLPack 1.3): the producer's type
// carries __dlpack_c_exchange_api__, a capsule named "dlpack_exchange_api" holding a table of C
// functions, looked up once per type. torch >= 2.10 has it: three tensors of an execute call
// cost ~0.1 us this way against ~1.3 us through _to_dlpack_versioned and capsules.
#include <Python.h>

#include <array>

#include "bindings.hpp"
#include "eagle/core/dlpack.hpp"

namespace eagle::python {

namespace {

// The table's layout, from the DLPack 1.3 specification (dlpack.h's DLPackExchangeAPI). Only the
// functions eagle calls are typed.
struct ExchangeApiHeader {
  DLPackVersion version;
  ExchangeApiHeader* prev_api;
};
struct ExchangeApi {
  ExchangeApiHeader header;
  void* managed_tensor_allocator;
  int (*managed_tensor_from_py_object_no_sync)(void* py_object, DLManagedTensorVersioned** out);
  void* managed_tensor_to_py_object_no_sync;
  int (*dltensor_from_py_object_no_sync)(void* py_object, DLTensor* out);
  int (*current_work_stream)(DLDeviceType device_type, int32_t device_id, void** out_stream);
};

// The type's table, or null when it has none eagle can use (no attribute, another capsule, a
// major version other than 1, a version before the table existed).
const ExchangeApi* read_exchange_api(PyTypeObject* type) {
  static PyObject* const name = PyUnicode_InternFromString("__dlpack_c_exchange_api__");
  PyObject* capsule = PyObject_GetAttr(reinterpret_cast<PyObject*>(type), name);
  if (capsule == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  const ExchangeApi* api = nullptr;
  if (PyCapsule_IsValid(capsule, "dlpack_exchange_api"))
    api = static_cast<const ExchangeApi*>(PyCapsule_GetPointer(capsule, "dlpack_exchange_api"));
  Py_DECREF(capsule);  // the table lives as long as its type, which the cache keeps
  if (api == nullptr || api->header.version.major != 1 || api->header.version.minor < 2)
    return nullptr;
  return api;
}

// The table of obj's type, looked up once per type: a few types (torch.Tensor, nn.Parameter,
// numpy.ndarray, ...) are seen in a process, each kept alive by the cache so that its address
// is never another type's.
const ExchangeApi* exchange_api_of(nb::handle obj) {
  struct Entry {
    PyTypeObject* type;
    const ExchangeApi* api;
  };
  static std::array<Entry, 16> cache{};
  static std::size_t used = 0;
  PyTypeObject* type = Py_TYPE(obj.ptr());
  for (std::size_t i = 0; i < used; ++i)
    if (cache[i].type == type) return cache[i].api;
  const ExchangeApi* api = read_exchange_api(type);
  if (used < cache.size()) {
    Py_INCREF(type);
    cache[used++] = {type, api};
  }
  return api;
}

// Whether a tensor on `where` can be used on `stream` with no handshake: on the CPU, or on the
// CUDA device whose current stream (the producer's) is `stream` itself (the legacy default
// stream, handle 0, included: torch's current stream until another is set).
bool usable_without_handshake(const ExchangeApi& api, const DLDevice& where, const Stream* stream) {
  if (where.device_type == kDLCPU) return true;
  if (where.device_type != kDLCUDA || api.current_work_stream == nullptr) return false;
  if (stream == nullptr || !stream->device().is_cuda()) return false;
  if (where.device_id != stream->device().ordinal()) return false;
  bool failed = false;
  const uintptr_t current = StreamMemo::current_stream(&api, where.device_id, [&] {
    void* s = nullptr;
    failed = api.current_work_stream(kDLCUDA, where.device_id, &s) != 0;
    return reinterpret_cast<uintptr_t>(s);
  });
  if (failed) {
    PyErr_Clear();
    return false;
  }
  return current == reinterpret_cast<uintptr_t>(stream->native());
}

}  // namespace

std::optional<plan::Operand> exchange_operand(nb::handle obj, const Stream* stream) {
  const ExchangeApi* api = exchange_api_of(obj);
  if (api == nullptr || api->dltensor_from_py_object_no_sync == nullptr) return std::nullopt;
  DLTensor t{};
  if (api->dltensor_from_py_object_no_sync(obj.ptr(), &t) != 0) {
    PyErr_Clear();  // __dlpack__ will say what is wrong
    return std::nullopt;
  }
  if (!usable_without_handshake(*api, t.device, stream)) return std::nullopt;
  return plan::Operand::dlpack(t);
}

std::optional<Array> exchange_array(nb::handle obj, const Stream* stream) {
  const ExchangeApi* api = exchange_api_of(obj);
  if (api == nullptr || api->managed_tensor_from_py_object_no_sync == nullptr) return std::nullopt;
  DLManagedTensorVersioned* t = nullptr;
  if (api->managed_tensor_from_py_object_no_sync(obj.ptr(), &t) != 0 || t == nullptr) {
    PyErr_Clear();
    return std::nullopt;
  }
  if (!usable_without_handshake(*api, t->dl_tensor.device, stream)) {
    if (t->deleter != nullptr) t->deleter(t);
    return std::nullopt;
  }
  try {
    return from_dlpack(t);  // on failure the tensor is still ours to delete
  } catch (...) {
    if (t->deleter != nullptr) t->deleter(t);
    throw;
  }
}

}  // namespace eagle::python
