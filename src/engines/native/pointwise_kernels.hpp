// Our CUDA pointwise kernels: one kernel per (op, dtype), `k(a, b, out, n)` over n contiguous
// elements with a grid-stride loop, computing in float.
#pragma once

#include <cstdint>
#include <string_view>

#include "eagle/core/dtype.hpp"

namespace eagle::native {

// The ops our kernels have, each once: X(name, binary). The IR op of the same name maps to it.
// clang-format off (it reflows this list differently on every pass)
#define EAGLE_POINTWISE_OPS(X) \
  X(add, true)                 \
  X(sub, true)                 \
  X(mul, true)                 \
  X(div, true)                 \
  X(max, true)                 \
  X(min, true)                 \
  X(pow, true)                 \
  X(mod, true)                 \
  X(gelu_backward, true)       \
  X(silu_backward, true)       \
  X(neg, false)                \
  X(abs, false)                \
  X(exp, false)                \
  X(log, false)                \
  X(sqrt, false)               \
  X(rsqrt, false)              \
  X(reciprocal, false)         \
  X(tanh, false)               \
  X(sigmoid, false)            \
  X(relu, false)               \
  X(gelu, false)               \
  X(gelu_tanh, false)          \
  X(silu, false)               \
  X(softplus, false)           \
  X(erf, false)                \
  X(sin, false)                \
  X(cos, false)                \
  X(floor, false)              \
  X(ceil, false)               \
  X(square, false)             \
  X(identity, false)
// clang-format on

#define EAGLE_PW_ENUM(name, binary) name,
enum class PwOp : uint8_t { EAGLE_POINTWISE_OPS(EAGLE_PW_ENUM) };
#undef EAGLE_PW_ENUM

// Which ops take two operands, by op: a table read by index.
#define EAGLE_PW_BINARY(name, binary) binary,
inline constexpr bool kPwBinary[] = {EAGLE_POINTWISE_OPS(EAGLE_PW_BINARY)};
#undef EAGLE_PW_BINARY
constexpr bool is_binary(PwOp op) {
  return kPwBinary[static_cast<std::size_t>(op)];
}
// The op for an IR op name; false when these kernels do not have it.
bool pointwise_op_of(std::string_view name, PwOp& op);
// The vector kernels' bytes per thread and operand: one 16-byte load or store.
inline constexpr int kPointwiseVectorBytes = 16;
// The __global__ function for (op, dtype) (f32, f16, bf16), or nullptr (no CUDA in this build,
// or a dtype without a kernel). `vector`: the kernel that takes kPointwiseVectorBytes of each
// operand per thread, for an element count that is a multiple of kPointwiseVectorBytes /
// itemsize(dtype) and 16-byte aligned pointers (the caller checks both); else one element per
// thread. Both take the element count n.
const void* pointwise_kernel(PwOp op, DType dtype, bool vector = false);
// Issues the kernel on `stream` with cudaLaunchKernel; `b` is ignored by unary ops. Returns
// false on a launch error (last_launch_error() says which); never throws.
bool launch_pointwise(const void* kernel, const void* a, const void* b, void* out, int64_t n,
                      unsigned grid, unsigned block, void* stream) noexcept;
const char* last_launch_error() noexcept;

}  // namespace eagle::native
