// Backward of the varlen (THD) attention for Hopper: dq, dk, dv of softmax(scale * q k^T) v per
// sequence, recomputing P from the forward's lse (FlashAttention-2/3 style).
//
// Kernels, in launch order:
//   preprocess  q tiles x q heads: delta = rowsum(dO * O) (f32 workspace); unless deterministic,
//               zero the f32 dq accumulator rows of the active tiles (never all Tq rows).
//   dkdv        kv tiles (128 rows) x kv heads: loops over the group's query heads and the q
//               blocks that can see the tile, dK and dV in registers (no atomics: written once).
//               Unless deterministic it also adds dQ += dS K into the accumulator (f32 atomics).
//   postprocess q tiles x q heads: dq = accumulator * scale in the io dtype.
//   dq          (deterministic mode, replaces the dQ part of dkdv and postprocess) q tiles x q
//               heads looping over the kv blocks they see, dQ in registers: bitwise repeatable.
// dkdv and dq multiply with Hopper wgmma (bwd_wgmma.cuh) on 128-byte-swizzled shared-memory
// tiles; bf16/f16 in, f32 accumulate. Tiles arrive by cp.async (bwd_io.cuh), double-buffered,
// with zero fill for rows past the sequence's end, and masked scores are selected to zero (never
// added), so NaN in padding rows never reaches an active gradient.
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "engines/native/attention/bwd_io.cuh"
#include "engines/native/attention/bwd_wgmma.cuh"
#include "engines/native/attention/tasks.cuh"
#include "engines/native/attention/varlen_kernels.hpp"

namespace eagle::native::attention {

namespace {

using bwd::Io;
using bwd::smem_addr;

constexpr int kKvBlock = 128;  // kv rows per dkdv task (bwd_kv_block_rows)
constexpr int kQBlock = 64;    // q rows per preprocess / postprocess / dq task (bwd_q_block_rows)
constexpr float kLog2e = 1.4426950408889634f;

struct Params {
  BwdArgs a;
  float* delta = nullptr;            // [Tq, H]
  float* acc = nullptr;              // [Tq, H, D], null in deterministic mode
  const int32_t* q_tiles = nullptr;  // q_grid.tile_offsets, null when q has no capacity
};

// Runs f(task) for each task of this CTA under the grid's schedule. `heads` is the head axis of
// the grid; f must leave shared memory free for the next task (end with a barrier). One loop for
// both schedules, so the kernel body is inlined once:
//   flat        CTA (blockIdx.x, blockIdx.y) = (tile, head), at most one task
//   persistent  worker w of W = gridDim.x runs task indices w, w + W, ... < active tiles * heads
// Task index i = tile * heads + head (tile-major, unlike tasks.cuh's head-major decode_task): the
// heads of one tile, tasks of the same cost, are consecutive, so the tiles of a long sequence go
// to distinct workers. Head-major, a stride W sharing a factor d with the active tile count A
// sends all heads of a tile to W / d workers only (A = 72, W = 132: 11 workers), and one long
// sequence among short ones then serialises its tiles on those few workers, where the flat
// grid's hardware dispatch spreads them. Resident CTAs still share a sequence's Q and dO (dkdv)
// or K and V (dq) in L2: the W tasks in flight cover W / heads neighbouring tiles of every head.
template <class F>
__device__ __forceinline__ void for_each_task(const VarlenShape& s, const TaskGrid& g, int block,
                                              bool q_side, int heads, F&& f) {
  const int64_t active = active_tiles(s, g);
  int64_t first = blockIdx.x, end = active * heads, stride = gridDim.x;
  if (g.schedule == Schedule::flat) {
    first = static_cast<int64_t>(blockIdx.x) * heads + blockIdx.y;
    end = static_cast<int64_t>(blockIdx.x) < active ? first + 1 : first;
    stride = 1;
  }
  for (int64_t i = first; i < end; i += stride) {
    const int64_t tile = i / heads;
    const int head = static_cast<int>(i - tile * heads);
    const Task t = make_task(s, g, block, q_side, tile, head);
    if (t.seq >= 0) f(t);
  }
}

// q rows of the sequence that some preprocess task covered (all of them with valid metadata):
// the dkdv kernel reads delta and the accumulator only there, even with bad cu_seqlens.
__device__ __forceinline__ int64_t covered_q_rows(const Params& p, const Task& t) {
  if (p.q_tiles == nullptr) return 0;
  const int64_t tiles = p.q_tiles[t.seq + 1] - p.q_tiles[t.seq];
  const int64_t q_len = t.q_end - t.q_begin;
  const int64_t covered = tiles > 0 ? tiles * kQBlock : 0;
  return covered < q_len ? covered : q_len;
}

// ---- preprocess / postprocess ----------------------------------------------------------------

constexpr int kRowThreads = 128;

// Both run under the grid's schedule like the heavy kernels: with no shared memory a CTA is
// cheap, but a flat grid sized for the capacity still launches capacity tiles x H of them, and
// persistent workers (every resident slot, about 12 per SM) cost nothing more at exact batches.
// Each thread loads all of its rows of the tile before it stores anything: the stores could
// alias the loads for the compiler, so a load-store loop would wait one memory latency per pass.
template <bool kBf16, int kD>
__global__ void __launch_bounds__(kRowThreads) preprocess_kernel(const Params p) {
  using T = typename Io<kBf16>::T;
  const VarlenShape& s = p.a.shape;
  const int H = s.heads;
  const T* o = static_cast<const T*>(p.a.o);
  const T* d_o = static_cast<const T*>(p.a.d_o);
  for_each_task(s, p.a.q_grid, kQBlock, true, H, [&](const Task& t) {
    constexpr int kCpr = kD / 8;              // 16-byte chunks per row
    constexpr int kRpp = kRowThreads / kCpr;  // rows per pass
    constexpr int kPasses = kQBlock / kRpp;
    const int c = static_cast<int>(threadIdx.x) % kCpr;
    const int r0 = static_cast<int>(threadIdx.x) / kCpr;
    const int n = static_cast<int>(t.row_end - t.row_begin);
    uint4 a[kPasses], b[kPasses];
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      a[i] = b[i] = make_uint4(0u, 0u, 0u, 0u);  // rows past the tile: never read (NaN padding)
      const int r = r0 + i * kRpp;
      if (r < n) {
        const int64_t base = ((t.row_begin + r) * H + t.head) * kD + c * 8;
        a[i] = *reinterpret_cast<const uint4*>(d_o + base);
        b[i] = *reinterpret_cast<const uint4*>(o + base);
      }
    }
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      const int r = r0 + i * kRpp;
      const bool ok = r < n;
      const int64_t row = t.row_begin + r;
      const int64_t base = (row * H + t.head) * kD + c * 8;
      const uint32_t aw[4] = {a[i].x, a[i].y, a[i].z, a[i].w};
      const uint32_t bw[4] = {b[i].x, b[i].y, b[i].z, b[i].w};
      float sum = 0.f;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float2 fa = Io<kBf16>::unpack(aw[e]), fb = Io<kBf16>::unpack(bw[e]);
        sum += fa.x * fb.x + fa.y * fb.y;
      }
#pragma unroll
      for (int m = kCpr / 2; m > 0; m >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, m);
      if (ok && c == 0) p.delta[row * H + t.head] = sum;
      if (ok && p.acc != nullptr) {
        const float4 z = make_float4(0.f, 0.f, 0.f, 0.f);
        *reinterpret_cast<float4*>(p.acc + base) = z;
        *reinterpret_cast<float4*>(p.acc + base + 4) = z;
      }
    }
  });
}

