// Internal, CUDA sources only: the kda / gdn2 backward's dqkg launch (kda_bwd_sm90.cu), the
// decay-weighted products of a chunk (dq~, dk~ and d(b k) through dAqk and dA with
// e^{G_i - G_j}), gdn2's db, and the reverse cumsum giving dg (and kda's dbeta). Two routes:
// exactly per channel on CUDA cores (dqkg_chunk) and on the tensor cores through a reference
// row per 16-row block (dqkg_tc_chunk, Shape::tensor_core_backward); dqkg_kernel runs either.
#pragma once

#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>

#include "engines/native/linear_attention/kda_bwd_common.cuh"
#include "engines/native/linear_attention/kda_fwd_common.cuh"
#include "engines/native/linear_attention/kda_mma.cuh"
#include "engines/native/linear_attention/vec8.cuh"

namespace eagle::native::kda::bwd {

using fwd::to_f;

template <int D>
struct QkgLayout {
  static constexpr int SF = D + 1, SA = C + 1;
  // f32: q~, k~, G, bk [C][SF]; dAqk, dA [C][SA]; beta [C].
  static constexpr int Q = 0, K = Q + C * SF, G = K + C * SF, BK = G + C * SF, DM = BK + C * SF;
  static constexpr int DA = DM + C * SA, BETA = DA + C * SA, end = BETA + C;
  static constexpr std::size_t bytes = static_cast<std::size_t>(end) * sizeof(float);
};

// What both dqkg kernels read: a chunk's rows in shared memory (QkgLayout) and where it lies.
struct Qkg {
  float *Qs, *Ks, *Gs, *BKs, *DMs, *DAs, *betas;
  ragged::ChunkTask task;
  int n, hv, HV;
  int64_t at;  // the (chunk, value head) slab
};

// 1. The chunk's rows as the forward reads them (zeros past its end): q~, k~, bk, G (the cumsum)
// and the masked dAqk and dA of chunk task j. False when j is past the batch's chunks. Ends with
// a __syncthreads.
template <typename T, int D, Gates GT>
__device__ __forceinline__ bool qkg_rows(const Params& p, int64_t j, Qkg& v) {
  using L = QkgLayout<D>;
  constexpr int SF = L::SF, SA = L::SA;
  extern __shared__ float4 smem4[];
  float* sm = reinterpret_cast<float*>(smem4);
  v.Qs = sm + L::Q;
  v.Ks = sm + L::K;
  v.Gs = sm + L::G;
  v.BKs = sm + L::BK;
  v.DMs = sm + L::DM;
  v.DAs = sm + L::DA;
  v.betas = sm + L::BETA;
  float *Qs = v.Qs, *Ks = v.Ks, *Gs = v.Gs, *BKs = v.BKs;
  const int tid = threadIdx.x;
  v.hv = blockIdx.y;
  v.task = chunk_of(p, j);
  if (v.task.sequence < 0) return false;
  v.n = static_cast<int>(v.task.row_end - v.task.row_begin);
  v.HV = p.s.value_heads;
  const int n = v.n, hv = v.hv, HV = v.HV, H = p.s.heads, hq = hv / (HV / H);
  v.at = j * HV + hv;
  const T* q = static_cast<const T*>(p.q);
  const T* k = static_cast<const T*>(p.k);
  for (int i = tid; i < C * D; i += kQkgThreads) {
    const int r = i / D, c = i % D;
    const bool ok = r < n;
    const int64_t row = v.task.row_begin + r;
    const int64_t qk = (row * H + hq) * D + c, vh = (row * HV + hv) * D + c;
    Qs[r * SF + c] = ok ? to_f(q[qk]) : 0.f;
    Ks[r * SF + c] = ok ? to_f(k[qk]) : 0.f;
    Gs[r * SF + c] = ok ? p.g[vh] : 0.f;
    if constexpr (GT == Gates::gdn2) BKs[r * SF + c] = ok ? p.b[vh] : 0.f;
  }
  if constexpr (GT == Gates::kda) {
    for (int r = tid; r < C; r += kQkgThreads)
      v.betas[r] = r < n ? p.beta[(v.task.row_begin + r) * HV + hv] : 0.f;
  }
  for (int i = tid; i < C * C; i += kQkgThreads) {
    const int r = i / C, c = i % C;
    v.DMs[r * SA + c] = p.ws.dm[v.at * C * C + i];
    v.DAs[r * SA + c] = p.ws.da[v.at * C * C + i];
  }
  __syncthreads();
  fwd::scale_rows_and_cumsum<D, GT, kQkgThreads>(Qs, Ks, BKs, Gs, v.betas, SF, p.s.l2norm,
                                                 p.s.scale);
  __syncthreads();
  return true;
}

// What one element (row i, channel c) leaves for the dg and dbeta sums: the gradients of G, of
// k~'s e^{G_last - G} factor and of bk.
struct QkgRest {
  float rg, re, rb;
};

// 2b. Element (i, c) from its four decay-weighted sums: dq~ and dk~ through this value head (pq,
// pk), gdn2's db, and what the sums of step 3 need.
template <int D, Gates GT>
__device__ __forceinline__ QkgRest qkg_element(const Params& p, const Qkg& v, int i, int c,
                                               float dq_m, float dbk_a, float dk_m, float dk_a) {
  constexpr int SF = QkgLayout<D>::SF;
  const float gi = v.Gs[i * SF + c];
  const int64_t slab_at = v.at * C * D + i * D + c;
  const float e_g = __expf(gi), e_l = __expf(v.Gs[(C - 1) * SF + c] - gi);
  const float dq = p.ws.dqg[slab_at] * e_g + dq_m;
  const float dbk = p.ws.dbg[slab_at] * e_g + dbk_a;
  const float dkl = p.ws.dkl[slab_at] * e_l;
  const float dk_part = dkl + dk_m + dk_a;
  const int64_t row = v.task.row_begin + i, vh = (row * v.HV + v.hv) * D + c;
  float bgate = 0.f;
  if constexpr (GT == Gates::kda)
    bgate = v.betas[i];
  else
    bgate = i < v.n ? p.b[vh] : 0.f;
  const float kc = v.Ks[i * SF + c];
  if (i < v.n) {
    p.ws.pq[vh] = dq;
    p.ws.pk[vh] = dk_part + bgate * dbk;
    if constexpr (GT == Gates::gdn2)
      if (p.db) p.db[vh] = dbk * kc;
  }
  return {v.Qs[i * SF + c] * dq + v.BKs[i * SF + c] * dbk - kc * dk_part, dkl * kc, dbk * kc};
}

// 3. dg = the reverse cumsum of dG, with d G_last (sum_i dkl k~ + d e^{G_last} e^{G_last}) at
// the chunk's last row; kda's dbeta = sum_c d(bk) k~ + sum_v d(w v) v. Reads each element's
// QkgRest from Qs (rg), Ks (re) and BKs (rb).
template <int D, Gates GT>
__device__ __forceinline__ void qkg_gates(const Params& p, const Qkg& v) {
  constexpr int SF = QkgLayout<D>::SF;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  for (int c = tid; c < D; c += kQkgThreads) {
    float acc = p.ws.dgl[v.at * D + c];
    for (int i = 0; i < C; ++i) acc += v.Ks[i * SF + c];
    for (int i = C - 1; i >= 0; --i) {
      acc += v.Qs[i * SF + c];
      if (i < v.n && p.dg) p.dg[((v.task.row_begin + i) * v.HV + v.hv) * D + c] = acc;
    }
  }
  if constexpr (GT == Gates::kda) {
    for (int r = warp; r < v.n; r += kQkgThreads / 32) {
      float sum = 0;
      for (int c = lane; c < D; c += 32) sum += v.BKs[r * SF + c];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
      if (lane == 0 && p.dbeta)
        p.dbeta[(v.task.row_begin + r) * v.HV + v.hv] = sum + p.ws.dbv[v.at * C + r];
    }
  }
}

// The products exactly per channel on CUDA cores (knob intra = 0), of chunk task j; false
// when j is past the batch's chunks.
template <typename T, int D, Gates GT>
__device__ __forceinline__ bool dqkg_chunk(const Params& p, int64_t j) {
  using L = QkgLayout<D>;
  constexpr int SF = L::SF, SA = L::SA, PER = C * D / kQkgThreads;
  Qkg v;
  if (!qkg_rows<T, D, GT>(p, j, v)) return false;
  const float *Qs = v.Qs, *Ks = v.Ks, *Gs = v.Gs, *BKs = v.BKs, *DMs = v.DMs, *DAs = v.DAs;
  const int tid = threadIdx.x;

  // 2. Per (row i, channel c): the products with e^{G_i - G_j} (j <= i), all factors <= 1. A
  // thread's elements share their channel ch = tid % D (rows tid / D + m * kRowStep), so each
  // j's k, q, bk and G are read once for all of them; each element still sums its terms in the
  // order of j.
  constexpr int kRowStep = kQkgThreads / D;
  static_assert(kQkgThreads % D == 0, "a thread's elements share one channel");
  const int ch = tid % D, i0 = tid / D;
  float dq_m[PER], dbk_a[PER], dk_m[PER], dk_a[PER], gi[PER];
#pragma unroll
  for (int m = 0; m < PER; ++m) {
    gi[m] = Gs[(i0 + m * kRowStep) * SF + ch];
    dq_m[m] = dbk_a[m] = dk_m[m] = dk_a[m] = 0;
  }
  for (int jj = 0; jj < C; ++jj) {
    const float kr = Ks[jj * SF + ch], gj = Gs[jj * SF + ch];
    const float qr = Qs[jj * SF + ch], bkr = BKs[jj * SF + ch];
#pragma unroll
    for (int m = 0; m < PER; ++m) {
      const int i = i0 + m * kRowStep;
      if (jj <= i) {  // row i against key jj
        const float kj = kr * __expf(gi[m] - gj);
        dq_m[m] += DMs[i * SA + jj] * kj;
        dbk_a[m] += DAs[i * SA + jj] * kj;
      }
      if (jj >= i) {  // key i against row jj
        const float f = __expf(gj - gi[m]);
        dk_m[m] += DMs[jj * SA + i] * qr * f;
        dk_a[m] += DAs[jj * SA + i] * bkr * f;
      }
    }
  }
  QkgRest rest[PER];
#pragma unroll
  for (int m = 0; m < PER; ++m)
    rest[m] = qkg_element<D, GT>(p, v, i0 + m * kRowStep, ch, dq_m[m], dbk_a[m], dk_m[m], dk_a[m]);
  __syncthreads();
#pragma unroll
  for (int m = 0; m < PER; ++m) {
    const int i = i0 + m * kRowStep;
    v.Qs[i * SF + ch] = rest[m].rg;
    v.Ks[i * SF + ch] = rest[m].re;
    v.BKs[i * SF + ch] = rest[m].rb;
  }
  __syncthreads();
  qkg_gates<D, GT>(p, v);
  return true;
}

// ---- dqkg on the tensor cores (Shape::tensor_core_backward, knob intra = 1) -----------------
// The four decay-weighted products of 16-row block I (rows r0 .. s1 = r0 + 15) through a
// reference row, as the forward's prepare takes A: every factor <= 1 off the diagonal block, and
// the diagonal block the same way when its decay span max_c(G_r0 - G_s1) is <= 80, else exactly
// per channel on CUDA cores:
//   dq_m  = e^{G_i - G_r0} . (dAqk [I, :] (k~ e^{G_r0 - G}))    keys j <= s1
//   dbk_a = e^{G_i - G_r0} . (dA   [I, :] (k~ e^{G_r0 - G}))
//   dk_m  = e^{G_s1 - G_i} . (dAqk^T[I, :] (q~ e^{G - G_s1}))   rows ii >= r0
//   dk_a  = e^{G_s1 - G_i} . (dA^T  [I, :] (bk e^{G - G_s1}))
// (dAqk and dA are masked, lower and strictly lower, so the sums stop at the diagonal.) Their
// operands are rounded to bf16 (f32 accumulation). Warp w takes columns 8w .. 8w + 7 of all four
// products, so each of its threads holds the four sums of its elements and finishes them there.

// The bf16 staging after QkgLayout's arrays: k~ e^{G_r0 - G}, q~ e^{G - G_s1} and
// bk e^{G - G_s1}, each [C][SB].
template <int D>
struct QkgTcLayout {
  static constexpr int SB = D + 8;
  static constexpr std::size_t KT = (QkgLayout<D>::bytes + 15) / 16 * 16;
  static constexpr std::size_t QT = KT + C * SB * 2, BT = QT + C * SB * 2;
  static constexpr std::size_t bytes = BT + C * SB * 2;
};

// A (16 x 16 at m0, k0) of an f32 matrix [.][ld] rounded to bf16: A(m, k) = s[m * ld + k], or
// with Trans s[k * ld + m] (kda_mma.cuh's fragment layout).
template <bool Trans>
__device__ __forceinline__ void load_a_f32(const float* s, int ld, int m0, int k0, uint32_t a[4]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = (lane & 3) * 2;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int m = m0 + g + (r & 1) * 8, kk = k0 + t + (r >> 1) * 8;
    const float lo = Trans ? s[kk * ld + m] : s[m * ld + kk];
    const float hi = Trans ? s[(kk + 1) * ld + m] : s[m * ld + kk + 1];
    const __nv_bfloat162 x = __floats2bfloat162_rn(lo, hi);
    a[r] = *reinterpret_cast<const uint32_t*>(&x);
  }
}

