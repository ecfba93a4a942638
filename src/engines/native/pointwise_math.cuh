// Internal, CUDA sources only: the float math of each op of EAGLE_POINTWISE_OPS, once, for the
// one-op kernels (compile-time op) and the fused interpreter (run-time op).
#pragma once

#include <cuda_runtime.h>

#include "engines/native/pointwise_kernels.hpp"

namespace eagle::native {

template <PwOp Op>
__device__ __forceinline__ float apply(float a, float b) {
  if constexpr (Op == PwOp::add) return a + b;
  if constexpr (Op == PwOp::sub) return a - b;
  if constexpr (Op == PwOp::mul) return a * b;
  if constexpr (Op == PwOp::div) return a / b;
  if constexpr (Op == PwOp::max) return (a != a || b != b) ? a + b : fmaxf(a, b);
  if constexpr (Op == PwOp::min) return (a != a || b != b) ? a + b : fminf(a, b);
  if constexpr (Op == PwOp::neg) return -a;
  if constexpr (Op == PwOp::abs) return fabsf(a);
  if constexpr (Op == PwOp::exp) return expf(a);
  if constexpr (Op == PwOp::log) return logf(a);
  if constexpr (Op == PwOp::sqrt) return sqrtf(a);
  if constexpr (Op == PwOp::rsqrt) return rsqrtf(a);
  if constexpr (Op == PwOp::reciprocal) return 1.0f / a;
  if constexpr (Op == PwOp::tanh) return tanhf(a);
  if constexpr (Op == PwOp::sigmoid) return 1.0f / (1.0f + expf(-a));
  if constexpr (Op == PwOp::relu) return a != a ? a : fmaxf(a, 0.0f);
  if constexpr (Op == PwOp::gelu) return 0.5f * a * (1.0f + erff(a * 0.70710678118654752f));
  if constexpr (Op == PwOp::silu) return a / (1.0f + expf(-a));
  if constexpr (Op == PwOp::gelu_tanh)  // 0.7978845608 = sqrt(2 / pi)
    return 0.5f * a * (1.0f + tanhf(0.7978845608028654f * (a + 0.044715f * a * a * a)));
  // max(a, 0) + log1p(exp(-|a|)): exp never overflows; NaN passes through.
  if constexpr (Op == PwOp::softplus)
    return (a != a ? a : fmaxf(a, 0.0f)) + log1pf(expf(-fabsf(a)));
  // a f'(b), the backward of gelu and silu (a the cotangent); 0.3989422804 = 1 / sqrt(2 pi).
  if constexpr (Op == PwOp::gelu_backward)
    return a * (0.5f * (1.0f + erff(b * 0.70710678118654752f)) +
                b * 0.3989422804014327f * expf(-0.5f * b * b));
  if constexpr (Op == PwOp::silu_backward) {
    const float s = 1.0f / (1.0f + expf(-b));
    return a * s * (1.0f + b * (1.0f - s));
  }
  if constexpr (Op == PwOp::erf) return erff(a);
  if constexpr (Op == PwOp::sin) return sinf(a);
  if constexpr (Op == PwOp::cos) return cosf(a);
  if constexpr (Op == PwOp::floor) return floorf(a);
  if constexpr (Op == PwOp::ceil) return ceilf(a);
  if constexpr (Op == PwOp::pow) return powf(a, b);
  if constexpr (Op == PwOp::mod) return fmodf(a, b);
  if constexpr (Op == PwOp::square) return a * a;
  if constexpr (Op == PwOp::identity) return a;
  return 0.0f;
}

// The same, the op chosen at run time (the fused kernel's instructions).
__device__ __forceinline__ float apply_op(PwOp op, float a, float b) {
  switch (op) {
#define EAGLE_PW_APPLY(name, binary) \
  case PwOp::name:                   \
    return apply<PwOp::name>(a, b);
    EAGLE_POINTWISE_OPS(EAGLE_PW_APPLY)
#undef EAGLE_PW_APPLY
  }
  return 0.0f;
}

}  // namespace eagle::native
