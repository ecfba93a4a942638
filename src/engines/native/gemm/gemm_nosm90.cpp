// Without a Hopper (sm_90a) build there is none of our GEMMs: every query says so and the engine
// declines.
#include "engines/native/gemm/gemm_epilogue.hpp"

namespace eagle::native::gemm {

bool epilogue_gemm_built() noexcept {
  return false;
}
std::size_t epilogue_gemm_workspace(const EpilogueGemmArgs&) noexcept {
  return 0;
}
bool epilogue_gemm(const EpilogueGemmArgs&, int, void*, void*) noexcept {
  return false;
}

}  // namespace eagle::native::gemm
