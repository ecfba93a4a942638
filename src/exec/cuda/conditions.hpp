// Internal: the one-thread kernel that turns a one-cell u32 array into conditional-node values.
#pragma once

#ifdef EAGLE_HAVE_CUDA
#include <cuda_runtime.h>

#include <cstdint>

namespace eagle::detail {

// Arms a plain-IF fallback can have: one handle each, set by one decision kernel.
inline constexpr int kMaxPlainArms = 32;

enum class ConditionMode : int32_t {
  non_zero = 0,       // handles[0] = cell != 0                (IF, IF/ELSE, WHILE)
  value = 1,          // handles[0] = cell                     (SWITCH)
  plain_if_else = 2,  // handles[0] = cell != 0, handles[1] = cell == 0
  plain_switch = 3,   // handles[k] = cell == k
};

struct ConditionArgs {
  const uint32_t* cell;
  int32_t count;
  ConditionMode mode;
  cudaGraphConditionalHandle handles[kMaxPlainArms];
};

// `__global__ void(ConditionArgs)`, launched <<<1, 1>>>.
const void* set_conditions_kernel();

}  // namespace eagle::detail
#endif
