// Internal, CUDA sources only: the kda / gdn2 forward's prepare launch in its compact layout
// (Shape::compact_prepare, the plan knob `prepare` = 1). It computes what the wide
// prepare_chunk (kda_fwd_sm90.cu) does, to rounding (its sums and e^x go in another order and by
// ex2, so not bit for bit); what differs is what shared memory holds and how the rows arrive:
//   - q and k stay as their 16-bit input rows, with each row's l2 norm and scale kept beside
//     them, instead of f32 rows scaled in place; kda's erase key beta k is formed when read
//     (gdn2 keeps f32 erase rows: its b is per channel);
//   - Aqk is kept 16-bit, which is what the output launch reads anyway;
//   - the intra-chunk products stage their keys 32 at a time;
//   - the chunk's rows come by cp.async, all in flight at once, and v by 16-byte loads;
//   - the rows' l2 norms take two lanes a row, eight elements at a time (warp_rows16_dot);
//   - G is kept in base-2 units (G log2 e: each e^x one ex2) and the element-wise passes take
//     eight channels at a time (16-byte accesses), the erase and q rows of a block sharing
//     their factors: ncu found the launch bound by issue (62% of slots, the integer pipe
//     busiest), mostly index arithmetic per element (H100, 2026-12-06).
// A kda CTA then takes 112 KB at D = 128 and two fit an SM (228 KB), where the wide layout's
// 190 KB holds one: the prepare was latency-bound at 8 warps per SM (ncu, 2026-12-04).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "engines/native/linear_attention/cp_async.cuh"
#include "engines/native/linear_attention/kda_fwd_common.cuh"
#include "engines/native/linear_attention/persistent.cuh"
#include "engines/native/linear_attention/unit_lower_inverse.cuh"
#include "engines/native/linear_attention/vec8.cuh"

