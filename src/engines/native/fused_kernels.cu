#include "engines/native/fused_kernels.hpp"
#include "engines/native/launch_status.hpp"
#include "engines/native/pointwise_math.cuh"
#include "kernel/cuda_numeric.cuh"

namespace eagle::native {

namespace {

constexpr int kRegisters = kFusedMaxInputs + kFusedMaxInstructions;

// Input k's element for flat index i of the iteration shape. I is the index type: 32-bit
// division is several times cheaper than 64-bit, and most shapes fit it.
template <class I>
__device__ __forceinline__ int64_t input_offset(const FusedProgram& p, int k, I i) {
  if (p.in_dense[k]) return static_cast<int64_t>(i);
  I off = 0, rest = i;
  for (int d = p.ndim - 1; d >= 0; --d) {
    const auto dim = static_cast<I>(p.dims[d]);
    off += (rest % dim) * static_cast<I>(p.in_strides[k][d]);
    rest /= dim;
  }
  return static_cast<int64_t>(off);
}

template <class T, class I>
__device__ __forceinline__ void fused_body(const FusedProgram& p) {
  const I step = static_cast<I>(gridDim.x) * blockDim.x;
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < static_cast<I>(p.numel);
       i += step) {
    float r[kRegisters];
    for (int k = 0; k < p.inputs; ++k)
      r[k] = detail::to_acc(static_cast<const T*>(p.in[k])[input_offset<I>(p, k, i)]);
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
__global__ void fused_kernel(const __grid_constant__ FusedProgram p) {
  // 32-bit indices while the last index plus a grid step cannot wrap.
  if (p.numel + static_cast<int64_t>(gridDim.x) * blockDim.x <= int64_t{UINT32_MAX})
    fused_body<T, uint32_t>(p);
  else
    fused_body<T, int64_t>(p);
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
