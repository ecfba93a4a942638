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
// (erf) and gelu_backward (gemm_problem keeps a product beside its epilogue for gelu alone).
void require_cublaslt_epilogue(const GemmProblem& p, const std::string& engine);

// The knobs that name one algorithm: entry `algo` of the heuristic list cuBLASLt returns for the
// problem given at most `workspace_mb` MiB of workspace; `tf32` computes f32 on TF32 tensor cores.
// `sm_share`: the percent of the device's SMs cuBLASLt plans the GEMM for
// (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET), 100 all; 0 the rule of sm_count_target.
struct GemmKnobs {
  int64_t algo = 0;
  int64_t workspace_mb = 0;
  bool tf32 = false;
  int64_t sm_share = 100;
};

// The SM count cuBLASLt's heuristic and kernel target (0: all of them): `share` percent of
// `multiprocessors`; for share 0, three quarters of them when the output's 128 x 128 tiles
// (over the batch) number at most a quarter of the SMs (a weight gradient [512, 512] from 4096
// tokens: 16 tiles), else all. Measured (H100, session 24, bench/probes/backward_overlap_probe.cu):
// such a GEMM alone took 8.6 us planned for 96 SMs against 10.3 us for all 132 (another kernel),
// and beside the dx / gelu_backward chain of an MLP backward it left that chain SMs to run on
// (the backward 62.1 against 77.2 us).
int32_t sm_count_target(int64_t m, int64_t n, int64_t batch, int multiprocessors, int64_t share);

// The alignment the knob's algorithm is chosen for (what allocations give). A call whose
// addresses are less aligned runs the heuristic's best algorithm for element-aligned addresses.
inline constexpr uint32_t kAlignedBytes = 256;

// Queries the heuristic on `device` (a handle is made there for the query and dropped) and keeps
// entry `knobs.algo` for aligned addresses, and entry 0 for element-aligned ones. Throws
// NotSupported naming `engine` when the list is shorter or cuBLASLt refuses the problem; CudaError
// when the device cannot be used.
std::shared_ptr<const plan::CompiledPlan> build_gemm_plan(const Loaded& lib, const GemmProblem& p,
                                                          const GemmKnobs& knobs, Device device,
                                                          int multiprocessors,
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
