// The chunked kda / gdn2 forward (kda_kernels.hpp): prepare, state and output launches over
// the flat chunk list of the ragged schedule (ragged::chunk_task), chunk C = 64.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "eagle/ragged/schedule.hpp"
#include "engines/native/linear_attention/chunk_common.cuh"
#include "engines/native/linear_attention/cp_async.cuh"
#include "engines/native/linear_attention/kda_fwd_common.cuh"
#include "engines/native/linear_attention/kda_kernels.hpp"
#include "engines/native/linear_attention/kda_mma.cuh"
#include "engines/native/linear_attention/kda_prepare_compact.cuh"
#include "engines/native/linear_attention/kda_state_rows.cuh"
#include "engines/native/linear_attention/persistent.cuh"
#include "engines/native/linear_attention/unit_lower_inverse.cuh"

namespace eagle::native::kda {

namespace {

using fwd::C;
using fwd::chunk_of;
using fwd::from_f;
using fwd::kPrepThreads;
using fwd::Params;
using fwd::Scratch;
using fwd::slab;
using fwd::to_f;
constexpr int kStateThreads = 128, kOutThreads = 128;
constexpr int kStateBlockV = 32;  // value columns of h per state CTA
constexpr std::size_t kAlign = 256;

std::size_t round_up(std::size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

// ---- prepare ---------------------------------------------------------------------------------

// Shared memory of the prepare kernel, in floats. f32 rows of D + 1 (odd: a column read across
// lanes is conflict-free), bf16 rows of D + 8 (fragment loads conflict-free).
template <int D>
struct PrepLayout {
  static constexpr int SF = D + 1, SB = D + 8, SA = C + 1, ST = C + 8;
  static constexpr int G = 0, K = G + C * SF, Q = K + C * SF, E = Q + C * SF;
  static constexpr int AKK = E + C * SF, AQK = AKK + C * SA, BETA = AQK + C * SA;
  static constexpr int SCR = BETA + C;
  // Product staging (96 bf16 rows) then T (f32) and the block products P.
  static constexpr int kStage = 96 * SB / 2, kSolve = C * SA + 3 * 256;
  static constexpr int total = SCR + (kStage > kSolve ? kStage : kSolve);
  static_assert((C * ST + 2 * C * SB) / 2 <= 2 * C * SF, "W/U staging must fit over k and q");
  static constexpr std::size_t bytes = static_cast<std::size_t>(total) * sizeof(float);
};

// Chunk task j of value head blockIdx.y; false when j is past the batch's chunks.
template <typename T, int D, Gates GT>
__device__ __forceinline__ bool prepare_chunk(const Params& p, int64_t j) {
  using L = PrepLayout<D>;
  constexpr int SF = L::SF, SB = L::SB, SA = L::SA, ST = L::ST;
  extern __shared__ float4 smem4[];
  float* sm = reinterpret_cast<float*>(smem4);
  float *Gs = sm + L::G, *Ks = sm + L::K, *Qs = sm + L::Q, *Es = sm + L::E;
  float *Akk = sm + L::AKK, *Aqk = sm + L::AQK, *betas = sm + L::BETA;
  const int tid = threadIdx.x, warp = tid >> 5;
  const int hv = blockIdx.y;
  const ragged::ChunkTask task = chunk_of(p, j);
  if (task.sequence < 0) return false;
  const int n = static_cast<int>(task.row_end - task.row_begin);
  const int HV = p.s.value_heads, H = p.s.heads, hq = hv / (HV / H);
  const T* q = static_cast<const T*>(p.q);
  const T* k = static_cast<const T*>(p.k);
  const T* v = static_cast<const T*>(p.v);

  // 1. The chunk's rows (zeros past its end: they then add nothing anywhere).
  for (int i = tid; i < C * D; i += kPrepThreads) {
    const int r = i / D, c = i % D;
    const bool ok = r < n;
    const int64_t row = task.row_begin + r;
    const int64_t qk = (row * H + hq) * D + c, vh = (row * HV + hv) * D + c;
    Qs[r * SF + c] = ok ? to_f(q[qk]) : 0.f;
    Ks[r * SF + c] = ok ? to_f(k[qk]) : 0.f;
    Gs[r * SF + c] = ok ? p.g[vh] : 0.f;
    if constexpr (GT == Gates::gdn2) Es[r * SF + c] = ok ? p.b[vh] : 0.f;
  }
  if constexpr (GT == Gates::kda) {
    for (int r = tid; r < C; r += kPrepThreads)
      betas[r] = r < n ? p.beta[(task.row_begin + r) * HV + hv] : 0.f;
  }
  __syncthreads();

  // 2. Norms and scale of q and k, the erase key b * k; G = cumsum of g per channel.
  fwd::scale_rows_and_cumsum<D, GT, kPrepThreads>(Qs, Ks, Es, Gs, betas, SF, p.s.l2norm, p.s.scale);
  __syncthreads();

  // 3a. Whether each 16-row diagonal block goes through its first row (decide_through_r0).
  __shared__ int through_r0[4];
  fwd::decide_through_r0<D>(Gs, SF, p.s.tensor_core_diagonal, through_r0);
  __syncthreads();
  // 3b. Rows of block I against keys 0 .. r0 + 15 on the tensor cores, through r0:
  // (x_i e^{G_i - G_r0}) . (k_j e^{G_r0 - G_j}); below the diagonal block both factors are <= 1
  // (j < r0 <= i).
  {
    bf16* st = reinterpret_cast<bf16*>(sm + L::SCR);  // rows: 16 erase, 16 q, then the keys
    for (int I = 0; I < 4; ++I) {
      const int r0 = 16 * I, keys = r0 + 16;
      const bool diag = through_r0[I];
      for (int i = tid; i < (32 + keys) * D; i += kPrepThreads) {
        const int s = i / D, c = i % D;
        const float gr = Gs[r0 * SF + c];
        float x;
        if (s < 16)
          x = Es[(r0 + s) * SF + c] * __expf(Gs[(r0 + s) * SF + c] - gr);
        else if (s < 32)
          x = Qs[(r0 + s - 16) * SF + c] * __expf(Gs[(r0 + s - 16) * SF + c] - gr);
        else if (s - 32 < r0 || diag)
          x = Ks[(s - 32) * SF + c] * __expf(gr - Gs[(s - 32) * SF + c]);
        else
          x = 0.f;
        st[s * SB + c] = __float2bfloat16(x);
      }
      __syncthreads();
      const int tiles = keys / 8;
      for (int t = warp; t < 2 * tiles; t += kPrepThreads / 32) {
        const bool is_q = t >= tiles;
        const int n0 = 8 * (t % tiles);
        float acc[1][4] = {};
        mma_rows<true, true, 1>(acc, st, SB, is_q ? 16 : 0, st + 32 * SB, SB, n0, D);
        float* dst = is_q ? Aqk : Akk;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = r0 + acc_row(0, e), col = acc_col(n0, e);
          const bool keep = col < r0 || (is_q ? col <= row : col < row);
          dst[row * SA + col] = keep ? acc[0][e] : 0.f;
        }
      }
      __syncthreads();
    }
  }
  // 3c. The diagonal blocks not taken through r0, exactly: e^{G_i - G_j} <= 1 per channel.
  {
    const int i = tid >> 4, jj = tid & 15;
    for (int blk = 0; blk < 4; ++blk) {
      if (through_r0[blk]) continue;
      const int ri = blk * 16 + i, rj = blk * 16 + jj;
      float kk = 0, qk = 0;
      if (jj <= i) {
        for (int c = 0; c < D; ++c) {
          const float kr = Ks[rj * SF + c] * __expf(Gs[ri * SF + c] - Gs[rj * SF + c]);
          kk += Es[ri * SF + c] * kr;
          qk += Qs[ri * SF + c] * kr;
        }
      }
      Akk[ri * SA + rj] = jj < i ? kk : 0.f;
      Aqk[ri * SA + rj] = qk;
    }
  }
  __syncthreads();

  // 4. T = (I + A)^-1 (A strictly lower): the diagonal blocks by substitution, then the blocks
  // below them by distance d from the diagonal: T_IJ = -T_II sum_{M = J}^{I - 1} A_IM T_MJ.
  float* Tm = sm + L::SCR;
  linear_attention::invert_unit_lower_64<kPrepThreads>(Akk, Tm, SA, Tm + C * SA);

  // 5. What the state and output launches read: q e^G, k e^{G_last - G}, e^{G_last}, Aqk.
  const int64_t at = slab(p, j, hv);
  {
    bf16* qg = p.ws.qg + at * C * D;
    bf16* kg = p.ws.kg + at * C * D;
    for (int i = tid; i < C * D; i += kPrepThreads) {
      const int r = i / D, c = i % D;
      const float gi = Gs[r * SF + c], gl = Gs[(C - 1) * SF + c];
      qg[i] = __float2bfloat16(Qs[r * SF + c] * __expf(gi));
      kg[i] = __float2bfloat16(Ks[r * SF + c] * __expf(gl - gi));
    }
    for (int c = tid; c < D; c += kPrepThreads) p.ws.gl[at * D + c] = __expf(Gs[(C - 1) * SF + c]);
    bf16* aqk = p.ws.aqk + at * C * C;
    for (int i = tid; i < C * C; i += kPrepThreads) {
      const int r = i / C, c = i % C;
      aqk[i] = __float2bfloat16(c <= r ? Aqk[r * SA + c] : 0.f);
    }
  }
  __syncthreads();

  // 6. W = T (b k e^G), U = T (w v), staged over k and q.
  bf16* Tb = reinterpret_cast<bf16*>(sm + L::K);
  bf16* R1 = Tb + C * ST;
  bf16* R2 = R1 + C * SB;
  for (int i = tid; i < C * C; i += kPrepThreads) {
    const int r = i / C, c = i % C;
    Tb[r * ST + c] = __float2bfloat16(Tm[r * SA + c]);
    if (p.ws.t) p.ws.t[at * C * C + i] = Tb[r * ST + c];
  }
  for (int i = tid; i < C * D; i += kPrepThreads) {
    const int r = i / D, c = i % D;
    const int64_t row = task.row_begin + r;
    R1[r * SB + c] = __float2bfloat16(Es[r * SF + c] * __expf(Gs[r * SF + c]));
    float wv = 0.f;
    if (r < n) {
      const int64_t vh = (row * HV + hv) * D + c;
      wv = to_f(v[vh]) * (GT == Gates::kda ? betas[r] : p.w[vh]);
    }
    R2[r * SB + c] = __float2bfloat16(wv);
  }
  __syncthreads();
  fwd::store_w_u<D>(p, at, Tb, ST, R1, R2, SB);
  return true;
}

// A chunk task per CTA (flat) or a CTA's tasks in turn (persistent): for_each_task.
template <typename T, int D, Gates GT>
__global__ void __launch_bounds__(kPrepThreads) prepare_kernel(const Params p) {
  linear_attention::for_each_task(p.cap, p.s.persistent,
                                  [&](int64_t j) { return prepare_chunk<T, D, GT>(p, j); });
}

// ---- state -----------------------------------------------------------------------------------

// A CTA covers Groups V blocks of BV columns, four warps each, sharing the chunk's W and kg rows
// in shared memory (Groups = 1: a CTA per block; 4: the whole state of a head, W and kg read
// from L2 once per chunk instead of once per block). Pipelined: two buffers of a chunk's W and
// kg rows, U's columns and e^{G_last}, the next chunk's loaded by cp.async while this one is
// computed (the loads are otherwise on the critical path of a sequence's chunks).
template <int D, int BV, int Groups, bool Pipelined>
struct StateLayout {
  static constexpr int SB = D + 8, SV = BV + 8, SU = Groups * BV + 8;
  static constexpr int kBuffers = Pipelined ? 2 : 1;
  // bf16 elements, per buffer: W and kg [C][SB], then (pipelined) U's columns [C][SU]; then
  // per group h [D][SV] and v' [C][SV]; then e^{G_last} [kBuffers][D] f32.
  static constexpr int KG = C * SB, US = KG + C * SB;
  static constexpr int kBufElems = US + (Pipelined ? C * SU : 0);
  static constexpr int H = kBuffers * kBufElems, VN = H + Groups * D * SV;
  static constexpr int end = VN + Groups * C * SV;
  static constexpr std::size_t bytes =
      static_cast<std::size_t>(end) * 2 + static_cast<std::size_t>(kBuffers) * D * sizeof(float);
};

// 16-byte copies of `rows` rows of D bf16 from global (row stride D) to shared (stride ld).
template <int D, int Threads>
__device__ __forceinline__ void copy_rows(bf16* dst, int ld, const bf16* src, int rows) {
  constexpr int per_row = D / 8;
  for (int i = threadIdx.x; i < rows * per_row; i += Threads) {
    const int r = i / per_row, c = (i % per_row) * 8;
    *reinterpret_cast<uint4*>(dst + r * ld + c) =
        *reinterpret_cast<const uint4*>(src + static_cast<int64_t>(r) * D + c);
  }
}

// Sequence slot s, value head blockIdx.y, V blocks Groups vb .. Groups vb + Groups - 1 (warps
// 4 g .. 4 g + 3 the g-th).
template <int D, int BV, int Groups, bool Pipelined>
__device__ __forceinline__ void state_slot(const Params& p, int64_t s, int vb) {
  using L = StateLayout<D, BV, Groups, Pipelined>;
  constexpr int SB = L::SB, SV = L::SV, SU = L::SU, MT = D / 64, NT = BV / 8;
  constexpr int Threads = kStateThreads * Groups;
  extern __shared__ float4 smem4[];
  bf16* sb = reinterpret_cast<bf16*>(smem4);
  const int group = threadIdx.x / kStateThreads, warp = (threadIdx.x % kStateThreads) >> 5;
  bf16 *Hs = sb + L::H + group * D * SV, *VNs = sb + L::VN + group * C * SV;
  float* gl_buffers = reinterpret_cast<float*>(sb + L::end);
  const int hv = blockIdx.y, u0 = vb * Groups * BV, v0 = u0 + group * BV, HV = p.s.value_heads;
  const int m_base = warp * (D / 4);  // this warp's rows of h
  // Slab `at`'s W and kg rows, U's columns and e^{G_last} into buffer b, by cp.async (pipelined
  // only: then in flight until waited for).
  auto prefetch = [&](int64_t at, int b) {
    using linear_attention::cp_async16;
    bf16* buf = sb + b * L::kBufElems;
    const bf16 *w = p.ws.w + at * C * D, *kg = p.ws.kg + at * C * D;
    const bf16* u = p.ws.u + at * C * D + u0;
    for (int i = threadIdx.x; i < C * (D / 8); i += Threads) {
      const int r = i / (D / 8), c = (i % (D / 8)) * 8;
      cp_async16(buf + r * SB + c, w + r * D + c, true);
      cp_async16(buf + L::KG + r * SB + c, kg + r * D + c, true);
    }
    for (int i = threadIdx.x; i < C * (Groups * BV / 8); i += Threads) {
      const int r = i / (Groups * BV / 8), c = (i % (Groups * BV / 8)) * 8;
      cp_async16(buf + L::US + r * SU + c, u + r * D + c, true);
    }
    for (int i = threadIdx.x; i < D / 4; i += Threads)
      cp_async16(gl_buffers + b * D + 4 * i, p.ws.gl + at * D + 4 * i, true);
  };

  float h[MT][NT][4];
  const int64_t state_at = (s * HV + hv) * static_cast<int64_t>(D) * D;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int t = 0; t < NT; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int d = acc_row(m_base + 16 * mt, e), c = v0 + acc_col(8 * t, e);
        h[mt][t][e] = p.h0 ? p.h0[state_at + static_cast<int64_t>(d) * D + c] : 0.f;
      }