template <bool kBf16, int kD>
__global__ void __launch_bounds__(kRowThreads) postprocess_kernel(const Params p) {
  using T = typename Io<kBf16>::T;
  const VarlenShape& s = p.a.shape;
  const int H = s.heads;
  T* dq = static_cast<T*>(p.a.dq);
  for_each_task(s, p.a.q_grid, kQBlock, true, H, [&](const Task& t) {
    constexpr int kCpr = kD / 8;
    constexpr int kRpp = kRowThreads / kCpr;
    constexpr int kPasses = kQBlock / kRpp;
    const int c = static_cast<int>(threadIdx.x) % kCpr;
    const int r0 = static_cast<int>(threadIdx.x) / kCpr;
    const int n = static_cast<int>(t.row_end - t.row_begin);
    float4 x[kPasses], y[kPasses];
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      x[i] = y[i] = make_float4(0.f, 0.f, 0.f, 0.f);
      const int r = r0 + i * kRpp;
      if (r < n) {
        const int64_t base = ((t.row_begin + r) * H + t.head) * kD + c * 8;
        x[i] = *reinterpret_cast<const float4*>(p.acc + base);
        y[i] = *reinterpret_cast<const float4*>(p.acc + base + 4);
      }
    }
    const float sc = s.scale;
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      const int r = r0 + i * kRpp;
      if (r < n) {
        const int64_t base = ((t.row_begin + r) * H + t.head) * kD + c * 8;
        uint4 out;
        out.x = Io<kBf16>::pack(x[i].x * sc, x[i].y * sc);
        out.y = Io<kBf16>::pack(x[i].z * sc, x[i].w * sc);
        out.z = Io<kBf16>::pack(y[i].x * sc, y[i].y * sc);
        out.w = Io<kBf16>::pack(y[i].z * sc, y[i].w * sc);
        *reinterpret_cast<uint4*>(dq + base) = out;
      }
    }
  });
}

