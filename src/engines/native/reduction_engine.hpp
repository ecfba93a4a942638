// The native reduction engine: one reduction node over any axes (keepdim or not), every mode,
// f32, f16 or bf16, dense row-major x. Trailing axes (and all axes) take the row kernel, any
// other set the strided one (reduction_kernels.hpp).
#pragma once

#include <memory>
#include <string>

#include "eagle/plan/engine.hpp"

namespace eagle::native {

std::unique_ptr<plan::Engine> make_reduction_engine(int64_t id, const std::string& name);

}  // namespace eagle::native
