#include "engines/native/fused_kernels.hpp"
#include "engines/native/launch_status.hpp"
#include "engines/native/pointwise_math.cuh"
#include "kernel/cuda_numeric.cuh"

namespace eagle::native {

namespace {

constexpr int kRegisters = kFusedMaxInputs + kFusedMaxInstructions;

template <class T>
__global__ void fused_kernel(const __grid_constant__ FusedProgram p) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.numel;
       i += step) {
    float r[kRegisters];
    for (int k = 0; k < p.inputs; ++k) {
      int64_t off = i;
      if (!p.in_dense[k]) {
        off = 0;
        int64_t rest = i;
        for (int d = p.ndim - 1; d >= 0; --d) {
          off += (rest % p.dims[d]) * p.in_strides[k][d];
          rest /= p.dims[d];
        }
      }
      r[k] = detail::to_acc(static_cast<const T*>(p.in[k])[off]);
    }
    for (int k = 0; k < p.instructions; ++k) {
      const FusedInstruction c = p.code[k];
      // Each node's output rounded to the io dtype, as the reference rounds it (a no-op in f32).
      r[c.dst] = detail::to_acc(detail::from_acc<T>(apply_op(c.op, r[c.a], r[c.b])));
    }
    for (int k = 0; k < p.outputs; ++k)
      static_cast<T*>(p.out[k])[i] = detail::from_acc<T>(r[p.out_reg[k]]);
  }
}

template <class T>
bool launch(const FusedProgram& p, unsigned grid, unsigned threads, void* stream) noexcept {
  fused_kernel<T><<<grid, threads, 0, static_cast<cudaStream_t>(stream)>>>(p);
  return launch_succeeded();
}

}  // namespace

FusedLauncher fused_launcher(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return &launch<float>;
    case DType::f16:
      return &launch<__half>;
    case DType::bf16:
      return &launch<__nv_bfloat16>;
    default:
      return nullptr;
  }
}

}  // namespace eagle::native
