// Our Hopper (sm_90a) GEMMs with a GELU epilogue, for a matmul and the pointwise node after it
// in one launch: CUTLASS's TMA warp-specialized mainloop with an epilogue visitor tree.
//
//   gelu           y = gelu(a @ b + bias), z = a @ b + bias kept in `aux` when given (the
//                  derivative reads it); bias optional, a vector along N
//   gelu_backward  y = gelu_backward(a @ b, z) = (a @ b) * gelu'(z), z read from `aux`
//
// gelu is the erf form (torch's default): gelu(z) = z Phi(z), gelu'(z) = Phi(z) + z phi(z),
// evaluated in f32 as the native pointwise kernels do. Accumulation is f32; y and z are rounded
// to the element type once.
//
// Layout: a [M, K] row-major, b [K, N] row-major (b_col_major = false) or column-major (the
// transposed view of a row-major [N, K], as the backward's W^T), y and aux [M, N] row-major;
// leading dimensions may exceed the row length (views). bf16 or f16 throughout. TMA needs
// 16-byte aligned base pointers and leading dimensions that are multiples of 8 elements.
#pragma once

#include <cstddef>
#include <cstdint>

#include "eagle/core/dtype.hpp"

namespace eagle::native::gemm {

enum class Epilogue : int32_t { gelu = 0, gelu_backward = 1 };

struct EpilogueGemmArgs {
  Epilogue epilogue = Epilogue::gelu;
  DType dtype = DType::bf16;
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  int64_t lda = 0;
  const void* b = nullptr;
  int64_t ldb = 0;  // between rows of b (row-major) or columns (column-major)
  bool b_col_major = false;
  const void* bias = nullptr;  // gelu only: [N] or nullptr
  void* aux = nullptr;         // gelu: z out; gelu_backward: z in
  int64_t ld_aux = 0;
  void* y = nullptr;
  int64_t ldy = 0;
};

// Whether this build has the kernels (a build for sm_90a).
bool epilogue_gemm_built() noexcept;
// "" when a kernel serves `a`'s shape, dtype and layout (pointers not looked at);
// else why not, as a sentence. A launch also needs aux, and no bias with gelu_backward.
const char* epilogue_gemm_refusal(const EpilogueGemmArgs& a) noexcept;
// Whether the pointers (and leading dimensions) meet TMA's alignment.
bool epilogue_gemm_aligned(const EpilogueGemmArgs& a) noexcept;
// Bytes of workspace a launch needs (0 for these kernels, but asked of CUTLASS).
std::size_t epilogue_gemm_workspace(const EpilogueGemmArgs& a) noexcept;
// Runs it on `stream` (a cudaStream_t); false on a refusal or a failed launch
// (launch_status.hpp's structured_launch_error says which).
bool epilogue_gemm(const EpilogueGemmArgs& a, int multiprocessors, void* workspace,
                   void* stream) noexcept;

}  // namespace eagle::native::gemm
