#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

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
  if (p.in_scalar[k]) return 0;
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

// The program at flat index i, one element: its inputs loaded into r, then its code run.
template <class I>
__device__ __forceinline__ void evaluate(const FusedProgram& p, I i, float* r) {
  for (int k = 0; k < p.inputs; ++k)
    if (!p.in_unread[k]) r[k] = load(p.in[k], input_offset<I>(p, k, i), p.in_type[k]);
  for (int k = 0; k < p.instructions; ++k) {
    const FusedInstruction c = p.code[k];
    r[c.dst] = round_to(apply_any(c.op, r[c.a], r[c.b], r[c.c]), c.type);
  }
}

template <class I>
__device__ __forceinline__ void fused_body(const FusedProgram& p) {
  const I step = static_cast<I>(gridDim.x) * blockDim.x;
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < static_cast<I>(p.numel);
       i += step) {
    float r[kRegisters];
    evaluate<I>(p, i, r);
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

// ---- The vector path: kFusedVec consecutive elements per thread.

constexpr int V = kFusedVec;
using Vec = float[V];

__device__ __forceinline__ float2 to_float2(__half2 h) {
  return __half22float2(h);
}
__device__ __forceinline__ float2 to_float2(__nv_bfloat162 h) {
  return __bfloat1622float2(h);
}
template <class Pair>
__device__ __forceinline__ Pair to_pair(float a, float b);
template <>
__device__ __forceinline__ __half2 to_pair<__half2>(float a, float b) {
  return __floats2half2_rn(a, b);
}
template <>
__device__ __forceinline__ __nv_bfloat162 to_pair<__nv_bfloat162>(float a, float b) {
  return __floats2bfloat162_rn(a, b);
}

// V 16-bit values (Elem, in pairs) from element `at` as one 16-byte load, and back.
template <class Elem, class Pair>
__device__ __forceinline__ void load_pairs(const void* p, int64_t at, Vec& v) {
  const uint4 raw = *reinterpret_cast<const uint4*>(static_cast<const Elem*>(p) + at);
  const auto* h = reinterpret_cast<const Pair*>(&raw);
#pragma unroll
  for (int j = 0; j < V / 2; ++j) {
    const float2 f = to_float2(h[j]);
    v[2 * j] = f.x;
    v[2 * j + 1] = f.y;
  }
}
template <class Elem, class Pair>
__device__ __forceinline__ void store_pairs(void* p, int64_t at, const Vec& v) {
  uint4 raw;
  auto* h = reinterpret_cast<Pair*>(&raw);
#pragma unroll
  for (int j = 0; j < V / 2; ++j) h[j] = to_pair<Pair>(v[2 * j], v[2 * j + 1]);
  *reinterpret_cast<uint4*>(static_cast<Elem*>(p) + at) = raw;
}

// V values of a tensor of type `t` from element `at` (a multiple of V; the base 16-byte aligned).
__device__ __forceinline__ void load_vec(const void* p, int64_t at, FusedType t, Vec& v) {
  switch (t) {
    case FusedType::f16:
      return load_pairs<__half, __half2>(p, at, v);
    case FusedType::bf16:
      return load_pairs<__nv_bfloat16, __nv_bfloat162>(p, at, v);
    case FusedType::boolean:
    case FusedType::u8: {
      const uint2 raw = *reinterpret_cast<const uint2*>(static_cast<const uint8_t*>(p) + at);
      const auto* b = reinterpret_cast<const uint8_t*>(&raw);
      const bool flag = t == FusedType::boolean;
#pragma unroll
      for (int j = 0; j < V; ++j)
        v[j] = flag ? (b[j] != 0 ? 1.0f : 0.0f) : static_cast<float>(b[j]);
      return;
    }
    default: {
      const auto* f = reinterpret_cast<const float4*>(static_cast<const float*>(p) + at);
#pragma unroll
      for (int q = 0; q < V / 4; ++q) {
        const float4 x = f[q];
        v[4 * q] = x.x;
        v[4 * q + 1] = x.y;
        v[4 * q + 2] = x.z;
        v[4 * q + 3] = x.w;
      }
    }
  }
}

__device__ __forceinline__ void store_vec(void* p, int64_t at, FusedType t, const Vec& v) {
  switch (t) {
    case FusedType::f16:
      return store_pairs<__half, __half2>(p, at, v);
    case FusedType::bf16:
      return store_pairs<__nv_bfloat16, __nv_bfloat162>(p, at, v);
    case FusedType::boolean: {
      uint2 raw;
      auto* b = reinterpret_cast<uint8_t*>(&raw);
#pragma unroll
      for (int j = 0; j < V; ++j) b[j] = v[j] != 0.0f ? 1 : 0;
      *reinterpret_cast<uint2*>(static_cast<uint8_t*>(p) + at) = raw;
      return;
    }
    default: {
      auto* f = reinterpret_cast<float4*>(static_cast<float*>(p) + at);
#pragma unroll
      for (int q = 0; q < V / 4; ++q)
        f[q] = make_float4(v[4 * q], v[4 * q + 1], v[4 * q + 2], v[4 * q + 3]);
    }
  }
}

// d = op(a, b) element by element: one decode for the V elements.
__device__ __forceinline__ void apply_vec(uint8_t op, const Vec& a, const Vec& b, Vec& d) {
#define EAGLE_FUSED_EACH(expr)                                 \
  _Pragma("unroll") for (int j = 0; j < V; ++j) d[j] = (expr); \
  return
  if (op < static_cast<uint8_t>(FusedExtra::cmp_eq)) {
    switch (static_cast<PwOp>(op)) {
#define EAGLE_PW_VEC(name, binary) \
  case PwOp::name:                 \
    EAGLE_FUSED_EACH(apply<PwOp::name>(a[j], b[j]));
      EAGLE_POINTWISE_OPS(EAGLE_PW_VEC)
#undef EAGLE_PW_VEC
    }
  }
  switch (static_cast<FusedExtra>(op)) {
    case FusedExtra::cmp_eq:
      EAGLE_FUSED_EACH(truth(a[j] == b[j]));
    case FusedExtra::cmp_neq:
      EAGLE_FUSED_EACH(truth(a[j] != b[j]));
    case FusedExtra::cmp_lt:
      EAGLE_FUSED_EACH(truth(a[j] < b[j]));
    case FusedExtra::cmp_le:
      EAGLE_FUSED_EACH(truth(a[j] <= b[j]));
    case FusedExtra::cmp_gt:
      EAGLE_FUSED_EACH(truth(a[j] > b[j]));
    case FusedExtra::cmp_ge:
      EAGLE_FUSED_EACH(truth(a[j] >= b[j]));
    case FusedExtra::logical_not:
      EAGLE_FUSED_EACH(truth(a[j] == 0.0f));
    case FusedExtra::logical_and:
      EAGLE_FUSED_EACH(truth(a[j] != 0.0f && b[j] != 0.0f));
    case FusedExtra::logical_or:
      EAGLE_FUSED_EACH(truth(a[j] != 0.0f || b[j] != 0.0f));
    default:  // cast (where is the caller's: it reads a third operand)
      EAGLE_FUSED_EACH(a[j]);
  }
#undef EAGLE_FUSED_EACH
}

// The register file in shared memory, [registers][V][threads]: a thread's element j of register
// r at (r * V + j) * threads + thread, so a warp's accesses fall in distinct banks.
template <class I>
__device__ __forceinline__ void fused_vec_body(const FusedProgram& p) {
  extern __shared__ float file[];
  float* mine = file + threadIdx.x;
  const int stride = static_cast<int>(blockDim.x);
  const auto slot = [&](int r, int j) -> float& { return mine[(r * V + j) * stride]; };
  const I groups = static_cast<I>(p.numel / V);
  const I step = static_cast<I>(gridDim.x) * blockDim.x;
  for (I g = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; g < groups; g += step) {
    const I i0 = g * V;
    for (int k = 0; k < p.inputs; ++k) {
      if (p.in_unread[k]) continue;
      Vec v;
      const int64_t at = input_offset<I>(p, k, i0);
      if (p.in_splat[k]) {
        const float x = load(p.in[k], at, p.in_type[k]);
#pragma unroll
        for (int j = 0; j < V; ++j) v[j] = x;
      } else {
        load_vec(p.in[k], at, p.in_type[k], v);
      }
#pragma unroll
      for (int j = 0; j < V; ++j) slot(k, j) = v[j];
    }
    for (int k = 0; k < p.instructions; ++k) {
      const FusedInstruction c = p.code[k];
      Vec a, b, d;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        a[j] = slot(c.a, j);
        b[j] = slot(c.b, j);
      }
      if (c.op == static_cast<uint8_t>(FusedExtra::where)) {
#pragma unroll
        for (int j = 0; j < V; ++j) d[j] = a[j] != 0.0f ? b[j] : slot(c.c, j);
      } else {
        apply_vec(c.op, a, b, d);
      }
      if (c.type != FusedType::f32) {
#pragma unroll
        for (int j = 0; j < V; ++j) d[j] = round_to(d[j], c.type);
      }
#pragma unroll
      for (int j = 0; j < V; ++j) slot(c.dst, j) = d[j];
    }
    for (int k = 0; k < p.outputs; ++k) {
      Vec v;
#pragma unroll
      for (int j = 0; j < V; ++j) v[j] = slot(p.out_reg[k], j);
      store_vec(p.out[k], static_cast<int64_t>(i0), p.out_type[k], v);
    }
  }
}

