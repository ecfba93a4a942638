// Internal, CUDA sources only: what the kda state-rows launches share (the forward's
// kda_state_rows.cuh, the backward's kda_bwd_dstate_rows.cuh). A warp holds a state's transpose
// S^T [V, K] for its 16 value columns (rows vw..vw + 15) as mma accumulator tiles over the keys:
// tile kt holds keys 8 kt .. 8 kt + 7. States in memory are f32 [K][V] (D x D).
#pragma once

#include <cstddef>
#include <cstdint>

#include "engines/native/linear_attention/kda_mma.cuh"

namespace eagle::native::kda {

// The shared memory of a state-rows launch, bf16 elements: two buffers of BufElems (the chunk's
// tiles); per warp (D / 16 of them) a staging tile for the state [D][SS] and one for a chunk's
// rows [kChunk][SS] (SS = 24: 48-byte rows, conflict-free for ldmatrix and stmatrix's eight
// rows); then e^{G_last} [2][D] f32.
template <int D, int BufElems>
struct RowsSmem {
  static constexpr int kWarps = D / 16, kThreads = 32 * kWarps, SS = 24;
  static constexpr int STAGE = 2 * BufElems, kStageElems = D * SS + kChunk * SS;
  static constexpr int end = STAGE + kWarps * kStageElems;
  static_assert(end % 8 == 0, "e^{G_last} must start 16-byte aligned");
  static constexpr std::size_t bytes =
      static_cast<std::size_t>(end) * 2 + 2 * static_cast<std::size_t>(D) * sizeof(float);
};

// The warp's rows of S^T from the state src [K][V] at `at` (0 where src is null).
template <int D>
__device__ __forceinline__ void load_state_rows(float (&st)[D / 8][4], const float* src, int64_t at,
                                                int vw) {
#pragma unroll
  for (int kt = 0; kt < D / 8; ++kt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int v = acc_row(vw, e), key = acc_col(8 * kt, e);
      st[kt][e] = src ? src[at + static_cast<int64_t>(key) * D + v] : 0.f;
    }
}

// The warp's rows of S^T into the state dst [K][V] at `at`.
template <int D>
__device__ __forceinline__ void store_state_rows(const float (&st)[D / 8][4], float* dst,
                                                 int64_t at, int vw) {
#pragma unroll
  for (int kt = 0; kt < D / 8; ++kt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int v = acc_row(vw, e), key = acc_col(8 * kt, e);
      dst[at + static_cast<int64_t>(key) * D + v] = st[kt][e];
    }
}

// S^T <- S^T diag(gl): each key column scaled by its e^{G_last} (gl [D] f32, 8-byte aligned).
template <int D>
__device__ __forceinline__ void scale_state_keys(float (&st)[D / 8][4], const float* gl) {
#pragma unroll
  for (int kt = 0; kt < D / 8; ++kt) {
    const float2 g = *reinterpret_cast<const float2*>(gl + acc_col(8 * kt, 0));
    st[kt][0] *= g.x;
    st[kt][1] *= g.y;
    st[kt][2] *= g.x;
    st[kt][3] *= g.y;
  }
}

}  // namespace eagle::native::kda
