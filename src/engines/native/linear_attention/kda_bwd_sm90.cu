// The chunked kda / gdn2 backward (kda_bwd_kernels.hpp): the forward's recomputation, then the
// dstate, dmat, dqkg and finish launches over the flat chunk list (ragged::chunk_task), C = 64.
//
// Per chunk, with q~ = scale q / |q|, k~ = k / |k| (or without the norms), bk = b k~ (kda: b =
// beta), G the chunk's cumsum of g, h the state before the chunk and dh the gradient of the state
// after it, the forward is v' = U - W h, o = (q~ e^G) h + Aqk v',
// h' = diag(e^{G_last}) h + (k~ e^{G_last - G})^T v', U = T (w v), W = T (bk e^G),
// T = (I + A)^-1, A = strictly-lower (bk)(k~ e^{G_i - G_j})^T, Aqk = lower q~ (k~ e^{G_i - G_j})^T.
// Its gradients: dv' = Aqk^T dO + (k~ e^{G_last - G}) dh, d(w v) = T^T dv', d(bk e^G) = T^T dW
// with dW = -dv' h^T, and dA = -T^T dT T^T = -(d(w v) U^T + d(bk e^G) W^T) (strictly lower);
// the products with e^{G_i - G_j} are then taken per channel (j <= i: every factor <= 1).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "eagle/ragged/schedule.hpp"
#include "engines/native/linear_attention/chunk_common.cuh"
#include "engines/native/linear_attention/cp_async.cuh"
#include "engines/native/linear_attention/kda_bwd_common.cuh"
#include "engines/native/linear_attention/kda_bwd_dqkg.cuh"
#include "engines/native/linear_attention/kda_bwd_dstate_rows.cuh"
#include "engines/native/linear_attention/kda_bwd_kernels.hpp"
#include "engines/native/linear_attention/kda_fwd_common.cuh"
#include "engines/native/linear_attention/kda_mma.cuh"
#include "engines/native/linear_attention/vec8.cuh"

