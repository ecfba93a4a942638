// Internal, CUDA sources only: the kda / gdn2 forward's state launch with the state transposed
// in registers (Shape::state_rows, the plan knob `state` = 2). Each warp owns 16 value columns
// of a head's state as the rows of S^T [V, K] in mma accumulators, for all K keys, and runs the
// recurrence alone:
//   v'^T = U^T - S^T W^T           (A = S^T from its own accumulators, B = W's rows)
//   S^T <- S^T diag(e^{G_last}) + v'^T (k e^{G_last - G})
//                                   (A = v'^T from the accumulators just made, B = kg's rows)
// An accumulator tile's layout is the next product's A fragment (FlashAttention's trick), so
// neither the state nor v' goes through shared memory between the products, and the warps of a
// CTA meet once per chunk: at the barrier that says the chunk's W, kg and U rows (loaded by
// cp.async during the previous chunk) are there and the other buffer is free. The launch
// state_kernel (kda_fwd_sm90.cu) instead keeps S [K, BV] per CTA of four warps and passes h and
// v' through shared memory with three barriers per chunk.
//
// A CTA is one (slot, value head), D / 16 warps; Parts = 2 (the plan knob `state` = 3): two CTAs
// per (slot, head), the sequences with more chunks than a balanced share split over both, half
// the warps and value columns each (linear_attention::rows_split). What it writes is the other
// launch's: h_c [K][V] bf16 per chunk (the state at its start, stored by stmatrix through a
// warp's own staging tile), v' [C][V] bf16 over the workspace, the final state f32 [K][V].
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "engines/native/linear_attention/chunk_common.cuh"
#include "engines/native/linear_attention/cp_async.cuh"
#include "engines/native/linear_attention/kda_fwd_common.cuh"
#include "engines/native/linear_attention/kda_rows_common.cuh"
#include "engines/native/linear_attention/ldmatrix.cuh"
#include "engines/native/linear_attention/persistent.cuh"