namespace eagle::native::kda::fwd {

// Byte offsets of the compact prepare's shared memory.
template <int D, Gates GT>
struct CompactLayout {
  static constexpr int SG = D + 4;  // f32 rows (G; gdn2's erase keys): 16-byte aligned
  static constexpr int SB = D + 8;  // 16-bit rows: 16-byte aligned, fragment loads conflict-free
  static constexpr int SA = C + 1, ST = C + 8;
  static constexpr std::size_t G = 0;
  static constexpr std::size_t E = G + C * SG * 4;  // gdn2 only
  static constexpr std::size_t K = E + (GT == Gates::gdn2 ? C * SG * 4 : 0);
  static constexpr std::size_t Q = K + C * SB * 2;
  static constexpr std::size_t AKK = Q + C * SB * 2;
  static constexpr std::size_t AQK = AKK + C * SA * 4;
  static constexpr std::size_t VEC = AQK + C * ST * 2;  // beta, rq, rk: [C] f32 each
  static constexpr std::size_t SCR = VEC + 3 * C * 4;
  // The products' staging (16 erase, 16 q and 32 key rows, bf16), then T and the inverse's sums.
  static constexpr std::size_t kStage = 64 * SB * 2, kSolve = (C * SA + 3 * 256) * 4;
  static constexpr std::size_t bytes = SCR + (kStage > kSolve ? kStage : kSolve);
  static_assert(K % 16 == 0 && Q % 16 == 0 && AQK % 16 == 0 && SCR % 16 == 0,
                "cp.async and 16-byte stores need 16-byte aligned regions");
  // The point of the layout: two kda CTAs per sm_90 SM (228 KB, 1 KB reserved per CTA, 16 bytes
  // of static shared memory each).
  static_assert(GT != Gates::kda || 2 * (bytes + 16 + 1024) <= 228 * 1024,
                "two compact kda CTAs must fit an SM");
};

// The intra-chunk products (Shape::fragment_products): rows of block I against keys
// 0 .. 16 I + 15 through r0 = 16 I, (x_i e^{G_i - G_r0}) . (k_j e^{G_r0 - G_j}), as the staged
// route computes them, but each warp builds its A and B fragments in registers from G (base-2
// units), the 16-bit q and k rows and their factors, for a fixed share of the 20 key tiles of 8
// (block 3's 8 tiles over warps 0-2, block 2's 6 over 3-4, block 1's 4 over 5-6, block 0's 2 on
// 7), both kinds (erase, q) on one B. Keys of a diagonal block not taken through r0 give 0 (the
// exact route fills it). Writes Akk (f32, strictly lower) and Aqk (bf16, lower) of its tiles;
// a __syncthreads must follow.
template <typename T, int D, Gates GT>
__device__ __forceinline__ void fragment_products(const float* Gs, const float* Es, const T* Kr,
                                                  const T* Qr, const float* betas, const float* rq,
                                                  const float* rk, const int (&through_r0)[4],
                                                  float* Akk, bf16* Aqk) {
  using L = CompactLayout<D, GT>;
  using T2 = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;
  using linear_attention::ex2, linear_attention::pack2f, linear_attention::unpack2;
  // The mma operands are bf16 for either T (kda_mma.cuh).
  constexpr int SG = L::SG, SB = L::SB, SA = L::SA, ST = L::ST;
  static_assert(kPrepThreads == 256, "the key tiles are shared out over 8 warps");
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c2 = 2 * (lane & 3);
  // Per warp (a nibble each): its block row, first key tile and number of key tiles.
  const int I = (0x01122333 >> (4 * warp)) & 15, t0 = (0x02030630 >> (4 * warp)) & 15,
            nt = (0x22233233 >> (4 * warp)) & 15;
  const int r0 = 16 * I, ra = r0 + g, rb = ra + 8;  // this lane's two rows
  const bool diag = through_r0[I];
  // The rows' factors: kda's erase key beta k (gdn2's erase rows are scaled already), q's scale.
  const float ea = GT == Gates::kda ? betas[ra] * rk[ra] : 1.f;
  const float eb = GT == Gates::kda ? betas[rb] * rk[rb] : 1.f;
  const float qa = rq[ra], qb = rq[rb];
  auto pair = [](const T* at) { return unpack2(*reinterpret_cast<const T2*>(at)); };
  float acc[2][3][4] = {};  // [erase, q][key tile][fragment]
  for (int k0 = 0; k0 < D; k0 += 16) {
    uint32_t ae[4], aq[4];
    float2 gr[2];  // G_r0 at this lane's channels k0 + c2 (+ 1) and k0 + c2 + 8 (+ 1)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int ch = k0 + c2 + 8 * h;
      gr[h] = *reinterpret_cast<const float2*>(Gs + r0 * SG + ch);
      const float2 ga = *reinterpret_cast<const float2*>(Gs + ra * SG + ch);
      const float2 gb = *reinterpret_cast<const float2*>(Gs + rb * SG + ch);
      const float fa0 = ex2(ga.x - gr[h].x), fa1 = ex2(ga.y - gr[h].y);
      const float fb0 = ex2(gb.x - gr[h].x), fb1 = ex2(gb.y - gr[h].y);
      float2 xa, xb;
      if constexpr (GT == Gates::kda) {
        xa = pair(Kr + ra * SB + ch);
        xb = pair(Kr + rb * SB + ch);
      } else {
        xa = *reinterpret_cast<const float2*>(Es + ra * SG + ch);
        xb = *reinterpret_cast<const float2*>(Es + rb * SG + ch);
      }
      // Fragment registers: 0 (row g, k 2c..), 1 (row g + 8), 2 (row g, k 2c + 8..), 3 (g + 8).
      ae[2 * h] = pack2f<bf16>(xa.x * ea * fa0, xa.y * ea * fa1);
      ae[2 * h + 1] = pack2f<bf16>(xb.x * eb * fb0, xb.y * eb * fb1);
      const float2 ya = pair(Qr + ra * SB + ch), yb = pair(Qr + rb * SB + ch);
      aq[2 * h] = pack2f<bf16>(ya.x * qa * fa0, ya.y * qa * fa1);
      aq[2 * h + 1] = pack2f<bf16>(yb.x * qb * fb0, yb.y * qb * fb1);
    }
#pragma unroll
    for (int t = 0; t < 3; ++t) {
      if (t >= nt) break;
      const int key = 8 * (t0 + t) + g;  // B's column g: key `key`, rows (channels) 2c.., 2c + 8..
      uint32_t b[2] = {0, 0};
      if (key < r0 || diag) {
        const float fk = rk[key];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int ch = k0 + c2 + 8 * h;
          const float2 gk = *reinterpret_cast<const float2*>(Gs + key * SG + ch);
          const float2 x = pair(Kr + key * SB + ch);
          b[h] = pack2f<bf16>(x.x * fk * ex2(gr[h].x - gk.x), x.y * fk * ex2(gr[h].y - gk.y));
        }
      }
      mma(acc[0][t], ae, b);
      mma(acc[1][t], aq, b);
    }
  }