// ---- dK, dV (and dQ by atomics) over kv tiles -------------------------------------------------
//
// Two warpgroups, warpgroup i owns kv rows [64 i, 64 i + 64) of the 128-row tile. Per block of
// 64 q rows: S^T = K Q^T and dP^T = V dO^T (SS, both K-major), P^T and dS^T in registers,
// dV += P^T dO and dK += dS^T Q (RS, B MN-major), and with kDq dQ = dS K from dS^T staged in
// shared memory (SS, both MN-major): split over the head dim (D = 128) or over the kv rows
// (D = 64, both warpgroups add into the accumulator). All tiles in 128-byte swizzle atoms.

template <int kD, bool kDq>
struct DkdvCfg {
  static constexpr int kBc = kKvBlock, kBr = 64, kThreads = 256;
  static constexpr int kTileKv = kBc * kD * 2, kTileQ = kBr * kD * 2, kTileS = kBc * kBr * 2;
  static constexpr int kOffV = kTileKv, kOffQ = 2 * kTileKv, kOffDo = kOffQ + 2 * kTileQ;
  static constexpr int kOffS = kOffDo + 2 * kTileQ;
  // dQ partials of the block (f32, rows padded by 8 floats): one [kBr][kD] for D = 128 (each
  // warpgroup its half of the columns), one per warpgroup for D = 64 (k split), summed on read.
  static constexpr int kLdq = kD + 8, kDqParts = kD == 128 ? 1 : 2;
  static constexpr int kOffDq = kOffS + (kDq ? kTileS : 0);
  static constexpr int kOffL = kOffDq + (kDq ? kDqParts * kBr * kLdq * 4 : 0);
  static constexpr int kOffDl = kOffL + 2 * kBr * 4;
  // + 1024: the base is aligned up to a swizzle atom.
  static constexpr std::size_t kSmem = kOffDl + 2 * kBr * 4 + 1024;
};

