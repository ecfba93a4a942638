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

__device__ __forceinline__ float load(const void* p, int64_t i, FusedType t) {
  switch (t) {
    case FusedType::f16:
      return __half2float(static_cast<const __half*>(p)[i]);
    case FusedType::bf16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case FusedType::boolean:
      return static_cast<const uint8_t*>(p)[i] != 0 ? 1.0f : 0.0f;
    case FusedType::u8:
      return static_cast<float>(static_cast<const uint8_t*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}

__device__ __forceinline__ void store(void* p, int64_t i, FusedType t, float v) {
  switch (t) {
    case FusedType::f16:
      static_cast<__half*>(p)[i] = __float2half_rn(v);
      break;
    case FusedType::bf16:
      static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
      break;
    case FusedType::boolean:
      static_cast<uint8_t*>(p)[i] = v != 0.0f ? 1 : 0;
      break;
    default:
      static_cast<float*>(p)[i] = v;
  }
}

// `v` as a tensor of type `t` holds it.
__device__ __forceinline__ float round_to(float v, FusedType t) {
  switch (t) {
    case FusedType::f16:
      return __half2float(__float2half_rn(v));
    case FusedType::bf16:
      return __bfloat162float(__float2bfloat16_rn(v));
    case FusedType::boolean:
      return v != 0.0f ? 1.0f : 0.0f;
    default:
      return v;
  }
}

__device__ __forceinline__ float truth(bool b) {
  return b ? 1.0f : 0.0f;
}

// The reference's definitions (comparisons and logic as C++ evaluates them on NaN).
__device__ __forceinline__ float apply_any(uint8_t op, float a, float b, float c) {
  if (op < static_cast<uint8_t>(FusedExtra::cmp_eq)) return apply_op(static_cast<PwOp>(op), a, b);
  switch (static_cast<FusedExtra>(op)) {
    case FusedExtra::cmp_eq:
      return truth(a == b);
    case FusedExtra::cmp_neq:
      return truth(a != b);
    case FusedExtra::cmp_lt:
      return truth(a < b);
    case FusedExtra::cmp_le:
      return truth(a <= b);
    case FusedExtra::cmp_gt:
      return truth(a > b);
    case FusedExtra::cmp_ge:
      return truth(a >= b);
    case FusedExtra::logical_not:
      return truth(a == 0.0f);
    case FusedExtra::logical_and:
      return truth(a != 0.0f && b != 0.0f);
    case FusedExtra::logical_or:
      return truth(a != 0.0f || b != 0.0f);
    case FusedExtra::where:
      return a != 0.0f ? b : c;
    default:  // cast
      return a;
  }
}

template <class I>
__device__ __forceinline__ void fused_body(const FusedProgram& p) {
  const I step = static_cast<I>(gridDim.x) * blockDim.x;
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < static_cast<I>(p.numel);
       i += step) {
    float r[kRegisters];
    for (int k = 0; k < p.inputs; ++k) r[k] = load(p.in[k], input_offset<I>(p, k, i), p.in_type[k]);
    for (int k = 0; k < p.instructions; ++k) {
      const FusedInstruction c = p.code[k];
      r[c.dst] = round_to(apply_any(c.op, r[c.a], r[c.b], r[c.c]), c.type);
    }
    for (int k = 0; k < p.outputs; ++k)
      store(p.out[k], static_cast<int64_t>(i), p.out_type[k], r[p.out_reg[k]]);
  }
}

__global__ void fused_kernel(const __grid_constant__ FusedProgram p) {
  // 32-bit indices while the last index plus a grid step cannot wrap.
  if (p.numel + static_cast<int64_t>(gridDim.x) * blockDim.x <= int64_t{UINT32_MAX})
    fused_body<uint32_t>(p);
  else
    fused_body<int64_t>(p);
}

bool launch(const FusedProgram& p, unsigned grid, unsigned threads, void* stream) noexcept {
  fused_kernel<<<grid, threads, 0, static_cast<cudaStream_t>(stream)>>>(p);
  return launch_succeeded();
}

}  // namespace

FusedLauncher fused_launcher() {
  return &launch;
}

}  // namespace eagle::native