namespace eagle::native::kda {

namespace {

using bwd::BwdScratch;
using bwd::C;
using bwd::chunk_of;
using bwd::kQkgThreads;
using bwd::Params;
using bwd::view;
constexpr int kStateThreads = 128, kMatThreads = 256, kFinishThreads = 128;
constexpr int kStateBlockV = 32;  // value columns of dh per dstate CTA
constexpr std::size_t kAlign = 256;

std::size_t round_up(std::size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

using fwd::from_f;
using fwd::to_f;

// ROWS rows of COLS bf16 from global (row stride COLS) to shared (stride ld) by cp.async: in
// flight until the caller's cp_async_commit, cp_async_wait and __syncthreads. Threads: the CTA's
// threads where known at compile time (the copy loop unrolls), else 0.
template <int COLS, int ROWS, int Threads = 0>
__device__ __forceinline__ void copy_tile(bf16* dst, int ld, const bf16* src) {
  linear_attention::load_chunk_rows<bf16, COLS, ROWS, true, Threads>(dst, ld, src, COLS, ROWS);
}
// Waits for this thread's copies; a __syncthreads then shows every thread's.
__device__ __forceinline__ void wait_tiles() {
  linear_attention::cp_async_commit();
  linear_attention::cp_async_wait<0>();
}

// Rows of d_o (value head hv, columns c0 .. c0 + COLS) of a chunk as bf16; rows at or past n
// become zero (d_o's padding rows are never read).
template <typename T, int COLS, int Threads>
__device__ __forceinline__ void load_d_o(bf16* dst, int ld, const Params& p, int64_t row0, int n,
                                         int hv, int c0) {
  const T* d_o = static_cast<const T*>(p.d_o);
  const int64_t HV = p.s.value_heads, D = p.s.dim;
  for (int i = threadIdx.x; i < C * COLS; i += Threads) {
    const int r = i / COLS, c = i % COLS;
    const float x = r < n ? to_f(d_o[((row0 + r) * HV + hv) * D + c0 + c]) : 0.f;
    dst[r * ld + c] = __float2bfloat16(x);
  }
}

using bwd::dqkg_kernel;
using bwd::QkgLayout;
using bwd::QkgTcLayout;

// ---- dstate: the reverse pass over a sequence's chunks ---------------------------------------

// Pipelined (Shape::pipelined_dstate): two buffers of a chunk's tiles and e^{G_last}, the
// previous chunk's (the pass runs backwards) copied by cp.async while this one is computed.
template <int D, int BV, bool Pipelined>
struct DStateLayout {
  static constexpr int SB = D + 8, SV = BV + 8, ST = C + 8;
  static constexpr int kBuffers = Pipelined ? 2 : 1;
  // bf16, per buffer: Aqk [C][ST], kg, W, qg [C][SB]; then dO [C][SV], dh [D][SV], dv' [C][SV];
  // then e^{G_last} [kBuffers][D] f32.
  static constexpr int M = 0, KL = M + C * ST, W = KL + C * SB, QG = W + C * SB;
  static constexpr int kBufElems = QG + C * SB;
  static constexpr int DO = kBuffers * kBufElems, DH = DO + C * SV, DV = DH + D * SV;
  static constexpr int end = DV + C * SV;
  static_assert(end % 8 == 0, "e^{G_last} must start 16-byte aligned");
  static constexpr std::size_t bytes =
      static_cast<std::size_t>(end) * 2 + static_cast<std::size_t>(kBuffers) * D * sizeof(float);
};

template <typename T, int D, int BV, bool Pipelined>
__device__ __forceinline__ void dstate_slot(const Params& p, int64_t s, int vb) {
  using L = DStateLayout<D, BV, Pipelined>;
  constexpr int SB = L::SB, SV = L::SV, ST = L::ST, MT = D / 64, NT = BV / 8;
  extern __shared__ float4 smem4[];
  bf16* sb = reinterpret_cast<bf16*>(smem4);
  bf16 *DOs = sb + L::DO, *DHs = sb + L::DH, *DVs = sb + L::DV;
  float* gl_buffers = reinterpret_cast<float*>(sb + L::end);
  // Chunk slab `at`'s tiles and e^{G_last} into buffer b by cp.async (in flight until waited).
  auto copy_chunk = [&](int64_t at, int b) {
    bf16* buf = sb + b * L::kBufElems;
    copy_tile<C, C>(buf + L::M, ST, view(p.f.aqk, at, C * C));
    copy_tile<D, C>(buf + L::KL, SB, view(p.f.kg, at, C * D));
    copy_tile<D, C>(buf + L::W, SB, view(p.f.w, at, C * D));
    copy_tile<D, C>(buf + L::QG, SB, view(p.f.qg, at, C * D));
    for (int i = threadIdx.x; i < D / 4; i += kStateThreads)
      linear_attention::cp_async16(gl_buffers + b * D + 4 * i, p.f.gl + at * D + 4 * i, true);
  };
  const int warp = threadIdx.x >> 5;
  const int hv = blockIdx.y, v0 = vb * BV, HV = p.s.value_heads;
  const int m_base = warp * (D / 4);  // this warp's rows of dh

  float dh[MT][NT][4];
  const int64_t state_at = (s * HV + hv) * static_cast<int64_t>(D) * D;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int t = 0; t < NT; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int d = acc_row(m_base + 16 * mt, e), c = v0 + acc_col(8 * t, e);
        dh[mt][t][e] = p.dht ? p.dht[state_at + static_cast<int64_t>(d) * D + c] : 0.f;
      }

  const int64_t first = p.offsets[s], last = p.offsets[s + 1];
  if constexpr (Pipelined) {
    if (first < last) copy_chunk((last - 1) * HV + hv, 0);
    linear_attention::cp_async_commit();
  }
  for (int64_t j = last - 1; j >= first; --j) {
    const int64_t at = j * HV + hv;
    const ragged::ChunkTask task = chunk_of(p, j);
    const int n = static_cast<int>(task.row_end - task.row_begin);
    const int b = Pipelined ? static_cast<int>((last - 1 - j) & 1) : 0;
    bf16* buf = sb + b * L::kBufElems;
    bf16 *Ms = buf + L::M, *KLs = buf + L::KL, *Ws = buf + L::W, *QGs = buf + L::QG;
    const float* GLs = gl_buffers + b * D;
    if constexpr (Pipelined) {
      // The other buffer was last read in the chunk after this one, before its closing
      // __syncthreads: the chunk before this one goes there while this one is computed.
      if (j - 1 >= first) copy_chunk((j - 1) * HV + hv, b ^ 1);
      linear_attention::cp_async_commit();
    } else {
      copy_chunk(at, 0);
      linear_attention::cp_async_commit();
    }
    load_d_o<T, BV, kStateThreads>(DOs, SV, p, task.row_begin, n, hv, v0);
    bf16* dhg = p.ws.dh + at * D * D;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int t = 0; t < NT; ++t)
#pragma unroll
        for (int e = 0; e < 4; e += 2) {
          const int d = acc_row(m_base + 16 * mt, e), c = acc_col(8 * t, e);
          const __nv_bfloat162 x = __floats2bfloat162_rn(dh[mt][t][e], dh[mt][t][e + 1]);
          *reinterpret_cast<__nv_bfloat162*>(DHs + d * SV + c) = x;
          *reinterpret_cast<__nv_bfloat162*>(dhg + static_cast<int64_t>(d) * D + v0 + c) = x;
        }
    // This chunk's group (pipelined: the next one may fly on).
    if constexpr (Pipelined)
      linear_attention::cp_async_wait<1>();
    else
      linear_attention::cp_async_wait<0>();
    __syncthreads();

    // dv' = Aqk^T dO + kg dh: warp w owns chunk rows 16 w .. 16 w + 15.
    {
      float acc[NT][4] = {};
      mma_rows<false, false, NT>(acc, Ms, ST, 16 * warp, DOs, SV, 0, C);
      mma_rows<true, false, NT>(acc, KLs, SB, 16 * warp, DHs, SV, 0, D);
      bf16* dvn = p.ws.dvn + at * C * D;
#pragma unroll
      for (int t = 0; t < NT; ++t)
#pragma unroll
        for (int e = 0; e < 4; e += 2) {
          const int r = acc_row(16 * warp, e), c = acc_col(8 * t, e);
          const __nv_bfloat162 x = __floats2bfloat162_rn(acc[t][e], acc[t][e + 1]);
          *reinterpret_cast<__nv_bfloat162*>(DVs + r * SV + c) = x;
          *reinterpret_cast<__nv_bfloat162*>(dvn + r * D + v0 + c) = x;
        }
    }
    __syncthreads();

    // dh <- diag(e^{G_last}) dh + qg^T dO - W^T dv'.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int t = 0; t < NT; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) dh[mt][t][e] *= GLs[acc_row(m_base + 16 * mt, e)];
      mma_rows<false, false, NT>(dh[mt], QGs, SB, m_base + 16 * mt, DOs, SV, 0, C);
      float wd[NT][4] = {};
      mma_rows<false, false, NT>(wd, Ws, SB, m_base + 16 * mt, DVs, SV, 0, C);
#pragma unroll
      for (int t = 0; t < NT; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) dh[mt][t][e] -= wd[t][e];
    }
    __syncthreads();
  }

