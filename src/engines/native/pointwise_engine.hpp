// The native pointwise engine: a single-node unary or binary pointwise graph, same dims, one
// dtype (f32, f16, bf16), dense row-major, as one launch of our CUDA kernel.
#pragma once

#include <memory>
#include <string>

#include "eagle/plan/engine.hpp"

namespace eagle::native {

std::unique_ptr<plan::Engine> make_pointwise_engine(int64_t id, const std::string& name);

}  // namespace eagle::native
