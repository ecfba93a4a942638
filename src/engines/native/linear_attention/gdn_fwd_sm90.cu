// The gdn forward's kernels (gdn_kernels.hpp): prepare, state and output, each over tiles in
// shared memory with mma.sync products (chunk_common.cuh). 128 threads (4 warps) per CTA; warp w
// owns rows [16 w, 16 w + 16) of a chunk's 64 in the row-parallel products.
#include <cuda_runtime.h>

#include "eagle/ragged/schedule.hpp"
#include "engines/native/linear_attention/chunk_common.cuh"
#include "engines/native/linear_attention/gdn_kernels.hpp"
#include "engines/native/linear_attention/persistent.cuh"
#include "engines/native/linear_attention/unit_lower_inverse.cuh"
#include "engines/native/linear_attention/vec8.cuh"

namespace eagle::native::linear_attention {

namespace {

constexpr int kThreads = 128;
constexpr int kC = kGdnChunk;
constexpr int kStateBlockV = 32;  // V columns of the state per sequential CTA
constexpr std::size_t kAlign = 256;

std::size_t round_up(std::size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

// What every kernel reads: the problem, its operands and the workspace arrays.
struct Params {
  const int32_t* cu;
  const int32_t* offsets;
  int64_t slots, tokens;
  int H, HV, group;
  int multiprocessors;  // the device's, for the split state rows' balanced share (rows_split)
  float scale;
  bool l2, safe_gate, beta_sigmoid, blocked_solve;
  bool staged_stores;  // W, U and o through shared memory, in 16-byte pieces
  // Each CTA loops over tasks blockIdx.x, + gridDim.x, ... (else one): the chunk launches, the
  // state launch.
  bool persistent, persistent_state;
  int64_t capacity_chunks;             // G_cap: the chunk tasks a flat grid covers
  Real g_t, beta_t, param_t, state_t;  // g; beta; a_log and dt_bias; the states
  const void *q, *k, *v, *g, *beta, *a_log, *dt_bias, *h0;
  void *o, *hN;
  float* gc;  // [T, HV] the gate's cumulative sum within each chunk
  float* rk;  // [T, H] inverse l2 norms of k rows (l2 only)
  float* dk;  // [T, HV] the state-rows update's row factor e^{G_last - G_t} / |k_t|
  void* w;    // [T, HV, K]
  void* u;    // [T, HV, V]: U, then v' (the state kernel overwrites it)
  void* h;    // [G_cap, HV, K, V]: the state at each chunk's start
};

// Byte offsets of the workspace arrays.
struct Layout {
  std::size_t gc, rk, dk, w, u, h, total;
};

Layout layout_of(const GdnShape& s, int64_t chunks) {
  const std::size_t t = static_cast<std::size_t>(s.tokens), hv = s.value_heads;
  const std::size_t e = 2;  // bf16, f16
  Layout l{};
  l.gc = 0;
  l.rk = l.gc + round_up(t * hv * sizeof(float));
  l.dk = l.rk + round_up(t * s.heads * sizeof(float));
  l.w = l.dk + round_up(t * hv * sizeof(float));
  l.u = l.w + round_up(t * hv * s.key_dim * e);
  l.h = l.u + round_up(t * hv * s.value_dim * e);
  l.total = l.h + round_up(static_cast<std::size_t>(chunks) * hv * s.key_dim * s.value_dim * e);
  return l;
}

// This lane's two rows of its warp's 16 in an accumulator tile (elements 0-1 and 2-3), with their
// G and a per-row factor, from shared memory.
struct LaneRows {
  int row[2];
  float g[2], f[2];
};
__device__ __forceinline__ LaneRows lane_rows(int warp, const float* gcs, const float* factor) {
  LaneRows r;
  for (int half = 0; half < 2; ++half) {
    r.row[half] = 16 * warp + acc_row(2 * half);
    r.g[half] = gcs[r.row[half]];
    r.f[half] = factor[r.row[half]];
  }
  return r;
}

__device__ __forceinline__ float softplus(float z) {
  return z > 0 ? z + log1pf(expf(-z)) : log1pf(expf(z));
}

// ---- prepare: per (chunk, value head) ---------------------------------------------------------

// Compact (GdnShape::compact_prepare): kb over kn and tm over af, each once the other is done.
template <typename T, int K, int V, bool Compact>
struct PrepareSmem {
  static constexpr int LK = K + 8, LV = V + 8, LT = kC + 8, LA = kC + 1;
  static constexpr std::size_t bytes =
      sizeof(T) * ((Compact ? 1 : 2) * kC * LK + kC * LV + (Compact ? 0 : kC * LT)) +
      sizeof(float) * (2 * kC * LA + 3 * kC + 3 * 256);  // + the blocked inverse's sums
  static_assert(kC * LT * sizeof(T) <= kC * LA * sizeof(float), "T's copy must fit over A");
  // The point of the compact layout: three CTAs per sm_90 SM (228 KB, 1 KB reserved per CTA).
  static_assert(!Compact || 3 * (bytes + 1024) <= 228 * 1024, "three compact CTAs must fit an SM");
};

// Chunk task j of value head blockIdx.y; false when j is past the batch's chunks.
template <typename T, int K, int V, bool Compact>
__device__ __forceinline__ bool prepare_chunk(const Params& p, int64_t j) {
  using E = Elem<T>;
  using L = PrepareSmem<T, K, V, Compact>;
  constexpr int LK = L::LK, LV = L::LV, LT = L::LT, LA = L::LA;
  const ragged::ChunkTask task = ragged::chunk_task(p.cu, p.offsets, p.slots, p.tokens, kC, j);
  if (task.sequence < 0) return false;
  const int h = blockIdx.y, kh = h / p.group;
  const int64_t r0 = task.row_begin;
  const int n = static_cast<int>(task.row_end - task.row_begin);
  if (n <= 0) return true;  // only under metadata ragged::validate rejects
  extern __shared__ __align__(16) unsigned char smem[];
  T* kn = reinterpret_cast<T*>(smem);   // [64][LK] k rows (normalized)
  T* kb = Compact ? kn : kn + kC * LK;  // [64][LK] beta exp(G) k
  T* vb = kb + kC * LK;                 // [64][LV] beta v
  T* after_vb = vb + kC * LV;           // wide: [64][LT] T = (I + A)^-1
  float* af = reinterpret_cast<float*>(Compact ? after_vb : after_vb + kC * LT);  // [64][LA] A
  T* tm = Compact ? reinterpret_cast<T*>(af) : after_vb;  // compact: T over A once inverted
  float* tf = af + kC * LA;                               // [64][LA] T in f32
  float* gcs = tf + kC * LA;                              // [64] G log2 e (base-2 units)
  float* bs = gcs + kC;                                   // [64] beta
  float* inv = bs + kC;                                   // [64] inverse norms of k rows
  float* sums = inv + kC;  // [3 * 256] the blocked inverse's block sums (solve = 1)
  const int tid = threadIdx.x, warp = tid / 32, lane = tid & 31;

  // The rows by cp.async (n >= 1 here), in flight while warp 0 reads the gates.
  load_chunk_rows<T, K, kC, true>(kn, LK, static_cast<const T*>(p.k) + (r0 * p.H + kh) * K,
                                  static_cast<int64_t>(p.H) * K, n);
  load_chunk_rows<T, V, kC, true>(vb, LV, static_cast<const T*>(p.v) + (r0 * p.HV + h) * V,
                                  static_cast<int64_t>(p.HV) * V, n);
  cp_async_commit();
  if (warp == 0) {
    // Lane l holds rows 2l and 2l + 1; rows past the chunk have g = 0 (G stays at the last
    // row's) and beta = 0.
    float gv[2] = {0, 0}, bv[2] = {0, 0};
    for (int e = 0; e < 2; ++e) {
      const int i = 2 * lane + e;
      if (i >= n) continue;
      const int64_t at = (r0 + i) * p.HV + h;
      float g = load_real(p.g, at, p.g_t);
      if (p.safe_gate)
        g = -expf(load_real(p.a_log, h, p.param_t)) *
            softplus(g + load_real(p.dt_bias, h, p.param_t));
      float b = load_real(p.beta, at, p.beta_t);
      if (p.beta_sigmoid) b = 1.0f / (1.0f + expf(-b));
      gv[e] = g;
      bv[e] = b;
    }
    const float pair = gv[0] + gv[1];
    float incl = pair;
    for (int o = 1; o < 32; o <<= 1) {
      const float y = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += y;
    }
    const float g0 = incl - pair + gv[0];
    gcs[2 * lane] = kLog2e * g0;
    gcs[2 * lane + 1] = kLog2e * incl;
    bs[2 * lane] = bv[0];
    bs[2 * lane + 1] = bv[1];
    if (2 * lane < n) p.gc[(r0 + 2 * lane) * p.HV + h] = g0;
    if (2 * lane + 1 < n) p.gc[(r0 + 2 * lane + 1) * p.HV + h] = incl;
  }
  cp_async_wait<0>();
  __syncthreads();
  if (p.l2) {
    normalize_rows<T, K>(kn, LK, inv);
    __syncthreads();
    if (h % p.group == 0)
      for (int i = tid; i < n; i += kThreads) p.rk[(r0 + i) * p.H + kh] = inv[i];
  }
  // The state-rows launch scales row t of v' by this before the update; here it is one exp a
  // row and head, there it would be one per element on that launch's serial path.
  for (int i = tid; i < n; i += kThreads)
    p.dk[(r0 + i) * p.HV + h] = ex2(gcs[n - 1] - gcs[i]) * (p.l2 ? inv[i] : 1.0f);

  // beta exp(G) k and beta v, the right-hand sides of W and U (compact: kb after A, over kn);
  // eight elements at a time, one factor per row (vec8.cuh).
  auto scale_rows = [&]<int Cols, bool Gated>(const T* from, T* to, int ld) {
    for (int e = tid; e < kC * (Cols / 8); e += kThreads) {
      const int i = e / (Cols / 8), c = (e % (Cols / 8)) * 8;
      const float f = Gated ? bs[i] * ex2(gcs[i]) : bs[i];
      float x[8];
      load8(from + i * ld + c, x);
#pragma unroll
      for (int m = 0; m < 8; ++m) x[m] *= f;
      store8(to + i * ld + c, x);
    }
  };
  auto form_kb = [&] { scale_rows.template operator()<K, true>(kn, kb, LK); };
  if constexpr (!Compact) form_kb();
  scale_rows.template operator()<V, false>(vb, vb, LV);
  // A = beta_i exp(G_i - G_j) k_i . k_j, strictly lower.
  {
    float acc[8][4] = {};
    for (int k0 = 0; k0 < K; k0 += 16) {
      uint32_t a[4];
      frag_a_mk(a, kn, LK, 16 * warp, k0);
      mma_tiles<true>(acc, a, kn, LK, 0, k0);
    }
    // This lane's two rows (their beta as the factor), a column pair at a time.
    const LaneRows lr = lane_rows(warp, gcs, bs);
    for (int nt = 0; nt < 8; ++nt) {
      const int j = nt * 8 + acc_col(0);
      const float2 g_col = *reinterpret_cast<const float2*>(gcs + j);
      for (int half = 0; half < 2; ++half) {
        const int i = lr.row[half];
        const float x0 = lr.f[half] * ex2(lr.g[half] - g_col.x) * acc[nt][2 * half];
        const float x1 = lr.f[half] * ex2(lr.g[half] - g_col.y) * acc[nt][2 * half + 1];
        af[i * LA + j] = j < i && i < n ? x0 : 0.0f;
        af[i * LA + j + 1] = j + 1 < i && i < n ? x1 : 0.0f;
      }
    }
  }
  __syncthreads();
  // Each element of kn read and rewritten by one thread; the inverse reads none of it.
  if constexpr (Compact) form_kb();
  if (p.blocked_solve) {
    invert_unit_lower_64<kThreads>(af, tf, LA, sums);
  } else {
    // T = (I + A)^-1 by forward substitution, one column per thread (columns are independent).
    if (tid < kC) {
      const int c = tid;
      for (int i = 0; i < kC; ++i) {
        float x = i == c ? 1.0f : 0.0f;
        for (int j = c; j < i; ++j) x -= af[i * LA + j] * tf[j * LA + c];
        tf[i * LA + c] = x;
      }
    }
    __syncthreads();
  }
  for (int e = tid; e < kC * (kC / 8); e += kThreads) {
    const int i = e / (kC / 8), c = (e % (kC / 8)) * 8;
    float x[8];
#pragma unroll
    for (int m = 0; m < 8; ++m) x[m] = tf[i * LA + c + m];
    store8(tm + i * LT + c, x);
  }
  __syncthreads();

  // W = T kb, U = T vb: rows of this warp, 64 columns at a time. Staged stores go through the
  // warp's [16][72] tile over tf (free once T's 16-bit copy is made).
  T* stage = p.staged_stores ? reinterpret_cast<T*>(tf) + warp * 16 * (64 + 8) : nullptr;
  auto product = [&](const T* rhs, int ld, int cols, T* out, int64_t stride) {
    for (int n0 = 0; n0 < cols; n0 += 64) {
      float acc[8][4] = {};
      for (int k0 = 0; k0 < kC; k0 += 16) {
        uint32_t a[4];
        frag_a_mk(a, tm, LT, 16 * warp, k0);
        mma_tiles<false>(acc, a, rhs, ld, n0, k0);
      }
      store_acc_rows<T, 8>(out + 16 * warp * stride + n0, stride, acc, n - 16 * warp, stage);
    }
  };
  product(kb, LK, K, static_cast<T*>(p.w) + (r0 * p.HV + h) * K, static_cast<int64_t>(p.HV) * K);
  product(vb, LV, V, static_cast<T*>(p.u) + (r0 * p.HV + h) * V, static_cast<int64_t>(p.HV) * V);
  return true;
}

// A chunk task per CTA (flat) or a CTA's tasks in turn (persistent): for_each_task.
template <typename T, int K, int V, bool Compact>
__global__ void __launch_bounds__(kThreads) gdn_prepare(const Params p) {
  for_each_task(p.capacity_chunks, p.persistent,
                [&](int64_t j) { return prepare_chunk<T, K, V, Compact>(p, j); });
}

// ---- state: per (sequence, value head, V block), sequential over the chunks ---------------------

// Slot s's rows [begin, end), its first chunk's index and how many of its chunks run: those its
// rows need, no more than the chunk offsets give it.
struct SlotChunks {
  int64_t begin, end, first, chunks;
};
__device__ __forceinline__ SlotChunks slot_chunks(const Params& p, int64_t s) {
  SlotChunks r;
  r.begin = ragged::clamp_row(p.cu[s], 0, p.tokens);
  r.end = ragged::clamp_row(p.cu[s + 1], r.begin, p.tokens);
  r.first = p.offsets[s];
  const int64_t own = static_cast<int64_t>(p.offsets[s + 1]) - r.first;
  const int64_t need = (r.end - r.begin + kC - 1) / kC;
  r.chunks = own < need ? own : need;
  return r;
}

// A CTA covers Groups V blocks of BV columns, four warps each, sharing the chunk's W and k rows
// in shared memory (Groups = V / BV: one CTA per head, W and k read once per chunk). Pipelined:
// two buffers of a chunk's W, k and U rows, G and the k rows' inverse norms, the next chunk's
// loaded by cp.async while this one is computed (the loads are otherwise on the critical path
// of a sequence's chunks).
template <typename T, int K, int BV, int Groups, bool Pipelined>
struct StateSmem {
  static constexpr int LK = K + 8, LB = BV + 8, LU = Groups * BV + 8;
  static constexpr int kBuffers = Pipelined ? 2 : 1;
  static constexpr int kChunkElems = 2 * kC * LK + kC * LU;  // W, k [64][LK]; U [64][LU]
  // Per group: the state [K][LB] and vd [64][LB].
  static constexpr int kGroupElems = K * LB + kC * LB;
  static constexpr std::size_t bytes = sizeof(T) * (kBuffers * kChunkElems + Groups * kGroupElems) +
                                       sizeof(float) * kBuffers * 2 * kC;
};

// Sequence slot s, value head blockIdx.y, V blocks Groups vb .. Groups vb + Groups - 1 (warps
// 4 g .. 4 g + 3 the g-th).
template <typename T, int K, int V, int BV, int Groups, bool Pipelined>
__device__ __forceinline__ void state_slot(const Params& p, int64_t s, int vb) {
  using E = Elem<T>;
  using L = StateSmem<T, K, BV, Groups, Pipelined>;
  constexpr int LK = L::LK, LB = L::LB, LU = L::LU;
  constexpr int MT = K / 64, NT = BV / 8;  // per warp: K / 4 key rows, BV columns
  const int tid = threadIdx.x, group = tid / kThreads, warp = (tid % kThreads) / 32;
  const int h = blockIdx.y, kh = h / p.group, u0 = vb * Groups * BV, v0 = u0 + group * BV;
  const SlotChunks range = slot_chunks(p, s);
  const int64_t begin = range.begin, end = range.end, first = range.first, chunks = range.chunks;
  extern __shared__ __align__(16) unsigned char smem[];
  T* chunk_rows = reinterpret_cast<T*>(smem);  // per buffer: W, k (as given) [64][LK]; U [64][LU]
  T* hs = chunk_rows + L::kBuffers * L::kChunkElems + group * L::kGroupElems;  // [K][LB] the state
  T* vd = hs + K * LB;  // [64][LB] v' exp(G_last - G) / |k|
  // Per buffer: G [64] and the inverse norms of the k rows [64].
  float* gate_rows =
      reinterpret_cast<float*>(chunk_rows + L::kBuffers * L::kChunkElems + Groups * L::kGroupElems);
  T* const u = static_cast<T*>(p.u);
  // Chunk c's W, k and U rows, G and inverse norms into buffer b: synchronous, or cp.async (then
  // in flight). Rows past the chunk repeat the last G.
  auto load_rows = [&](int64_t c, int b) {
    const int64_t r0 = begin + c * kC;
    const int n = static_cast<int>(end - r0 < kC ? end - r0 : kC);
    T* w_rows = chunk_rows + b * L::kChunkElems;
    T* k_rows = w_rows + kC * LK;
    T* u_rows = k_rows + kC * LK;
    const T* w_at = static_cast<const T*>(p.w) + (r0 * p.HV + h) * K;
    const T* k_at = static_cast<const T*>(p.k) + (r0 * p.H + kh) * K;
    const T* u_at = u + (r0 * p.HV + h) * V + u0;
    load_chunk_rows<T, K, kC, Pipelined>(w_rows, LK, w_at, static_cast<int64_t>(p.HV) * K, n);
    load_chunk_rows<T, K, kC, Pipelined>(k_rows, LK, k_at, static_cast<int64_t>(p.H) * K, n);
    load_chunk_rows<T, Groups * BV, kC, Pipelined>(u_rows, LU, u_at, static_cast<int64_t>(p.HV) * V,
                                                   n);
    if (tid < kC) {
      const int i = tid < n ? tid : n - 1;
      float* g_dst = gate_rows + b * 2 * kC + tid;
      const float* g_src = p.gc + (r0 + i) * p.HV + h;
      const float* r_src = p.rk + (r0 + i) * p.H + kh;
      if constexpr (Pipelined) {
        cp_async4(g_dst, g_src);
        if (p.l2) cp_async4(g_dst + kC, r_src);
      } else {
        g_dst[0] = *g_src;
        if (p.l2) g_dst[kC] = *r_src;
      }
      if (!p.l2) g_dst[kC] = 1.0f;
    }
  };

  const int64_t state_at = (s * p.HV + h) * static_cast<int64_t>(K) * V;
  float S[MT][NT][4];
  for (int mt = 0; mt < MT; ++mt)
    for (int nt = 0; nt < NT; ++nt)
      for (int e = 0; e < 4; ++e) {
        const int key = warp * (K / 4) + mt * 16 + acc_row(e), col = v0 + nt * 8 + acc_col(e);
        S[mt][nt][e] = p.h0 ? load_real(p.h0, state_at + key * V + col, p.state_t) : 0.0f;
      }

  if constexpr (Pipelined) {
    if (chunks > 0) load_rows(0, 0);
    cp_async_commit();
  }
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t r0 = begin + c * kC;
    const int n = static_cast<int>(end - r0 < kC ? end - r0 : kC);
    const int buffer = Pipelined ? static_cast<int>(c & 1) : 0;
    T* ws = chunk_rows + buffer * L::kChunkElems;    // [64][LK] W
    T* ks = ws + kC * LK;                            // [64][LK] k (as given)
    T* us = ks + kC * LK + group * BV;               // [64][LU] U, this group's columns
    const float* gcs = gate_rows + buffer * 2 * kC;  // [64] G
    const float* inv = gcs + kC;                     // [64] inverse norms of the k rows
    T* hout = static_cast<T*>(p.h) + ((first + c) * p.HV + h) * static_cast<int64_t>(K) * V;
    for (int mt = 0; mt < MT; ++mt)
      for (int nt = 0; nt < NT; ++nt)
        for (int e = 0; e < 4; e += 2) {
          const int key = warp * (K / 4) + mt * 16 + acc_row(e), col = nt * 8 + acc_col(e);
          const uint32_t x = pack2f<T>(S[mt][nt][e], S[mt][nt][e + 1]);
          *reinterpret_cast<uint32_t*>(hs + key * LB + col) = x;
          *reinterpret_cast<uint32_t*>(hout + key * V + v0 + col) = x;
        }
    if constexpr (Pipelined) {
      // The other buffer was last read in the previous chunk, before its closing
      // __syncthreads: the next chunk's rows go there while this one is computed.
      if (c + 1 < chunks) load_rows(c + 1, buffer ^ 1);
      cp_async_commit();
    } else {
      load_rows(c, 0);
    }
    if constexpr (Pipelined) cp_async_wait<1>();  // this chunk's group; the next may fly on
    __syncthreads();
    const float g_last = gcs[kC - 1];
    // v' = U - W h, written over U; vd = v' exp(G_last - G) / |k_i| for the state update: the
    // k rows' l2 norms go into vd's rows, so k is used as given (no pass normalizing it).
    {
      float acc[NT][4] = {};
      for (int k0 = 0; k0 < K; k0 += 16) {
        uint32_t a[4];
        frag_a_mk(a, ws, LK, 16 * warp, k0);
        mma_tiles<false>(acc, a, hs, LB, 0, k0);
      }
      for (int nt = 0; nt < NT; ++nt)
        for (int e = 0; e < 4; e += 2) {
          const int i = 16 * warp + acc_row(e), col = nt * 8 + acc_col(e);
          const T y0 = E::from_float(E::to_float(us[i * LU + col]) - acc[nt][e]);
          const T y1 = E::from_float(E::to_float(us[i * LU + col + 1]) - acc[nt][e + 1]);
          if (i < n)
            *reinterpret_cast<uint32_t*>(u + ((r0 + i) * p.HV + h) * V + v0 + col) = pack2(y0, y1);
          const float d = i < n ? __expf(g_last - gcs[i]) * inv[i] : 0.0f;
          *reinterpret_cast<uint32_t*>(vd + i * LB + col) =
              pack2f<T>(E::to_float(y0) * d, E::to_float(y1) * d);
        }
    }
    __syncthreads();
    // S <- exp(G_last) S + ks^T vd.
    const float decay = __expf(g_last);
    for (int mt = 0; mt < MT; ++mt)
      for (int nt = 0; nt < NT; ++nt)
        for (int e = 0; e < 4; ++e) S[mt][nt][e] *= decay;
    for (int k0 = 0; k0 < kC; k0 += 16)
      for (int mt = 0; mt < MT; ++mt) {
        uint32_t a[4];
        frag_a_km(a, ks, LK, warp * (K / 4) + mt * 16, k0);
        mma_tiles<false>(S[mt], a, vd, LB, 0, k0);
      }
    __syncthreads();
  }
  if (p.hN)
    for (int mt = 0; mt < MT; ++mt)
      for (int nt = 0; nt < NT; ++nt)
        for (int e = 0; e < 4; ++e) {
          const int key = warp * (K / 4) + mt * 16 + acc_row(e), col = v0 + nt * 8 + acc_col(e);
          store_real(p.hN, state_at + key * V + col, p.state_t, S[mt][nt][e]);
        }
}

// A (slot, Groups V blocks) per CTA (flat) or a CTA's in turn (persistent).
template <typename T, int K, int V, int BV, int Groups, bool Pipelined>
__global__ void __launch_bounds__(kThreads* Groups) gdn_state(const Params p) {
  for_each_slot_block<V / (BV * Groups)>(p.slots, p.persistent_state, [&](int64_t s, int vb) {
    state_slot<T, K, V, BV, Groups, Pipelined>(p, s, vb);
  });
}

// ---- state, transposed in registers: per (sequence, value head) -------------------------------

// The state launch of knob `state` = 2 and 3 (native_kda's kda_state_rows.cuh, for gdn's scalar
// gate): each warp keeps S^T for its 16 value columns in mma accumulators and runs the
// recurrence alone (v'^T = U^T - S^T W^T, S^T <- e^{G_last} S^T + (v' d)^T k with d_t =
// e^{G_last - G_t} / |k_t| from the prepare launch), one barrier per chunk. Parts = 2 (knob
// `state` = 3): two CTAs per (slot, head), the longest sequences split over both (rows_split).
// Shared memory: two buffers of the chunk's W and k rows [64][LK], U [64][LU] (a split CTA's
// half of the columns), d [64] and G_last; per warp one staging tile, for h_c [K][SS] and then
// for v' [64][SS] (store_transposed ends with __syncwarp, so the second use cannot overtake the
// first's reads).
template <typename T, int K, int V>
struct StateRowsSmem {
  static constexpr int kWarps = V / 16, kThreadsRows = 32 * kWarps;
  static constexpr int LK = K + 8, LU = V + 8, SS = 24;
  static constexpr int kChunkElems = 2 * kC * LK + kC * LU;
  static constexpr int kStageElems = (K > kC ? K : kC) * SS;
  static constexpr int kElems = 2 * kChunkElems + kWarps * kStageElems;
  static_assert(kElems % 8 == 0, "the gates must start 16-byte aligned");
  static constexpr std::size_t bytes = sizeof(T) * kElems + sizeof(float) * 2 * 2 * kC;
};

// Slot s, value head h; CTA `part` of the slot's Parts (may_split: the slot has both).
template <typename T, int K, int V, int Parts>
__device__ __forceinline__ void state_rows_slot(const Params& p, int64_t s, int h, int part,
                                                bool may_split) {
  using E = Elem<T>;
  using L = StateRowsSmem<T, K, V>;
  constexpr int LK = L::LK, LU = L::LU, SS = L::SS, KT = K / 8, KB = K / 16, TT = kC / 8,
                TB = kC / 16;
  const int tid = threadIdx.x, warp = tid / 32;
  const RowsSplit split = rows_part<L::kWarps, Parts>(p.offsets, p.slots, s, part, may_split, p.HV,
                                                      p.multiprocessors, V);
  if (!split.runs || warp >= split.warps) return;
  const int threads = 32 * split.warps;
  // This warp's columns: of the CTA's U rows (lw), and of the head (vw).
  const int kh = h / p.group, lw = 16 * warp, vw = split.col0 + lw;
  const SlotChunks range = slot_chunks(p, s);
  const int64_t begin = range.begin, end = range.end, first = range.first, chunks = range.chunks;
  extern __shared__ __align__(16) unsigned char smem[];
  T* chunk_rows = reinterpret_cast<T*>(smem);  // per buffer: W, k (as given) [64][LK]; U [64][LU]
  T* stage = chunk_rows + 2 * L::kChunkElems + warp * L::kStageElems;
  float* gate_rows = reinterpret_cast<float*>(chunk_rows + L::kElems);  // per buffer: d, G_last
  T* const u = static_cast<T*>(p.u);
  auto load_rows = [&](int64_t c, int b) {  // cp.async, in flight until waited for
    const int64_t r0 = begin + c * kC;
    const int n = static_cast<int>(end - r0 < kC ? end - r0 : kC);
    T* w_rows = chunk_rows + b * L::kChunkElems;
    const T* w_at = static_cast<const T*>(p.w) + (r0 * p.HV + h) * K;
    const T* k_at = static_cast<const T*>(p.k) + (r0 * p.H + kh) * K;
    const T* u_at = u + (r0 * p.HV + h) * V + split.col0;
    const int64_t w_ld = static_cast<int64_t>(p.HV) * K, k_ld = static_cast<int64_t>(p.H) * K;
    const int64_t u_ld = static_cast<int64_t>(p.HV) * V;
    T* u_rows = w_rows + 2 * kC * LK;
    if constexpr (Parts == 1) {  // all threads, known here: the copies unroll
      constexpr int kT = L::kThreadsRows;
      load_chunk_rows<T, K, kC, true, kT>(w_rows, LK, w_at, w_ld, n);
      load_chunk_rows<T, K, kC, true, kT>(w_rows + kC * LK, LK, k_at, k_ld, n);
      load_chunk_rows<T, V, kC, true, kT>(u_rows, LU, u_at, u_ld, n);
    } else {
      load_chunk_rows<T, K, kC, true>(w_rows, LK, w_at, w_ld, n, threads);
      load_chunk_rows<T, K, kC, true>(w_rows + kC * LK, LK, k_at, k_ld, n, threads);
      if (split.cols == V)
        load_chunk_rows<T, V, kC, true>(u_rows, LU, u_at, u_ld, n, threads);
      else
        load_chunk_rows<T, V / 2, kC, true>(u_rows, LU, u_at, u_ld, n, threads);
    }
    if (tid < kC) {  // d, 0 past the chunk; the chunk's last G
      float* d_dst = gate_rows + b * 2 * kC + tid;
      if (tid < n)
        cp_async4(d_dst, p.dk + (r0 + tid) * p.HV + h);
      else
        *d_dst = 0.0f;
      if (tid == 0) cp_async4(d_dst + kC, p.gc + (r0 + n - 1) * p.HV + h);
    }
  };

  // S^T [vw + row][key] in accumulator tiles over the keys.
  const int64_t state_at = (s * p.HV + h) * static_cast<int64_t>(K) * V;
  float st[KT][4];
  for (int kt = 0; kt < KT; ++kt)
    for (int e = 0; e < 4; ++e) {
      const int v = vw + acc_row(e), key = 8 * kt + acc_col(e);
      st[kt][e] = p.h0 ? load_real(p.h0, state_at + key * V + v, p.state_t) : 0.0f;
    }
  if (chunks > 0) load_rows(0, 0);
  cp_async_commit();
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t r0 = begin + c * kC;
    const int n = static_cast<int>(end - r0 < kC ? end - r0 : kC);
    const int b = static_cast<int>(c & 1);
    const T* ws = chunk_rows + b * L::kChunkElems;  // [64][LK] W
    const T* ks = ws + kC * LK;                     // [64][LK] k (as given)
    const T* us = ks + kC * LK;                     // [64][LU] U
    const float* ds = gate_rows + b * 2 * kC;       // [64] d, 0 past the chunk; then G_last
    // This chunk's rows are in and every warp is past the previous chunk (the other buffer).
    cp_async_wait<0>();
    sync_rows(threads);
    if (c + 1 < chunks) load_rows(c + 1, b ^ 1);
    cp_async_commit();

    // h_c, stored as h [key][v].
    uint32_t sa[KB][4];
    tiles_to_a<T>(st, sa);
    store_transposed<KB, SS>(
        stage, sa,
        static_cast<T*>(p.h) + ((first + c) * p.HV + h) * static_cast<int64_t>(K) * V + vw, V);

    // v'^T = U^T - S^T W^T, rounded to T and written over U (the chunk's rows); the update's A
    // fragments are the rounded v' scaled by d_t.
    float acc[TT][4] = {};
    for (int kb = 0; kb < KB; ++kb)  // B (key, t) = W[t][key]
      mma_tiles<true>(acc, sa[kb], ws, LK, 0, 16 * kb);
    const float g_last = ds[kC];
    // Element e of accumulator tile 2 tb + half, held in an A fragment of tiles 2 tb, 2 tb + 1.
    auto element = [](const uint32_t(&f)[4], int half, int e) {
      const uint32_t bits = f[2 * half + e / 2];
      return E::to_float(reinterpret_cast<const T*>(&bits)[e & 1]);
    };
    uint32_t vo[TB][4], va[TB][4];
    for (int tb = 0; tb < TB; ++tb) {
      uint32_t uf[4];  // U^T (v, t) as an A fragment
      ldsm_a<false>(uf, us, LU, lw, 16 * tb);
      float y[2][4], yd[2][4];
      for (int half = 0; half < 2; ++half)
        for (int e = 0; e < 4; ++e) y[half][e] = element(uf, half, e) - acc[2 * tb + half][e];
      tiles_to_a<T>(y[0], y[1], vo[tb]);
      for (int half = 0; half < 2; ++half)
        for (int e = 0; e < 4; ++e)
          yd[half][e] = element(vo[tb], half, e) * ds[16 * tb + 8 * half + acc_col(e)];
      tiles_to_a<T>(yd[0], yd[1], va[tb]);
    }
    store_transposed<TB, SS>(stage, vo, u + (r0 * p.HV + h) * V + vw,
                             static_cast<int64_t>(p.HV) * V, n);

    // S^T <- e^{G_last} S^T + (v' d)^T k.
    const float decay = __expf(g_last);
    for (int kt = 0; kt < KT; ++kt)
      for (int e = 0; e < 4; ++e) st[kt][e] *= decay;
    for (int tb = 0; tb < TB; ++tb)  // B (t, key) = k[t][key]
      mma_tiles<false>(st, va[tb], ks, LK, 0, 16 * tb);
  }
  cp_async_wait<0>();  // nothing left in flight at exit
  if (p.hN)
    for (int kt = 0; kt < KT; ++kt)
      for (int e = 0; e < 4; ++e) {
        const int v = vw + acc_row(e), key = 8 * kt + acc_col(e);
        store_real(p.hN, state_at + key * V + v, p.state_t, st[kt][e]);
      }
}

// A (slot, head, part) per CTA, longest sequences first (flat), or a CTA's (slot, part) tasks in
// turn for head blockIdx.y (persistent).
template <typename T, int K, int V, int Parts>
__global__ void __launch_bounds__(StateRowsSmem<T, K, V>::kThreadsRows)
    gdn_state_rows(const Params p) {
  if (!p.persistent_state)
    longest_first<kLongestFirstSlots, Parts>(
        p.offsets, p.slots, [&](int64_t s, int h, int part, bool may_split) {
          state_rows_slot<T, K, V, Parts>(p, s, h, part, may_split);
        });
  else
    for_each_slot_block<Parts>(p.slots, true, [&](int64_t s, int part) {
      state_rows_slot<T, K, V, Parts>(p, s, blockIdx.y, part, true);
    });
}

// The state-rows launch of Parts CTAs per (slot, head); Parts = 2 sizes its grid from the SMs
// its rule reads (Params::multiprocessors).
template <typename T, int K, int V, int Parts>
SlotBlockLaunch<Params> state_rows_launch(int multiprocessors) {
  using Rows = StateRowsSmem<T, K, V>;
  return {gdn_state_rows<T, K, V, Parts>,  Rows::kThreadsRows, Rows::bytes, Parts, 0,
          Parts == 2 ? multiprocessors : 0};
}

// ---- output: per (chunk, value head) ----------------------------------------------------------

template <typename T, int K, int V>
struct OutputSmem {
  static constexpr int LK = K + 8, LV = V + 8, LT = kC + 8;
  static constexpr std::size_t bytes =
      sizeof(T) * (2 * kC * LK + K * LV + kC * LV + kC * LT) + sizeof(float) * 3 * kC;
};

// Chunk task j of value head blockIdx.y; false when j is past the batch's chunks.
template <typename T, int K, int V>
__device__ __forceinline__ bool output_chunk(const Params& p, int64_t j) {
  using L = OutputSmem<T, K, V>;
  constexpr int LK = L::LK, LV = L::LV, LT = L::LT;
  const ragged::ChunkTask task = ragged::chunk_task(p.cu, p.offsets, p.slots, p.tokens, kC, j);
  if (task.sequence < 0) return false;
  const int h = blockIdx.y, kh = h / p.group;
  const int64_t r0 = task.row_begin;
  const int n = static_cast<int>(task.row_end - task.row_begin);
  if (n <= 0) return true;  // only under metadata ragged::validate rejects
  const int tid = threadIdx.x, warp = tid / 32;
  extern __shared__ __align__(16) unsigned char smem[];
  T* qs = reinterpret_cast<T*>(smem);                   // [64][LK]
  T* ks = qs + kC * LK;                                 // [64][LK]
  T* hs = ks + kC * LK;                                 // [K][LV] the state at the chunk's start
  T* vs = hs + K * LV;                                  // [64][LV] v'
  T* ps = vs + kC * LV;                                 // [64][LT] q k^T exp(G_i - G_j), lower
  float* gcs = reinterpret_cast<float*>(ps + kC * LT);  // [64] G log2 e (base-2 units)
  float* rq = gcs + kC;  // [64] scale / |q_i| (scale without the norm)
  float* rk = rq + kC;   // [64] 1 / |k_j| (the prepare launch's), 0 past the chunk

  // Every copy in flight at once (cp.async; n >= 1 here), the gates read meanwhile.
  load_chunk_rows<T, K, kC, true>(qs, LK, static_cast<const T*>(p.q) + (r0 * p.H + kh) * K,
                                  static_cast<int64_t>(p.H) * K, n);
  load_chunk_rows<T, K, kC, true>(ks, LK, static_cast<const T*>(p.k) + (r0 * p.H + kh) * K,
                                  static_cast<int64_t>(p.H) * K, n);
  load_chunk_rows<T, V, kC, true>(vs, LV, static_cast<const T*>(p.u) + (r0 * p.HV + h) * V,
                                  static_cast<int64_t>(p.HV) * V, n);
  load_chunk_rows<T, V, K, true>(
      hs, LV, static_cast<const T*>(p.h) + (j * p.HV + h) * static_cast<int64_t>(K) * V, V, K);
  cp_async_commit();
  if (tid < kC) {
    gcs[tid] = kLog2e * p.gc[(r0 + (tid < n ? tid : n - 1)) * p.HV + h];
    rk[tid] = !p.l2 ? 1.0f : tid < n ? p.rk[(r0 + tid) * p.H + kh] : 0.0f;
  }
  cp_async_wait<0>();
  __syncthreads();
  // The l2 norms and the scale enter as row and column scales of the products (q and k are
  // used as given): each warp finds its own 16 q rows' (the rows of its P and o tiles).
  {
    const float f = p.l2 ? p.scale * warp_rows16_inv_norm<T, K>(qs, LK, 16 * warp) : p.scale;
    if ((tid & 31) < 16) rq[16 * warp + (tid & 15)] = f;
  }
  __syncwarp();
  const LaneRows lr = lane_rows(warp, gcs, rq);  // this lane's two rows of P and o
  {
    float acc[8][4] = {};
    for (int k0 = 0; k0 < K; k0 += 16) {
      uint32_t a[4];
      frag_a_mk(a, qs, LK, 16 * warp, k0);
      mma_tiles<true>(acc, a, ks, LK, 0, k0);
    }
    // P = (q k^T) (scale / |q_i|) (1 / |k_j|) e^{G_i - G_j} on and below the diagonal, a column
    // pair at a time.
    for (int nt = 0; nt < 8; ++nt) {
      const int j = nt * 8 + acc_col(0);
      const float2 g_col = *reinterpret_cast<const float2*>(gcs + j);
      const float2 f_col = *reinterpret_cast<const float2*>(rk + j);
      for (int half = 0; half < 2; ++half) {
        const int i = lr.row[half];
        const float x0 = acc[nt][2 * half] * lr.f[half] * f_col.x * ex2(lr.g[half] - g_col.x);
        const float x1 = acc[nt][2 * half + 1] * lr.f[half] * f_col.y * ex2(lr.g[half] - g_col.y);
        *reinterpret_cast<uint32_t*>(ps + i * LT + j) =
            pack2f<T>(j <= i && i < n ? x0 : 0.0f, j + 1 <= i && i < n ? x1 : 0.0f);
      }
    }
  }
  __syncthreads();
  float o[V / 8][4] = {};
  for (int k0 = 0; k0 < K; k0 += 16) {
    uint32_t a[4];
    frag_a_mk(a, qs, LK, 16 * warp, k0);
    mma_tiles<false>(o, a, hs, LV, 0, k0);
  }
  float row_factor[2];  // e^{G_i} scale / |q_i| of this lane's two rows
  for (int half = 0; half < 2; ++half) row_factor[half] = ex2(lr.g[half]) * lr.f[half];
  for (int nt = 0; nt < V / 8; ++nt)
    for (int e = 0; e < 4; ++e) o[nt][e] *= row_factor[e >> 1];
  for (int k0 = 0; k0 < kC; k0 += 16) {
    uint32_t a[4];
    frag_a_mk(a, ps, LT, 16 * warp, k0);
    mma_tiles<false>(o, a, vs, LV, 0, k0);
  }
  // Staged stores go through this warp's own q rows (LK = V + 8 wide: the staging tile's
  // stride), which only this warp has read.
  const int64_t ld = static_cast<int64_t>(p.HV) * V;
  store_acc_rows<T, V / 8>(static_cast<T*>(p.o) + (r0 * p.HV + h) * V + 16 * warp * ld, ld, o,
                           n - 16 * warp, p.staged_stores ? qs + 16 * warp * LK : nullptr);
  return true;
}

template <typename T, int K, int V>
__global__ void __launch_bounds__(kThreads) gdn_output(const Params p) {
  for_each_task(p.capacity_chunks, p.persistent,
                [&](int64_t j) { return output_chunk<T, K, V>(p, j); });
}

// ---- launch ----------------------------------------------------------------------------------

Real real_of(DType d) {
  return d == DType::bf16 ? Real::bf16 : d == DType::f16 ? Real::f16 : Real::f32;
}

template <typename Kernel>
bool set_smem(Kernel kernel, std::size_t bytes) {
  // Every call, not once: cheap, and right after a device reset or on another device too.
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(bytes)) == cudaSuccess;
}