template <bool kBf16, int kD, bool kDq>
__global__ void __launch_bounds__(256, 1) dkdv_kernel(const Params p) {
  using C = DkdvCfg<kD, kDq>;
  using T = typename Io<kBf16>::T;
  constexpr int kBc = C::kBc, kBr = C::kBr, kThreads = C::kThreads;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  T* sK = reinterpret_cast<T*>(smem);
  T* sV = reinterpret_cast<T*>(smem + C::kOffV);
  T* sQ = reinterpret_cast<T*>(smem + C::kOffQ);            // [2] tiles
  T* sdO = reinterpret_cast<T*>(smem + C::kOffDo);          // [2] tiles
  unsigned char* sdS = smem + C::kOffS;                     // dS^T [kBc][kBr], only with kDq
  float* sL = reinterpret_cast<float*>(smem + C::kOffL);    // [2][kBr]
  float* sDl = reinterpret_cast<float*>(smem + C::kOffDl);  // [2][kBr]
  float* sdQ = reinterpret_cast<float*>(smem + C::kOffDq);  // [kDqParts][kBr][kLdq], kDq
  const uint32_t aK = smem_addr(sK), aV = smem_addr(sV), aQ = smem_addr(sQ), adO = smem_addr(sdO),
                 adS = smem_addr(sdS);

  const VarlenShape& s = p.a.shape;
  const int H = s.heads, Hk = s.kv_heads, G = H / Hk;
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, w = tid / 32;
  const int wg = w / 4, wl = w % 4;
  const int g = lane / 4, tq = lane % 4;
  const T* q = static_cast<const T*>(p.a.q);
  const T* k = static_cast<const T*>(p.a.k);
  const T* v = static_cast<const T*>(p.a.v);
  const T* d_o = static_cast<const T*>(p.a.d_o);
  const float sl2 = s.scale * kLog2e;

  for_each_task(s, p.a.kv_grid, kBc, false, Hk, [&](const Task& t) {
    const int hk = t.head;
    const int64_t kv_len = t.kv_end - t.kv_begin, q_len = t.q_end - t.q_begin;
    const int64_t off = kv_len - q_len;  // bottom-right causal: i sees j iff j <= i + off
    const int64_t j0 = t.row_begin - t.kv_begin;
    const int nkv = static_cast<int>(t.row_end - t.row_begin);
    const int64_t q_hi = covered_q_rows(p, t);
    const int64_t i_start = s.causal ? (j0 - off > 0 ? j0 - off : 0) : 0;
    const int64_t nb = q_hi > i_start ? (q_hi - i_start + kBr - 1) / kBr : 0;
    const int64_t blocks = nb * G;

    bwd::load_tile_sw128<kBc, kD, kThreads>(sK, k + (t.row_begin * Hk + hk) * kD,
                                            static_cast<int64_t>(Hk) * kD, nkv);
    bwd::load_tile_sw128<kBc, kD, kThreads>(sV, v + (t.row_begin * Hk + hk) * kD,
                                            static_cast<int64_t>(Hk) * kD, nkv);
    bwd::cp_async_commit();

    auto issue = [&](int64_t b) {
      const int h = hk * G + static_cast<int>(b / nb);
      const int64_t i0 = i_start + (b % nb) * kBr;
      const int nq = static_cast<int>(q_hi - i0 < kBr ? q_hi - i0 : kBr);
      const int64_t qrow0 = t.q_begin + i0;
      const int buf = static_cast<int>(b % 2);
      bwd::load_tile_sw128<kBr, kD, kThreads>(sQ + buf * kBr * kD, q + (qrow0 * H + h) * kD,
                                              static_cast<int64_t>(H) * kD, nq);
      bwd::load_tile_sw128<kBr, kD, kThreads>(sdO + buf * kBr * kD, d_o + (qrow0 * H + h) * kD,
                                              static_cast<int64_t>(H) * kD, nq);
      if (tid < kBr) {
        const bool ok = tid < nq;
        const int64_t at = ok ? (qrow0 + tid) * H + h : 0;
        bwd::cp_async4(sL + buf * kBr + tid, p.a.lse + at, ok ? 4 : 0);
        bwd::cp_async4(sDl + buf * kBr + tid, p.delta + at, ok ? 4 : 0);
      }
      bwd::cp_async_commit();
    };

    float dk[kD / 2], dv[kD / 2];
#pragma unroll
    for (int i = 0; i < kD / 2; ++i) dk[i] = dv[i] = 0.f;
    const int kv_r = w * 16 + g;  // this thread's kv rows kv_r, kv_r + 8 in the tile

    if (blocks > 0) issue(0);
    for (int64_t b = 0; b < blocks; ++b) {
      bwd::block_landed();
      if (b + 1 < blocks) issue(b + 1);
      const int h = hk * G + static_cast<int>(b / nb);
      const int64_t i0 = i_start + (b % nb) * kBr;
      const int nq = static_cast<int>(q_hi - i0 < kBr ? q_hi - i0 : kBr);
      const int64_t qrow0 = t.q_begin + i0;
      const int buf = static_cast<int>(b % 2);
      // Opaque bases: the descriptors are rebuilt per block, not held in registers across it.
      const uint32_t bK = bwd::opaque(aK), bV = bwd::opaque(aV);
      const uint32_t bQ = bwd::opaque(aQ) + buf * C::kTileQ,
                     bdO = bwd::opaque(adO) + buf * C::kTileQ;
      const float* bL = sL + buf * kBr;
      const float* bDl = sDl + buf * kBr;
      // Key j0 + r is seen by query i0 + c iff r - c <= i0 + off - j0 (causal). Clamped to
      // [-kBr, kBc], where the answer is already the same for every r, c of the block, and kBc
      // when not causal (always seen): the per-element test is one 32-bit compare.
      const int64_t reach = s.causal ? i0 + off - j0 : kBc;
      const int lim = static_cast<int>(reach < -kBr ? -kBr : (reach > kBc ? kBc : reach));

      // S^T = K Q^T, dP^T = V dO^T: 64 kv rows x 64 q rows per warpgroup, k = head dim.
      // Two groups: P^T is computed while dP^T is still in the tensor cores.
      float sacc[32], dpacc[32];
      bwd::two_products<kBf16, kD, kBc, kBr>(sacc, dpacc, bK + wg * 64 * 128, bQ,
                                             bV + wg * 64 * 128, bdO);

      // P^T, masked entries selected to 0 (lse = -inf or NaN fails `lv > -inf`).
      float pv[32];
#pragma unroll
      for (int n = 0; n < kBr / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = kv_r + (e / 2) * 8;
          const int c = n * 8 + 2 * tq + (e % 2);
          const float lv = bL[c];
          const bool ok = r < nkv && c < nq && r - c <= lim && lv > -INFINITY;
          pv[4 * n + e] = ok ? bwd::exp2_approx(sacc[4 * n + e] * sl2 - lv * kLog2e) : 0.f;
        }
      }
      bwd::wgmma_wait_all();
      bwd::fence_regs(dpacc);

      // dS^T = P^T * (dP^T - delta) (masked P^T is 0, so is dS^T), both packed as A tiles.
      uint32_t pa[kBr / 16][4], dsa[kBr / 16][4];
#pragma unroll
      for (int n = 0; n < kBr / 8; ++n) {
        float dsv[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int c = n * 8 + 2 * tq + (e % 2);
          dsv[e] = pv[4 * n + e] * (dpacc[4 * n + e] - bDl[c]);
        }
        pa[n / 2][(n % 2) * 2] = Io<kBf16>::pack(pv[4 * n], pv[4 * n + 1]);
        pa[n / 2][(n % 2) * 2 + 1] = Io<kBf16>::pack(pv[4 * n + 2], pv[4 * n + 3]);
        dsa[n / 2][(n % 2) * 2] = Io<kBf16>::pack(dsv[0], dsv[1]);
        dsa[n / 2][(n % 2) * 2 + 1] = Io<kBf16>::pack(dsv[2], dsv[3]);
      }
      if constexpr (kDq) {
        // dS^T rows kv_r and kv_r + 8 (both swizzled by g = kv_r % 8), q columns 8n + 2t.
        // Bits 4..6 of `row` are g: chunk n lands at chunk n ^ g by one XOR.
        const uint32_t row = bwd::opaque(adS) + kv_r * 128 + tq * 4 + (g << 4);
#pragma unroll
        for (int n = 0; n < kBr / 8; ++n) {
          const uint32_t at = row ^ (n << 4);
          bwd::st_shared_b32(at, dsa[n / 2][(n % 2) * 2]);
          bwd::st_shared_b32(at + 8 * 128, dsa[n / 2][(n % 2) * 2 + 1]);
        }
        bwd::fence_proxy_async();  // dS^T is read by wgmma
      }

      // dV += P^T dO, dK += dS^T Q: k = the block's q rows, B MN-major (head dim contiguous).
      bwd::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBr / 16; ++kk) {
        const uint32_t o = kk * 16 * 128;
        bwd::wgmma_rs<kBf16, 1>(dv, pa[kk], bwd::sw128_desc(bdO + o, kBr * 128, 1024));
        bwd::wgmma_rs<kBf16, 1>(dk, dsa[kk], bwd::sw128_desc(bQ + o, kBr * 128, 1024));
      }
      bwd::wgmma_commit();
      // Waiting here frees P^T and dS^T before dQ's accumulators go live (no spills at D = 128).
      bwd::wgmma_wait_all();
      bwd::fence_regs(dk);
      bwd::fence_regs(dv);
#pragma unroll
      for (int kk = 0; kk < kBr / 16; ++kk) {
        bwd::fence_regs(pa[kk]);
        bwd::fence_regs(dsa[kk]);
      }

      if constexpr (kDq) {
        __syncthreads();  // all of dS^T is in shared memory
        const uint32_t bdS = bwd::opaque(adS);
        float dqa[32];
#pragma unroll
        for (int i = 0; i < 32; ++i) dqa[i] = 0.f;
        bwd::wgmma_fence();
        if constexpr (kD == 128) {
          // dQ[:, 64 wg + 0..63] = dS K[:, 64 wg + 0..63], k = all 128 kv rows.
#pragma unroll
          for (int kk = 0; kk < kBc / 16; ++kk) {
            const uint32_t o = kk * 16 * 128;
            bwd::wgmma_ss<kBf16, 1, 1>(dqa, bwd::sw128_desc(bdS + o, kBc * 128, 1024),
                                       bwd::sw128_desc(bK + wg * kBc * 128 + o, kBc * 128, 1024));
          }
        } else {
          // dQ partial = dS[:, kv 64 wg..] K[kv 64 wg.., :], k = this warpgroup's kv rows.
#pragma unroll
          for (int kk = 0; kk < 4; ++kk) {
            const uint32_t o = (wg * 64 + kk * 16) * 128;
            bwd::wgmma_ss<kBf16, 1, 1>(dqa, bwd::sw128_desc(bdS + o, kBc * 128, 1024),
                                       bwd::sw128_desc(bK + o, kBc * 128, 1024));
          }
        }
        bwd::wgmma_commit();
        bwd::wgmma_wait_all();
        bwd::fence_regs(dqa);
        // Through shared memory, so that the accumulator gets coalesced 16-byte atomics.
        const uint32_t part =
            bwd::opaque(smem_addr(sdQ)) +
            4 * ((kD == 128 ? wg * 64 : wg * kBr * C::kLdq) + (wl * 16 + g) * C::kLdq + 2 * tq);
#pragma unroll
        for (int n = 0; n < 8; ++n) {
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            bwd::st_shared_v2(part + 4 * (half * 8 * C::kLdq + n * 8), dqa[4 * n + 2 * half],
                              dqa[4 * n + 2 * half + 1]);
          }
        }
        __syncthreads();
        constexpr int kC4 = kD / 4;
#pragma unroll 2  // few registers: the accumulators of dK, dV stay live
        for (int idx = tid; idx < kBr * kC4; idx += kThreads) {
          const int r = idx / kC4, c = (idx % kC4) * 4;
          if (r < nq) {
            float4 x = *reinterpret_cast<const float4*>(sdQ + r * C::kLdq + c);
            if constexpr (C::kDqParts == 2) {
              const float4 y = *reinterpret_cast<const float4*>(sdQ + (kBr + r) * C::kLdq + c);
              x.x += y.x;
              x.y += y.y;
              x.z += y.z;
              x.w += y.w;
            }
            atomicAdd(reinterpret_cast<float4*>(p.acc + ((qrow0 + r) * H + h) * kD + c), x);
          }
        }
      }
      // No barrier: block b + 1 refills this block's buffer (issue(b + 2)) and rewrites dS^T and
      // dQ only after its first barrier, which every thread reaches done with them (its wgmmas
      // waited for, its atomics issued).
    }

    // dK (times scale) and dV of the tile's rows; rows no query sees hold zeros.
    T* dk_out = static_cast<T*>(p.a.dk);
    T* dv_out = static_cast<T*>(p.a.dv);
