// Host side of the GELU-epilogue GEMMs: the dispatch to the instance of (element type, b's
// layout, epilogue) that gemm_*_sm90.cu compiled.
#include "engines/native/gemm/gemm_kernels.cuh"
#include "engines/native/launch_status.hpp"

namespace eagle::native::gemm {

namespace {

template <class Element, Epilogue E, class F>
auto with_layout(const EpilogueGemmArgs& a, F&& f) {
  return a.b_col_major ? f.template operator()<Element, true, E>()
                       : f.template operator()<Element, false, E>();
}

// f.template operator()<Element, BColMajor, E>() for a's instance.
template <class F>
auto dispatch(const EpilogueGemmArgs& a, F&& f) {
  const bool bf16 = a.dtype == DType::bf16;
  if (a.epilogue == Epilogue::gelu)
    return bf16 ? with_layout<cutlass::bfloat16_t, Epilogue::gelu>(a, f)
                : with_layout<cutlass::half_t, Epilogue::gelu>(a, f);
  return bf16 ? with_layout<cutlass::bfloat16_t, Epilogue::gelu_backward>(a, f)
              : with_layout<cutlass::half_t, Epilogue::gelu_backward>(a, f);
}

}  // namespace

bool epilogue_gemm_built() noexcept {
  return true;
}

std::size_t epilogue_gemm_workspace(const EpilogueGemmArgs& a) noexcept {
  if (*epilogue_gemm_refusal(a)) return 0;
  return dispatch(a, [&]<class Element, bool BCol, Epilogue E>() {
    return epilogue_gemm_workspace_of<Element, BCol, E>(a);
  });
}

bool epilogue_gemm(const EpilogueGemmArgs& a, int multiprocessors, void* workspace,
                   void* stream) noexcept {
  if (*epilogue_gemm_refusal(a) || !epilogue_gemm_aligned(a) || !a.aux) return false;
  if (a.epilogue == Epilogue::gelu_backward && a.bias) return false;
  const bool ok = dispatch(a, [&]<class Element, bool BCol, Epilogue E>() {
    return run_epilogue_gemm<Element, BCol, E>(a, multiprocessors, workspace,
                                               static_cast<cudaStream_t>(stream));
  });
  // A refusal by CUTLASS (can_implement) launches nothing: report it as the launch's error.
  return launch_succeeded() && ok;
}

}  // namespace eagle::native::gemm