// The state launch of Groups V blocks a CTA.
template <typename T, int K, int V, int Groups>
SlotBlockLaunch<Params> state_launch(bool pipelined) {
  return {pipelined ? gdn_state<T, K, V, kStateBlockV, Groups, true>
                    : gdn_state<T, K, V, kStateBlockV, Groups, false>,
          kThreads * Groups,
          pipelined ? StateSmem<T, K, kStateBlockV, Groups, true>::bytes
                    : StateSmem<T, K, kStateBlockV, Groups, false>::bytes,
          V / (kStateBlockV * Groups)};
}

template <typename T, int K, int V>
bool launch(const GdnArgs& a, const Params& p, cudaStream_t stream) {
  const GdnShape& s = a.shape;
  auto prepare = s.compact_prepare ? gdn_prepare<T, K, V, true> : gdn_prepare<T, K, V, false>;
  auto output = gdn_output<T, K, V>;
  const std::size_t prep_bytes =
      s.compact_prepare ? PrepareSmem<T, K, V, true>::bytes : PrepareSmem<T, K, V, false>::bytes;
  constexpr std::size_t out_bytes = OutputSmem<T, K, V>::bytes;
  if (!set_smem(prepare, prep_bytes) || !set_smem(output, out_bytes)) return false;
  // Flat: a CTA per task. Persistent: as many as are resident at once (over the other grid
  // dims), each looping over its tasks; the host asks the occupancy calculator, no device sync.
  const unsigned heads = static_cast<unsigned>(s.value_heads);
  unsigned prep_x = static_cast<unsigned>(a.capacity_chunks), out_x = prep_x;
  if (s.persistent && (!persistent_workers(prepare, kThreads, prep_bytes, heads, prep_x) ||
                       !persistent_workers(output, kThreads, out_bytes, heads, out_x)))
    return false;
  constexpr int kBlocks = V / kStateBlockV;
  auto state = s.state_rows ? (s.split_state_rows ? state_rows_launch<T, K, V, 2>(p.multiprocessors)
                                                  : state_rows_launch<T, K, V, 1>(0))
               : s.head_state ? state_launch<T, K, V, kBlocks>(s.pipelined_state)
                              : state_launch<T, K, V, 1>(s.pipelined_state);
  if (!state.plan(s.slots, s.persistent_state, heads)) return false;
  if (a.capacity_chunks > 0) prepare<<<dim3(prep_x, heads), kThreads, prep_bytes, stream>>>(p);
  state.launch(heads, stream, p);
  if (a.capacity_chunks > 0) output<<<dim3(out_x, heads), kThreads, out_bytes, stream>>>(p);
  return cudaPeekAtLastError() == cudaSuccess;
}

}  // namespace

