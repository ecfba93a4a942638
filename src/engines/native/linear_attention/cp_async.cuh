// Internal, CUDA sources only: asynchronous 16-byte copies from global to shared memory
// (cp.async, sm_80 and later), for loops that load the next tile while computing this one.
#pragma once

#include <cstdint>

namespace eagle::native::linear_attention {

// 16 bytes from global `g` to shared `s`, not through registers; zero-filled when !valid (then
// nothing is read, but `g` must still be a valid address). Both 16-byte aligned.
__device__ __forceinline__ void cp_async16(void* s, const void* g, bool valid) {
  const auto dst = static_cast<unsigned>(__cvta_generic_to_shared(s));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(g),
               "r"(valid ? 16 : 0));
}
// 4 bytes from global `g` to shared `s` (cp.async.ca: the sizes below 16 go through L1).
__device__ __forceinline__ void cp_async4(void* s, const void* g) {
  const auto dst = static_cast<unsigned>(__cvta_generic_to_shared(s));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(g));
}
// Closes the group of this thread's copies issued since the last commit.
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
// Waits until at most N of this thread's committed groups are still in flight; a __syncthreads
// after it makes every thread's finished copies visible to the block.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

}  // namespace eagle::native::linear_attention
