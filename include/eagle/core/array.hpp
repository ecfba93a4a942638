// Array: typed, strided view of device or host memory, owning or borrowed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "eagle/core/device.hpp"
#include "eagle/core/dtype.hpp"
#include "eagle/core/shape.hpp"

namespace eagle {

class Stream;

// A block of memory on one device. Owning storage frees itself; borrowed storage does not.
class Storage {
 public:
  // Allocates `bytes` on `device` (cudaMalloc on CUDA, aligned new on the CPU). Throws
  // InvalidArgument when `bytes` exceeds INT64_MAX (no array can address more).
  static std::shared_ptr<Storage> allocate(Device device, std::size_t bytes);
  // Host memory, page-locked (cudaMallocHost) when this build has CUDA and a GPU is usable, so
  // copies between it and a GPU on a stream are asynchronous; plain host memory otherwise
  // (pinned() says which). Its device is the CPU.
  static std::shared_ptr<Storage> allocate_pinned(std::size_t bytes);
  // Borrows a caller's pointer; `keep_alive` (may be null) is held until the storage dies.
  static std::shared_ptr<Storage> borrow(Device device, void* data, std::size_t bytes,
                                         std::shared_ptr<void> keep_alive = nullptr);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  Device device() const { return device_; }
  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  bool owning() const { return owning_; }
  bool pinned() const { return pinned_; }

 private:
  Storage(Device device, void* data, std::size_t bytes, bool owning, std::shared_ptr<void> keep);
  Device device_;
  void* data_;
  std::size_t bytes_;
  bool owning_;
  bool pinned_ = false;
  std::shared_ptr<void> keep_alive_;
};

// Bytes eagle currently holds allocated on a device (owning storage only).
std::size_t bytes_in_use(Device device);

// Every factory checks the shape (no negative dim) and that element counts, byte sizes and byte
// offsets fit in int64 (shape.hpp), throwing InvalidArgument otherwise. Every operation on an
// undefined (default-constructed) Array throws InvalidArgument, except the accessors below.
//
// Read-only arrays: an array may be a read-only view (as_read_only(), or a DLPack import whose
// producer set DLPACK_FLAG_BITMASK_READ_ONLY). Its views (slice, reshape) stay read-only; copy_from
// into it throws InvalidArgument; to_dlpack marks the export read-only; to() makes a writable copy.
// Kernels and graphs refuse to write into it. Read-only guards eagle's own writes: other views of
// the same memory made without the flag can still write it.
class Array {
 public:
  Array() = default;

  // A new owning, contiguous (row-major) array. Contents are unspecified.
  static Array empty(const Shape& shape, DType dtype, Device device);
  // A new owning, contiguous host array in page-locked memory where a GPU is usable
  // (Storage::allocate_pinned): the source or target of asynchronous copies to a GPU, e.g. the
  // staging of each training step's batch.
  static Array empty_pinned(const Shape& shape, DType dtype);
  // A non-owning array over a caller's pointer; strides in elements (empty = row-major).
  // The caller keeps the memory alive for as long as the array (and any graph using it) lives.
  // `keep_alive` (may be null) is held until the last view of the memory dies; a wrap that
  // throws keeps no reference to it.
  static Array wrap(void* data, const Shape& shape, DType dtype, Device device,
                    const Shape& strides = {}, std::shared_ptr<void> keep_alive = nullptr);
  // A contiguous view of `shape` at `byte_offset` into existing storage (shares ownership).
  // Throws InvalidArgument when the view does not fit in the storage.
  static Array on_storage(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype,
                          int64_t byte_offset = 0);
  // A contiguous array with a copy of host values. Integer arrays made from floating values
  // convert with saturating_cast (convert.hpp).
  template <class T>
  static Array from(const std::vector<T>& values, const Shape& shape, Device device);

  bool defined() const { return storage_ != nullptr; }
  bool read_only() const { return read_only_; }
  // A read-only view of the same elements (shares storage).
  Array as_read_only() const;
  DType dtype() const { return dtype_; }
  Device device() const;
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }  // in elements
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const;
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * itemsize(dtype_); }
  int64_t byte_offset() const { return byte_offset_; }
  bool is_contiguous() const;
  bool owning() const;
  bool pinned() const;  // the storage is page-locked host memory
  // Address of the first element (storage base + byte offset).
  void* data() const;
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  // Lowest and one-past-highest byte addresses the view can touch.
  std::pair<uintptr_t, uintptr_t> byte_span() const;

  // Views (share storage). slice: rows [begin, end) of dimension `dim`.
  Array slice(int dim, int64_t begin, int64_t end) const;
  // Same elements, new shape; the array must be contiguous and numel must match.
  Array reshape(const Shape& shape) const;

  // A new contiguous copy on `device` (synchronous).
  Array to(Device device) const;
  // Copies src into this array (same shape and dtype; both contiguous; this array writable).
  // With a stream the copy is issued on it and may still be running on return; without one it
  // is complete.
  void copy_from(const Array& src, const Stream* stream = nullptr) const;
  // Host copy of the values, converted to T (synchronous). Floating values become integers by
  // saturating_cast (convert.hpp): truncated, clamped to T's range, NaN -> 0.
  template <class T>
  std::vector<T> to_vector() const;

  std::string describe() const;  // "f32[4,8] on cuda:0"

 private:
  std::shared_ptr<Storage> storage_;
  DType dtype_ = DType::f32;
  Shape shape_;
  Shape strides_;
  int64_t byte_offset_ = 0;
  bool read_only_ = false;
};

}  // namespace eagle