  const int64_t first = p.offsets[s], last = p.offsets[s + 1];
  if constexpr (Pipelined) {
    if (first < last) prefetch(slab(p, first, hv), 0);
    linear_attention::cp_async_commit();
  }
  for (int64_t j = first; j < last; ++j) {
    const int64_t at = slab(p, j, hv);
    const int b = Pipelined ? static_cast<int>((j - first) & 1) : 0;
    bf16 *Wsm = sb + b * L::kBufElems, *KGs = Wsm + L::KG;
    float* GLs = gl_buffers + b * D;
    if constexpr (Pipelined) {
      // The other buffer was last read in the previous chunk, before its closing
      // __syncthreads: the next chunk's slab goes there while this one is computed.
      if (j + 1 < last) prefetch(slab(p, j + 1, hv), b ^ 1);
      linear_attention::cp_async_commit();
    } else {
      copy_rows<D, Threads>(Wsm, SB, p.ws.w + at * C * D, C);
      copy_rows<D, Threads>(KGs, SB, p.ws.kg + at * C * D, C);
      for (int c = threadIdx.x; c < D; c += Threads) GLs[c] = p.ws.gl[at * D + c];
    }
    bf16* hg = p.ws.h + at * D * D;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int t = 0; t < NT; ++t)
#pragma unroll
        for (int e = 0; e < 4; e += 2) {
          const int d = acc_row(m_base + 16 * mt, e), c = acc_col(8 * t, e);
          const __nv_bfloat162 x = __floats2bfloat162_rn(h[mt][t][e], h[mt][t][e + 1]);
          *reinterpret_cast<__nv_bfloat162*>(Hs + d * SV + c) = x;
          *reinterpret_cast<__nv_bfloat162*>(hg + static_cast<int64_t>(d) * D + v0 + c) = x;
        }
    if constexpr (Pipelined) linear_attention::cp_async_wait<1>();  // this chunk's group
    __syncthreads();