// Whether every input the code reads is one element (a reduction's cotangent broadcast to its
// input's shape, say): then each output is one value, computed once per thread.
__host__ __device__ __forceinline__ bool constant_program(const FusedProgram& p) {
  for (int k = 0; k < p.inputs; ++k)
    if (!p.in_unread[k] && !p.in_scalar[k]) return false;
  return true;
}

// A constant program: the code run once on the scalar path, then each output a store loop.
template <class I>
__device__ __forceinline__ void fused_constant_body(const FusedProgram& p) {
  float r[kRegisters];
  evaluate<I>(p, I{0}, r);  // every input read is one element: offset 0 for any index
  const I groups = static_cast<I>(p.numel / V);
  const I step = static_cast<I>(gridDim.x) * blockDim.x;
  for (int k = 0; k < p.outputs; ++k) {
    Vec v;
#pragma unroll
    for (int j = 0; j < V; ++j) v[j] = r[p.out_reg[k]];
    for (I g = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; g < groups; g += step)
      store_vec(p.out[k], static_cast<int64_t>(g) * V, p.out_type[k], v);
  }
}

__global__ void fused_vec_kernel(const __grid_constant__ FusedProgram p) {
  const bool narrow =
      p.numel + static_cast<int64_t>(gridDim.x) * blockDim.x * V <= int64_t{UINT32_MAX};
  if (constant_program(p)) {
    if (narrow)
      fused_constant_body<uint32_t>(p);
    else
      fused_constant_body<int64_t>(p);
  } else if (narrow) {
    fused_vec_body<uint32_t>(p);
  } else {
    fused_vec_body<int64_t>(p);
  }
}

