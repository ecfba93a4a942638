// Internal, CUDA sources only: the kda / gdn2 backward's dstate launch with dh transposed in
// registers (Shape::dstate_rows, knob `dstate` = 2 of native_kda_bwd), as the forward's
// kda_state_rows.cuh: each warp owns 16 value columns of a head's dh as the rows of dh^T [V, K]
// in mma accumulators and runs the reverse recurrence over the sequence's chunks alone:
//   dv'^T = dO^T Aqk + dh^T kg^T          (A = dO^T from a warp tile, dh^T from accumulators)
//   dh^T <- dh^T diag(e^{G_last}) + dO^T qg - dv'^T W
// one barrier per chunk (the chunk's Aqk, kg, W and qg tiles, copied by cp.async during the
// chunk after it, are in; the other buffer is free). A warp reads its own 16 columns of d_o
// (registers, one chunk ahead) and stores dh_c [K][V] and dv' [C][V] bf16 through its own
// stmatrix staging tiles; dh0 f32 [K][V] at the end. Parts = 2 (Shape::split_dstate_rows, knob
// `dstate` = 3): two CTAs per (slot, head), the sequences past a balanced share split over both,
// half the warps and value columns each (linear_attention::rows_split, as the forward's state
// rows; a value column's reverse recurrence needs no other column).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "engines/native/linear_attention/chunk_common.cuh"
#include "engines/native/linear_attention/cp_async.cuh"
#include "engines/native/linear_attention/kda_bwd_common.cuh"
#include "engines/native/linear_attention/kda_rows_common.cuh"
#include "engines/native/linear_attention/ldmatrix.cuh"
#include "engines/native/linear_attention/persistent.cuh"

namespace eagle::native::kda::bwd {

// Shared memory of the dstate-rows launch (RowsSmem): each buffer holds the chunk's Aqk [C][ST]
// and kg, W, qg [C][SB]; the staging tiles take dh_c, and d_o's columns then dv'.
template <int D>
struct DStateRowsLayout : RowsSmem<D, C*(C + 8) + 3 * C*(D + 8)> {
  static constexpr int SB = D + 8, ST = C + 8;
  static constexpr int KL = C * ST, W = KL + C * SB, QG = W + C * SB, kBufElems = QG + C * SB;
};

// A warp's 16 columns (c0..) of d_o for chunk rows row0 .. row0 + 63, four 16-byte pieces a
// lane (row x >> 1, half x & 1 of piece x = lane + 32 i); rows at or past n are zero (padding
// rows may hold NaN). d_o 16-byte aligned (the launch checks).
template <typename T>
struct DoPieces {
  uint4 x[4];
  __device__ __forceinline__ void load(const Params& p, int64_t row0, int n, int hv, int c0) {
    const T* d_o = static_cast<const T*>(p.d_o);
    const int64_t HV = p.s.value_heads, D = p.s.dim;
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int piece = lane + 32 * i, r = piece >> 1, half = (piece & 1) * 8;
      x[i] = r < n ? *reinterpret_cast<const uint4*>(d_o + ((row0 + r) * HV + hv) * D + c0 + half)
                   : make_uint4(0, 0, 0, 0);
    }
  }
  // Into the warp's tile [C][ld] as bf16.
  __device__ __forceinline__ void store(bf16* tile, int ld) const {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int piece = lane + 32 * i, r = piece >> 1, half = (piece & 1) * 8;
      uint4 y = x[i];
      if constexpr (!std::is_same_v<T, bf16>) {
        const T* in = reinterpret_cast<const T*>(&x[i]);
        bf16* out = reinterpret_cast<bf16*>(&y);
#pragma unroll
        for (int e = 0; e < 8; ++e) out[e] = __float2bfloat16(to_float(in[e]));
      }
      *reinterpret_cast<uint4*>(tile + r * ld + half) = y;
    }
  }
  static __device__ __forceinline__ float to_float(__half v) {
    return __half2float(v);
  }
  static __device__ __forceinline__ float to_float(bf16 v) {
    return __bfloat162float(v);
  }
};