    // v' = U - W h: warp w owns chunk rows 16 w .. 16 w + 15.
    {
      float acc[NT][4] = {};
      mma_rows<true, false, NT>(acc, Wsm, SB, 16 * warp, Hs, SV, 0, D);
      const bf16* u = p.ws.u + at * C * D;
      bf16* vn = p.ws.vn + at * C * D;
#pragma unroll
      for (int t = 0; t < NT; ++t)
#pragma unroll
        for (int e = 0; e < 4; e += 2) {
          const int r = acc_row(16 * warp, e), c = acc_col(8 * t, e);
          // U's columns from shared memory when the pipeline brought them, else from global.
          const bf16* ur = Pipelined ? Wsm + L::US + r * SU + group * BV + c : u + r * D + v0 + c;
          const float2 uu = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(ur));
          const __nv_bfloat162 x = __floats2bfloat162_rn(uu.x - acc[t][e], uu.y - acc[t][e + 1]);
          *reinterpret_cast<__nv_bfloat162*>(VNs + r * SV + c) = x;
          *reinterpret_cast<__nv_bfloat162*>(vn + r * D + v0 + c) = x;
        }
    }
    __syncthreads();

    // h <- diag(e^{G_last}) h + (k e^{G_last - G})^T v'.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int t = 0; t < NT; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) h[mt][t][e] *= GLs[acc_row(m_base + 16 * mt, e)];
      mma_rows<false, false, NT>(h[mt], KGs, SB, m_base + 16 * mt, VNs, SV, 0, C);
    }
    __syncthreads();
  }

  if (p.ht) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int t = 0; t < NT; ++t)