#pragma unroll
    for (int n = 0; n < kD / 8; ++n) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = kv_r + half * 8;
        if (r < nkv) {
          const int64_t at = ((t.row_begin + r) * Hk + hk) * kD + n * 8 + 2 * tq;
          *reinterpret_cast<uint32_t*>(dk_out + at) =
              Io<kBf16>::pack(dk[4 * n + 2 * half] * s.scale, dk[4 * n + 2 * half + 1] * s.scale);
          *reinterpret_cast<uint32_t*>(dv_out + at) =
              Io<kBf16>::pack(dv[4 * n + 2 * half], dv[4 * n + 2 * half + 1]);
        }
      }
    }
    bwd::cp_async_wait_all();  // K, V still in flight when no q block ran
    __syncthreads();
  });
}

// ---- dQ over q tiles (deterministic mode) -----------------------------------------------------
//
// One warpgroup per (q tile of 64 rows, q head), looping over the kv blocks of 64 rows it sees:
// S = Q K^T and dP = dO V^T (SS, both K-major), dS in registers, dQ += dS K (RS, K MN-major).
// The order of the products is fixed: bitwise repeatable.

template <int kD>
struct DqCfg {
  static constexpr int kBr = kQBlock, kBc = 64, kThreads = 128;
  static constexpr int kTileQ = kBr * kD * 2, kTileKv = kBc * kD * 2;
  static constexpr int kOffDo = kTileQ, kOffK = 2 * kTileQ, kOffV = kOffK + 2 * kTileKv;
  static constexpr std::size_t kSmem = kOffV + 2 * kTileKv + 1024;
};

