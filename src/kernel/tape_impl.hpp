// Internal: the row copy of the tape kernels, shared by the CPU and CUDA implementations. A row
// is copied in words of the element size W (1, 2, 4 or 8 bytes).
#pragma once

#include <cstdint>

#include "eagle/kernel/args.hpp"
#include "eagle/kernel/kernel.hpp"

#ifdef __CUDACC__
#define EAGLE_TAPE_HD __host__ __device__ __forceinline__
#else
#define EAGLE_TAPE_HD inline
#endif

namespace eagle::detail {

// Which argument is the tape, which the index, which the row (src or out).
struct TapeRoles {
  int tape, index, row;
  bool to_tape;
};
inline constexpr TapeRoles kTapeWrite{2, 1, 0, true};
inline constexpr TapeRoles kTapeRead{0, 1, 2, false};

// Whether an array argument is row-major contiguous (its strides are its dims' suffix products).
EAGLE_TAPE_HD bool is_dense(const ArrayArg& a) {
  int64_t expected = 1;
  for (int d = a.ndim - 1; d >= 0; --d) {
    if (a.dims[d] != 1 && a.strides[d] != expected) return false;
    expected *= a.dims[d];
  }
  return true;
}

// Copies words [begin, end) stepping by `step` of the row the index selects; nothing when the
// index is past the tape. The tape's rows are contiguous; the row argument (src or out) may be
// a strided view.
template <class Word, class Args>
EAGLE_TAPE_HD void tape_copy(const Args& a, TapeRoles roles, int64_t begin, int64_t step) {
  const uint32_t index = *static_cast<const uint32_t*>(a.arrays[roles.index].data);
  const int64_t cap = a.arrays[roles.tape].dims[0];
  if (static_cast<int64_t>(index) >= cap) return;
  const ArrayArg& row_arg = a.arrays[roles.row];
  const int64_t n = row_arg.numel;
  Word* tape = static_cast<Word*>(a.arrays[roles.tape].data) + static_cast<int64_t>(index) * n;
  Word* row = static_cast<Word*>(row_arg.data);
  const bool dense = is_dense(row_arg);
  for (int64_t i = begin; i < n; i += step) {
    Word& r = row[dense ? i : element_offset(row_arg, i)];
    if (roles.to_tape) {
      tape[i] = r;
    } else {
      r = tape[i];
    }
  }
}

// The CUDA kernel copying words of `bytes` bytes (tape_cuda.cu); empty without CUDA.
CudaFunction tape_cuda_function(bool to_tape, std::size_t bytes);
CudaLaunchShape tape_cuda_shape(const KernelArgs& a, const DeviceProperties& device);

}  // namespace eagle::detail
