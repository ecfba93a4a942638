// A compiled cuBLASLt GEMM: matrix layouts and the algorithm fixed at build (from cuBLASLt's
// heuristic list on the target device), one cublasLtMatmul per call with the executor's handle,
// workspace and stream.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "eagle/kernel/call.hpp"
#include "eagle/plan/engine.hpp"
#include "engines/cublaslt/api.hpp"
#include "engines/gemm_problem.hpp"

namespace eagle::cublaslt {

using engines::BiasForm;
using engines::GemmEpilogue;
using engines::GemmProblem;
using engines::Matrix;

// Declines (NotSupported naming `engine`) the forms of `p` cuBLASLt has no epilogue for: gelu
// (erf) and gelu_backward, and a product kept beside its epilogue.
void require_cublaslt_epilogue(const GemmProblem& p, const std::string& engine);

// The knobs that name one algorithm: entry `algo` of the heuristic list cuBLASLt returns for the
// problem given at most `workspace_mb` MiB of workspace; `tf32` computes f32 on TF32 tensor cores.
struct GemmKnobs {
  int64_t algo = 0;
  int64_t workspace_mb = 0;
  bool tf32 = false;
};

// The alignment the knob's algorithm is chosen for (what allocations give). A call whose
// addresses are less aligned runs the heuristic's best algorithm for element-aligned addresses.
inline constexpr uint32_t kAlignedBytes = 256;

// Queries the heuristic on `device` (a handle is made there for the query and dropped) and keeps
// entry `knobs.algo` for aligned addresses, and entry 0 for element-aligned ones. Throws
// NotSupported naming `engine` when the list is shorter or cuBLASLt refuses the problem; CudaError
// when the device cannot be used.
std::shared_ptr<const plan::CompiledPlan> build_gemm_plan(const Loaded& lib, const GemmProblem& p,
                                                          const GemmKnobs& knobs, Device device,
                                                          const plan::OperandLayout& layout,
                                                          const std::string& engine);

#ifdef EAGLE_HAVE_CUDA
// The algorithm a plan built here runs, or null for another plan (benchmarks time the same
// algorithm through a raw cublasLtMatmul).
const cublasLtMatmulAlgo_t* algo_of(const plan::CompiledPlan& plan);
#endif

// The handle plans declare (Library "cublasLt"): made by the executor, one per device and stream
// owner, from the process's cuBLASLt.
const Library& handle_library();

}  // namespace eagle::cublaslt