template <bool kBf16, int kD>
__global__ void __launch_bounds__(128) dq_kernel(const Params p) {
  using C = DqCfg<kD>;
  using T = typename Io<kBf16>::T;
  constexpr int kBr = C::kBr, kBc = C::kBc, kThreads = C::kThreads;
  extern __shared__ __align__(1024) unsigned char smem_dq[];
  unsigned char* smem = smem_dq + ((1024 - (smem_addr(smem_dq) & 1023)) & 1023);
  T* sQ = reinterpret_cast<T*>(smem);
  T* sdO = reinterpret_cast<T*>(smem + C::kOffDo);
  T* sK = reinterpret_cast<T*>(smem + C::kOffK);  // [2] tiles
  T* sV = reinterpret_cast<T*>(smem + C::kOffV);  // [2] tiles
  const uint32_t aQ = smem_addr(sQ), adO = smem_addr(sdO), aK = smem_addr(sK), aV = smem_addr(sV);

  const VarlenShape& s = p.a.shape;
  const int H = s.heads, Hk = s.kv_heads, G = H / Hk;
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, w = tid / 32;
  const int g = lane / 4, tq = lane % 4;
  const T* q = static_cast<const T*>(p.a.q);
  const T* k = static_cast<const T*>(p.a.k);
  const T* v = static_cast<const T*>(p.a.v);
  const T* d_o = static_cast<const T*>(p.a.d_o);
  const float sl2 = s.scale * kLog2e;

  for_each_task(s, p.a.q_grid, kBr, true, H, [&](const Task& t) {
    const int h = t.head, hk = h / G;
    const int64_t kv_len = t.kv_end - t.kv_begin, q_len = t.q_end - t.q_begin;
    const int64_t off = kv_len - q_len;
    const int64_t i0 = t.row_begin - t.q_begin;
    const int nq = static_cast<int>(t.row_end - t.row_begin);
    int64_t kv_hi = kv_len;  // keys [0, kv_hi) are seen by some row of the tile
    if (s.causal) {
      kv_hi = i0 + nq + off;
      kv_hi = kv_hi < 0 ? 0 : (kv_hi > kv_len ? kv_len : kv_hi);
    }
    const int64_t blocks = (kv_hi + kBc - 1) / kBc;

    bwd::load_tile_sw128<kBr, kD, kThreads>(sQ, q + (t.row_begin * H + h) * kD,
                                            static_cast<int64_t>(H) * kD, nq);
    bwd::load_tile_sw128<kBr, kD, kThreads>(sdO, d_o + (t.row_begin * H + h) * kD,
                                            static_cast<int64_t>(H) * kD, nq);
    bwd::cp_async_commit();

    auto issue = [&](int64_t b) {
      const int64_t jb = b * kBc;
      const int nk = static_cast<int>(kv_len - jb < kBc ? kv_len - jb : kBc);
      const int64_t krow0 = t.kv_begin + jb;
      const int buf = static_cast<int>(b % 2);
      bwd::load_tile_sw128<kBc, kD, kThreads>(sK + buf * kBc * kD, k + (krow0 * Hk + hk) * kD,
                                              static_cast<int64_t>(Hk) * kD, nk);
      bwd::load_tile_sw128<kBc, kD, kThreads>(sV + buf * kBc * kD, v + (krow0 * Hk + hk) * kD,
                                              static_cast<int64_t>(Hk) * kD, nk);
      bwd::cp_async_commit();
    };

    // This thread's rows 16 w + g and + 8: their lse (as log2) and delta.
    float L[2], dl[2];
    bool live[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = w * 16 + g + half * 8;
      L[half] = 0.f;
      dl[half] = 0.f;
      live[half] = false;
      if (r < nq) {
        const float l = p.a.lse[(t.row_begin + r) * H + h];
        live[half] = l > -INFINITY;  // a row that sees no key (lse = -inf) adds nothing
        L[half] = l * kLog2e;
        dl[half] = p.delta[(t.row_begin + r) * H + h];
      }
    }

    float dqa[kD / 2];
#pragma unroll
    for (int i = 0; i < kD / 2; ++i) dqa[i] = 0.f;

    if (blocks > 0) issue(0);
    for (int64_t b = 0; b < blocks; ++b) {
      bwd::block_landed();
      if (b + 1 < blocks) issue(b + 1);
      const int64_t jb = b * kBc;
      const int nk = static_cast<int>(kv_len - jb < kBc ? kv_len - jb : kBc);
      const int buf = static_cast<int>(b % 2);
      const uint32_t bQ = bwd::opaque(aQ), bdO = bwd::opaque(adO);
      const uint32_t bK = bwd::opaque(aK) + buf * C::kTileKv,
                     bV = bwd::opaque(aV) + buf * C::kTileKv;
      // Query i0 + r sees key jb + c iff c - r <= i0 + off - jb (causal); clamped to [-kBr, kBc]
      // (the same answer for the whole block beyond), kBc when not causal: a 32-bit compare.
      const int64_t reach = s.causal ? i0 + off - jb : kBc;
      const int lim = static_cast<int>(reach < -kBr ? -kBr : (reach > kBc ? kBc : reach));

      // S = Q K^T, dP = dO V^T: 64 q rows x 64 kv rows, k = head dim.
      // Two groups: P is computed while dP is still in the tensor cores.
      float sacc[32], dpacc[32];
      bwd::two_products<kBf16, kD, kBr, kBc>(sacc, dpacc, bQ, bK, bdO, bV);
      float pv[32];
#pragma unroll
      for (int n = 0; n < kBc / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = w * 16 + g + (e / 2) * 8;
          const int c = n * 8 + 2 * tq + (e % 2);
          const bool ok = live[e / 2] && c < nk && c - r <= lim;
          pv[4 * n + e] = ok ? bwd::exp2_approx(sacc[4 * n + e] * sl2 - L[e / 2]) : 0.f;
        }
      }
      bwd::wgmma_wait_all();
      bwd::fence_regs(dpacc);

      uint32_t dsa[kBc / 16][4];
#pragma unroll
      for (int n = 0; n < kBc / 8; ++n) {
        float dsv[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) dsv[e] = pv[4 * n + e] * (dpacc[4 * n + e] - dl[e / 2]);
        dsa[n / 2][(n % 2) * 2] = Io<kBf16>::pack(dsv[0], dsv[1]);
        dsa[n / 2][(n % 2) * 2 + 1] = Io<kBf16>::pack(dsv[2], dsv[3]);
      }

      // dQ += dS K: k = the block's kv rows, K MN-major (head dim contiguous).
      bwd::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBc / 16; ++kk) {
        bwd::wgmma_rs<kBf16, 1>(dqa, dsa[kk], bwd::sw128_desc(bK + kk * 16 * 128, kBc * 128, 1024));
      }
      bwd::wgmma_commit();
      bwd::wgmma_wait_all();
      bwd::fence_regs(dqa);
#pragma unroll
      for (int kk = 0; kk < kBc / 16; ++kk) bwd::fence_regs(dsa[kk]);
      // No barrier: block b + 1 refills this buffer (issue(b + 2)) only after its first barrier.
    }
    bwd::cp_async_wait_all();  // Q, dO still in flight when no kv block ran

    T* dq = static_cast<T*>(p.a.dq);
#pragma unroll
    for (int n = 0; n < kD / 8; ++n) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = w * 16 + g + half * 8;
        if (r < nq) {
          const int64_t at = ((t.row_begin + r) * H + h) * kD + n * 8 + 2 * tq;
          *reinterpret_cast<uint32_t*>(dq + at) =
              Io<kBf16>::pack(dqa[4 * n + 2 * half] * s.scale, dqa[4 * n + 2 * half + 1] * s.scale);
        }
      }
    }
    __syncthreads();
  });
}

