// The GELU-backward-epilogue GEMMs in bf16 (gemm_kernels.cuh): b row- and column-major.
#include "engines/native/gemm/gemm_kernels.cuh"

namespace eagle::native::gemm {

EAGLE_EPILOGUE_GEMM_INSTANCE(cutlass::bfloat16_t, false, Epilogue::gelu_backward)
EAGLE_EPILOGUE_GEMM_INSTANCE(cutlass::bfloat16_t, true, Epilogue::gelu_backward)

}  // namespace eagle::native::gemm