  if (p.dh0) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int t = 0; t < NT; ++t)
#pragma unroll
        for (int e = 0; e < 4; e += 2) {
          const int d = acc_row(m_base + 16 * mt, e), c = v0 + acc_col(8 * t, e);
          *reinterpret_cast<float2*>(p.dh0 + state_at + static_cast<int64_t>(d) * D + c) =
              make_float2(dh[mt][t][e], dh[mt][t][e + 1]);
        }
  }
}

// A (slot, V block) per CTA (flat) or a CTA's in turn (persistent).
template <typename T, int D, int BV, bool Pipelined>
__global__ void __launch_bounds__(kStateThreads) dstate_kernel(const Params p) {
  linear_attention::for_each_slot_block<D / BV>(
      p.s.slots, p.s.persistent_state,
      [&](int64_t s, int vb) { dstate_slot<T, D, BV, Pipelined>(p, s, vb); });
}

// ---- dmat: the plain products of a chunk -----------------------------------------------------

template <int D>
struct MatLayout {
  static constexpr int SB = D + 8, ST = C + 8;
  // bf16: dO [C][SB], h [D][SB], dh [D][SB], v' [C][SB], dv' [C][SB], T [C][ST], dW [C][SB];
  // later U over dO, W over v', d(w v) over h, d(bk e^G) over dh. Then [2][C] f32 row sums.
  static constexpr int DO = 0, HS = DO + C * SB, DH = HS + D * SB, VN = DH + D * SB;
  static constexpr int DVN = VN + C * SB, TT = DVN + C * SB, DW = TT + C * ST, end = DW + C * SB;
  static constexpr std::size_t bytes = static_cast<std::size_t>(end) * 2 + 2 * C * sizeof(float);
};

