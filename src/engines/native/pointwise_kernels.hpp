// Our CUDA pointwise kernels: one kernel per (op, dtype), `k(a, b, out, n)` over n contiguous
// elements with a grid-stride loop, computing in float.
#pragma once

#include <cstdint>
#include <string_view>

#include "eagle/core/dtype.hpp"

namespace eagle::native {

enum class PwOp : uint8_t {
  add,
  sub,
  mul,
  div,
  max,
  min,  // binary
  neg,
  abs,
  exp,
  log,
  sqrt,
  rsqrt,
  tanh,
  sigmoid,
  relu,
  gelu,
  silu,
  square,
  identity  // unary
};
constexpr bool is_binary(PwOp op) {
  return op <= PwOp::min;
}
// The op for an IR op name; false when these kernels do not have it.
bool pointwise_op_of(std::string_view name, PwOp& op);
// The __global__ function for (op, dtype) (f32, f16, bf16), or nullptr (no CUDA in this build,
// or a dtype without a kernel).
const void* pointwise_kernel(PwOp op, DType dtype);
// Issues the kernel on `stream` with cudaLaunchKernel; `b` is ignored by unary ops. Returns
// false on a launch error (last_launch_error() says which); never throws.
bool launch_pointwise(const void* kernel, const void* a, const void* b, void* out, int64_t n,
                      unsigned grid, unsigned block, void* stream) noexcept;
const char* last_launch_error() noexcept;

}  // namespace eagle::native