// Chunk task j on the tensor cores; false when j is past the batch's chunks.
template <typename T, int D, Gates GT>
__device__ __forceinline__ bool dqkg_tc_chunk(const Params& p, int64_t j) {
  using L = QkgLayout<D>;
  using LT = QkgTcLayout<D>;
  constexpr int SF = L::SF, SA = L::SA, SB = LT::SB;
  constexpr int kTiles = D / 8;  // column tiles of the products: one per warp
  static_assert(kTiles <= kQkgThreads / 32, "a warp per column tile");
  Qkg v;
  if (!qkg_rows<T, D, GT>(p, j, v)) return false;
  const float *Qs = v.Qs, *Ks = v.Ks, *Gs = v.Gs, *BKs = v.BKs, *DMs = v.DMs, *DAs = v.DAs;
  extern __shared__ float4 smem4[];
  unsigned char* raw = reinterpret_cast<unsigned char*>(smem4);
  bf16* KT = reinterpret_cast<bf16*>(raw + LT::KT);
  bf16* QT = reinterpret_cast<bf16*>(raw + LT::QT);
  bf16* BT = reinterpret_cast<bf16*>(raw + LT::BT);
  const int tid = threadIdx.x, warp = tid >> 5;
  const bool tiles_warp = warp < kTiles;
  const int n0 = 8 * warp;

  __shared__ int through_r0[4];
  fwd::decide_through_r0<D>(Gs, SF, true, through_r0);
  __syncthreads();

  QkgRest rest[4][4];  // per block, per accumulator element (unrolled: kept in registers)
#pragma unroll
  for (int I = 0; I < 4; ++I) {
    const int r0 = 16 * I, s1 = r0 + 15;
    const bool diag = through_r0[I];
    // The scaled rows: keys 0 .. s1 (the diagonal block's only through r0), rows r0 .. C - 1
    // (the diagonal block's only through s1). A thread keeps one channel pair (its G_r0, G_s1 in
    // registers) and stores bf16 pairs; e^x as one ex2.
    {
      using linear_attention::ex2, linear_attention::kLog2e;
      constexpr int kPairs = D / 2, kRowStep = kQkgThreads / kPairs;
      static_assert(kQkgThreads % kPairs == 0, "a thread keeps one channel pair");
      const int c = 2 * (tid % kPairs), row0 = tid / kPairs;
      const float r0_lo = Gs[r0 * SF + c], r0_hi = Gs[r0 * SF + c + 1];
      const float s1_lo = Gs[s1 * SF + c], s1_hi = Gs[s1 * SF + c + 1];
      auto store2 = [](bf16* at, float lo, float hi) {
        *reinterpret_cast<uint32_t*>(at) = linear_attention::pack2f<bf16>(lo, hi);
      };
      for (int jj = row0; jj < r0 + 16; jj += kRowStep) {
        const bool on = jj < r0 || diag;
        const float f_lo = on ? ex2((r0_lo - Gs[jj * SF + c]) * kLog2e) : 0.f;
        const float f_hi = on ? ex2((r0_hi - Gs[jj * SF + c + 1]) * kLog2e) : 0.f;
        store2(KT + jj * SB + c, Ks[jj * SF + c] * f_lo, Ks[jj * SF + c + 1] * f_hi);
      }
      for (int ii = r0 + row0; ii < C; ii += kRowStep) {
        const bool on = ii > s1 || diag;
        const float f_lo = on ? ex2((Gs[ii * SF + c] - s1_lo) * kLog2e) : 0.f;
        const float f_hi = on ? ex2((Gs[ii * SF + c + 1] - s1_hi) * kLog2e) : 0.f;
        store2(QT + ii * SB + c, Qs[ii * SF + c] * f_lo, Qs[ii * SF + c + 1] * f_hi);
        store2(BT + ii * SB + c, BKs[ii * SF + c] * f_lo, BKs[ii * SF + c + 1] * f_hi);
      }
    }
    __syncthreads();
    if (tiles_warp) {
      float dq[4] = {}, dbk[4] = {}, dkm[4] = {}, dka[4] = {};
      for (int k0 = 0; k0 < r0 + 16; k0 += 16) {
        uint32_t am[4], ad[4], b[2];
        load_a_f32<false>(DMs, SA, r0, k0, am);
        load_a_f32<false>(DAs, SA, r0, k0, ad);
        load_b<false>(KT, SB, k0, n0, b);
        mma(dq, am, b);
        mma(dbk, ad, b);
      }
      for (int k0 = r0; k0 < C; k0 += 16) {
        uint32_t am[4], ad[4], bq[2], bb[2];
        load_a_f32<true>(DMs, SA, r0, k0, am);
        load_a_f32<true>(DAs, SA, r0, k0, ad);
        load_b<false>(QT, SB, k0, n0, bq);
        load_b<false>(BT, SB, k0, n0, bb);
        mma(dkm, am, bq);
        mma(dka, ad, bb);
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = acc_row(r0, e), c = acc_col(n0, e);
        const float gi = Gs[i * SF + c];
        const float to_r0 = __expf(gi - Gs[r0 * SF + c]), from_s1 = __expf(Gs[s1 * SF + c] - gi);
        float dq_m = dq[e] * to_r0, dbk_a = dbk[e] * to_r0;
        float dk_m = dkm[e] * from_s1, dk_a = dka[e] * from_s1;
        if (!diag) {  // the diagonal block exactly: every factor <= 1
          for (int jj = r0; jj <= i; ++jj) {
            const float kj = Ks[jj * SF + c] * __expf(gi - Gs[jj * SF + c]);
            dq_m += DMs[i * SA + jj] * kj;
            dbk_a += DAs[i * SA + jj] * kj;
          }
          for (int ii = i; ii <= s1; ++ii) {
            const float f = __expf(Gs[ii * SF + c] - gi);
            dk_m += DMs[ii * SA + i] * Qs[ii * SF + c] * f;
            dk_a += DAs[ii * SA + i] * BKs[ii * SF + c] * f;
          }
        }
        rest[I][e] = qkg_element<D, GT>(p, v, i, c, dq_m, dbk_a, dk_m, dk_a);
      }
    }
    __syncthreads();  // the staging is rewritten for the next block
  }
  if (tiles_warp) {
#pragma unroll
    for (int I = 0; I < 4; ++I)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = acc_row(16 * I, e), c = acc_col(n0, e);
        v.Qs[i * SF + c] = rest[I][e].rg;
        v.Ks[i * SF + c] = rest[I][e].re;
        v.BKs[i * SF + c] = rest[I][e].rb;
      }
  }
  __syncthreads();
  qkg_gates<D, GT>(p, v);
  return true;
}

// A chunk task per CTA (flat) or a CTA's tasks in turn (persistent), on the tensor cores (TC)
// or exactly per channel.
template <typename T, int D, Gates GT, bool TC>
__global__ void __launch_bounds__(kQkgThreads) dqkg_kernel(const Params p) {
  linear_attention::for_each_task(p.cap, p.s.persistent, [&](int64_t j) {
    if constexpr (TC)
      return dqkg_tc_chunk<T, D, GT>(p, j);
    else
      return dqkg_chunk<T, D, GT>(p, j);
  });
}

}  // namespace eagle::native::kda::bwd
