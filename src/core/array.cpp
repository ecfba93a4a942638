#include "eagle/core/array.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>

#include "eagle/core/convert.hpp"
#include "eagle/core/error.hpp"
#include "eagle/core/stream.hpp"
#include "util/cuda_check.hpp"

namespace eagle {

namespace {

constexpr int kMaxTrackedDevices = 64;
std::atomic<std::size_t> g_bytes_in_use[kMaxTrackedDevices + 1];  // slot 0: the CPU

std::atomic<std::size_t>& counter(Device d) {
  return g_bytes_in_use[d.is_cpu() ? 0 : 1 + std::min(d.ordinal(), kMaxTrackedDevices - 1)];
}

void check_cuda_device(Device d, const char* what) {
  if (d.is_cuda() && d.ordinal() >= cuda_device_count())
    throw InvalidArgument(std::string(what) + ": device " + d.str() + " is not attached (" +
                          std::to_string(cuda_device_count()) + " CUDA devices)");
}

void check_defined(const Array& a, const char* what, const char* which) {
  if (!a.defined())
    throw InvalidArgument(std::string(what) + ": " + which +
                          " is undefined (a default-constructed Array)");
}

}  // namespace

std::size_t bytes_in_use(Device device) {
  return counter(device).load();
}

Storage::Storage(Device device, void* data, std::size_t bytes, bool owning,
                 std::shared_ptr<void> keep)
    : device_(device), data_(data), bytes_(bytes), owning_(owning), keep_alive_(std::move(keep)) {}

std::shared_ptr<Storage> Storage::allocate(Device device, std::size_t bytes) {
  check_cuda_device(device, "Storage::allocate");
  if (bytes > static_cast<std::size_t>(INT64_MAX))
    throw InvalidArgument("Storage::allocate: " + std::to_string(bytes) +
                          " bytes is more than fits in int64 (no array can address it)");
  void* p = nullptr;
  const std::size_t rounded = std::max<std::size_t>(bytes, 1);
  if (device.is_cpu()) {
    p = ::operator new(rounded, std::align_val_t(64));
  } else {
#ifdef EAGLE_HAVE_CUDA
    detail::DeviceGuard guard(device.ordinal());
    EAGLE_CUDA_CHECK(cudaMalloc(&p, rounded));
#endif
  }
  counter(device) += bytes;
  return std::shared_ptr<Storage>(new Storage(device, p, bytes, true, nullptr));
}

std::shared_ptr<Storage> Storage::allocate_pinned(std::size_t bytes) {
#ifdef EAGLE_HAVE_CUDA
  if (cuda_available()) {
    if (bytes > static_cast<std::size_t>(INT64_MAX))
      throw InvalidArgument("Storage::allocate_pinned: " + std::to_string(bytes) +
                            " bytes is more than fits in int64 (no array can address it)");
    void* p = nullptr;
    EAGLE_CUDA_CHECK(cudaMallocHost(&p, std::max<std::size_t>(bytes, 1)));
    counter(Device::cpu()) += bytes;
    std::shared_ptr<Storage> s(new Storage(Device::cpu(), p, bytes, true, nullptr));
    s->pinned_ = true;
    return s;
  }
#endif
  return allocate(Device::cpu(), bytes);
}

std::shared_ptr<Storage> Storage::borrow(Device device, void* data, std::size_t bytes,
                                         std::shared_ptr<void> keep_alive) {
  if (data == nullptr && bytes > 0)
    throw InvalidArgument("Storage::borrow: data must not be null for a non-empty array");
  return std::shared_ptr<Storage>(new Storage(device, data, bytes, false, std::move(keep_alive)));
}

Storage::~Storage() {
  if (!owning_) return;
  counter(device_) -= bytes_;
#ifdef EAGLE_HAVE_CUDA
  if (pinned_) {
    cudaFreeHost(data_);
    return;
  }
#endif
  if (device_.is_cpu()) {
    ::operator delete(data_, std::align_val_t(64));
  } else {
#ifdef EAGLE_HAVE_CUDA
    detail::DeviceGuard guard(device_.ordinal());
    cudaFree(data_);
#endif
  }
}

Array Array::empty(const Shape& shape, DType dtype, Device device) {
  const std::size_t bytes = checked_nbytes(shape, dtype, "Array::empty");
  Array a;
  a.dtype_ = dtype;
  a.shape_ = shape;
  a.strides_ = contiguous_strides(shape);
  a.storage_ = Storage::allocate(device, bytes);
  return a;
}

Array Array::empty_pinned(const Shape& shape, DType dtype) {
  const std::size_t bytes = checked_nbytes(shape, dtype, "Array::empty_pinned");
  Array a;
  a.dtype_ = dtype;
  a.shape_ = shape;
  a.strides_ = contiguous_strides(shape);
  a.storage_ = Storage::allocate_pinned(bytes);
  return a;
}

Array Array::wrap(void* data, const Shape& shape, DType dtype, Device device, const Shape& strides,
                  std::shared_ptr<void> keep_alive) {
  if (!strides.empty() && strides.size() != shape.size())
    throw InvalidArgument("Array::wrap: strides has " + std::to_string(strides.size()) +
                          " entries but shape has " + std::to_string(shape.size()));
  checked_nbytes(shape, dtype, "Array::wrap");
  Array a;
  a.dtype_ = dtype;
  a.shape_ = shape;
  a.strides_ = strides.empty() ? contiguous_strides(shape) : strides;
  const ByteExtent extent = checked_byte_extent(a.shape_, a.strides_, dtype, "Array::wrap");
  // The view reaches [data + lo, data + hi): both ends must be addresses, not wrap around.
  const auto base = reinterpret_cast<uintptr_t>(data);
  if ((extent.lo < 0 && base < static_cast<uintptr_t>(-extent.lo)) ||
      (extent.hi > 0 && static_cast<uintptr_t>(extent.hi) > UINTPTR_MAX - base))
    throw InvalidArgument("Array::wrap: shape " + shape_str(shape) + " with strides " +
                          shape_str(a.strides_) + " reaches bytes [" + std::to_string(extent.lo) +
                          ", " + std::to_string(extent.hi) +
                          ") around data, past the ends of the address space");
  a.storage_ =
      Storage::borrow(device, data, static_cast<std::size_t>(extent.hi), std::move(keep_alive));
  return a;
}

Array Array::on_storage(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype,
                        int64_t byte_offset) {
  const std::size_t bytes = checked_nbytes(shape, dtype, "Array::on_storage");
  if (!storage) throw InvalidArgument("Array::on_storage: storage must not be null");
  // Written as bytes <= size - offset so that neither side can wrap.
  if (byte_offset < 0 || static_cast<std::size_t>(byte_offset) > storage->bytes() ||
      bytes > storage->bytes() - static_cast<std::size_t>(byte_offset))
    throw InvalidArgument("Array::on_storage: a view of " + std::to_string(bytes) +
                          " bytes at offset " + std::to_string(byte_offset) +
                          " does not fit in storage of " + std::to_string(storage->bytes()) +
                          " bytes");
  Array a;
  a.dtype_ = dtype;
  a.shape_ = shape;
  a.strides_ = contiguous_strides(shape);
  a.byte_offset_ = byte_offset;
  a.storage_ = std::move(storage);
  return a;
}

Array Array::as_read_only() const {
  check_defined(*this, "Array::as_read_only", "the array");
  Array v = *this;
  v.read_only_ = true;
  return v;
}

Device Array::device() const {
  return storage_ ? storage_->device() : Device::cpu();
}

int64_t Array::numel() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

bool Array::is_contiguous() const {
  return numel() <= 1 || strides_ == contiguous_strides(shape_);
}
bool Array::pinned() const {
  return storage_ && storage_->pinned();
}

bool Array::owning() const {
  return storage_ && storage_->owning();
}

void* Array::data() const {
  if (!storage_) return nullptr;
  return static_cast<char*>(storage_->data()) + byte_offset_;
}

std::pair<uintptr_t, uintptr_t> Array::byte_span() const {
  const uintptr_t base = reinterpret_cast<uintptr_t>(data());
  if (numel() == 0) return {base, base};
  int64_t lo = 0, hi = 0;  // element offsets of the extreme elements
  for (std::size_t i = 0; i < shape_.size(); ++i) {
    const int64_t reach = (shape_[i] - 1) * strides_[i];
    (reach < 0 ? lo : hi) += reach;
  }
  const int64_t size = static_cast<int64_t>(itemsize(dtype_));
  return {base + lo * size, base + (hi + 1) * size};
}

Array Array::slice(int dim, int64_t begin, int64_t end) const {
  check_defined(*this, "Array::slice", "the array");
  if (dim < 0 || dim >= ndim())
    throw InvalidArgument("Array::slice: dim " + std::to_string(dim) + " is out of range for " +
                          describe());
  if (begin < 0 || end < begin || end > shape_[dim])
    throw InvalidArgument("Array::slice: range [" + std::to_string(begin) + ", " +
                          std::to_string(end) + ") must lie within [0, " +
                          std::to_string(shape_[dim]) + "] of dim " + std::to_string(dim));
  Array v = *this;
  v.shape_[dim] = end - begin;
  v.byte_offset_ += begin * strides_[dim] * static_cast<int64_t>(itemsize(dtype_));
  return v;
}

Array Array::reshape(const Shape& shape) const {
  check_defined(*this, "Array::reshape", "the array");
  const int64_t n = checked_numel(shape, "Array::reshape");
  if (n != numel())
    throw InvalidArgument("Array::reshape: " + shape_str(shape) + " holds " + std::to_string(n) +
                          " elements but the array has " + std::to_string(numel()));
  if (!is_contiguous()) throw InvalidArgument("Array::reshape: the array must be contiguous");
  Array v = *this;
  v.shape_ = shape;
  v.strides_ = contiguous_strides(shape);
  return v;
}

std::string Array::describe() const {
  return std::string(dtype_name(dtype_)) + shape_str(shape_) + " on " + device().str();
}

void Array::copy_from(const Array& src, const Stream* stream) const {
  check_defined(*this, "Array::copy_from", "the destination");
  check_defined(src, "Array::copy_from", "the source");
  if (read_only_)
    throw InvalidArgument("Array::copy_from: the destination " + describe() +
                          " is read-only (a read-only view or import); copy into a writable array");
  if (src.shape_ != shape_ || src.dtype_ != dtype_)
    throw InvalidArgument("Array::copy_from: source " + src.describe() +
                          " must have the destination's shape and dtype (" + describe() + ")");
  if (!is_contiguous() || !src.is_contiguous())
    throw InvalidArgument("Array::copy_from: both arrays must be contiguous");
  if (nbytes() == 0) return;
  if (device().is_cpu() && src.device().is_cpu()) {
    std::memmove(data(), src.data(), nbytes());
    return;
  }
#ifdef EAGLE_HAVE_CUDA
  const Device gpu = device().is_cuda() ? device() : src.device();
  check_cuda_device(gpu, "Array::copy_from");
  detail::DeviceGuard guard(gpu.ordinal());
  if (stream && stream->native()) {
    EAGLE_CUDA_CHECK(cudaMemcpyAsync(data(), src.data(), nbytes(), cudaMemcpyDefault,
                                     static_cast<cudaStream_t>(stream->native())));
  } else {
    // cudaMemcpy may return before a device-to-device copy ends, and eagle's streams are
    // non-blocking: wait for the legacy stream the copy ran on, so it is complete on return.
    EAGLE_CUDA_CHECK(cudaMemcpy(data(), src.data(), nbytes(), cudaMemcpyDefault));
    EAGLE_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
  }
#else
  (void)stream;
  throw InvalidArgument("Array::copy_from: this build of eagle has no CUDA support");
#endif
}

namespace {

// Copies a strided view whose bytes are readable on the host into contiguous `dst`.
void gather(const char* base, const Shape& shape, const Shape& strides, std::size_t size,
            char* dst) {
  const int64_t n = checked_numel(shape, "Array::to");
  Shape index(shape.size(), 0);
  for (int64_t e = 0; e < n; ++e) {
    int64_t off = 0;
    for (std::size_t i = 0; i < shape.size(); ++i) off += index[i] * strides[i];
    std::memcpy(dst + e * size, base + off * static_cast<int64_t>(size), size);
    for (std::size_t i = shape.size(); i-- > 0;) {
      if (++index[i] < shape[i]) break;
      index[i] = 0;
    }
  }
}

}  // namespace

Array Array::to(Device device) const {
  check_defined(*this, "Array::to", "the array");
  Array out = Array::empty(shape_, dtype_, device);
  if (is_contiguous()) {
    out.copy_from(*this);
    return out;
  }
  // A strided view: bring its byte span to the host, gather, then move the result.
  auto [lo, hi] = byte_span();
  const std::size_t span = hi - lo;
  std::vector<char> host_span(span);
  Array span_src = Array::wrap(reinterpret_cast<void*>(lo), {static_cast<int64_t>(span)}, DType::u8,
                               this->device());
  Array span_dst =
      Array::wrap(host_span.data(), {static_cast<int64_t>(span)}, DType::u8, Device::cpu());
  span_dst.copy_from(span_src);
  const char* base = host_span.data() + (reinterpret_cast<uintptr_t>(data()) - lo);
  if (device.is_cpu()) {
    gather(base, shape_, strides_, itemsize(dtype_), static_cast<char*>(out.data()));
  } else {
    std::vector<char> packed(nbytes());
    gather(base, shape_, strides_, itemsize(dtype_), packed.data());
    out.copy_from(Array::wrap(packed.data(), shape_, dtype_, Device::cpu()));
  }
  return out;
}

namespace {

// Floats become integers by saturating_cast (out-of-range and NaN values are defined); every
// other pair converts as static_cast does (integers wrap; bool is v != 0).
template <class To, class From>
To convert(From v) {
  constexpr bool from_16 = std::is_same_v<From, half> || std::is_same_v<From, bfloat16>;
  constexpr bool from_real = from_16 || std::is_floating_point_v<From>;
  if constexpr (std::is_same_v<To, half> || std::is_same_v<To, bfloat16>) {
    return To(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bool> && from_16) {
    return static_cast<float>(v) != 0;
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_integral_v<To> && from_16) {
    return saturating_cast<To>(static_cast<float>(v));
  } else if constexpr (std::is_integral_v<To> && from_real) {
    return saturating_cast<To>(static_cast<double>(v));
  } else if constexpr (from_16) {
    return static_cast<To>(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace

template <class T>
Array Array::from(const std::vector<T>& values, const Shape& shape, Device device) {
  const int64_t n = checked_numel(shape, "Array::from");
  if (n != static_cast<int64_t>(values.size()))
    throw InvalidArgument("Array::from: shape " + shape_str(shape) + " holds " + std::to_string(n) +
                          " elements but values has " + std::to_string(values.size()));
  Array out = Array::empty(shape, dtype_of<T>, device);
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(values.begin(), values.end());
    out.copy_from(Array::wrap(bytes.data(), shape, DType::boolean, Device::cpu()));
  } else {
    out.copy_from(Array::wrap(const_cast<T*>(values.data()), shape, dtype_of<T>, Device::cpu()));
  }
  return out;
}

template <class T>
std::vector<T> Array::to_vector() const {
  check_defined(*this, "Array::to_vector", "the array");
  Array host = device().is_cpu() && is_contiguous() ? *this : to(Device::cpu());
  std::vector<T> out(static_cast<std::size_t>(numel()));
  if (dtype_ == DType::boolean) {
    // Read bool storage as bytes: any non-zero byte (e.g. from DLPack or wrap) is true.
    const uint8_t* src = static_cast<const uint8_t*>(host.data());
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = convert<T>(src[i] != 0);
    return out;
  }
  visit_dtype(dtype_, [&](auto tag) {
    using S = decltype(tag);
    const S* src = static_cast<const S*>(host.data());
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = convert<T>(src[i]);
  });
  return out;
}

#define EAGLE_ARRAY_INSTANTIATE(T)                                            \
  template Array Array::from<T>(const std::vector<T>&, const Shape&, Device); \
  template std::vector<T> Array::to_vector<T>() const;
EAGLE_ARRAY_INSTANTIATE(double)
EAGLE_ARRAY_INSTANTIATE(float)
EAGLE_ARRAY_INSTANTIATE(half)
EAGLE_ARRAY_INSTANTIATE(bfloat16)
EAGLE_ARRAY_INSTANTIATE(int64_t)
EAGLE_ARRAY_INSTANTIATE(int32_t)
EAGLE_ARRAY_INSTANTIATE(uint32_t)
EAGLE_ARRAY_INSTANTIATE(uint8_t)
#undef EAGLE_ARRAY_INSTANTIATE
template std::vector<bool> Array::to_vector<bool>() const;
template Array Array::from<bool>(const std::vector<bool>&, const Shape&, Device);

}  // namespace eagle