// f32 [.][ld] stores of a warp's 16 x 8 NT accumulator tiles at (m0, n0), times `sign`.
template <int NT>
__device__ __forceinline__ void store_f32(float* g, int ld, const float (&acc)[NT][4], int m0,
                                          int n0, float sign) {
#pragma unroll
  for (int t = 0; t < NT; ++t)
#pragma unroll
    for (int e = 0; e < 4; e += 2) {
      const int r = acc_row(m0, e), c = acc_col(n0 + 8 * t, e);
      *reinterpret_cast<float2*>(g + r * ld + c) =
          make_float2(sign * acc[t][e], sign * acc[t][e + 1]);
    }
}
template <int NT>
__device__ __forceinline__ void store_bf16(bf16* s, int ld, const float (&acc)[NT][4], int m0,
                                           int n0, float sign) {
#pragma unroll
  for (int t = 0; t < NT; ++t)
#pragma unroll
    for (int e = 0; e < 4; e += 2) {
      const int r = acc_row(m0, e), c = acc_col(n0 + 8 * t, e);
      *reinterpret_cast<__nv_bfloat162*>(s + r * ld + c) =
          __floats2bfloat162_rn(sign * acc[t][e], sign * acc[t][e + 1]);
    }
}
// A [C][C] product's tiles, masked to the lower triangle (with or without the diagonal).
template <int NT>
__device__ __forceinline__ void store_lower(float* g, const float (&acc)[NT][4], int m0, int n0,
                                            float sign, bool diagonal) {
#pragma unroll
  for (int t = 0; t < NT; ++t)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = acc_row(m0, e), c = acc_col(n0 + 8 * t, e);
      g[r * C + c] = (c < r || (diagonal && c == r)) ? sign * acc[t][e] : 0.f;
    }
}