// ---- host side ----------------------------------------------------------------------------------

bool supported(const VarlenShape& s) {
  return (s.dtype == DType::bf16 || s.dtype == DType::f16) && s.head_dim == s.value_dim &&
         (s.head_dim == 64 || s.head_dim == 128) && s.heads > 0 && s.kv_heads > 0 &&
         s.heads % s.kv_heads == 0 && s.heads <= 65535 && s.slots >= 1 && s.rows_q >= 0 &&
         s.rows_kv >= 0;
}

std::size_t align256(std::size_t n) {
  return (n + 255) / 256 * 256;
}
std::size_t delta_bytes(const VarlenShape& s) {
  return align256(static_cast<std::size_t>(s.rows_q) * s.heads * sizeof(float));
}
std::size_t acc_bytes(const VarlenShape& s) {
  return align256(static_cast<std::size_t>(s.rows_q) * s.heads * s.head_dim * sizeof(float));
}

// Launches `kernel` over `g` (grid.y / the persistent task axis = `heads`).
template <class Kernel>
bool launch(Kernel kernel, const TaskGrid& g, int heads, int threads, std::size_t smem,
            cudaStream_t stream, const Params& p) {
  if (g.capacity_tiles <= 0) return true;
  if (g.tile_offsets == nullptr) return false;
  if (smem > 48 * 1024 && cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(smem)) != cudaSuccess) {
    return false;
  }
  dim3 grid;
  if (g.schedule == Schedule::flat) {
    if (g.capacity_tiles > INT_MAX) return false;
    grid = dim3(static_cast<unsigned>(g.capacity_tiles), static_cast<unsigned>(heads));
  } else {
    int per_sm = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem) !=
        cudaSuccess) {
      return false;
    }
    grid = dim3(static_cast<unsigned>(persistent_workers(g, heads, per_sm > 0 ? per_sm : 1)));
  }
  kernel<<<grid, threads, smem, stream>>>(p);
  return cudaPeekAtLastError() == cudaSuccess;
}