constexpr int kThreads = 256;
constexpr int kFileBytes = 48 * 1024;  // the vector path's shared memory per block, at most
constexpr int kThreadsPerSm = 2048;

unsigned grid_for(int64_t items, int threads, int multiprocessors) {
  const int64_t blocks = (items + threads - 1) / threads;
  const int64_t resident = int64_t{multiprocessors} * (kThreadsPerSm / threads);
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, resident));
}

bool launch(const FusedProgram& p, bool vector, int multiprocessors, void* stream) noexcept {
  const auto s = static_cast<cudaStream_t>(stream);
  if (vector && constant_program(p)) {
    // Stores alone, no file: two blocks an SM, each thread storing several vectors, leave the
    // rest of the device to what runs beside it (a loss cotangent's broadcast runs beside the
    // step's first projection).
    fused_vec_kernel<<<std::min(grid_for(p.numel / V, kThreads, multiprocessors),
                                static_cast<unsigned>(std::max(1, multiprocessors) * 2)),
                       kThreads, 0, s>>>(p);
  } else if (vector) {
    // As many threads as the file allows (a multiple of 32, at most 256).
    const int per_thread = std::max(1, p.registers) * V * static_cast<int>(sizeof(float));
    const int threads = std::clamp(kFileBytes / per_thread / 32 * 32, 32, kThreads);
    fused_vec_kernel<<<grid_for(p.numel / V, threads, multiprocessors), threads,
                       static_cast<std::size_t>(per_thread) * threads, s>>>(p);
  } else {
    fused_kernel<<<grid_for(p.numel, kThreads, multiprocessors), kThreads, 0, s>>>(p);
  }
  return launch_succeeded();
}

}  // namespace

FusedLauncher fused_launcher() {
  return &launch;
}

}  // namespace eagle::native