template <typename T, int D, Gates GT>
__device__ __forceinline__ bool dmat_chunk(const Params& p, int64_t j) {
  using L = MatLayout<D>;
  // Each warp: 16 rows and half the columns, NW (of D) or NC (of C) tiles of 8.
  constexpr int SB = L::SB, ST = L::ST, NW = D / 16, NC = C / 16;
  extern __shared__ float4 smem4[];
  bf16* sb = reinterpret_cast<bf16*>(smem4);
  bf16 *DOs = sb + L::DO, *HSs = sb + L::HS, *DHs = sb + L::DH, *VNs = sb + L::VN;
  bf16 *DVNs = sb + L::DVN, *TTs = sb + L::TT, *DWs = sb + L::DW;
  bf16 *Us = DOs, *WWs = VNs, *DWVs = HSs, *DBGs = DHs;
  float* part = reinterpret_cast<float*>(sb + L::end);  // [2][C]
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int m0 = 16 * (warp & 3), half = warp >> 2;
  const int hv = blockIdx.y, HV = p.s.value_heads;
  const ragged::ChunkTask task = chunk_of(p, j);
  if (task.sequence < 0) return false;
  const int n = static_cast<int>(task.row_end - task.row_begin);
  const int64_t at = j * HV + hv;

  load_d_o<T, D, kMatThreads>(DOs, SB, p, task.row_begin, n, hv, 0);
  copy_tile<D, D, kMatThreads>(HSs, SB, view(p.f.h, at, D * D));
  copy_tile<D, D, kMatThreads>(DHs, SB, p.ws.dh + at * D * D);
  copy_tile<D, C, kMatThreads>(VNs, SB, view(p.f.vn, at, C * D));
  copy_tile<D, C, kMatThreads>(DVNs, SB, p.ws.dvn + at * C * D);
  copy_tile<C, C, kMatThreads>(TTs, ST, view(p.f.t, at, C * C));
  wait_tiles();
  __syncthreads();

  {  // d(q e^G) = dO h^T
    float acc[NW][4] = {};
    mma_rows<true, true, NW>(acc, DOs, SB, m0, HSs, SB, half * D / 2, D);
    store_f32<NW>(p.ws.dqg + at * C * D, D, acc, m0, half * D / 2, 1.f);
  }
  {  // d(k e^{G_last - G}) = v' dh^T
    float acc[NW][4] = {};
    mma_rows<true, true, NW>(acc, VNs, SB, m0, DHs, SB, half * D / 2, D);
    store_f32<NW>(p.ws.dkl + at * C * D, D, acc, m0, half * D / 2, 1.f);
  }
  {  // dW = -dv' h^T
    float acc[NW][4] = {};
    mma_rows<true, true, NW>(acc, DVNs, SB, m0, HSs, SB, half * D / 2, D);
    store_bf16<NW>(DWs, SB, acc, m0, half * D / 2, -1.f);
  }
  {  // dAqk = dO v'^T, lower with the diagonal
    float acc[NC][4] = {};
    mma_rows<true, true, NC>(acc, DOs, SB, m0, VNs, SB, half * C / 2, D);
    store_lower<NC>(p.ws.dm + at * C * C, acc, m0, half * C / 2, 1.f, true);
  }
  // d e^{G_last} = sum_v h dh, times e^{G_last}: each warp 16 rows (channels) at a time.
  for (int c0 = 16 * warp; c0 < D; c0 += kMatThreads / 2) {
    const float sum = linear_attention::warp_rows16_dot<bf16, D>(HSs, DHs, SB, c0);
    if (lane < 16) p.ws.dgl[at * D + c0 + lane] = sum * p.f.gl[at * D + c0 + lane];
  }
  __syncthreads();

  copy_tile<D, C, kMatThreads>(Us, SB, view(p.f.u, at, C * D));
  copy_tile<D, C, kMatThreads>(WWs, SB, view(p.f.w, at, C * D));
  {  // d(w v) = T^T dv': dv = d(w v) w, dw = d(w v) v (kda: their beta, summed per row)
    float acc[NW][4] = {};
    mma_rows<false, false, NW>(acc, TTs, ST, m0, DVNs, SB, half * D / 2, C);
    const T* v = static_cast<const T*>(p.v);
    T* dv = static_cast<T*>(p.dv);
    float rows[2] = {0.f, 0.f};
#pragma unroll
    for (int t = 0; t < NW; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = acc_row(m0, e), c = acc_col(half * D / 2 + 8 * t, e);
        if (r >= n) continue;
        const int64_t row = task.row_begin + r, vh = (row * HV + hv) * D + c;
        const float x = acc[t][e], vv = to_f(v[vh]);
        if constexpr (GT == Gates::kda) {
          if (dv) dv[vh] = from_f<T>(x * p.beta[row * HV + hv]);
          rows[e >> 1] += x * vv;
        } else {
          if (dv) dv[vh] = from_f<T>(x * p.w[vh]);
          if (p.dw) p.dw[vh] = x * vv;
        }
      }
    if constexpr (GT == Gates::kda) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        rows[h] += __shfl_xor_sync(0xffffffffu, rows[h], 1);
        rows[h] += __shfl_xor_sync(0xffffffffu, rows[h], 2);
      }
      if ((lane & 3) == 0) {
        part[half * C + acc_row(m0, 0)] = rows[0];
        part[half * C + acc_row(m0, 2)] = rows[1];
      }
    }
    store_bf16<NW>(DWVs, SB, acc, m0, half * D / 2, 1.f);
  }
  {  // d(bk e^G) = T^T dW
    float acc[NW][4] = {};
    mma_rows<false, false, NW>(acc, TTs, ST, m0, DWs, SB, half * D / 2, C);
    store_f32<NW>(p.ws.dbg + at * C * D, D, acc, m0, half * D / 2, 1.f);
    store_bf16<NW>(DBGs, SB, acc, m0, half * D / 2, 1.f);
  }
  wait_tiles();  // U and W, in flight since before the two products above
  __syncthreads();
  {  // dA = -(d(w v) U^T + d(bk e^G) W^T), strictly lower
    float acc[NC][4] = {};
    mma_rows<true, true, NC>(acc, DWVs, SB, m0, Us, SB, half * C / 2, D);
    mma_rows<true, true, NC>(acc, DBGs, SB, m0, WWs, SB, half * C / 2, D);
    store_lower<NC>(p.ws.da + at * C * C, acc, m0, half * C / 2, -1.f, false);
  }
  if constexpr (GT == Gates::kda) {
    for (int r = threadIdx.x; r < C; r += kMatThreads) p.ws.dbv[at * C + r] = part[r] + part[C + r];
  }
  return true;
}

