// The GELU-epilogue GEMMs in f16 (gemm_kernels.cuh): b row- and column-major.
#include "engines/native/gemm/gemm_kernels.cuh"

namespace eagle::native::gemm {

EAGLE_EPILOGUE_GEMM_INSTANCE(cutlass::half_t, false, Epilogue::gelu)
EAGLE_EPILOGUE_GEMM_INSTANCE(cutlass::half_t, true, Epilogue::gelu)

}  // namespace eagle::native::gemm