#pragma unroll
        for (int e = 0; e < 4; e += 2) {
          const int d = acc_row(m_base + 16 * mt, e), c = v0 + acc_col(8 * t, e);
          *reinterpret_cast<float2*>(p.ht + state_at + static_cast<int64_t>(d) * D + c) =
              make_float2(h[mt][t][e], h[mt][t][e + 1]);
        }
  }
}

// A (slot, Groups V blocks) per CTA (flat) or a CTA's in turn (persistent).
template <int D, int BV, int Groups, bool Pipelined>
__global__ void __launch_bounds__(kStateThreads* Groups) state_kernel(const Params p) {
  linear_attention::for_each_slot_block<D / (BV * Groups)>(
      p.s.slots, p.s.persistent_state,
      [&](int64_t s, int vb) { state_slot<D, BV, Groups, Pipelined>(p, s, vb); });
}

// ---- output ----------------------------------------------------------------------------------

template <int D>
struct OutLayout {
  static constexpr int SB = D + 8, ST = C + 8;
  static constexpr int QG = 0, H = QG + C * SB, A = H + D * SB, VN = A + C * ST;
  static constexpr std::size_t bytes = static_cast<std::size_t>(VN + C * SB) * 2;
};

// Chunk task j of value head blockIdx.y; false when j is past the batch's chunks.
template <typename T, int D>
__device__ __forceinline__ bool output_chunk(const Params& p, int64_t j) {
  using L = OutLayout<D>;
  constexpr int SB = L::SB, ST = L::ST, NT = D / 8;
  extern __shared__ float4 smem4[];
  bf16* sb = reinterpret_cast<bf16*>(smem4);
  bf16 *QGs = sb + L::QG, *Hs = sb + L::H, *As = sb + L::A, *VNs = sb + L::VN;
  const int warp = threadIdx.x >> 5;
  const int hv = blockIdx.y, HV = p.s.value_heads;
  const ragged::ChunkTask task = chunk_of(p, j);
  if (task.sequence < 0) return false;
  const int n = static_cast<int>(task.row_end - task.row_begin);
  const int64_t at = slab(p, j, hv);
  // Every copy in flight at once (cp.async), then one wait.
  using linear_attention::load_chunk_rows;
  constexpr int kT = kOutThreads;
  load_chunk_rows<bf16, D, C, true, kT>(QGs, SB, p.ws.qg + at * C * D, D, C);
  load_chunk_rows<bf16, D, D, true, kT>(Hs, SB, p.ws.h + at * D * D, D, D);
  load_chunk_rows<bf16, C, C, true, kT>(As, ST, p.ws.aqk + at * C * C, C, C);
  load_chunk_rows<bf16, D, C, true, kT>(VNs, SB, p.ws.vn + at * C * D, D, C);
  linear_attention::cp_async_commit();
  linear_attention::cp_async_wait<0>();
  __syncthreads();
  float acc[NT][4] = {};
  mma_rows<true, false, NT>(acc, QGs, SB, 16 * warp, Hs, SB, 0, D);
  mma_rows<true, false, NT>(acc, As, ST, 16 * warp, VNs, SB, 0, C);
  T* o = static_cast<T*>(p.o);
  const auto address = reinterpret_cast<std::uintptr_t>(o);
  if ((address & 3) == 0) {
    // An accumulator's pair of columns as one 4-byte store; with the knob `stores`, where o
    // starts 16-byte aligned, staged through this warp's own q e^G rows (SB = D + 8 wide, the
    // staging tile's stride; only this warp has read them) and stored in 16-byte pieces.
    const int64_t ld = static_cast<int64_t>(HV) * D;
    T* stage = p.s.staged_stores && (address & 15) == 0 ? reinterpret_cast<T*>(QGs + 16 * warp * SB)
                                                        : nullptr;
    linear_attention::store_acc_rows<T, NT>(o + (task.row_begin * HV + hv) * D + 16 * warp * ld, ld,
                                            acc, n - 16 * warp, stage);
    return true;
  }
  // A view (or a DLPack import) may start at any element: then element by element.
#pragma unroll
  for (int t = 0; t < NT; ++t)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = acc_row(16 * warp, e), c = acc_col(8 * t, e);
      if (r < n) o[((task.row_begin + r) * HV + hv) * D + c] = from_f<T>(acc[t][e]);
    }
  return true;
}