bool gdn_serves(const GdnShape& s) {
  return (s.dtype == DType::bf16 || s.dtype == DType::f16) && s.key_dim == s.value_dim &&
         (s.key_dim == 64 || s.key_dim == 128);
}

std::size_t gdn_workspace_bytes(const GdnShape& s, int64_t capacity_chunks) {
  return layout_of(s, capacity_chunks).total;
}

bool gdn_forward(const GdnArgs& a, void* workspace, void* stream) noexcept {
  const GdnShape& s = a.shape;
  if (!gdn_serves(s) || s.slots < 1 || s.heads < 1 || s.value_heads % s.heads != 0) return false;
  if (a.capacity_chunks > 0x7fffffff || s.slots > 0x7fffffff || s.value_heads > 65535) return false;
  const Layout l = layout_of(s, a.capacity_chunks);
  char* ws = static_cast<char*>(workspace);
  Params p{};
  p.cu = a.cu_seqlens;
  p.offsets = a.chunk_offsets;
  p.slots = s.slots;
  p.tokens = s.tokens;
  p.H = s.heads;
  p.HV = s.value_heads;
  p.group = s.value_heads / s.heads;
  p.scale = s.scale;
  p.l2 = s.use_qk_l2norm;
  p.safe_gate = s.safe_gate;
  p.beta_sigmoid = s.use_beta_sigmoid;
  p.blocked_solve = s.blocked_solve;
  p.staged_stores = s.staged_stores;
  p.persistent = s.persistent;
  p.persistent_state = s.persistent_state;
  p.multiprocessors = s.split_state_rows ? device_multiprocessors() : 0;  // rows_split's only
  p.capacity_chunks = a.capacity_chunks;
  p.g_t = real_of(s.g_dtype);
  p.beta_t = real_of(s.beta_dtype);
  p.param_t = real_of(s.param_dtype);
  p.state_t = real_of(s.state_dtype);
  p.q = a.q;
  p.k = a.k;
  p.v = a.v;
  p.g = a.g;
  p.beta = a.beta;
  p.a_log = a.a_log;
  p.dt_bias = a.dt_bias;
  p.h0 = a.initial_state;
  p.o = a.o;
  p.hN = a.final_state;
  p.gc = reinterpret_cast<float*>(ws + l.gc);
  p.rk = reinterpret_cast<float*>(ws + l.rk);
  p.dk = reinterpret_cast<float*>(ws + l.dk);
  p.w = ws + l.w;
  p.u = ws + l.u;
  p.h = ws + l.h;
  const auto st = static_cast<cudaStream_t>(stream);
  const bool bf16 = s.dtype == DType::bf16;
  if (s.key_dim == 64)
    return bf16 ? launch<__nv_bfloat16, 64, 64>(a, p, st) : launch<__half, 64, 64>(a, p, st);
  return bf16 ? launch<__nv_bfloat16, 128, 128>(a, p, st) : launch<__half, 128, 128>(a, p, st);
}

}  // namespace eagle::native::linear_attention
