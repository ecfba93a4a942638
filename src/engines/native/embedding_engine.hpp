// The native embedding engine: one embedding node (forward), a table of f32, f16 or bf16, ids
// of i32 or i64, dense row-major, as one launch of our row-gather kernel. An id outside [0, V)
// gives a NaN row (embedding_kernels.hpp says why).
#pragma once

#include <memory>
#include <string>

#include "eagle/plan/engine.hpp"

namespace eagle::native {

std::unique_ptr<plan::Engine> make_embedding_engine(int64_t id, const std::string& name);

}  // namespace eagle::native
