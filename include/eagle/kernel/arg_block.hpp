// The host side of an argument block: a call's arrays and scalars packed into the bytes of a
// KernelArgsN<A, S>, so the same bytes serve a CPU implementation (as a KernelArgs view), a CUDA
// launch and a CUDA graph kernel node (as the kernel's one parameter).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "eagle/core/array.hpp"
#include "eagle/kernel/args.hpp"

namespace eagle {

class ArgBlock {
 public:
  ArgBlock() = default;
  // A block for `arrays` arrays and `scalars` scalars; arrays are empty and scalars zero.
  ArgBlock(int arrays, int scalars);

  int num_arrays() const { return arrays_; }
  int num_scalars() const { return scalars_; }
  ArrayArg& array(int i) { return arrays_at()[i]; }
  const ArrayArg& array(int i) const { return arrays_at()[i]; }
  ScalarArg& scalar(int i) { return scalars_at()[i]; }
  const ScalarArg& scalar(int i) const { return scalars_at()[i]; }

  // What a CPU implementation receives. Valid while the block lives and is not resized.
  KernelArgs view() const { return {arrays_at(), scalars_at(), arrays_, scalars_}; }
  // The bytes of the KernelArgsN<A, S> a CUDA kernel receives.
  const void* data() const { return words_.data(); }
  std::size_t bytes() const { return words_.size() * sizeof(uint64_t); }

 private:
  ArrayArg* arrays_at() { return reinterpret_cast<ArrayArg*>(words_.data()); }
  const ArrayArg* arrays_at() const { return reinterpret_cast<const ArrayArg*>(words_.data()); }
  ScalarArg* scalars_at() {
    return reinterpret_cast<ScalarArg*>(reinterpret_cast<char*>(words_.data()) +
                                        args_scalars_offset(arrays_));
  }
  const ScalarArg* scalars_at() const {
    return reinterpret_cast<const ScalarArg*>(reinterpret_cast<const char*>(words_.data()) +
                                              args_scalars_offset(arrays_));
  }
  std::vector<uint64_t> words_;  // 8-byte aligned storage of the block
  int arrays_ = 0;
  int scalars_ = 0;
};

// An array argument for memory at `data` of `shape` and `dtype`, with `strides` in elements
// (empty: row-major). Throws InvalidArgument naming `what` when the rank exceeds kMaxDims.
ArrayArg make_array_arg(void* data, const Shape& shape, DType dtype, const Shape& strides = {},
                        const std::string& what = "array argument");
// The same for an Array (its own strides).
ArrayArg make_array_arg(const Array& a, const std::string& what);

}  // namespace eagle
