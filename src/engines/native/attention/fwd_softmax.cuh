// Register-side pieces of the Hopper forward's consumers: views of the wgmma accumulators by
// (row, column), the online softmax in base 2, and the wgmma issue helper.
#pragma once

#include <cmath>

#include <cutlass/numeric_conversion.h>
#include <cute/tensor.hpp>

namespace eagle::native::attention::fwd {

using namespace cute;

// A wgmma accumulator layout ((2, 2, V), M, N) (column pair, row + 8, column + 8) as
// ((2, M), (2, V, N)): rows, then columns, of what one thread holds.
template <class AccLayout>
CUTE_HOST_DEVICE constexpr auto rowcol_layout(AccLayout acc) {
  static_assert(rank(AccLayout{}) == 3 && rank<0>(AccLayout{}) == 3);
  auto v = get<0>(acc);
  return make_layout(make_layout(get<1>(v), get<1>(acc)),
                     make_layout(get<0>(v), get<2>(v), get<2>(acc)));
}

template <class Tensor_>
CUTE_HOST_DEVICE auto rowcol(Tensor_&& t) {
  return make_tensor(t.data(), rowcol_layout(t.layout()));
}

// The S accumulator ((2, 2, V), 1, 1) read as the A operand of a k16 wgmma, ((2, 2, 2), 1, V/2):
// both orders of a thread's registers agree (pair, row + 8, column + 8), so only the modes regroup.
template <class AccLayout>
CUTE_HOST_DEVICE constexpr auto acc_as_operand_a(AccLayout acc) {
  static_assert(size<2>(AccLayout{}) == 1);
  auto v = get<0>(acc);
  constexpr int kPairs = size<2>(decltype(v){}) / 2;
  auto step = stride<2>(v);
  return make_layout(make_layout(get<0>(v), get<1>(v), make_layout(_2{}, step)), get<1>(acc),
                     make_layout(Int<kPairs>{}, step * _2{}));
}

__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Issues one warpgroup's wgmma chain c (+)= a b over all k blocks and commits it (no wait).
// kRegisterA: a lives in registers (its values must be ready before the wgmma reads them).
template <bool kZeroInit, bool kRegisterA, class Mma, class TA, class TB, class TC>
__device__ __forceinline__ void wgmma_chain(Mma& mma, TA& a, const TB& b, TC& c) {
  if constexpr (kRegisterA) warpgroup_fence_operand(a);
  warpgroup_fence_operand(c);
  warpgroup_arrive();
  if constexpr (kZeroInit) mma.accumulate_ = GMMA::ScaleOut::Zero;
  CUTE_UNROLL
  for (int kb = 0; kb < size<2>(a); ++kb) {
    cute::gemm(mma, a(_, _, kb), b(_, _, kb), c);
    mma.accumulate_ = GMMA::ScaleOut::One;
  }
  warpgroup_commit_batch();
  warpgroup_fence_operand(c);
  if constexpr (kRegisterA) warpgroup_fence_operand(a);
}

// Online softmax over the rows one thread holds (a quad of 4 lanes shares each row). Scores are
// raw q.k; `scale_log2` = scale * log2(e) turns them into base-2 exponents.
template <int kRows>
struct OnlineSoftmax {
  float row_max[kRows];
  float row_sum[kRows];
  float scale_log2;

  __device__ __forceinline__ explicit OnlineSoftmax(float scale_log2_) : scale_log2(scale_log2_) {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      row_max[r] = -INFINITY;
      row_sum[r] = 0.f;
    }
  }

  // s (rows, cols) becomes p = exp2(s * scale_log2 - max); correction[r] rescales what the
  // row accumulated so far. A row still without a visible key keeps max = -inf and p = 0.
  template <class TensorS>
  __device__ __forceinline__ void update(TensorS& s, float (&correction)[kRows]) {
    static_assert(size<0>(TensorS{}.layout()) == kRows);
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      float m = row_max[r];
      CUTE_UNROLL
      for (int c = 0; c < size<1>(s); ++c) m = fmaxf(m, s(r, c));
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
      // -inf - -inf would be NaN: a row with no visible key yet subtracts 0 instead.
      const float m_scaled = m == -INFINITY ? 0.f : m * scale_log2;
      correction[r] = exp2_approx(row_max[r] * scale_log2 - m_scaled);
      row_max[r] = m;
      float sum = 0.f;
      CUTE_UNROLL
      for (int c = 0; c < size<1>(s); ++c) {
        const float p = exp2_approx(fmaf(s(r, c), scale_log2, -m_scaled));
        s(r, c) = p;
        sum += p;
      }
      row_sum[r] = fmaf(row_sum[r], correction[r], sum);
    }
  }

  // Sums the quad's partial row sums; returns 1 / sum (0 for a row that saw no key) and writes
  // the natural-log lse (-inf for such a row).
  __device__ __forceinline__ void finish(float (&inv_sum)[kRows], float (&lse)[kRows],
                                         float scale) const {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      float sum = row_sum[r];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const bool empty = !(sum > 0.f);
      inv_sum[r] = empty ? 0.f : 1.f / sum;
      lse[r] = empty ? -INFINITY : row_max[r] * scale + logf(sum);
    }
  }
};

}  // namespace eagle::native::attention::fwd