// Flips the sign of both bf16 halves of each register: -x exactly.
__device__ __forceinline__ void negate(uint32_t (&a)[4]) {
#pragma unroll
  for (int r = 0; r < 4; ++r) a[r] ^= 0x80008000u;
}

// Sequence slot s, value head hv; CTA `part` of the slot's Parts (may_split: the slot has both).
template <typename T, int D, int Parts>
__device__ __forceinline__ void dstate_rows_slot(const Params& p, int64_t s, int hv, int part,
                                                 bool may_split) {
  using L = DStateRowsLayout<D>;
  constexpr int SB = L::SB, ST = L::ST, SS = L::SS, KT = D / 8, KB = D / 16;
  constexpr int TT = C / 8, TB = C / 16;
  extern __shared__ float4 smem4[];
  bf16* sb = reinterpret_cast<bf16*>(smem4);
  float* gl_buffers = reinterpret_cast<float*>(sb + L::end);
  const int warp = threadIdx.x >> 5;
  const int HV = p.s.value_heads;
  const linear_attention::RowsSplit split = linear_attention::rows_part<L::kWarps, Parts>(
      p.offsets, p.s.slots, s, part, may_split, HV, p.multiprocessors, D);
  if (!split.runs || warp >= split.warps) return;
  const int threads = 32 * split.warps, vw = split.col0 + 16 * warp;
  bf16* h_stage = sb + L::STAGE + warp * L::kStageElems;
  bf16* row_stage = h_stage + D * SS;  // d_o's columns, then dv'
  // A chunk's tile of COLS columns by cp.async (unrolled over the whole CTA when unsplit).
  auto copy_rows = [&]<int COLS>(bf16* dst, int ld, const bf16* src) {
    using linear_attention::load_chunk_rows;
    if constexpr (Parts == 1)
      load_chunk_rows<bf16, COLS, C, true, L::kThreads>(dst, ld, src, COLS, C);
    else
      load_chunk_rows<bf16, COLS, C, true>(dst, ld, src, COLS, C, threads);
  };
  auto copy_chunk = [&](int64_t at, int b) {  // cp.async, in flight until waited for
    bf16* buf = sb + b * L::kBufElems;
    copy_rows.template operator()<C>(buf, ST, view(p.f.aqk, at, C * C));
    copy_rows.template operator()<D>(buf + L::KL, SB, view(p.f.kg, at, C * D));
    copy_rows.template operator()<D>(buf + L::W, SB, view(p.f.w, at, C * D));
    copy_rows.template operator()<D>(buf + L::QG, SB, view(p.f.qg, at, C * D));
    for (int i = threadIdx.x; i < D / 4; i += threads)
      linear_attention::cp_async16(gl_buffers + b * D + 4 * i, p.f.gl + at * D + 4 * i, true);
  };

  // dh^T [vw + row][key] in accumulator tiles over the keys.
  float dh[KT][4];
  const int64_t state_at = (s * HV + hv) * static_cast<int64_t>(D) * D;
  load_state_rows<D>(dh, p.dht, state_at, vw);

  const int64_t first = p.offsets[s], last = p.offsets[s + 1];
  DoPieces<T> d_o;
  if (first < last) {
    copy_chunk((last - 1) * HV + hv, 0);
    const ragged::ChunkTask task = chunk_of(p, last - 1);
    d_o.load(p, task.row_begin, static_cast<int>(task.row_end - task.row_begin), hv, vw);
  }
  linear_attention::cp_async_commit();
  for (int64_t j = last - 1; j >= first; --j) {
    const int64_t at = j * HV + hv;
    const int b = static_cast<int>((last - 1 - j) & 1);
    const bf16* Ms = sb + b * L::kBufElems;
    const bf16 *KLs = Ms + L::KL, *Ws = Ms + L::W, *QGs = Ms + L::QG;
    const float* GLs = gl_buffers + b * D;
    // This chunk's tiles are in and every warp is past the chunk after it (the other buffer).
    linear_attention::cp_async_wait<0>();
    linear_attention::sync_rows(threads);
    if (j - 1 >= first) copy_chunk((j - 1) * HV + hv, b ^ 1);
    linear_attention::cp_async_commit();

    // dO^T (v, t) as A fragments from the warp's columns of d_o; the next chunk's (j - 1) loads
    // then fly while this one is computed.
    d_o.store(row_stage, SS);
    __syncwarp();
    uint32_t da[TB][4];
#pragma unroll
    for (int tb = 0; tb < TB; ++tb)
      linear_attention::ldsm_a<false>(da[tb], row_stage, SS, 0, 16 * tb);
    __syncwarp();
    if (j - 1 >= first) {
      const ragged::ChunkTask prev = chunk_of(p, j - 1);
      d_o.load(p, prev.row_begin, static_cast<int>(prev.row_end - prev.row_begin), hv, vw);
    }

    // dh_c, stored as dh [key][v].
    uint32_t ha[KB][4];
    linear_attention::tiles_to_a<bf16>(dh, ha);
    linear_attention::store_transposed<KB, SS>(h_stage, ha, p.ws.dh + at * D * D + vw, D);

    // dv'^T = dO^T Aqk + dh^T kg^T over the chunk's rows t.
    float acc[TT][4] = {};
#pragma unroll
    for (int tb = 0; tb < TB; ++tb)  // B (t', t) = Aqk[t'][t]
      linear_attention::mma_tiles<false>(acc, da[tb], Ms, ST, 0, 16 * tb);
#pragma unroll
    for (int kb = 0; kb < KB; ++kb)  // B (key, t) = kg[t][key]
      linear_attention::mma_tiles<true>(acc, ha[kb], KLs, SB, 0, 16 * kb);
    uint32_t va[TB][4];
    linear_attention::tiles_to_a<bf16>(acc, va);
    linear_attention::store_transposed<TB, SS>(row_stage, va, p.ws.dvn + at * C * D + vw, D);

    // dh^T <- dh^T diag(e^{G_last}) + dO^T qg - dv'^T W.
    scale_state_keys<D>(dh, GLs);
#pragma unroll
    for (int tb = 0; tb < TB; ++tb) {
      linear_attention::mma_tiles<false>(dh, da[tb], QGs, SB, 0, 16 * tb);  // B (t, key) = qg
      negate(va[tb]);
      linear_attention::mma_tiles<false>(dh, va[tb], Ws, SB, 0, 16 * tb);  // B (t, key) = W
    }
  }
  linear_attention::cp_async_wait<0>();  // nothing left in flight at exit

  if (p.dh0) store_state_rows<D>(dh, p.dh0, state_at, vw);
}

// A (slot, head, part) per CTA, longest sequences first (flat), or a CTA's (slot, part) tasks in
// turn for head blockIdx.y (persistent).
template <typename T, int D, int Parts>
__global__ void __launch_bounds__(DStateRowsLayout<D>::kThreads)
    dstate_rows_kernel(const Params p) {
  if (!p.s.persistent_state)
    linear_attention::longest_first<linear_attention::kLongestFirstSlots, Parts>(
        p.offsets, p.s.slots, [&](int64_t s, int hv, int part, bool may_split) {
          dstate_rows_slot<T, D, Parts>(p, s, hv, part, may_split);
        });
  else
    linear_attention::for_each_slot_block<Parts>(p.s.slots, true, [&](int64_t s, int part) {
      dstate_rows_slot<T, D, Parts>(p, s, blockIdx.y, part, true);
    });
}

}  // namespace eagle::native::kda::bwd
