#include "eagle/core/dlpack.hpp"

#include <cstdint>
#include <memory>
#include <string>

#include "eagle/core/error.hpp"

namespace eagle {

namespace {

struct DTypeCode {
  DType dtype;
  uint8_t code;
  uint8_t bits;
};
constexpr DTypeCode kCodes[] = {
    {DType::f64, kDLFloat, 64},   {DType::f32, kDLFloat, 32}, {DType::f16, kDLFloat, 16},
    {DType::bf16, kDLBfloat, 16}, {DType::i64, kDLInt, 64},   {DType::i32, kDLInt, 32},
    {DType::u32, kDLUInt, 32},    {DType::u8, kDLUInt, 8},    {DType::boolean, kDLBool, 8},
};

// What an exported tensor owns: the array (keeps the memory alive) and the shape/stride arrays.
struct ExportContext {
  Array array;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  DLManagedTensorVersioned tensor{};
};

void delete_export(DLManagedTensorVersioned* self) {
  delete static_cast<ExportContext*>(self->manager_ctx);
}

}  // namespace

DLManagedTensorVersioned* to_dlpack(const Array& array) {
  if (!array.defined())
    throw InvalidArgument("to_dlpack: the array is undefined (a default-constructed Array)");
  auto ctx = std::make_unique<ExportContext>();
  ctx->array = array;
  ctx->shape = array.shape();
  ctx->strides = array.strides();
  DLManagedTensorVersioned& t = ctx->tensor;
  t.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  t.manager_ctx = ctx.get();
  t.deleter = &delete_export;
  // A read-only array stays read-only for the consumer (the spec's flag says: do not write).
  t.flags = array.read_only() ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
  // data points at the storage base; the view's start is byte_offset (as the spec prefers). A
  // view that starts before the base (a slice of a negative-stride wrap) has no unsigned offset:
  // data then points at the start itself.
  const bool before_base = array.byte_offset() < 0;
  t.dl_tensor.data = before_base ? array.data() : array.storage()->data();
  t.dl_tensor.byte_offset = before_base ? 0 : static_cast<uint64_t>(array.byte_offset());
  t.dl_tensor.device = {array.device().is_cpu() ? kDLCPU : kDLCUDA,
                        array.device().is_cpu() ? 0 : array.device().ordinal()};
  t.dl_tensor.ndim = array.ndim();
  for (const auto& c : kCodes)
    if (c.dtype == array.dtype()) t.dl_tensor.dtype = {c.code, c.bits, 1};
  t.dl_tensor.shape = ctx->shape.data();
  t.dl_tensor.strides = ctx->strides.data();
  return &ctx.release()->tensor;
}

namespace {

// Checks a DLTensor and views it as an Array holding `keep_alive` (which must not free anything
// when the view fails: see ImportOwner).
Array view(const DLTensor& t, const char* who, std::shared_ptr<void> keep_alive) {
  const std::string w = who;
  const DType dtype = dlpack_dtype(t.dtype, who);
  const Device device = dlpack_device(t.device, who);
  const std::span<const int64_t> dims = dlpack_dims(t, who);
  const Shape shape(dims.begin(), dims.end());
  const int64_t numel = checked_numel(shape, w);
  checked_nbytes(shape, dtype, w);
  Shape strides = t.strides ? Shape(t.strides, t.strides + t.ndim) : contiguous_strides(shape);
  checked_byte_extent(shape, strides, dtype, w);
  char* start = dlpack_start(t, numel, who);
  try {
    return Array::wrap(start, shape, dtype, device, strides, std::move(keep_alive));
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(w + ": " + e.what());  // name the import, not only the view
  }
}

}  // namespace

DType dlpack_dtype(const DLDataType& t, const char* who) {
  if (t.lanes != 1)
    throw InvalidArgument(std::string(who) + ": dtype lanes must be 1, got " +
                          std::to_string(t.lanes));
  for (const auto& c : kCodes)
    if (c.code == t.code && c.bits == t.bits) return c.dtype;
  throw InvalidArgument(std::string(who) + ": dtype (code " + std::to_string(t.code) + ", bits " +
                        std::to_string(t.bits) + ") has no eagle dtype");
}

Device dlpack_device(const DLDevice& d, const char* who) {
  if (d.device_type == kDLCUDA) {
    if (d.device_id < 0)
      throw InvalidArgument(std::string(who) + ": CUDA device id must be >= 0, got " +
                            std::to_string(d.device_id));
    return Device::cuda(d.device_id);
  }
  if (d.device_type != kDLCPU && d.device_type != kDLCUDAHost)
    throw InvalidArgument(std::string(who) + ": device type " + std::to_string(d.device_type) +
                          " is not supported (CPU, CUDA and CUDA host memory are)");
  return Device::cpu();
}

std::span<const int64_t> dlpack_dims(const DLTensor& t, const char* who) {
  if (t.ndim < 0) throw InvalidArgument(std::string(who) + ": ndim must be >= 0");
  if (t.ndim > 0 && !t.shape) throw InvalidArgument(std::string(who) + ": shape must not be null");
  return {t.shape, static_cast<std::size_t>(t.ndim)};
}

char* dlpack_start(const DLTensor& t, int64_t numel, const char* who) {
  if (!t.data && numel > 0)
    throw InvalidArgument(std::string(who) + ": data must not be null for a non-empty tensor");
  // data + byte_offset must be an address: no wrap past the end of the address space.
  const auto base = reinterpret_cast<uintptr_t>(t.data);
  if (t.byte_offset > static_cast<uint64_t>(INT64_MAX) || t.byte_offset > UINTPTR_MAX - base)
    throw InvalidArgument(std::string(who) + ": byte_offset " + std::to_string(t.byte_offset) +
                          " past data runs off the address space (or past INT64_MAX)");
  return reinterpret_cast<char*>(base + static_cast<uintptr_t>(t.byte_offset));
}

namespace {

// Holds an imported tensor; calls its deleter only once armed, i.e. once the import succeeded.
// Any failure before that (a refused tensor, an allocation that throws) leaves the tensor, and
// the duty to delete it, with the caller, as from_dlpack promises.
struct ImportOwner {
  DLManagedTensorVersioned* tensor = nullptr;
  bool armed = false;
  ~ImportOwner() {
    if (armed && tensor->deleter) tensor->deleter(tensor);
  }
};

}  // namespace

Array from_dlpack(DLManagedTensorVersioned* tensor) {
  if (!tensor) throw InvalidArgument("from_dlpack: tensor must not be null");
  if (tensor->version.major != DLPACK_MAJOR_VERSION)
    throw InvalidArgument("from_dlpack: DLPack major version " +
                          std::to_string(tensor->version.major) +
                          " is not supported (eagle reads major version 1)");
  auto owner = std::make_shared<ImportOwner>();
  owner->tensor = tensor;
  Array a = view(tensor->dl_tensor, "from_dlpack", owner);
  if (tensor->flags & DLPACK_FLAG_BITMASK_READ_ONLY) a = a.as_read_only();
  // Nothing below throws: from here on the deleter runs when the last Array sharing this
  // storage dies.
  owner->armed = true;
  return a;
}

Array view_dlpack(const DLTensor& tensor) {
  return view(tensor, "view_dlpack", nullptr);
}

}  // namespace eagle