template <typename T, int D>
__global__ void __launch_bounds__(kOutThreads) output_kernel(const Params p) {
  linear_attention::for_each_task(p.cap, p.s.persistent,
                                  [&](int64_t j) { return output_chunk<T, D>(p, j); });
}

// ---- host ------------------------------------------------------------------------------------

struct Sizes {
  std::size_t rows_d, cc, dd, d;  // bytes of one section: [cap][HV][C][D] bf16, ...
};

Sizes sizes(const Shape& s, int64_t cap) {
  const auto slabs = static_cast<std::size_t>(cap) * static_cast<std::size_t>(s.value_heads);
  const auto d = static_cast<std::size_t>(s.dim);
  return {round_up(slabs * C * d * 2), round_up(slabs * C * C * 2), round_up(slabs * d * d * 2),
          round_up(slabs * d * 4)};
}

Scratch carve(const Shape& s, int64_t cap, void* workspace) {
  const Sizes z = sizes(s, cap);
  char* at = static_cast<char*>(workspace);
  auto take = [&](std::size_t bytes) {
    char* p = at;
    at += bytes;
    return p;
  };
  Scratch w;
  w.w = reinterpret_cast<bf16*>(take(z.rows_d));
  w.u = reinterpret_cast<bf16*>(take(z.rows_d));
  w.qg = reinterpret_cast<bf16*>(take(z.rows_d));
  w.kg = reinterpret_cast<bf16*>(take(z.rows_d));
  w.vn = reinterpret_cast<bf16*>(take(z.rows_d));
  w.aqk = reinterpret_cast<bf16*>(take(z.cc));
  w.h = reinterpret_cast<bf16*>(take(z.dd));
  w.gl = reinterpret_cast<float*>(take(z.d));
  w.t = nullptr;
  return w;
}

