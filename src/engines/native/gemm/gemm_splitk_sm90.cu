// The split-K GEMMs (gemm_splitk.hpp) in bf16 and f16, and their host side.
#include "engines/native/gemm/gemm_kernels.cuh"
#include "engines/native/launch_status.hpp"

namespace eagle::native::gemm {

EAGLE_SPLITK_GEMM_INSTANCE(cutlass::bfloat16_t)
EAGLE_SPLITK_GEMM_INSTANCE(cutlass::half_t)

bool splitk_gemm_built() noexcept {
  return true;
}

std::size_t splitk_gemm_workspace(const SplitKGemmArgs& a, int multiprocessors) noexcept {
  if (*splitk_gemm_refusal(a)) return 0;
  return a.dtype == DType::bf16 ? splitk_gemm_workspace_of<cutlass::bfloat16_t>(a, multiprocessors)
                                : splitk_gemm_workspace_of<cutlass::half_t>(a, multiprocessors);
}

bool splitk_gemm(const SplitKGemmArgs& a, int multiprocessors, void* workspace,
                 void* stream) noexcept {
  if (*splitk_gemm_refusal(a) || !splitk_gemm_aligned(a)) return false;
  const auto s = static_cast<cudaStream_t>(stream);
  const bool ok = a.dtype == DType::bf16
                      ? run_splitk_gemm<cutlass::bfloat16_t>(a, multiprocessors, workspace, s)
                      : run_splitk_gemm<cutlass::half_t>(a, multiprocessors, workspace, s);
  return launch_succeeded() && ok;
}

}  // namespace eagle::native::gemm