// A chunk task per CTA (flat) or a CTA's tasks in turn (persistent).
template <typename T, int D, Gates GT>
__global__ void __launch_bounds__(kMatThreads) dmat_kernel(const Params p) {
  linear_attention::for_each_task(p.cap, p.s.persistent,
                                  [&](int64_t j) { return dmat_chunk<T, D, GT>(p, j); });
}

// ---- finish: per row, GQA sums, the norms' backward, zeros in padding rows -------------------

__device__ __forceinline__ int64_t clamp_row(int64_t x, int64_t lo, int64_t hi) {
  return x < lo ? lo : (x > hi ? hi : x);
}

template <typename T, int D>
__global__ void __launch_bounds__(kFinishThreads) finish_kernel(const Params p) {
  constexpr int PL = D / 32;  // channels per lane
  const int64_t row = blockIdx.x;
  const int H = p.s.heads, HV = p.s.value_heads, group = HV / H;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t lo = clamp_row(p.s.cu[0], 0, p.s.rows);
  const int64_t hi = clamp_row(p.s.cu[p.s.slots], lo, p.s.rows);
  T* dq = static_cast<T*>(p.dq);
  T* dk = static_cast<T*>(p.dk);
  if (row < lo || row >= hi) {
    T* dv = static_cast<T*>(p.dv);
    for (int i = threadIdx.x; i < H * D; i += kFinishThreads) {
      if (dq) dq[row * H * D + i] = from_f<T>(0.f);
      if (dk) dk[row * H * D + i] = from_f<T>(0.f);
    }
    for (int i = threadIdx.x; i < HV * D; i += kFinishThreads) {
      const int64_t at = row * HV * D + i;
      if (dv) dv[at] = from_f<T>(0.f);
      if (p.dg) p.dg[at] = 0.f;
      if (p.db) p.db[at] = 0.f;
      if (p.dw) p.dw[at] = 0.f;
    }
    for (int i = threadIdx.x; i < HV; i += kFinishThreads)
      if (p.dbeta) p.dbeta[row * HV + i] = 0.f;
    return;
  }
  for (int task = warp; task < 2 * H; task += kFinishThreads / 32) {
    const bool is_q = task < H;
    const int hq = is_q ? task : task - H;
    T* out = is_q ? dq : dk;
    if (!out) continue;
    const T* x_in = static_cast<const T*>(is_q ? p.q : p.k);
    const float* part = is_q ? p.ws.pq : p.ws.pk;
    const float mul = is_q ? p.s.scale : 1.f;
    // Lane l takes channels PL l .. PL l + PL - 1: the f32 sums (workspace rows, 16-byte
    // aligned) in one PL-wide load per value head.
    using Vec = std::conditional_t<PL == 4, float4, float2>;
    static_assert(PL == 4 || PL == 2, "D = 128 or 64");
    const int c0 = PL * lane;
    float x[PL], d[PL] = {};
    float ss = 0, dot = 0;
    for (int m = 0; m < group; ++m) {
      const Vec v = *reinterpret_cast<const Vec*>(part + (row * HV + hq * group + m) * D + c0);
      const float* vf = reinterpret_cast<const float*>(&v);
#pragma unroll
      for (int u = 0; u < PL; ++u) d[u] += vf[u];
    }
#pragma unroll
    for (int u = 0; u < PL; ++u) {
      x[u] = to_f(x_in[(row * H + hq) * D + c0 + u]);
      ss += x[u] * x[u];
      dot += x[u] * d[u];
    }
    float r = 1.f;
    if (p.s.l2norm) {
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        ss += __shfl_xor_sync(0xffffffffu, ss, o);
        dot += __shfl_xor_sync(0xffffffffu, dot, o);
      }
      r = rsqrtf(ss + 1e-6f);
    }
    // dx = mul r (d - n (n . d)) with n = x r; without the norm r = 1 and no projection.
    const float proj = p.s.l2norm ? dot * r * r : 0.f;
#pragma unroll
    for (int u = 0; u < PL; ++u)
      out[(row * H + hq) * D + c0 + u] = from_f<T>(mul * r * (d[u] - x[u] * proj));
  }
}