template <bool kBf16, int kD, bool kDq>
bool launch_dkdv(const TaskGrid& g, int heads, cudaStream_t stream, const Params& p) {
  using C = DkdvCfg<kD, kDq>;
  return launch(dkdv_kernel<kBf16, kD, kDq>, g, heads, C::kThreads, C::kSmem, stream, p);
}

template <bool kBf16, int kD>
bool run(const BwdArgs& a, void* workspace, cudaStream_t stream) {
  const VarlenShape& s = a.shape;
  Params p;
  p.a = a;
  p.delta = static_cast<float*>(workspace);
  p.acc = a.deterministic
              ? nullptr
              : reinterpret_cast<float*>(static_cast<unsigned char*>(workspace) + delta_bytes(s));
  p.q_tiles = a.q_grid.capacity_tiles > 0 ? a.q_grid.tile_offsets : nullptr;
  const int H = s.heads, Hk = s.kv_heads;
  if (!launch(preprocess_kernel<kBf16, kD>, a.q_grid, H, kRowThreads, 0, stream, p)) return false;
  if (a.deterministic) {
    if (!launch_dkdv<kBf16, kD, false>(a.kv_grid, Hk, stream, p)) return false;
    return launch(dq_kernel<kBf16, kD>, a.q_grid, H, DqCfg<kD>::kThreads, DqCfg<kD>::kSmem, stream,
                  p);
  }
  if (!launch_dkdv<kBf16, kD, true>(a.kv_grid, Hk, stream, p)) return false;
  return launch(postprocess_kernel<kBf16, kD>, a.q_grid, H, kRowThreads, 0, stream, p);
}

}  // namespace

int bwd_kv_block_rows(const VarlenShape& shape) {
  return supported(shape) ? kKvBlock : 0;
}
int bwd_q_block_rows(const VarlenShape& shape) {
  return supported(shape) ? kQBlock : 0;
}

std::size_t bwd_workspace_bytes(const VarlenShape& shape, bool deterministic) {
  if (!supported(shape)) return 0;
  return delta_bytes(shape) + (deterministic ? 0 : acc_bytes(shape));
}

bool varlen_bwd(const BwdArgs& args, void* workspace, void* stream) noexcept {
  const VarlenShape& s = args.shape;
  if (!supported(s)) return false;
  if (args.q_grid.capacity_tiles <= 0 && args.kv_grid.capacity_tiles <= 0) return true;
  if (!s.cu_q || !s.cu_kv || !args.q || !args.k || !args.v || !args.o || !args.d_o || !args.lse ||
      !args.dq || !args.dk || !args.dv) {
    return false;
  }
  if (bwd_workspace_bytes(s, args.deterministic) > 0 && workspace == nullptr) return false;
  const cudaStream_t st = static_cast<cudaStream_t>(stream);
  const bool bf16 = s.dtype == DType::bf16;
  if (s.head_dim == 64) {
    return bf16 ? run<true, 64>(args, workspace, st) : run<false, 64>(args, workspace, st);
  }
  return bf16 ? run<true, 128>(args, workspace, st) : run<false, 128>(args, workspace, st);
}

}  // namespace eagle::native::attention
