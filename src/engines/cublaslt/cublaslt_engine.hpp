// The cuBLASLt engine of the gemm family: a matmul (2-D or batched with broadcast, transposes
// through strides, an optional bias) and at most one relu / gelu_tanh node after it, in f32
// (tf32 knob), f16 or bf16 with f32 accumulation, as one cublasLtMatmul. Its knobs name the
// algorithm: entry `algo` of cuBLASLt's heuristic list within `workspace_mb` MiB, and `tf32`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "eagle/plan/engine.hpp"
#include "engines/cublaslt/api.hpp"

namespace eagle::cublaslt {

std::unique_ptr<plan::Engine> make_cublaslt_engine(int64_t id, const std::string& name);

// The same engine reading its library from `source` instead of the process's (tests: a library
// the environment hides, from load()). Plans it builds still take handles from the process's.
using LibrarySource = const Loaded& (*)();
std::unique_ptr<plan::Engine> make_cublaslt_engine_from(int64_t id, const std::string& name,
                                                        LibrarySource source);

}  // namespace eagle::cublaslt
