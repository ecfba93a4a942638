// The native GEMM engine, our CUTLASS Hopper kernels (src/engines/native/gemm): one matmul with
// a GELU epilogue in one launch. y = gelu(a @ b + bias), the product kept when the graph outputs
// it too (the derivative reads it); or dx = gelu_backward(a @ b, z), a backward's g W^T through
// the derivative of the gelu before it. bf16 or f16, a row-major, b row- or column-major (a
// transposed view), one product (a batch only where it folds into the rows), N and K multiples
// of 8. A plain matmul is cuBLASLt's: this engine declines it.
#pragma once

#include <memory>
#include <string>

#include "eagle/plan/engine.hpp"

namespace eagle::native {

std::unique_ptr<plan::Engine> make_gemm_engine(int64_t id, const std::string& name);

}  // namespace eagle::native
