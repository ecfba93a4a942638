// Our Hopper (sm_90a) split-K GEMM for products with few output tiles and a long K: a weight
// gradient dW = x^T g ([dim, T] x [T, dim], T the tokens) has (dim / 128)^2 tiles of 128 x 128,
// 16 at dim 512 on 132 SMs. K is cut into `splits` slices, each a CTA's, and the slices' f32
// partial tiles are summed in a fixed order (CUTLASS's stream-K scheduler in split-K mode,
// deterministic reduction) before one rounding to the element type.
//
// Layout: a [M, K] column-major (the transposed view of a row-major [K, M]: x^T), b [K, N]
// row-major, y [M, N] row-major; leading dimensions may exceed the rows (views). bf16 or f16.
// TMA needs 16-byte aligned base pointers and leading dimensions that are multiples of 8.
#pragma once

#include <cstddef>
#include <cstdint>

#include "eagle/core/dtype.hpp"

namespace eagle::native::gemm {

struct SplitKGemmArgs {
  DType dtype = DType::bf16;
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  int64_t lda = 0;  // between columns of a (column-major)
  const void* b = nullptr;
  int64_t ldb = 0;  // between rows of b
  void* y = nullptr;
  int64_t ldy = 0;
  int splits = 1;
};

// The slices for `multiprocessors` SMs: as many as fill the SMs once over the output's 128 x 128
// tiles, each at least 4 K steps of 64 (256 elements); 1 when the tiles alone fill half the SMs.
int splitk_slices(int64_t m, int64_t n, int64_t k, int multiprocessors) noexcept;
// Whether this build has the kernels (a build for sm_90a).
bool splitk_gemm_built() noexcept;
// "" when the kernel serves `a`'s shape and layout (pointers not looked at), else why not.
const char* splitk_gemm_refusal(const SplitKGemmArgs& a) noexcept;
bool splitk_gemm_aligned(const SplitKGemmArgs& a) noexcept;
// Bytes of workspace a launch needs: the partial tiles and their flags.
std::size_t splitk_gemm_workspace(const SplitKGemmArgs& a, int multiprocessors) noexcept;
// Runs it on `stream` (a cudaStream_t): zeroes its flags in the workspace, then one launch.
bool splitk_gemm(const SplitKGemmArgs& a, int multiprocessors, void* workspace,
                 void* stream) noexcept;

}  // namespace eagle::native::gemm