// ---- host ------------------------------------------------------------------------------------

struct Sizes {
  std::size_t dd16, cd16, cd32, cc32, d32, c32, rows32;
};

Sizes sizes(const Shape& s, int64_t cap) {
  const auto slabs = static_cast<std::size_t>(cap) * static_cast<std::size_t>(s.value_heads);
  const auto d = static_cast<std::size_t>(s.dim);
  const auto rows = static_cast<std::size_t>(s.rows) * static_cast<std::size_t>(s.value_heads);
  return {round_up(slabs * d * d * 2), round_up(slabs * C * d * 2), round_up(slabs * C * d * 4),
          round_up(slabs * C * C * 4), round_up(slabs * d * 4),     round_up(slabs * C * 4),
          round_up(rows * d * 4)};
}

std::size_t own_bytes(const Sizes& z) {
  return z.dd16 + z.cd16 + 3 * z.cd32 + 2 * z.cc32 + z.d32 + z.c32 + 2 * z.rows32;
}

BwdScratch carve(const Sizes& z, char* at) {
  auto take = [&](std::size_t bytes) {
    char* p = at;
    at += bytes;
    return p;
  };
  BwdScratch w;
  w.dh = reinterpret_cast<bf16*>(take(z.dd16));
  w.dvn = reinterpret_cast<bf16*>(take(z.cd16));
  w.dqg = reinterpret_cast<float*>(take(z.cd32));
  w.dkl = reinterpret_cast<float*>(take(z.cd32));
  w.dbg = reinterpret_cast<float*>(take(z.cd32));
  w.dm = reinterpret_cast<float*>(take(z.cc32));
  w.da = reinterpret_cast<float*>(take(z.cc32));
  w.dgl = reinterpret_cast<float*>(take(z.d32));
  w.dbv = reinterpret_cast<float*>(take(z.c32));
  w.pq = reinterpret_cast<float*>(take(z.rows32));
  w.pk = reinterpret_cast<float*>(take(z.rows32));
  return w;
}

template <typename Kernel>
bool allow_smem(Kernel kernel, std::size_t bytes) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(bytes)) == cudaSuccess;
}

// The dstate launch: dh transposed in registers (Shape::dstate_rows, where d_o is 16-byte
// aligned for its 16-byte reads; split_dstate_rows: two CTAs per (slot, head), the grid sized
// from the SMs the kernel's rule reads), else a CTA per 32 columns of dh.
template <typename T, int D>
linear_attention::SlotBlockLaunch<Params> dstate_launch(const Params& p) {
  using Rows = bwd::DStateRowsLayout<D>;
  if (p.s.dstate_rows && reinterpret_cast<std::uintptr_t>(p.d_o) % 16 == 0) {
    if (p.s.split_dstate_rows)
      return {
          bwd::dstate_rows_kernel<T, D, 2>, Rows::kThreads, Rows::bytes, 2, 0, p.multiprocessors};
    return {bwd::dstate_rows_kernel<T, D, 1>, Rows::kThreads, Rows::bytes};
  }
  const bool piped = p.s.pipelined_dstate;
  return {
      piped ? dstate_kernel<T, D, kStateBlockV, true> : dstate_kernel<T, D, kStateBlockV, false>,
      kStateThreads,
      piped ? DStateLayout<D, kStateBlockV, true>::bytes
            : DStateLayout<D, kStateBlockV, false>::bytes,
      D / kStateBlockV};
}

