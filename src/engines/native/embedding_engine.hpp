// The native embedding engine: one embedding node (a row gather) or embedding_bwd (the
// deterministic sort-and-sum of embedding_bwd_kernels.hpp, whatever its `deterministic`
// attribute says: it never uses float atomics), a table or dy of f32, f16 or bf16, ids of i32
// or i64, dense row-major. An id outside [0, V) gives a NaN row forward and is dropped backward
// (embedding_kernels.hpp says why).
#pragma once

#include <memory>
#include <string>

#include "eagle/plan/engine.hpp"

namespace eagle::native {

std::unique_ptr<plan::Engine> make_embedding_engine(int64_t id, const std::string& name);

}  // namespace eagle::native
