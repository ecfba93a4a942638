#include "eagle/core/dlpack.hpp"

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
  if (!array.defined()) throw InvalidArgument("to_dlpack: array is not defined");
  auto ctx = std::make_unique<ExportContext>();
  ctx->array = array;
  ctx->shape = array.shape();
  ctx->strides = array.strides();
  DLManagedTensorVersioned& t = ctx->tensor;
  t.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  t.manager_ctx = ctx.get();
  t.deleter = &delete_export;
  t.flags = 0;
  // data points at the storage base; the view's start is byte_offset (as the spec prefers).
  t.dl_tensor.data = array.storage()->data();
  t.dl_tensor.byte_offset = static_cast<uint64_t>(array.byte_offset());
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

// Checks a DLTensor and views it as an Array holding `keep_alive`. Everything Array::wrap would
// reject is checked before `make_owner` runs: once an owner exists, an exception would run the
// deleter and the caller would free the tensor again.
template <class MakeOwner>
Array view(const DLTensor& t, const char* who, const MakeOwner& make_owner) {
  const std::string w = who;
  if (t.dtype.lanes != 1)
    throw InvalidArgument(w + ": dtype lanes must be 1, got " + std::to_string(t.dtype.lanes));
  const DTypeCode* code = nullptr;
  for (const auto& c : kCodes)
    if (c.code == t.dtype.code && c.bits == t.dtype.bits) code = &c;
  if (!code)
    throw InvalidArgument(w + ": dtype (code " + std::to_string(t.dtype.code) + ", bits " +
                          std::to_string(t.dtype.bits) + ") has no eagle dtype");
  Device device = Device::cpu();
  if (t.device.device_type == kDLCUDA) {
    if (t.device.device_id < 0)
      throw InvalidArgument(w + ": CUDA device id must be >= 0, got " +
                            std::to_string(t.device.device_id));
    device = Device::cuda(t.device.device_id);
  } else if (t.device.device_type != kDLCPU && t.device.device_type != kDLCUDAHost) {
    throw InvalidArgument(w + ": device type " + std::to_string(t.device.device_type) +
                          " is not supported (CPU, CUDA and CUDA host memory are)");
  }
  if (t.ndim < 0) throw InvalidArgument(w + ": ndim must be >= 0");
  if (t.ndim > 0 && !t.shape) throw InvalidArgument(w + ": shape must not be null");
  Shape shape(t.shape, t.shape + t.ndim);
  Shape strides = t.strides ? Shape(t.strides, t.strides + t.ndim) : contiguous_strides(shape);
  int64_t numel = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0)
      throw InvalidArgument(w + ": shape " + shape_str(shape) + " has negative size in dim " +
                            std::to_string(i));
    numel *= shape[i];
  }
  if (!t.data && numel > 0)
    throw InvalidArgument(w + ": data must not be null for a non-empty tensor");
  char* start = static_cast<char*>(t.data) + t.byte_offset;
  return Array::wrap(start, shape, code->dtype, device, strides, make_owner());
}

}  // namespace

Array from_dlpack(DLManagedTensorVersioned* tensor) {
  if (!tensor) throw InvalidArgument("from_dlpack: tensor must not be null");
  if (tensor->version.major != DLPACK_MAJOR_VERSION)
    throw InvalidArgument("from_dlpack: DLPack major version " +
                          std::to_string(tensor->version.major) +
                          " is not supported (eagle reads major version 1)");
  // The deleter runs when the last Array sharing this storage dies.
  return view(tensor->dl_tensor, "from_dlpack", [tensor] {
    return std::shared_ptr<void>(tensor, [](void* p) {
      auto* m = static_cast<DLManagedTensorVersioned*>(p);
      if (m->deleter) m->deleter(m);
    });
  });
}

Array view_dlpack(const DLTensor& tensor) {
  return view(tensor, "view_dlpack", [] { return std::shared_ptr<void>(); });
}

}  // namespace eagle