template <typename T, int D, Gates GT>
bool launch(const Params& p, int64_t cap, cudaStream_t stream) {
  auto dmat = dmat_kernel<T, D, GT>;
  const bool tc = p.s.tensor_core_backward;
  auto dqkg = tc ? dqkg_kernel<T, D, GT, true> : dqkg_kernel<T, D, GT, false>;
  auto finish = finish_kernel<T, D>;
  constexpr std::size_t mat_bytes = MatLayout<D>::bytes;
  const std::size_t qkg_bytes = tc ? QkgTcLayout<D>::bytes : QkgLayout<D>::bytes;
  if (!allow_smem(dmat, mat_bytes) || !allow_smem(dqkg, qkg_bytes)) return false;
  // Flat: a CTA per task. Persistent: as many as are resident at once, each looping over its
  // tasks (as the forward's launches; the finish launch over rows stays flat).
  using linear_attention::persistent_workers;
  const unsigned heads = static_cast<unsigned>(p.s.value_heads);
  unsigned mat_x = static_cast<unsigned>(cap), qkg_x = mat_x;
  auto dstate = dstate_launch<T, D>(p);
  if (!dstate.plan(p.s.slots, p.s.persistent_state, heads)) return false;
  if (cap > 0 && p.s.persistent &&
      (!persistent_workers(dmat, kMatThreads, mat_bytes, heads, mat_x) ||
       !persistent_workers(dqkg, kQkgThreads, qkg_bytes, heads, qkg_x)))
    return false;
  Params q = p;
  q.cap = cap;
  dstate.launch(heads, stream, q);
  if (cap > 0) {
    dmat<<<dim3(mat_x, heads), kMatThreads, mat_bytes, stream>>>(q);
    dqkg<<<dim3(qkg_x, heads), kQkgThreads, qkg_bytes, stream>>>(q);
  }
  if (p.s.rows > 0) finish<<<static_cast<unsigned>(p.s.rows), kFinishThreads, 0, stream>>>(q);
  return cudaPeekAtLastError() == cudaSuccess;
}

template <typename T, Gates GT>
bool launch_dim(const Params& p, int64_t cap, cudaStream_t stream) {
  return p.s.dim == 64 ? launch<T, 64, GT>(p, cap, stream) : launch<T, 128, GT>(p, cap, stream);
}

template <typename T>
bool launch_gates(const Params& p, int64_t cap, cudaStream_t stream) {
  return p.s.gates == Gates::kda ? launch_dim<T, Gates::kda>(p, cap, stream)
                                 : launch_dim<T, Gates::gdn2>(p, cap, stream);
}

}  // namespace

std::size_t backward_workspace_bytes(const Shape& s, int64_t cap) {
  if (!served(s)) return 0;
  const int64_t c = cap > 0 ? cap : 0;
  return recompute_bytes(s, c) + own_bytes(sizes(s, c));
}

bool backward(const BwdArgs& a, void* workspace, void* stream) noexcept {
  const Shape& s = a.shape;
  if (!served(s) || !a.chunk_offsets || !s.cu || !a.d_o) return false;
  if (a.capacity_chunks > 0x7fffffff || s.slots > 0x7fffffff || s.rows > 0x7fffffff) return false;
  if (s.gates == Gates::kda ? !a.beta : (!a.b || !a.w)) return false;
  const int64_t cap = a.capacity_chunks > 0 ? a.capacity_chunks : 0;
  Params p;
  p.s = s;
  p.q = a.q;
  p.k = a.k;
  p.v = a.v;
  p.g = a.g;
  p.beta = a.beta;
  p.b = a.b;
  p.w = a.w;
  p.d_o = a.d_o;
  p.dht = a.d_final_state;
  p.dq = a.dq;
  p.dk = a.dk;
  p.dv = a.dv;
  p.dg = a.dg;
  p.dbeta = a.dbeta;
  p.db = a.db;
  p.dw = a.dw;
  p.dh0 = a.d_initial_state;
  p.offsets = a.chunk_offsets;
  p.multiprocessors = s.split_dstate_rows ? linear_attention::device_multiprocessors() : 0;
  p.f = ChunkViews{};
  if (cap > 0) {
    FwdArgs f;
    f.shape = s;
    f.q = a.q;
    f.k = a.k;
    f.v = a.v;
    f.g = a.g;
    f.beta = a.beta;
    f.b = a.b;
    f.w = a.w;
    f.initial_state = a.initial_state;
    f.chunk_offsets = a.chunk_offsets;
    f.capacity_chunks = cap;
    if (!recompute(f, workspace, stream, &p.f)) return false;
  }
  p.ws = carve(sizes(s, cap), static_cast<char*>(workspace) + recompute_bytes(s, cap));
  const auto st = static_cast<cudaStream_t>(stream);
  return s.dtype == DType::bf16 ? launch_gates<bf16>(p, cap, st) : launch_gates<__half>(p, cap, st);
}

}  // namespace eagle::native::kda