namespace eagle::native::kda::fwd {

// Shared memory of the state-rows launch (RowsSmem): each buffer holds the chunk's W, kg and U
// rows [C][SB] (of U a split CTA's half of the columns); the staging tiles take h_c and v'.
template <int D>
struct StateRowsLayout : RowsSmem<D, 3 * C*(D + 8)> {
  static constexpr int SB = D + 8;
  static constexpr int KG = C * SB, U = 2 * C * SB, kBufElems = 3 * C * SB;
};

// Sequence slot s, value head hv; CTA `part` of the slot's Parts (may_split: the slot has both).
template <int D, int Parts>
__device__ __forceinline__ void state_rows_slot(const Params& p, int64_t s, int hv, int part,
                                                bool may_split) {
  using L = StateRowsLayout<D>;
  constexpr int SB = L::SB, SS = L::SS, KT = D / 8, KB = D / 16;  // key tiles, key blocks
  constexpr int TT = C / 8, TB = C / 16;                          // row tiles, row blocks
  extern __shared__ float4 smem4[];
  bf16* sb = reinterpret_cast<bf16*>(smem4);
  float* gl_buffers = reinterpret_cast<float*>(sb + L::end);
  const int warp = threadIdx.x >> 5;
  const int HV = p.s.value_heads;
  const linear_attention::RowsSplit split = linear_attention::rows_part<L::kWarps, Parts>(
      p.offsets, p.s.slots, s, part, may_split, HV, p.multiprocessors, D);
  if (!split.runs || warp >= split.warps) return;
  const int threads = 32 * split.warps;
  // This warp's value columns, the rows of its S^T: of the head (vw), of the CTA's U rows (lw).
  const int lw = 16 * warp, vw = split.col0 + lw;
  bf16* h_stage = sb + L::STAGE + warp * L::kStageElems;
  bf16* v_stage = h_stage + D * SS;
  auto prefetch = [&](int64_t at, int b) {
    using linear_attention::cp_async16;
    bf16* buf = sb + b * L::kBufElems;
    const bf16 *w = p.ws.w + at * C * D, *kg = p.ws.kg + at * C * D, *u = p.ws.u + at * C * D;
    for (int i = threadIdx.x; i < C * (D / 8); i += threads) {
      const int r = i / (D / 8), c = (i % (D / 8)) * 8;
      cp_async16(buf + r * SB + c, w + r * D + c, true);
      cp_async16(buf + L::KG + r * SB + c, kg + r * D + c, true);
      if (c < split.cols) cp_async16(buf + L::U + r * SB + c, u + r * D + split.col0 + c, true);
    }
    for (int i = threadIdx.x; i < D / 4; i += threads)
      cp_async16(gl_buffers + b * D + 4 * i, p.ws.gl + at * D + 4 * i, true);
  };

  // S^T [vw + row][key] in accumulator tiles over the keys: tile kt holds keys 8 kt...
  float st[KT][4];
  const int64_t state_at = (s * HV + hv) * static_cast<int64_t>(D) * D;
  load_state_rows<D>(st, p.h0, state_at, vw);

  const int64_t first = p.offsets[s], last = p.offsets[s + 1];
  if (first < last) prefetch(slab(p, first, hv), 0);
  linear_attention::cp_async_commit();
  for (int64_t j = first; j < last; ++j) {
    const int64_t at = slab(p, j, hv);
    const int b = static_cast<int>((j - first) & 1);
    const bf16* Ws = sb + b * L::kBufElems;
    const bf16 *KGs = Ws + L::KG, *Us = Ws + L::U;
    const float* GLs = gl_buffers + b * D;
    // This chunk's rows are in (its group is the only one in flight) and every warp is past the
    // previous chunk, which read the other buffer: the next chunk's rows may go there.
    linear_attention::cp_async_wait<0>();
    linear_attention::sync_rows(threads);
    if (j + 1 < last) prefetch(slab(p, j + 1, hv), b ^ 1);
    linear_attention::cp_async_commit();

    // h_c: S^T rounded to bf16, as A fragments over the keys, stored as h [key][v].
    uint32_t sa[KB][4];
    linear_attention::tiles_to_a<bf16>(st, sa);
    linear_attention::store_transposed<KB, SS>(h_stage, sa, p.ws.h + at * D * D + vw, D);

    // v'^T = U^T - S^T W^T over the chunk's rows t: tile tt holds rows 8 tt...
    float acc[TT][4] = {};
#pragma unroll
    for (int kb = 0; kb < KB; ++kb)  // B (key, t) = W[t][key]
      linear_attention::mma_tiles<true>(acc, sa[kb], Ws, SB, 0, 16 * kb);
    uint32_t va[TB][4];
#pragma unroll
    for (int tb = 0; tb < TB; ++tb) {
      uint32_t uf[4];  // U^T (v, t) as an A fragment: tiles 2 tb and 2 tb + 1, halves e 0-1, 2-3
      linear_attention::ldsm_a<false>(uf, Us, SB, lw, 16 * tb);
      float t0[4], t1[4];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&uf[h]));
        const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&uf[2 + h]));
        t0[2 * h] = lo.x - acc[2 * tb][2 * h];
        t0[2 * h + 1] = lo.y - acc[2 * tb][2 * h + 1];
        t1[2 * h] = hi.x - acc[2 * tb + 1][2 * h];
        t1[2 * h + 1] = hi.y - acc[2 * tb + 1][2 * h + 1];
      }
      linear_attention::tiles_to_a<bf16>(t0, t1, va[tb]);
    }
    linear_attention::store_transposed<TB, SS>(v_stage, va, p.ws.vn + at * C * D + vw, D);

    // S^T <- S^T diag(e^{G_last}) + v'^T (k e^{G_last - G}).
    scale_state_keys<D>(st, GLs);
#pragma unroll
    for (int tb = 0; tb < TB; ++tb)  // B (t, key) = kg[t][key]
      linear_attention::mma_tiles<false>(st, va[tb], KGs, SB, 0, 16 * tb);
  }
  linear_attention::cp_async_wait<0>();  // nothing may be left in flight at exit

  if (p.ht) store_state_rows<D>(st, p.ht, state_at, vw);
}

// A (slot, head, part) per CTA, longest sequences first (flat), or a CTA's (slot, part) tasks in
// turn for head blockIdx.y (persistent).
template <int D, int Parts = 1>
__global__ void __launch_bounds__(StateRowsLayout<D>::kThreads) state_rows_kernel(const Params p) {
  if (!p.s.persistent_state)
    linear_attention::longest_first<linear_attention::kLongestFirstSlots, Parts>(
        p.offsets, p.s.slots, [&](int64_t s, int hv, int part, bool may_split) {
          state_rows_slot<D, Parts>(p, s, hv, part, may_split);
        });
  else
    linear_attention::for_each_slot_block<Parts>(p.s.slots, true, [&](int64_t s, int part) {
      state_rows_slot<D, Parts>(p, s, blockIdx.y, part, true);
    });
}

}  // namespace eagle::native::kda::fwd