template <typename Kernel>
bool allow_smem(Kernel kernel, std::size_t bytes) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(bytes)) == cudaSuccess;
}

bool aligned16(const void* x) {
  return reinterpret_cast<std::uintptr_t>(x) % 16 == 0;
}

// The compact prepare's 16-byte copies need every row operand 16-byte aligned (its rows are
// then too: D is a multiple of 8).
bool compact_prepare(const Params& p) {
  if (!p.s.compact_prepare) return false;
  const bool gates = p.s.gates == Gates::kda || (aligned16(p.b) && aligned16(p.w));
  return gates && aligned16(p.q) && aligned16(p.k) && aligned16(p.v) && aligned16(p.g);
}

// The state launch of Groups V blocks a CTA.
template <int D, int Groups>
linear_attention::SlotBlockLaunch<Params> state_launch(bool pipelined) {
  return {pipelined ? state_kernel<D, kStateBlockV, Groups, true>
                    : state_kernel<D, kStateBlockV, Groups, false>,
          kStateThreads * Groups,
          pipelined ? StateLayout<D, kStateBlockV, Groups, true>::bytes
                    : StateLayout<D, kStateBlockV, Groups, false>::bytes,
          D / (kStateBlockV * Groups)};
}

// The state-rows launch of Parts CTAs per (slot, head); Parts = 2 sizes its grid from the SMs
// its rule reads (Params::multiprocessors).
template <int D, int Parts>
linear_attention::SlotBlockLaunch<Params> state_rows_launch(int multiprocessors) {
  using Rows = fwd::StateRowsLayout<D>;
  return {fwd::state_rows_kernel<D, Parts>, Rows::kThreads, Rows::bytes, Parts, 0,
          Parts == 2 ? multiprocessors : 0};
}

