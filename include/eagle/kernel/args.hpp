// The argument block every eagle kernel receives, CPU or CUDA. It is sized per kernel: a kernel
// with A array parameters and S scalar parameters receives a KernelArgsN<A, S>. Its layout is a
// function of (A, S) alone and known to eagle, so a built graph can patch pointers in place (bind)
// without knowing the kernel. This header is plain C++ that CUDA device code includes too.
#pragma once

#include <cstddef>
#include <cstdint>

#include "eagle/core/hd.hpp"

namespace eagle {

// Dimensions an array argument describes; a kernel refuses arrays of higher rank.
inline constexpr int kMaxDims = 8;

// One array argument as a kernel sees it. Dims and strides past ndim are 1 and 0.
struct ArrayArg {
  void* data;
  int64_t numel;
  int64_t dims[kMaxDims];
  int64_t strides[kMaxDims];  // in elements; row-major for a dense array
  int32_t ndim;
  int32_t dtype;  // eagle::DType as an integer
};

// Where element i (row-major order over the argument's shape) lies, in elements from its data:
// a strided view (a transpose, a column slice) is read or written where it lies.
EAGLE_HD int64_t element_offset(const ArrayArg& a, int64_t i) {
  int64_t offset = 0;
  for (int d = a.ndim - 1; d >= 0; --d) {
    offset += (i % a.dims[d]) * a.strides[d];
    i /= a.dims[d];
  }
  return offset;
}

union ScalarArg {
  double f;
  int64_t i;
};

// The block passed by value as the single parameter of an eagle CUDA kernel
// (`__global__ void k(eagle::KernelArgsN<3, 1>)`). Arrays and scalars are in the order of the
// kernel's parameter lists.
template <int A, int S>
struct KernelArgsN {
  static_assert(A >= 1, "a kernel takes at least one array");
  static_assert(S >= 0, "a scalar count is never negative");
  ArrayArg arrays[A];
  ScalarArg scalars[S == 0 ? 1 : S];  // one unused slot when there are none
  int32_t num_arrays;
  int32_t num_scalars;
};

// The byte layout of KernelArgsN<arrays, scalars>, for host code that packs one at run time.
constexpr std::size_t args_scalars_offset(int arrays) {
  return static_cast<std::size_t>(arrays) * sizeof(ArrayArg);
}
constexpr std::size_t args_counts_offset(int arrays, int scalars) {
  return args_scalars_offset(arrays) + static_cast<std::size_t>(scalars == 0 ? 1 : scalars) * 8;
}
constexpr std::size_t args_block_bytes(int arrays, int scalars) {
  return args_counts_offset(arrays, scalars) + 8;
}
static_assert(sizeof(ArrayArg) % 8 == 0, "ArrayArg keeps the block 8-byte aligned");
static_assert(sizeof(KernelArgsN<1, 0>) == args_block_bytes(1, 0), "layout of the block");
static_assert(sizeof(KernelArgsN<3, 2>) == args_block_bytes(3, 2), "layout of the block");
static_assert(sizeof(KernelArgsN<11, 5>) == args_block_bytes(11, 5), "layout of the block");

// A view of any argument block: what a CPU implementation receives. Reads like KernelArgsN
// (`a.arrays[i].data`, `a.scalars[j].f`).
struct KernelArgs {
  const ArrayArg* arrays = nullptr;
  const ScalarArg* scalars = nullptr;
  int32_t num_arrays = 0;
  int32_t num_scalars = 0;
};

}  // namespace eagle
