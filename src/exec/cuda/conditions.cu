#include "exec/cuda/conditions.hpp"

namespace eagle::detail {

namespace {

__global__ void set_conditions(const ConditionArgs a) {
  const uint32_t cell = *a.cell;
  switch (a.mode) {
    case ConditionMode::non_zero:
      cudaGraphSetConditional(a.handles[0], cell != 0);
      break;
    case ConditionMode::value:
      cudaGraphSetConditional(a.handles[0], cell);
      break;
    case ConditionMode::plain_if_else:
      cudaGraphSetConditional(a.handles[0], cell != 0);
      cudaGraphSetConditional(a.handles[1], cell == 0);
      break;
    case ConditionMode::plain_switch:
      for (int k = 0; k < a.count; ++k) cudaGraphSetConditional(a.handles[k], cell == uint32_t(k));
      break;
  }
}

}  // namespace

const void* set_conditions_kernel() {
  return reinterpret_cast<const void*>(&set_conditions);
}

}  // namespace eagle::detail