template <typename T, int D, Gates GT>
bool launch(const Params& p, int64_t cap, cudaStream_t stream, bool output) {
  const bool compact = compact_prepare(p);
  auto prep = compact ? fwd::prepare_compact_kernel<T, D, GT> : prepare_kernel<T, D, GT>;
  auto out = output_kernel<T, D>;
  const std::size_t prep_bytes = compact ? fwd::CompactLayout<D, GT>::bytes : PrepLayout<D>::bytes;
  // Two compact CTAs per SM need the largest shared-memory carveout.
  if (compact && cudaFuncSetAttribute(prep, cudaFuncAttributePreferredSharedMemoryCarveout,
                                      cudaSharedmemCarveoutMaxShared) != cudaSuccess)
    return false;
  constexpr std::size_t out_bytes = OutLayout<D>::bytes;
  if (!allow_smem(prep, prep_bytes) || !allow_smem(out, out_bytes)) return false;
  // Flat: a CTA per task. Persistent: as many as are resident at once, each looping over its
  // tasks (linear_attention::persistent_workers asks the occupancy calculator, no device sync).
  using linear_attention::persistent_workers;
  const unsigned heads = static_cast<unsigned>(p.s.value_heads);
  unsigned prep_x = static_cast<unsigned>(cap), out_x = prep_x;
  if (p.s.persistent && (!persistent_workers(prep, kPrepThreads, prep_bytes, heads, prep_x) ||
                         !persistent_workers(out, kOutThreads, out_bytes, heads, out_x)))
    return false;
  constexpr int kBlocks = D / kStateBlockV;
  auto st = p.s.state_rows   ? (p.s.split_state_rows ? state_rows_launch<D, 2>(p.multiprocessors)
                                                     : state_rows_launch<D, 1>(0))
            : p.s.head_state ? state_launch<D, kBlocks>(p.s.pipelined_state)
                             : state_launch<D, 1>(p.s.pipelined_state);
  if (!st.plan(p.s.slots, p.s.persistent_state, heads)) return false;
  Params q = p;
  q.cap = cap;
  prep<<<dim3(prep_x, heads), kPrepThreads, prep_bytes, stream>>>(q);
  st.launch(heads, stream, q);
  if (output) out<<<dim3(out_x, heads), kOutThreads, out_bytes, stream>>>(q);
  return cudaPeekAtLastError() == cudaSuccess;
}