#pragma unroll
  for (int t = 0; t < 3; ++t) {
    if (t >= nt) break;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = acc_row(r0, e), col = acc_col(8 * (t0 + t), e);
      Akk[row * SA + col] = col < row ? acc[0][t][e] : 0.f;
      Aqk[row * ST + col] = __float2bfloat16(col <= row ? acc[1][t][e] : 0.f);
    }
  }
}

// Chunk task j of value head blockIdx.y; false when j is past the batch's chunks.
template <typename T, int D, Gates GT>
__device__ __forceinline__ bool prepare_chunk_compact(const Params& p, int64_t j) {
  using L = CompactLayout<D, GT>;
  constexpr int SG = L::SG, SB = L::SB, SA = L::SA, ST = L::ST;
  extern __shared__ float4 smem4[];
  unsigned char* sm = reinterpret_cast<unsigned char*>(smem4);
  float* Gs = reinterpret_cast<float*>(sm + L::G);
  float* Es = reinterpret_cast<float*>(sm + L::E);
  T* Kr = reinterpret_cast<T*>(sm + L::K);
  T* Qr = reinterpret_cast<T*>(sm + L::Q);
  float* Akk = reinterpret_cast<float*>(sm + L::AKK);
  bf16* Aqk = reinterpret_cast<bf16*>(sm + L::AQK);
  float* betas = reinterpret_cast<float*>(sm + L::VEC);
  float* rq = betas + C;
  float* rk = rq + C;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int hv = blockIdx.y;
  const ragged::ChunkTask task = chunk_of(p, j);
  if (task.sequence < 0) return false;
  const int n = static_cast<int>(task.row_end - task.row_begin);
  const int HV = p.s.value_heads, H = p.s.heads, hq = hv / (HV / H);
  const T* q = static_cast<const T*>(p.q);
  const T* k = static_cast<const T*>(p.k);
  const T* v = static_cast<const T*>(p.v);
  // Row r's buffer row; past the chunk the tensor's row 0 stands in as an address (cp.async
  // reads nothing there and writes zeros).
  auto row_of = [&](int r) { return r < n ? task.row_begin + r : int64_t{0}; };

  // 1. The chunk's rows, every copy in flight at once (zeros past its end).
  using linear_attention::cp_async16;
  using linear_attention::ex2, linear_attention::kLog2e, linear_attention::load8,
      linear_attention::pack8, linear_attention::store8;
  for (int i = tid; i < C * (D / 8); i += kPrepThreads) {
    const int r = i / (D / 8), c = (i % (D / 8)) * 8;
    const int64_t qk = (row_of(r) * H + hq) * D + c;
    cp_async16(Qr + r * SB + c, q + qk, r < n);
    cp_async16(Kr + r * SB + c, k + qk, r < n);
  }
  for (int i = tid; i < C * (D / 4); i += kPrepThreads) {
    const int r = i / (D / 4), c = (i % (D / 4)) * 4;
    const int64_t vh = (row_of(r) * HV + hv) * D + c;
    cp_async16(Gs + r * SG + c, p.g + vh, r < n);
    if constexpr (GT == Gates::gdn2) cp_async16(Es + r * SG + c, p.b + vh, r < n);
  }
  if constexpr (GT == Gates::kda) {
    for (int r = tid; r < C; r += kPrepThreads)
      betas[r] = r < n ? p.beta[(task.row_begin + r) * HV + hv] : 0.f;
  }
  linear_attention::cp_async_commit();
  linear_attention::cp_async_wait<0>();
  __syncthreads();

  // 2. Each row's factors of q and k (kept, not applied): warps 0-3 take q's rows 16 w.., warps
  // 4-7 k's, two lanes a row eight elements at a time (warp_rows16_dot); G = cumsum of g per
  // channel, in base-2 units; then (gdn2) the erase key b k.
  {
    static_assert(kPrepThreads == 256, "eight warps: four for q's rows, four for k's");
    const bool is_k = warp >= 4;
    const int row0 = 16 * (warp & 3);
    const float f =
        p.s.l2norm ? linear_attention::warp_rows16_inv_norm<T, D>(is_k ? Kr : Qr, SB, row0) : 1.f;
    if (lane < 16) {
      if (is_k)
        rk[row0 + lane] = f;
      else
        rq[row0 + lane] = f * p.s.scale;
    }
  }
  for (int c = tid; c < D; c += kPrepThreads) {
    float acc = 0;
    for (int r = 0; r < C; ++r) {
      acc += Gs[r * SG + c];
      Gs[r * SG + c] = acc * kLog2e;
    }
  }
  __syncthreads();
  if constexpr (GT == Gates::gdn2) {  // b k, with k's factor from above; read after 3a's barrier
    for (int r = warp; r < C; r += kPrepThreads / 32)
      for (int c = lane; c < D; c += 32) Es[r * SG + c] *= to_f(Kr[r * SB + c]) * rk[r];
  }
  // The scaled rows as the wide layout holds them: q, k and the erase key b k.
  auto qv = [&](int r, int c) { return to_f(Qr[r * SB + c]) * rq[r]; };
  auto kv = [&](int r, int c) { return to_f(Kr[r * SB + c]) * rk[r]; };
  auto ev = [&](int r, int c) {
    if constexpr (GT == Gates::kda)
      return betas[r] * kv(r, c);
    else
      return Es[r * SG + c];
  };
  // ev's eight channels c.. of row r.
  auto erase8 = [&](int r, int c, float(&x)[8]) {
    if constexpr (GT == Gates::kda) {
      load8(Kr + r * SB + c, x);
      const float f = betas[r] * rk[r];
#pragma unroll
      for (int e = 0; e < 8; ++e) x[e] *= f;
    } else {
      load8(Es + r * SG + c, x);
    }
  };

  // 3a. Whether each 16-row diagonal block goes through its first row (decide_through_r0).
  __shared__ int through_r0[4];
  decide_through_r0<D>(Gs, SG, p.s.tensor_core_diagonal, through_r0, kLog2e);
  __syncthreads();
  // 3b. Rows of block I against keys 0 .. r0 + 15 on the tensor cores, through r0, 32 keys at a
  // time: (x_i e^{G_i - G_r0}) . (k_j e^{G_r0 - G_j}); or with fragments built in registers.
  if (p.s.fragment_products) {
    fragment_products<T, D, GT>(Gs, Es, Kr, Qr, betas, rq, rk, through_r0, Akk, Aqk);
    __syncthreads();
  } else {
    bf16* st = reinterpret_cast<bf16*>(sm + L::SCR);  // rows: 16 erase, 16 q, then 32 keys
    for (int I = 0; I < 4; ++I) {
      const int r0 = 16 * I, keys = r0 + 16;
      const bool diag = through_r0[I];
      for (int k0 = 0; k0 < keys; k0 += 32) {
        const int nk = keys - k0 < 32 ? keys - k0 : 32;
        // The erase and q rows once per block row, one factor e^{G_i - G_r0} for both.
        if (k0 == 0)
          for (int u = tid; u < 16 * (D / 8); u += kPrepThreads) {
            const int s = u / (D / 8), c = (u % (D / 8)) * 8, row = r0 + s;
            float gr[8], f[8], x[8], y[8];
            load8(Gs + r0 * SG + c, gr);
            load8(Gs + row * SG + c, f);
#pragma unroll
            for (int e = 0; e < 8; ++e) f[e] = ex2(f[e] - gr[e]);
            erase8(row, c, x);
#pragma unroll
            for (int e = 0; e < 8; ++e) y[e] = x[e] * f[e];
            store8(st + s * SB + c, y);
            load8(Qr + row * SB + c, x);
            const float fq = rq[row];
#pragma unroll
            for (int e = 0; e < 8; ++e) y[e] = x[e] * fq * f[e];
            store8(st + (16 + s) * SB + c, y);
          }
        for (int u = tid; u < nk * (D / 8); u += kPrepThreads) {
          const int s = u / (D / 8), c = (u % (D / 8)) * 8, key = k0 + s;
          float y[8] = {};
          if (key < r0 || diag) {
            float gr[8], g[8], x[8];
            load8(Gs + r0 * SG + c, gr);
            load8(Gs + key * SG + c, g);
            load8(Kr + key * SB + c, x);
            const float fk = rk[key];
#pragma unroll
            for (int e = 0; e < 8; ++e) y[e] = x[e] * fk * ex2(gr[e] - g[e]);
          }
          store8(st + (32 + s) * SB + c, y);
        }
        __syncthreads();
        const int tiles = nk / 8;
        for (int t = warp; t < 2 * tiles; t += kPrepThreads / 32) {
          const bool is_q = t >= tiles;
          const int n0 = 8 * (t % tiles);
          float acc[1][4] = {};
          mma_rows<true, true, 1>(acc, st, SB, is_q ? 16 : 0, st + 32 * SB, SB, n0, D);
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int row = r0 + acc_row(0, e), col = k0 + acc_col(n0, e);
            const bool keep = col < r0 || (is_q ? col <= row : col < row);
            const float a = keep ? acc[0][e] : 0.f;
            if (is_q)
              Aqk[row * ST + col] = __float2bfloat16(a);
            else
              Akk[row * SA + col] = a;
          }
        }
        __syncthreads();
      }
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
          const float kr = kv(rj, c) * ex2(Gs[ri * SG + c] - Gs[rj * SG + c]);
          kk += ev(ri, c) * kr;
          qk += qv(ri, c) * kr;
        }
      }
      Akk[ri * SA + rj] = jj < i ? kk : 0.f;
      Aqk[ri * ST + rj] = __float2bfloat16(qk);
    }
  }
  __syncthreads();

  // 4. T = (I + A)^-1 over the staging (it ends with a __syncthreads).
  float* Tm = reinterpret_cast<float*>(sm + L::SCR);
  linear_attention::invert_unit_lower_64<kPrepThreads>(Akk, Tm, SA, Tm + C * SA);

  // 5. What the state and output launches read: q e^G, k e^{G_last - G}, e^{G_last}, Aqk; two
  // elements per store.
  const int64_t at = slab(p, j, hv);
  {
    bf16* qg = p.ws.qg + at * C * D;
    bf16* kg = p.ws.kg + at * C * D;
    for (int u = tid; u < C * (D / 8); u += kPrepThreads) {
      const int r = u / (D / 8), c = (u % (D / 8)) * 8;
      float g[8], gl[8], x[8], y[8];
      load8(Gs + r * SG + c, g);
      load8(Gs + (C - 1) * SG + c, gl);
      load8(Qr + r * SB + c, x);
      const float fq = rq[r], fk = rk[r];
#pragma unroll
      for (int e = 0; e < 8; ++e) y[e] = x[e] * fq * ex2(g[e]);
      store8(qg + r * D + c, y);
      load8(Kr + r * SB + c, x);
#pragma unroll
      for (int e = 0; e < 8; ++e) y[e] = x[e] * fk * ex2(gl[e] - g[e]);
      store8(kg + r * D + c, y);
    }
    for (int c = tid; c < D; c += kPrepThreads) p.ws.gl[at * D + c] = ex2(Gs[(C - 1) * SG + c]);
    bf16* aqk = p.ws.aqk + at * C * C;
    const bf16 zero = __float2bfloat16(0.f);
    for (int u = tid; u < C * (C / 8); u += kPrepThreads) {
      const int r = u / (C / 8), c = (u % (C / 8)) * 8;
      uint4 raw = *reinterpret_cast<const uint4*>(Aqk + r * ST + c);
      bf16* x = reinterpret_cast<bf16*>(&raw);
#pragma unroll
      for (int e = 0; e < 8; ++e)
        if (c + e > r) x[e] = zero;
      *reinterpret_cast<uint4*>(aqk + r * C + c) = raw;
    }
  }
  __syncthreads();

  // 6. W = T (b k e^G), U = T (w v): T over Aqk, b k e^G over k in place (each element read and
  // written by one thread), w v over q; eight elements at a time.
  bf16* Tb = Aqk;
  bf16* R1 = reinterpret_cast<bf16*>(Kr);
  bf16* R2 = reinterpret_cast<bf16*>(Qr);
  for (int u = tid; u < C * (C / 8); u += kPrepThreads) {
    const int r = u / (C / 8), c = (u % (C / 8)) * 8;
    float x[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) x[e] = Tm[r * SA + c + e];
    const uint4 raw = pack8(x);
    *reinterpret_cast<uint4*>(Tb + r * ST + c) = raw;
    if (p.ws.t) *reinterpret_cast<uint4*>(p.ws.t + at * C * C + r * C + c) = raw;
  }
  for (int u = tid; u < C * (D / 8); u += kPrepThreads) {
    const int r = u / (D / 8), c = (u % (D / 8)) * 8;
    float g[8], x[8];
    load8(Gs + r * SG + c, g);
    erase8(r, c, x);
#pragma unroll
    for (int e = 0; e < 8; ++e) x[e] *= ex2(g[e]);
    store8(R1 + r * SB + c, x);
  }
  for (int i = tid; i < C * (D / 8); i += kPrepThreads) {
    const int r = i / (D / 8), c = (i % (D / 8)) * 8;
    float wv[8] = {};
    if (r < n) {
      const int64_t vh = ((task.row_begin + r) * HV + hv) * D + c;
      const uint4 raw = *reinterpret_cast<const uint4*>(v + vh);
      const T* x = reinterpret_cast<const T*>(&raw);
#pragma unroll
      for (int e = 0; e < 8; ++e) wv[e] = to_f(x[e]) * (GT == Gates::kda ? betas[r] : p.w[vh + e]);
    }
    uint4 packed;
    auto* out = reinterpret_cast<__nv_bfloat162*>(&packed);
#pragma unroll
    for (int e = 0; e < 4; ++e) out[e] = __floats2bfloat162_rn(wv[2 * e], wv[2 * e + 1]);
    *reinterpret_cast<uint4*>(R2 + r * SB + c) = packed;
  }
  __syncthreads();
  // G's rows are dead by now (R1 was formed from them before the barrier above): the staged
  // stores' tiles (8 warps x 16 x D bf16) fit where they were.
  static_assert(8 * 16 * D * 2 <= C * SG * 4, "the staged W / U tiles fit in G's region");
  store_w_u<D>(p, at, Tb, ST, R1, R2, SB,
               p.s.staged_stores ? reinterpret_cast<bf16*>(sm + L::G) : nullptr);
  return true;
}

// A chunk task per CTA (flat) or a CTA's tasks in turn (persistent); two CTAs per SM for kda.
template <typename T, int D, Gates GT>
__global__ void __launch_bounds__(kPrepThreads, 2) prepare_compact_kernel(const Params p) {
  linear_attention::for_each_task(p.cap, p.s.persistent,
                                  [&](int64_t j) { return prepare_chunk_compact<T, D, GT>(p, j); });
}

}  // namespace eagle::native::kda::fwd