template <typename T, Gates GT>
bool launch_dim(const Params& p, int64_t cap, cudaStream_t stream, bool output) {
  return p.s.dim == 64 ? launch<T, 64, GT>(p, cap, stream, output)
                       : launch<T, 128, GT>(p, cap, stream, output);
}

template <typename T>
bool launch_gates(const Params& p, int64_t cap, cudaStream_t stream, bool output) {
  return p.s.gates == Gates::kda ? launch_dim<T, Gates::kda>(p, cap, stream, output)
                                 : launch_dim<T, Gates::gdn2>(p, cap, stream, output);
}

}  // namespace

bool served(const Shape& s) {
  return (s.dtype == DType::bf16 || s.dtype == DType::f16) && (s.dim == 64 || s.dim == 128) &&
         s.heads >= 1 && s.value_heads >= 1 && s.value_heads % s.heads == 0 &&
         s.value_heads <= 65535 && s.slots >= 1;
}

std::size_t workspace_bytes(const Shape& s, int64_t cap) {
  if (!served(s) || cap <= 0) return 0;
  const Sizes z = sizes(s, cap);
  return 5 * z.rows_d + z.cc + z.dd + z.d;
}

namespace {

// The launches of a forward (output: the o launch too) over `ws`.
bool run(const FwdArgs& a, const Scratch& ws, void* stream, bool output) {
  const Shape& s = a.shape;
  if (!served(s) || !a.chunk_offsets || !s.cu) return false;
  if (a.capacity_chunks <= 0) {
    // No rows at all (T = 0): nothing to launch, but every slot's final state is still its
    // initial state, or 0.
    if (!a.final_state) return true;
    const std::size_t bytes =
        static_cast<std::size_t>(s.slots) * static_cast<std::size_t>(s.value_heads) *
        static_cast<std::size_t>(s.dim) * static_cast<std::size_t>(s.dim) * sizeof(float);
    const auto st = static_cast<cudaStream_t>(stream);
    return (a.initial_state ? cudaMemcpyAsync(a.final_state, a.initial_state, bytes,
                                              cudaMemcpyDeviceToDevice, st)
                            : cudaMemsetAsync(a.final_state, 0, bytes, st)) == cudaSuccess;
  }
  if (a.capacity_chunks > 0x7fffffff || s.slots > 0x7fffffff) return false;
  if (s.gates == Gates::kda ? !a.beta : (!a.b || !a.w)) return false;
  Params p;
  p.s = s;
  p.q = a.q;
  p.k = a.k;
  p.v = a.v;
  p.g = a.g;
  p.beta = a.beta;
  p.b = a.b;
  p.w = a.w;
  p.h0 = a.initial_state;
  p.o = a.o;
  p.ht = a.final_state;
  p.offsets = a.chunk_offsets;
  p.ws = ws;
  p.multiprocessors = s.split_state_rows ? linear_attention::device_multiprocessors() : 0;
  const auto st = static_cast<cudaStream_t>(stream);
  return s.dtype == DType::bf16 ? launch_gates<bf16>(p, a.capacity_chunks, st, output)
                                : launch_gates<__half>(p, a.capacity_chunks, st, output);
}

}  // namespace

bool forward(const FwdArgs& a, void* workspace, void* stream) noexcept {
  if (!served(a.shape) || a.capacity_chunks <= 0) return run(a, Scratch{}, stream, true);
  return run(a, carve(a.shape, a.capacity_chunks, workspace), stream, true);
}

std::size_t recompute_bytes(const Shape& s, int64_t cap) {
  if (!served(s) || cap <= 0) return 0;
  return workspace_bytes(s, cap) + sizes(s, cap).cc;
}

bool recompute(const FwdArgs& a, void* workspace, void* stream, ChunkViews* views) noexcept {
  if (!served(a.shape) || a.capacity_chunks <= 0) return run(a, Scratch{}, stream, false);
  Scratch ws = carve(a.shape, a.capacity_chunks, workspace);
  ws.t = reinterpret_cast<bf16*>(static_cast<char*>(workspace) +
                                 workspace_bytes(a.shape, a.capacity_chunks));
  if (views) *views = {ws.w, ws.u, ws.qg, ws.kg, ws.vn, ws.aqk, ws.h, ws.t, ws.gl};
  FwdArgs b = a;
  b.final_state = nullptr;
  return run(b, ws, stream, false);
}

}  // namespace eagle::native::kda
